"""The env server and its clients: routes, status codes, sessions, auth, AgentGym's routes, batches.

Servers run in this process on a loopback port (`ServerThread`), so a test env registered here (a
tiny probe scenario with a breakable backend) is served too. Load and memory tests, which need a
server of their own process, are in test_load.py.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import gymnasium as gym
import httpx
import numpy as np
import pytest

import agentgym_envs  # noqa: F401
from agentgym_envs.core import EpisodeOverError, TextEnv
from agentgym_envs.remote import (
    AuthenticationError,
    RemoteEnv,
    RemoteEnvError,
    RemoteVectorEnv,
    ServerUnavailableError,
    SessionLostError,
)
from agentgym_envs.remote.server import create_app
from agentgym_envs.remote.server.local import ServerThread
from agentgym_wrappers import MultiTurnWrapper
from agentgym_wrappers.stops import DEFAULT_TURN_TOKENS, FORMAT_STOPS, stop_strings_for, turn_tokens_for

BABYAI = "AgentGym/BabyAI-v0"
LOCAL = "AgentGym/BabyAI-GoToLocal-v0"
PROBE = "AgentGymTest/Probe-v0"


class ProbeEnv(TextEnv):
    """A tiny scenario for the fault paths: `end` finishes the episode, `boom` breaks the backend."""

    closed = 0

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        self._open = True

    def tasks(self, split: str = "train") -> list[str]:
        return [f"{split}-{i}" for i in range(3)]

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        return f"task {task_id}: say end", {"category": "probe", "instruction": "say end"}

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if action == "boom":
            raise RuntimeError("the backend exploded")
        if action == "wait":  # a slow step, to hold the session's lock
            time.sleep(1.5)
        if action == "end":
            return "done", 1.0, True, False, {"valid_action": True, "success": True}
        return f"not an action: {action[:20]}", 0.0, False, False, {"valid_action": False, "success": False}

    def close(self) -> None:
        if self._open:
            type(self).closed += 1
            self._open = False


if PROBE not in gym.registry:
    gym.register(PROBE, entry_point=ProbeEnv)


@pytest.fixture(scope="module")
def server():
    app = create_app([BABYAI, LOCAL, PROBE], max_sessions=64, ttl=None, max_body_bytes=4 << 20)
    with ServerThread(app) as running:
        yield running


@pytest.fixture()
def http(server):
    with httpx.Client(base_url=server.base_url, timeout=30) as client:
        yield client


def new_session(http: httpx.Client, env_id: str = BABYAI, **kwargs: Any) -> str:
    reply = http.post("/sessions", json={"env_id": env_id, "kwargs": kwargs})
    assert reply.status_code == 201, reply.text
    return reply.json()["session_id"]


JSON = {"content-type": "application/json"}


def error(reply: httpx.Response, status: int) -> str:
    """The reply's `detail` after checking its status; every error is JSON with a readable detail."""
    assert reply.status_code == status, (reply.status_code, reply.text[:300])
    detail = reply.json()["detail"]
    assert isinstance(detail, str) and detail
    return detail


# ---- the client mirrors the env ----------------------------------------------------------------
def test_client_mirrors_spaces_attributes_tasks_and_episodes(server) -> None:
    twin = gym.make(LOCAL)
    env = gym.make("AgentGym/Remote-v0", base_url=server.base_url, env_id=LOCAL)
    base = env.unwrapped
    assert base.session_id is None  # nothing is asked of the server before first use
    assert base.system_prompt == twin.unwrapped.system_prompt
    assert base.default_max_turns == twin.unwrapped.default_max_turns
    assert base.action_format == twin.unwrapped.action_format and base.splits == twin.unwrapped.splits
    assert base.observation_space == twin.observation_space and base.action_space == twin.action_space
    assert base.tasks("test") == twin.unwrapped.tasks("test")
    assert base.task_at("train", 5) == twin.unwrapped.task_at("train", 5)
    for options in ({"split": "test", "task_id": 2}, {"split": "test"}, None):
        assert env.reset(seed=11, options=options) == twin.reset(seed=11, options=options)
        for action in ["turn left", "fly", "move forward", "check available actions", "go to red ball 1"]:
            result = env.step(action)
            assert result == twin.step(action)
            if result[2] or result[3]:
                break
    env.reset(seed=0, options={"split": "test", "task_id": 0})
    assert env.render() is None and base.render_mode is None
    env.close()
    env.close()  # idempotent
    twin.close()


