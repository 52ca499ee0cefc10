"""The server's per-call timeout: a hanging env call is answered 504 and its session closed, while the
other sessions of its worker thread go on (the thread is retired, a fresh one takes the slot)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import httpx
import pytest
from envs.remote.probes import HANG, HangProbe

from agentgym_envs.remote.server import create_app
from agentgym_envs.remote.server.local import ServerThread

#: The server's call timeout here; the margins below are many times wider (the machine may be loaded).
CALL_TIMEOUT = 1.0


@pytest.fixture()
def server() -> Any:
    if HANG not in gym.registry:
        gym.register(HANG, entry_point=HangProbe)
    HangProbe.release.clear()
    # One worker thread: every session shares it, so a hung call would stall them all without the timeout.
    app = create_app([HANG], workers=1, call_timeout=CALL_TIMEOUT)
    with ServerThread(app) as running, httpx.Client(base_url=running.base_url, timeout=60) as http:
        try:
            yield app, http
        finally:
            HangProbe.release.set()  # the retired thread returns, closes the abandoned env and stops


def _session(http: httpx.Client) -> str:
    session_id = http.post("/sessions", json={}).json()["session_id"]
    assert http.post(f"/sessions/{session_id}/reset", json={}).json()["observation"] == "start"
    return session_id


def test_a_hanging_call_is_answered_504_and_the_other_sessions_of_its_thread_go_on(server) -> None:
    app, http = server
    hung, other = _session(http), _session(http)

    def step(session_id: str, action: str) -> httpx.Response:  # a client per request thread
        base = str(http.base_url).rstrip("/")
        return httpx.post(f"{base}/sessions/{session_id}/step", json={"action": action}, timeout=60)

    with ThreadPoolExecutor(2) as pool:
        hanging = pool.submit(step, hung, "hang")
        time.sleep(0.2)  # the hang is on the one thread now; the next step queues behind it
        started = time.monotonic()
        queued = pool.submit(step, other, "go")
        reply, timed_out = queued.result(timeout=60), hanging.result(timeout=60)
        waited = time.monotonic() - started

    assert reply.status_code == 200 and reply.json()["observation"] == "echo go"
    assert waited < 30 * CALL_TIMEOUT  # answered once the hung call's timeout retired its thread
    assert timed_out.status_code == 504
    assert timed_out.json()["error_type"] == "EnvCallTimeout"
    assert f"step of session {hung}" in timed_out.json()["detail"] and "1 s" in timed_out.json()["detail"]
    assert app.state.manager.pool.retired == 1

    gone = http.post(f"/sessions/{hung}/step", json={"action": "go"})
    assert gone.status_code == 404 and "call timeout (1 s)" in gone.json()["detail"]
    assert [s["session_id"] for s in http.get("/sessions").json()["sessions"]] == [other]
    assert http.post(f"/sessions/{other}/step", json={"action": "again"}).json()["observation"] == "echo again"


def test_a_hanging_call_in_a_batch_fails_alone_and_the_calls_after_it_run(server) -> None:
    app, http = server
    first, hung, last = _session(http), _session(http), _session(http)
    calls = [
        {"session_id": first, "op": "step", "action": "one"},
        {"session_id": hung, "op": "step", "action": "hang"},
        {"session_id": last, "op": "step", "action": "three"},
    ]
    results = http.post("/batch", json={"calls": calls}).json()["results"]

    assert [r["ok"] for r in results] == [True, False, True]
    assert results[0]["observation"] == "echo one" and results[2]["observation"] == "echo three"
    assert results[1]["status"] == 504 and results[1]["error_type"] == "EnvCallTimeout"
    assert app.state.manager.pool.retired == 1
    assert sorted(s["session_id"] for s in http.get("/sessions").json()["sessions"]) == sorted([first, last])
