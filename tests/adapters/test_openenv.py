"""OpenEnv's protocol on `agentgym serve`: OpenEnv's own client and validator against our server.

OpenEnv's `GenericEnvClient` plays one whole episode of every scenario (the scenario's expert, run
by the server's expert routes, picks the actions); OpenEnv's `validate_running_environment` checks
the routes; the error frames, the session cap, and the server's token/Host/Origin checks and
client-kwargs policy are checked on the WebSocket too.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

pytest.importorskip("openenv")
pytest.importorskip("websockets")

from openenv import GenericEnvClient
from openenv.cli._validation import validate_running_environment
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

import agentgym_envs
from agentgym_envs.adapters.openenv import make_client, openenv_url
from agentgym_envs.remote.server import create_app
from agentgym_envs.remote.server.local import ServerThread

# One short task per scenario, so that the expert finishes it in a few steps (SciWorld's and
# WebArena's are the slow ones: a JVM, a browser and a web site); a scenario not named here plays
# the test task of seed 0.
SHORT_TASKS = {
    "AgentGym/SciWorld-v0": {"task_id": "find-living-thing/225"},
    "AgentGym/WebArena-v0": {"task_id": "0"},
    "AgentGym/TextWorld-v0": {"task_id": "coin_collector/level5/0"},
}
EPISODES = {env_id: SHORT_TASKS.get(env_id, {"seed": 0, "split": "test"}) for env_id in agentgym_envs.PRIMARY_IDS}
TEXTCRAFT = "AgentGym/TextCraft-v0"


@pytest.fixture(scope="module")
def server():
    with ServerThread(create_app(list(EPISODES), ttl=None)) as running:
        yield running


@pytest.mark.parametrize("env_id", list(EPISODES))
def test_openenv_client_plays_an_expert_episode(server, env_id: str) -> None:
    with (
        GenericEnvClient(base_url=openenv_url(server.base_url, env_id)).sync() as env,
        httpx.Client(base_url=server.base_url, timeout=60) as http,
    ):
        result = env.reset(**EPISODES[env_id])
        assert result.done is False and result.reward is None and result.observation["text"]
        state = env.state()
        assert state["env_id"] == env_id and state["step_count"] == 0 and state["task_id"]
        session = state["session_id"]
        assert http.post(f"/sessions/{session}/expert").status_code == 200
        total, steps = 0.0, 0
        while not result.done:
            observation = result.observation
            seen = {"observation": observation["text"], "info": observation["info"]}
            act = http.post(f"/sessions/{session}/expert/act", json=seen)
            result = env.step({"action": act.json()["action"]})
            total, steps = total + result.reward, steps + 1
            assert steps <= 100, "the expert did not finish its short task"
        info = result.observation["info"]
        assert info["success"] is True and result.observation["terminated"] is True
        assert total == pytest.approx(info["score"]) and info["score"] > 0  # BabyAI discounts by steps
        state = env.state()
        assert state["step_count"] == steps and state["done"] is True and state["success"] is True
        with pytest.raises(RuntimeError, match="EXECUTION_ERROR"):  # a step after the end: the env's 409
            env.step({"action": "look"})
    for _ in range(600):  # the server closes the session once the client has gone (JVMs take a moment)
        if all(s["session_id"] != session for s in httpx.get(server.base_url + "/sessions").json()["sessions"]):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"session {session} outlived its WebSocket")


def test_openenv_validator_passes_at_each_base_url(server) -> None:
    report = validate_running_environment(openenv_url(server.base_url, TEXTCRAFT))
    failed = [c for c in report["criteria"] if not c["passed"]]
    assert report["passed"], failed
    schema = httpx.get(openenv_url(server.base_url, TEXTCRAFT) + "/schema").json()
    assert schema["action"]["required"] == ["action"] and "text" in schema["observation"]["properties"]
    assert httpx.get(openenv_url(server.base_url, "AgentGym/Nope-v0") + "/health").status_code == 404


async def _frames(url: str, frames: list[Any], **options: Any) -> list[dict[str, Any]]:
    """Send raw frames over one WebSocket; return the replies (the `close` frame gets none)."""
    replies = []
    async with connect(url, **options) as ws:
        for frame in frames:
            await ws.send(frame if isinstance(frame, str) else json.dumps(frame))
            if not (isinstance(frame, dict) and frame.get("type") == "close"):
                replies.append(json.loads(await ws.recv()))
    return replies


def ws_url(server_url: str, env_id: str = TEXTCRAFT) -> str:
    return openenv_url(server_url, env_id).replace("http://", "ws://") + "/ws"


def test_error_frames_use_openenv_codes_and_the_session_goes_on(server) -> None:
    replies = asyncio.run(
        _frames(
            ws_url(server.base_url),
            [
                "not json",
                {"type": "dance"},
                {"type": "step", "data": {"action": "inventory"}},
                {"type": "reset", "data": {"seed": 0, "tsak_id": 3}},
                {"type": "reset", "data": {"seed": 0, "split": "test"}},
                {"type": "step", "data": {"act": "inventory"}},
                {"type": "step", "data": {"action": "inventory"}},
                {"type": "close"},
            ],
        )
    )
    codes = [r["data"].get("code") if r["type"] == "error" else r["type"] for r in replies]
    assert codes == [
        "INVALID_JSON",
        "UNKNOWN_TYPE",
        "EXECUTION_ERROR",
        "VALIDATION_ERROR",
        "observation",
        "VALIDATION_ERROR",
        "observation",
    ]
    assert replies[2]["data"]["status"] == 409 and "reset" in replies[2]["data"]["message"]
    assert "tsak_id" in replies[3]["data"]["message"]  # an unknown reset key is refused, not dropped
    assert replies[6]["data"]["observation"]["text"].startswith("Inventory")


def test_client_kwargs_follow_the_servers_policy(server) -> None:
    replies = asyncio.run(
        _frames(
            ws_url(server.base_url),
            [
                {"type": "reset", "data": {"seed": 0, "env_kwargs": {"recipes_path": "/etc/passwd"}}},
                {"type": "reset", "data": {"seed": 0, "env_kwargs": {"max_distractors": 99}}},
                {"type": "reset", "data": {"seed": 0, "env_kwargs": {"depths": [1]}}},
                {"type": "state"},
            ],
        )
    )
    refused, bad_value, made, state = replies
    assert refused["data"]["code"] == "VALIDATION_ERROR" and refused["data"]["status"] == 403
    assert refused["data"]["error_type"] == "ForbiddenKwarg" and "recipes_path" in refused["data"]["message"]
    assert bad_value["data"]["status"] == 422 and "max_distractors" in bad_value["data"]["message"]
    assert made["type"] == "observation" and made["data"]["observation"]["info"]["category"] == "depth-1"
    assert state["data"]["env_kwargs"] == {"depths": [1]}


def test_capacity_reached_is_answered_with_its_code() -> None:
    with ServerThread(create_app([TEXTCRAFT], max_sessions=1, ttl=None)) as server:

        async def two() -> dict[str, Any]:
            async with connect(ws_url(server.base_url)) as first:
                await first.send(json.dumps({"type": "state"}))
                assert json.loads(await first.recv())["type"] == "state"
                async with connect(ws_url(server.base_url)) as second:
                    return json.loads(await second.recv())

        reply = asyncio.run(two())
    assert reply["type"] == "error" and reply["data"]["code"] == "CAPACITY_REACHED" and reply["data"]["status"] == 429


def test_websocket_handshake_passes_the_servers_token_host_and_origin_checks() -> None:
    app = create_app([TEXTCRAFT], token="s3cret", ttl=None)
    with ServerThread(app, token="s3cret") as server:
        url = ws_url(server.base_url)

        def status(**options: Any) -> int:
            with pytest.raises(InvalidStatus) as refused:
                asyncio.run(_frames(url, [{"type": "state"}], **options))
            return refused.value.response.status_code

        bearer = {"Authorization": "Bearer s3cret"}
        assert status() == 401
        assert status(additional_headers={"Authorization": "Bearer wrong"}) == 401
        assert status(additional_headers=bearer, origin="http://evil.example") == 403
        assert status(additional_headers={**bearer, "Host": "rebound.example"}) == 403
        with pytest.raises(ConnectionError):  # OpenEnv's own client sends no token
            GenericEnvClient(base_url=openenv_url(server.base_url, TEXTCRAFT)).sync().reset()
        assert httpx.get(openenv_url(server.base_url, TEXTCRAFT) + "/health").status_code == 401
        with make_client(server.base_url, TEXTCRAFT, token="s3cret").sync() as env:
            assert env.reset(seed=1, split="test").observation["info"]["split"] == "test"


def test_a_websocket_outlives_the_http_read_deadlines() -> None:
    """The server's HTTP head deadline must not fire on a connection upgraded to a WebSocket (it wrote
    a 408 into the WebSocket stream once a session had lasted longer than the deadline)."""
    from agentgym_envs.timeouts import uvicorn_options

    with ServerThread(create_app([TEXTCRAFT], ttl=None), **uvicorn_options(header_timeout=0.2)) as server:

        async def idle_then_state() -> list[dict[str, Any]]:
            async with connect(ws_url(server.base_url)) as ws:
                replies = []
                for _ in range(2):
                    await ws.send(json.dumps({"type": "state"}))
                    replies.append(json.loads(await ws.recv()))
                    await asyncio.sleep(0.5)  # past the head deadline, idle
                return replies

        assert [reply["type"] for reply in asyncio.run(idle_then_state())] == ["state", "state"]
