"""Envs whose calls are short pure-Python work (`shared_server_thread`, TextCraft) run every session on one
worker thread; a batch over them answers exactly as the envs do in process, and frees every session's lock."""

from __future__ import annotations

import asyncio

import gymnasium as gym
import httpx
import numpy as np
import pytest

import agentgym_envs  # noqa: F401
from agentgym_envs.remote.server import create_app
from agentgym_envs.remote.server.local import ServerThread
from agentgym_envs.remote.server.sessions import SessionManager, _shares_a_thread
from agentgym_envs.remote.wire import ApiError

TEXTCRAFT = "AgentGym/TextCraft-v0"
BABYAI = "AgentGym/BabyAI-GoToLocal-v0"


def test_only_envs_that_say_so_share_a_thread() -> None:
    assert _shares_a_thread(TEXTCRAFT) and _shares_a_thread("AgentGym/TextCraft-Depth2-v0")
    assert not _shares_a_thread(BABYAI)
    assert not _shares_a_thread("CartPole-v1")  # a foreign env declares nothing: the contract's default


def test_a_client_cannot_choose_the_shared_thread() -> None:
    async def main() -> None:
        manager = SessionManager([TEXTCRAFT], ttl=None)
        try:
            with pytest.raises(ApiError) as refused:
                await manager.create(TEXTCRAFT, {"shared_server_thread": False})
            assert refused.value.status == 403 and "shared_server_thread" in refused.value.detail
        finally:
            await manager.shutdown()

    asyncio.run(main())


def test_textcraft_sessions_share_one_slot_and_others_spread() -> None:
    async def main() -> tuple[list[int], list[int], list[int]]:
        manager = SessionManager([TEXTCRAFT, BABYAI], workers=4, ttl=None)
        try:
            crafts = [await manager.create(TEXTCRAFT, {}) for _ in range(6)]
            babies = [await manager.create(BABYAI, {}) for _ in range(4)]
            more = [await manager.create(TEXTCRAFT, {}) for _ in range(2)]
            return [s.slot for s in crafts], [s.slot for s in babies], [s.slot for s in more]
        finally:
            await manager.shutdown()

    crafts, babies, more = asyncio.run(main())
    assert len(set(crafts + more)) == 1
    # The shared slot counts its sessions, so the least-loaded assignment sends the others elsewhere.
    assert crafts[0] not in babies and len(set(babies)) == 3


@pytest.fixture(scope="module")
def http():
    app = create_app([TEXTCRAFT, BABYAI], max_sessions=128, ttl=None, workers=4)
    with ServerThread(app) as running, httpx.Client(base_url=running.base_url, timeout=60) as client:
        yield client


def test_a_batch_over_shared_thread_sessions_answers_as_the_envs_do(http) -> None:
    n = 12
    ids = [http.post("/sessions", json={"env_id": TEXTCRAFT}).json()["session_id"] for _ in range(n)]
    baby = http.post("/sessions", json={"env_id": BABYAI}).json()["session_id"]  # another thread, same batch
    twins = [gym.make(TEXTCRAFT) for _ in range(n)]
    baby_twin = gym.make(BABYAI)
    calls = [{"session_id": s, "op": "reset", "seed": i} for i, s in enumerate(ids)]
    calls.append({"session_id": baby, "op": "reset", "seed": 5})
    results = http.post("/batch", json={"calls": calls}).json()["results"]
    expected = [twin.reset(seed=i) for i, twin in enumerate(twins)] + [baby_twin.reset(seed=5)]
    assert [[r["observation"], r["info"]] for r in results] == [list(e) for e in expected]
    experts = [twin.unwrapped.make_expert() for twin in twins]
    observations = [e[0] for e in expected[:n]]
    infos = [e[1] for e in expected[:n]]
    rng = np.random.default_rng(0)
    done = [False] * n
    for _ in range(40):
        live = [i for i in range(n) if not done[i]]
        if not live:
            break
        actions = {i: experts[i].act(observations[i], infos[i]) if rng.random() < 0.8 else "inventory" for i in live}
        calls = [{"session_id": ids[i], "op": "step", "action": actions[i]} for i in live]
        calls.append({"session_id": baby, "op": "step", "action": "turn left"})
        calls.insert(1, {"session_id": "gone", "op": "step", "action": "inventory"})  # fails alone
        results = http.post("/batch", json={"calls": calls}).json()["results"]
        assert not results.pop(1)["ok"]
        for i, result in zip(live, results, strict=False):
            observation, reward, terminated, truncated, info = twins[i].step(actions[i])
            assert result == {
                "ok": True,
                "observation": observation,
                "reward": reward,
                "terminated": terminated,
                "truncated": truncated,
                "info": info,
            }
            observations[i], infos[i], done[i] = observation, info, terminated or truncated
        assert results[-1]["observation"] == baby_twin.step("turn left")[0]
    assert all(done)
    rows = http.get("/sessions").json()["sessions"]
    assert len(rows) == n + 1 and not any(row["busy"] for row in rows)  # every lock was released
    for s in [*ids, baby]:
        assert http.delete(f"/sessions/{s}").status_code in (200, 204)
