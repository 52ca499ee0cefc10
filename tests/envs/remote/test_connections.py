"""The server's connections bounded below its descriptor limit (issue 28.4): a flood of half-sent
requests no longer exhausts the descriptors and resets well-behaved clients' connections.

The server runs in a subprocess limited to 256 descriptors; the flood comes from other loopback
addresses (127.0.0.2 and up), every socket stays on loopback and is closed at the end.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import resource
import socket
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import pytest
from envs.remote.probes import HANG, HangProbe
from hypothesis import given, settings
from hypothesis import strategies as st
from server_process import serving

from agentgym_envs.connections import BUSY, IDLE, READING, ConnectionLimit, default_max_connections
from agentgym_envs.remote.client.transport import HTTPTransport
from agentgym_envs.remote.server import create_app
from agentgym_envs.remote.server.local import ServerThread
from agentgym_train.cli import main as cli

BABYAI = "AgentGym/BabyAI-v0"
DESCRIPTORS = 256


@contextlib.contextmanager
def limited_server(*args: str) -> Iterator[tuple[int, int]]:
    """`agentgym serve BABYAI ARGS` in a subprocess allowed DESCRIPTORS descriptors: (port, pid)."""

    # The child lowers its own limit before the CLI starts (no preexec_fn: this process may run threads).
    start = (
        "import resource, runpy, sys; "
        f"resource.setrlimit(resource.RLIMIT_NOFILE, ({DESCRIPTORS}, {DESCRIPTORS})); "
        "sys.argv = ['agentgym', *sys.argv[1:]]; runpy.run_module('agentgym_train.cli', run_name='__main__')"
    )
    command = [sys.executable, "-c", start, "serve", BABYAI, "--port", "0", *args]
    with serving(command=command) as server:
        yield server.port, server.pid


def _half_sent(port: int, source: str, count: int) -> list[socket.socket]:
    """`count` connections from `source`, each with half a request head sent, held open."""
    head = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Slow: ".encode()
    sockets = []
    for _ in range(count):
        sock = socket.socket()
        sockets.append(sock)
        sock.settimeout(5)
        sock.bind((source, 0))
        try:
            sock.connect(("127.0.0.1", port))
            sock.sendall(head)
        except OSError:  # refused or reset: the flood's problem, not the test's
            pass
    return sockets


def _call(port: int, method: str, path: str, body: Any = None) -> tuple[int, dict[str, Any]]:
    """One request on a fresh connection from 127.0.0.1 (what a well-behaved client does)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        payload = None if body is None else json.dumps(body)
        headers = {} if body is None else {"content-type": "application/json"}
        connection.request(method, path, body=payload, headers=headers)
        reply = connection.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        connection.close()


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="loopback addresses past 127.0.0.1 and /proc: Linux")
def test_a_flood_of_half_sent_requests_does_not_reset_a_normal_clients_connections() -> None:
    started = time.monotonic()
    flood: list[socket.socket] = []
    try:
        # Read deadlines far past the test, so that only the bound closes the half-sent requests.
        with limited_server("--header-timeout", "120") as (port, pid):
            # 300 half-sent requests from one address: more than the server has descriptors.
            flood += _half_sent(port, "127.0.0.2", 300)
            time.sleep(0.3)
            failures = []
            for _ in range(20):
                try:
                    status, _ = _call(port, "GET", "/health")
                    if status != 200:
                        failures.append(status)
                except OSError as error:  # before the bound: connection reset by peer
                    failures.append(repr(error))
            assert not failures, f"{len(failures)} of 20 /health calls failed during the flood: {failures[:3]}"
            status, created = _call(port, "POST", "/sessions", {})
            assert status == 201, created
            session = created["session_id"]
            assert _call(port, "POST", f"/sessions/{session}/reset", {"seed": 0})[0] == 200
            assert _call(port, "POST", f"/sessions/{session}/step", {"action": "check available actions"})[0] == 200
            assert _descriptors(pid) < DESCRIPTORS - 32  # one address holds at most half the bound

            # Then from four more addresses at once: the bound in all holds too.
            for source in ("127.0.0.3", "127.0.0.4", "127.0.0.5", "127.0.0.6"):
                flood += _half_sent(port, source, 80)
            time.sleep(0.3)
            assert _descriptors(pid) < DESCRIPTORS
            for _ in range(5):
                assert _call(port, "GET", "/health")[0] == 200
            status, health = _call(port, "GET", "/health")
            connections = health["connections"]
            assert connections["max"] == 192 and connections["per_address"] == 96, connections
            assert connections["open"] <= 192 and connections["shed"] >= 300 + 320 - 192, connections
            assert connections["refused"] == 0, connections
    finally:
        for sock in flood:
            sock.close()
    assert time.monotonic() - started < 60