def test_client_mirrors_the_stop_strings_and_reply_budget(server, monkeypatch) -> None:
    local = type(gym.make(LOCAL).unwrapped)
    monkeypatch.setattr(local, "stop_strings", ("\nENV:", "<obs>"))
    monkeypatch.setattr(local, "default_max_turn_tokens", 77)
    remote = gym.make("AgentGym/Remote-v0", base_url=server.base_url, env_id=LOCAL)
    assert stop_strings_for(remote) == ("\nENV:", "<obs>") and turn_tokens_for(remote) == 77
    # An env that declares neither: the client, like the wrapper, falls back to its action format's.
    monkeypatch.setattr(local, "stop_strings", None)
    monkeypatch.setattr(local, "default_max_turn_tokens", None)
    plain = gym.make("AgentGym/Remote-v0", base_url=server.base_url, env_id=LOCAL)
    assert plain.unwrapped.stop_strings is None and plain.unwrapped.default_max_turn_tokens is None
    assert stop_strings_for(plain) == FORMAT_STOPS["action_line"] and turn_tokens_for(plain) == DEFAULT_TURN_TOKENS


def test_multiturn_wrapper_reads_the_remote_scenario(server) -> None:
    env = MultiTurnWrapper(gym.make("AgentGym/Remote-v0", base_url=server.base_url, env_id=LOCAL))
    assert env.max_turns == 20 and env.system_prompt.startswith("You are an agent in a grid world")
    env.reset(seed=0)
    observation, _, _, _, info = env.step("I will look around.\nAction: turn left")
    assert info["valid_action"] and observation.startswith("You turned left.")
    env.close()


def test_remote_expert_solves_a_task(server) -> None:
    env = RemoteEnv(server.base_url, LOCAL)
    observation, info = env.reset(options={"split": "test", "task_id": 1})
    expert = env.make_expert()
    for _ in range(100):
        observation, reward, terminated, truncated, info = env.step(expert.act(observation, info))
        if terminated or truncated:
            break
    assert info["success"] and terminated and reward > 0
    env.close()
    probe = RemoteEnv(server.base_url, PROBE)
    probe.reset()
    with pytest.raises(NotImplementedError, match="has no expert"):
        probe.make_expert()
    probe.close()


def test_client_raises_what_the_env_raises(server) -> None:
    env = RemoteEnv(server.base_url, PROBE)
    with pytest.raises(gym.error.ResetNeeded):
        env.step("end")
    env.reset(seed=0)
    with pytest.raises(TypeError, match="must be a str"):
        env.step(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown split"):
        env.reset(options={"split": "nope"})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"level": 3})
    env.reset(seed=0)
    with pytest.raises(RemoteEnvError, match="the backend exploded") as failure:
        env.step("boom")
    assert failure.value.status == 500
    assert env.step("end")[2] is True  # the server kept serving the same session
    with pytest.raises(EpisodeOverError):
        env.step("end")
    env.close()


