"""The env server under load, in a process of its own (`agentgym serve`): many concurrent clients, and
abandoned sessions reaped with their memory."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator

import gymnasium as gym
import httpx
import numpy as np
import pytest
from server_process import serving

import agentgym_envs  # noqa: F401
from agentgym_envs.remote import RemoteEnv
from agentgym_train.cli import main

BABYAI = "AgentGym/BabyAI-v0"


@contextlib.contextmanager
def served(*args: str) -> Iterator[str]:
    """`agentgym serve ARGS --port 0` in a subprocess; yields its base URL, stops it gracefully after."""
    with serving(*args) as server:
        yield server.base_url


def test_serve_refuses_unknown_and_client_ids(capsys) -> None:
    assert main(["serve", "AgentGym/NoSuch-v0"]) == 2
    assert "unknown env ids ['AgentGym/NoSuch-v0']" in capsys.readouterr().err
    assert main(["serve", "AgentGym/Remote-v0"]) == 2
    assert "clients of a server" in capsys.readouterr().err


@pytest.mark.slow
def test_32_clients_of_one_server_each_match_an_in_process_twin() -> None:
    """32 clients x 200 steps at once; every observation, reward and info equals that of an in-process
    env with the same seed and actions, so no session ever saw another's call."""
    failures: list[str] = []

    def client(index: int, url: str) -> None:
        rng = np.random.default_rng(index)
        env, twin = RemoteEnv(url, BABYAI), gym.make(BABYAI)
        try:
            seed = 100 * index
            reset = env.reset(seed=seed)
            assert reset == twin.reset(seed=seed), "reset differs"
            info = reset[1]
            for step in range(200):
                choices = [*info["available_actions"], "fly to the moon", "pick up"]
                action = choices[rng.integers(len(choices))]
                result = env.step(action)
                if result != twin.step(action):
                    failures.append(f"client {index}, step {step} ({action!r}): differs from the twin")
                    return
                info = result[4]
                if result[2] or result[3]:
                    seed += 1
                    reset = env.reset(seed=seed)
                    assert reset == twin.reset(seed=seed), "reset differs"
                    info = reset[1]
        except Exception as error:
            failures.append(f"client {index}: {type(error).__name__}: {error}")
        finally:
            env.close()
            twin.close()

    with served(BABYAI) as url:
        threads = [threading.Thread(target=client, args=(i, url)) for i in range(32)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        health = httpx.get(f"{url}/health").json()
    assert failures == []
    assert health["sessions"] == 0 and health["status"] == "ok"


@pytest.mark.slow
def test_500_abandoned_sessions_are_reaped_and_memory_returns() -> None:
    """Rounds of 500 sessions (made, reset, stepped, abandoned) are closed by the idle reaper, and a
    round leaves the server's memory where it found it.

    The first round is a warm-up: Python's allocator keeps the arenas it grew for it (pinned by a few
    long-lived objects) and reuses them, so the check is that a round returns to its starting RSS,
    i.e. that nothing of 500 closed sessions stays behind.
    """
    # Long enough that no session of a round idles out while the round's 500 are still being made
    # (a loaded CI machine took over 6 s for that), short enough to wait for twice.
    ttl = 20.0
    with served(BABYAI, "--ttl", str(ttl), "--max-sessions", "600") as url, httpx.Client(base_url=url) as http:

        def round_of(n: int) -> dict:
            ids = [http.post("/sessions", json={}).json()["session_id"] for _ in range(n)]
            resets = [{"session_id": sid, "op": "reset", "seed": k} for k, sid in enumerate(ids)]
            steps = [{"session_id": sid, "op": "step", "action": "move forward"} for sid in ids]
            for calls in (resets, steps):
                assert all(r["ok"] for r in http.post("/batch", json={"calls": calls}, timeout=120).json()["results"])
            return http.get("/health").json()

        def reaped(total: int) -> dict:
            deadline = time.monotonic() + ttl + 30
            while (health := http.get("/health").json())["reaped"] < total:
                assert time.monotonic() < deadline, f"only {health['reaped']} of {total} sessions reaped"
                time.sleep(0.2)
            time.sleep(0.5)  # the reaper trims the heap right after closing
            return http.get("/health").json()

        round_of(500)
        start = reaped(500)["rss_bytes"]
        peak = round_of(500)
        assert peak["sessions"] == 500
        end = reaped(1000)
    assert end["sessions"] == 0 and end["reaped"] == 1000
    mib = 2**20
    assert end["rss_bytes"] - start < 4 * mib, (start / mib, peak["rss_bytes"] / mib, end["rss_bytes"] / mib)