def test_a_kept_alive_connection_being_answered_is_never_closed_to_make_room_and_clients_retry() -> None:
    if HANG not in gym.registry:
        gym.register(HANG, entry_point=HangProbe)
    HangProbe.release.clear()
    app = create_app([HANG], max_connections=1)
    with ServerThread(app) as running, ThreadPoolExecutor(1) as pool:
        connection = http.client.HTTPConnection("127.0.0.1", running.port, timeout=30)
        try:
            # Requests on one kept-alive connection: after the first reply it idles, then answers a held step.
            connection.request("POST", "/sessions", body="{}", headers={"content-type": "application/json"})
            session = json.loads(connection.getresponse().read())["session_id"]
            connection.request(
                "POST", f"/sessions/{session}/reset", body="{}", headers={"content-type": "application/json"}
            )
            assert connection.getresponse().read()

            def held() -> tuple[int, bytes]:
                body = '{"action": "hang"}'
                connection.request(
                    "POST", f"/sessions/{session}/step", body=body, headers={"content-type": "application/json"}
                )
                reply = connection.getresponse()
                return reply.status, reply.read()

            step = pool.submit(held)
            time.sleep(0.5)  # the step is held in the env now
            newcomer = socket.create_connection(("127.0.0.1", running.port), timeout=10)
            refused = newcomer.recv(4096)
            newcomer.close()
            # The client retries such a refusal (the server read none of the request), and is served once
            # the held step is answered and its connection idles.
            client = HTTPTransport(running.base_url, retries=6)
            with ThreadPoolExecutor(1) as other:
                later = other.submit(client.request, "GET", "/health")
                time.sleep(0.2)
                HangProbe.release.set()
                status, body = step.result(timeout=30)
                assert later.result(timeout=30)["status"] == "ok"
            client.close()
        finally:
            HangProbe.release.set()
            connection.close()
    assert status == 200 and json.loads(body)["observation"] == "echo hang", (status, body)
    # the newcomer is refused instead (429: past the address's share, which is the one connection here)
    assert refused.startswith(b"HTTP/1.1 429") and b"TooManyConnections" in refused, refused


# ---- the bound itself, with stand-in connections ---------------------------------------------------
class _Transport:
    def __init__(self) -> None:
        self.written, self.closing = b"", False

    def write(self, data: bytes) -> None:
        self.written += data

    def close(self) -> None:
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing


class _Connection:
    def __init__(self) -> None:
        self.transport = _Transport()


def test_the_bound_sheds_the_longest_reading_then_the_longest_idle_never_a_busy_one() -> None:
    limit = ConnectionLimit(3, per_address=3)
    busy, idle, reading = _Connection(), _Connection(), _Connection()
    for connection in (busy, idle, reading):
        assert limit.admit(connection, "a")
    limit.state(busy, BUSY)
    limit.state(idle, IDLE)
    newcomer = _Connection()
    assert limit.admit(newcomer, "b")
    assert reading.transport.closing and b"503" in reading.transport.written  # a request was on its way
    limit.state(newcomer, BUSY)
    assert limit.admit(_Connection(), "c")
    assert idle.transport.closing and idle.transport.written == b""  # an idle one is closed silently
    assert not busy.transport.closing
    assert limit.stats() == {"open": 3, "max": 3, "per_address": 3, "shed": 2, "refused": 0}


def test_when_every_connection_is_busy_the_newcomer_is_refused_503_or_429_past_its_address_share() -> None:
    limit = ConnectionLimit(4, per_address=2)
    first, second = _Connection(), _Connection()
    for connection in (first, second):
        assert limit.admit(connection, "a")
        limit.state(connection, BUSY)
    extra = _Connection()
    assert not limit.admit(extra, "a")
    assert extra.transport.closing and extra.transport.written.startswith(b"HTTP/1.1 429")
    others = [_Connection(), _Connection()]
    for connection in others:
        assert limit.admit(connection, "b")
        limit.state(connection, BUSY)
    late = _Connection()
    assert not limit.admit(late, "c")
    assert late.transport.written.startswith(b"HTTP/1.1 503") and b"TooManyConnections" in late.transport.written
    assert len(limit) == 4 and limit.stats()["refused"] == 2
    limit.release(first)
    limit.release(first)  # idempotent
    assert limit.admit(_Connection(), "c") and len(limit) == 4