# ---- status codes ------------------------------------------------------------------------------
def test_faults_get_the_right_status_and_the_server_stays_healthy(http) -> None:
    sid = new_session(http)
    early = http.post(f"/sessions/{sid}/step", json={"action": "turn left"})
    assert "before calling env.reset()" in error(early, 409) and early.json()["error_type"] == "ResetNeeded"
    assert http.post(f"/sessions/{sid}/reset", json={"seed": 1}).status_code == 200

    malformed = http.post(
        f"/sessions/{sid}/step", content=b'{"action": "turn', headers={"content-type": "application/json"}
    )
    assert "malformed request" in error(malformed, 422)
    assert "body.action" in error(http.post(f"/sessions/{sid}/step", json={}), 422)
    assert "body.action" in error(http.post(f"/sessions/{sid}/step", json={"action": 7}), 422)
    assert "body.actoin" in error(http.post(f"/sessions/{sid}/step", json={"action": "x", "actoin": "y"}), 422)
    assert error(http.post(f"/sessions/{sid}/step", content=b"[1, 2]", headers=JSON), 422)

    megabyte = http.post(f"/sessions/{sid}/step", json={"action": "x" * 1_000_000})
    assert megabyte.status_code == 200 and megabyte.json()["info"]["valid_action"] is False
    too_long = http.post(f"/sessions/{sid}/step", json={"action": "x" * ((1 << 20) + 1)})
    assert "action space allows at most" in error(too_long, 422)
    assert "exceeds the limit" in error(http.post(f"/sessions/{sid}/step", json={"action": "x" * (5 << 20)}), 413)

    assert "unknown session 'nope'" in error(http.post("/sessions/nope/step", json={"action": "x"}), 404)
    assert "unknown session" in error(http.get("/sessions/nope"), 404)
    unknown = error(http.post("/sessions", json={"env_id": "AgentGym/NoSuch-v0"}), 404)
    assert "not served here" in unknown and BABYAI in unknown and PROBE in unknown
    refused = error(http.post("/sessions", json={"env_id": BABYAI, "kwargs": {"colour": 1}}), 403)
    assert "'colour' is not one a client may choose" in refused and "show_actions" in refused
    assert error(http.get("/no/such/route"), 404) == "Not Found"

    probe = new_session(http, PROBE)
    http.post(f"/sessions/{probe}/reset", json={})
    broken = http.post(f"/sessions/{probe}/step", json={"action": "boom"})
    assert "RuntimeError: the backend exploded" in error(broken, 500) and broken.json()["error_type"] == "RuntimeError"
    assert http.post(f"/sessions/{probe}/step", json={"action": "end"}).json()["terminated"] is True
    over = http.post(f"/sessions/{probe}/step", json={"action": "end"})
    assert "episode is over" in error(over, 409) and over.json()["error_type"] == "EpisodeOverError"

    assert http.delete(f"/sessions/{sid}").json() == {"session_id": sid, "closed": True}
    assert "unknown session" in error(http.post(f"/sessions/{sid}/step", json={"action": "turn left"}), 404)
    assert error(http.delete(f"/sessions/{sid}"), 404)
    http.delete(f"/sessions/{probe}")

    health = http.get("/health").json()
    assert health["status"] == "ok" and health["rss_bytes"] > 0 and health["uptime_s"] > 0
    fresh = new_session(http)
    assert http.post(f"/sessions/{fresh}/reset", json={"seed": 3}).status_code == 200
    assert http.post(f"/sessions/{fresh}/step", json={"action": "turn left"}).status_code == 200
    http.delete(f"/sessions/{fresh}")