def test_an_address_past_its_share_sheds_its_own_not_others() -> None:
    limit = ConnectionLimit(10, per_address=2)
    other = _Connection()
    assert limit.admit(other, "good")
    flood = [_Connection() for _ in range(5)]
    for connection in flood:
        assert limit.admit(connection, "bad")
    assert [c.transport.closing for c in flood] == [True, True, True, False, False]
    assert not other.transport.closing and len(limit) == 3


def test_closed_websockets_stop_counting_and_defaults_follow_the_descriptor_limit() -> None:
    limit = ConnectionLimit(1)
    socket_ = _Connection()
    assert limit.admit(socket_, "a")
    limit.state(socket_, "upgraded")
    socket_.transport.close()  # the WebSocket closed; its HTTP protocol is not told
    assert limit.admit(_Connection(), "a") and len(limit) == 1 and limit.stats()["refused"] == 0
    assert default_max_connections(256) == 192 and default_max_connections(1024) == 768
    assert default_max_connections(20) == 8
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert ConnectionLimit().max_connections == default_max_connections(soft)
    with pytest.raises(ValueError):
        ConnectionLimit(-1)


def test_serve_takes_the_connection_bounds_and_shows_them(monkeypatch, capsys) -> None:
    import agentgym_envs.remote.server as server_module

    with pytest.raises(SystemExit):
        cli(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "--max-connections " in help_text and "--max-connections-per-address" in help_text, help_text
    given: dict[str, Any] = {}
    monkeypatch.setattr(server_module, "serve", lambda env_ids, host, port, **options: given.update(options))
    assert cli(["serve", BABYAI, "--max-connections", "500", "--max-connections-per-address", "50"]) == 0
    assert given["max_connections"] == 500 and given["max_connections_per_address"] == 50


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("admit"), st.sampled_from(["a", "b", "c"])),
        st.tuples(st.sampled_from([READING, IDLE, BUSY, "upgraded", "release", "ws-close"]), st.integers(0, 30)),
    ),
    max_size=60,
)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(ops=OPS, max_connections=st.integers(1, 6), per_address=st.integers(0, 6))
def test_the_bound_holds_and_never_closes_a_busy_connection_whatever_happens(ops, max_connections, per_address) -> None:
    limit = ConnectionLimit(max_connections, per_address)
    made: list[tuple[_Connection, str]] = []  # every connection ever admitted, with its address
    states: dict[_Connection, str] = {}  # what each counted connection last reported
    by_client: set[_Connection] = set()  # the connections their client closed
    for op, arg in ops:
        if op == "admit":
            connection = _Connection()
            made.append((connection, arg))
            before = {c for c, _ in made if c.transport.closing}
            if limit.admit(connection, arg):
                states[connection] = READING
            closed_now = {c for c, _ in made if c.transport.closing} - before - {connection}
            for victim in closed_now:  # only a connection waiting for a request or idle is closed for room
                assert states.pop(victim) in (READING, IDLE), states
        elif made:
            connection, _ = made[arg % len(made)]
            if connection not in states or (connection.transport.closing and op != "release"):
                continue  # a closed connection reports nothing more but its end
            if op == "release":
                limit.release(connection)
                del states[connection]
            elif op == "ws-close":
                if states[connection] == "upgraded":
                    connection.transport.close()  # the WebSocket's end: the limit hears of it only by pruning
                    by_client.add(connection)
            else:
                limit.state(connection, op)
                states[connection] = op
        open_ones = [c for c in states if not c.transport.closing]
        assert len(limit) <= max(max_connections, len(states)) and len(open_ones) <= limit.max_connections
        for address in "abc":
            mine = [c for c, a in made if a == address and c in states and not c.transport.closing]
            assert len(mine) <= limit.per_address
    assert limit.shed + limit.refused == sum(c.transport.closing and c not in by_client for c, _ in made)