def test_concurrent_calls_on_one_session_run_in_order(http, server) -> None:
    sid = new_session(http)
    http.post(f"/sessions/{sid}/reset", json={"seed": 5})
    twin = gym.make(BABYAI)
    twin.reset(seed=5)
    expected = sorted(twin.step("turn left")[0] for _ in range(16))
    replies: list[httpx.Response] = []

    def call() -> None:
        with httpx.Client(base_url=server.base_url, timeout=30) as client:
            replies.append(client.post(f"/sessions/{sid}/step", json={"action": "turn left"}))

    threads = [threading.Thread(target=call) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [r.status_code for r in replies] == [200] * 16
    assert sorted(r.json()["observation"] for r in replies) == expected
    assert http.get(f"/sessions/{sid}").json()["steps"] == 16
    http.delete(f"/sessions/{sid}")


def test_concurrent_deletes_of_one_session_close_it_once_and_the_others_get_404(http, server) -> None:
    sid = http.post("/sessions", json={"env_id": PROBE}).json()["session_id"]
    http.post(f"/sessions/{sid}/reset", json={})
    closed_before = ProbeEnv.closed
    statuses: list[int] = []

    def delete() -> None:
        statuses.append(httpx.delete(f"{server.base_url}/sessions/{sid}", timeout=30).status_code)

    step = threading.Thread(target=lambda: http.post(f"/sessions/{sid}/step", json={"action": "wait"}))
    step.start()
    time.sleep(0.3)  # the 1.5 s step holds the session's lock; the deletes queue behind it
    deletes = [threading.Thread(target=delete) for _ in range(8)]
    for thread in deletes:
        thread.start()
    for thread in [step, *deletes]:
        thread.join()
    assert sorted(statuses) == [200] + [404] * 7
    assert ProbeEnv.closed == closed_before + 1
    after = http.delete(f"/sessions/{sid}")
    assert after.status_code == 404 and after.json()["error_type"] == "SessionNotFound"


def test_a_repeated_call_number_is_answered_once(http) -> None:
    sid = new_session(http)
    http.post(f"/sessions/{sid}/reset", json={"seed": 2, "seq": 1})
    first = http.post(f"/sessions/{sid}/step", json={"action": "turn left", "seq": 2})
    again = http.post(f"/sessions/{sid}/step", json={"action": "turn left", "seq": 2})
    assert first.content == again.content
    assert http.get(f"/sessions/{sid}").json()["steps"] == 1
    http.delete(f"/sessions/{sid}")


def test_session_cap_is_answered_429() -> None:
    with ServerThread(create_app([PROBE], max_sessions=2)) as server, httpx.Client(base_url=server.base_url) as http:
        first, _ = new_session(http, PROBE), new_session(http, PROBE)
        assert "maximum of 2 sessions" in error(http.post("/sessions", json={}), 429)
        http.delete(f"/sessions/{first}")
        assert http.post("/sessions", json={}).status_code == 201


def test_reaper_closes_idle_sessions_and_clients_recover() -> None:
    closed = ProbeEnv.closed
    with ServerThread(create_app([PROBE], ttl=0.3)) as server, httpx.Client(base_url=server.base_url) as http:
        for _ in range(5):
            new_session(http, PROBE)
        env = RemoteEnv(server.base_url, PROBE)
        env.reset()
        deadline = time.monotonic() + 10
        while (health := http.get("/health").json())["reaped"] < 6 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert health["sessions"] == 0 and health["reaped"] == 6
        assert ProbeEnv.closed == closed + 6  # reaping closed every env (and so its backend)
        with pytest.raises(SessionLostError, match=r"reaped after 0\.3 s idle"):
            env.step("x")
        assert env.reset()[0].startswith("task")  # a reset opens a new session
        assert env.step("end")[2]
        env.close()


def test_graceful_shutdown_closes_every_session() -> None:
    closed = ProbeEnv.closed
    server = ServerThread(create_app([PROBE])).start()
    envs = [RemoteEnv(server.base_url, PROBE) for _ in range(4)]
    for env in envs:
        env.reset()
    server.stop()
    assert not server.thread.is_alive()
    assert ProbeEnv.closed == closed + 4


def test_client_reports_a_gone_server_and_reconnects_after_a_restart() -> None:
    server = ServerThread(create_app([PROBE])).start()
    env = RemoteEnv(server.base_url, PROBE, retries=2)
    env.reset()
    server.stop()
    started = time.monotonic()
    with pytest.raises(ServerUnavailableError, match=f"{server.base_url} is unreachable .* after 3 attempts"):
        env.step("x")
    assert time.monotonic() - started < 5
    with ServerThread(create_app([PROBE]), port=server.port):  # restarted: it forgot the session
        with pytest.raises(SessionLostError, match="restarted server forgets"):
            env.step("x")
        assert env.reset()[0].startswith("task")
        assert env.step("end")[2]
    env.close()  # the server is gone again: closing still succeeds


def test_client_survives_the_server_dropping_idle_connections() -> None:
    with ServerThread(create_app([LOCAL]), timeout_keep_alive=1) as server:
        env = RemoteEnv(server.base_url, LOCAL)
        env.reset(seed=0)
        env.step("turn left")
        time.sleep(1.5)  # the server closes the idle keep-alive connection
        env.step("turn left")
        with httpx.Client(base_url=server.base_url) as http:
            assert http.get(f"/sessions/{env.session_id}").json()["steps"] == 2
        env.close()


# ---- auth ---------------------------------------------------------------------------------------
def test_bearer_token_is_checked_on_every_route() -> None:
    with ServerThread(create_app([LOCAL], token="s3cret")) as server, httpx.Client(base_url=server.base_url) as http:
        for method, path in [("GET", "/health"), ("GET", "/docs"), ("GET", "/openapi.json"), ("GET", "/envs"),
                             ("POST", "/sessions"), ("POST", "/sessions/x/step"), ("POST", "/batch"),
                             ("POST", "/create"), ("GET", "/")]:  # fmt: skip
            assert "bearer token" in error(http.request(method, path), 401)
            assert http.request(method, path, headers={"Authorization": "Bearer wrong"}).status_code == 401
        good = {"Authorization": "Bearer s3cret"}
        assert http.get("/health", headers=good).status_code == 200
        schema = http.get("/openapi.json", headers=good).json()
        assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"

        with pytest.raises(AuthenticationError, match="bearer token"):
            RemoteEnv(server.base_url, LOCAL, token="wrong").reset()
        env = RemoteEnv(server.base_url, LOCAL, token="s3cret")
        assert env.reset(seed=1)[0].startswith("Mission:")
        env.close()


# ---- documentation ------------------------------------------------------------------------------
def test_openapi_documents_every_route_with_typed_bodies(http) -> None:
    schema = http.get("/openapi.json").json()
    paths = schema["paths"]
    for path in ["/sessions", "/sessions/{session_id}", "/sessions/{session_id}/reset", "/sessions/{session_id}/step",
                 "/sessions/{session_id}/tasks", "/sessions/{session_id}/expert", "/sessions/{session_id}/expert/act",
                 "/batch", "/envs", "/health", "/create", "/reset", "/step", "/observation", "/close"]:  # fmt: skip
        assert path in paths, path
    step = paths["/sessions/{session_id}/step"]["post"]
    assert step["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/StepRequest")
    assert step["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("/StepResponse")
    assert {"404", "409", "422", "500"} <= set(step["responses"])
    envs = {e["env_id"]: e for e in http.get("/envs").json()["envs"]}
    assert envs[BABYAI]["splits"] == {"train": 400_000, "test": 4_000} and envs[BABYAI]["has_expert"]


# ---- AgentGym's routes ------------------------------------------------------------------------
def test_agentgym_routes_serve_the_first_id_to_its_clients(http) -> None:
    """The first id's dialect answers (every scenario's is in test_agentgym_compat.py)."""
    assert http.get("/").json().startswith(f"This is environment {BABYAI}")
    env_id = http.post("/create").json()["id"]  # AgentGym's BabyAI client posts no body
    assert isinstance(env_id, int)
    reset = http.post("/reset", json={"id": env_id, "data_idx": 43}).json()  # level 43 % 40, seed 43 // 40
    observation, info = gym.make(BABYAI).reset(options={"task_id": "GoToObjS6/1"})
    assert reset["observation"] == observation and reset["task_description"] == info["instruction"]
    assert http.post("/close", json={"id": env_id}).json() is True
    assert "is not valid" in http.post("/step", json={"id": env_id, "action": "turn left"}).json()["error"]


# ---- batches ------------------------------------------------------------------------------------
def test_batch_route_runs_many_sessions_in_one_request(http) -> None:
    a, b = new_session(http), new_session(http)
    reply = http.post(
        "/batch",
        json={"calls": [{"session_id": a, "op": "reset", "seed": 1}, {"session_id": b, "op": "reset", "seed": 2}]},
    ).json()["results"]
    assert [r["ok"] for r in reply] == [True, True]
    twin = gym.make(BABYAI)
    assert reply[1]["observation"] == twin.reset(seed=2)[0]
    calls = [
        {"session_id": "gone", "op": "step", "action": "x"},
        {"session_id": b, "op": "step", "action": "turn left"},
    ]
    missing, stepped = http.post("/batch", json={"calls": calls}).json()["results"]
    assert not missing["ok"] and missing["status"] == 404 and "unknown session" in missing["detail"]
    assert stepped["ok"] and stepped["observation"] == twin.step("turn left")[0]  # one bad call fails alone

    twice = [{"session_id": a, "op": "step", "action": "x"}, {"session_id": a, "op": "step", "action": "y"}]
    assert "at most one call per session" in error(http.post("/batch", json={"calls": twice}), 422)
    assert error(http.post("/batch", json={"calls": []}), 422)
    assert "needs an action" in error(http.post("/batch", json={"calls": [{"session_id": a, "op": "step"}]}), 422)
    http.delete(f"/sessions/{a}")
    http.delete(f"/sessions/{b}")


def test_remote_vector_env_matches_in_process_envs(server) -> None:
    n = 4
    envs = gym.make_vec("AgentGym/Remote-v0", num_envs=n, base_url=server.base_url, env_id=LOCAL)
    assert isinstance(envs, RemoteVectorEnv)
    twins = [gym.make(LOCAL) for _ in range(n)]
    observations, infos = envs.reset(seed=10)
    assert observations == tuple(twin.reset(seed=10 + i)[0] for i, twin in enumerate(twins))
    assert list(infos["task_id"]) == [twin.unwrapped._task["task_id"] for twin in twins]
    rng = np.random.default_rng(0)
    ended = [False] * n
    for _ in range(40):
        actions = [str(rng.choice(["turn left", "turn right", "move forward", "pick up", "toggle"])) for _ in range(n)]
        observations, rewards, terminations, truncations, infos = envs.step(actions)
        for i, twin in enumerate(twins):
            if ended[i]:  # NEXT_STEP autoreset: the sub-env was reset by this step
                expected = twin.reset()[0]
                assert observations[i] == expected and rewards[i] == 0
            else:
                observation, reward, terminated, truncated, info = twin.step(actions[i])
                assert (observations[i], rewards[i], terminations[i], truncations[i]) == (
                    observation,
                    reward,
                    terminated,
                    truncated,
                )
                assert infos["valid_action"][i] == info["valid_action"] and infos["_valid_action"][i]
            ended[i] = bool(terminations[i] or truncations[i])
    envs.close()
    for twin in twins:
        twin.close()
