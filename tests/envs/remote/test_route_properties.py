"""Property-based tests (Hypothesis) of the server's routes: our own, AgentGym's and OpenEnv's, within a
fixed, derandomised budget (the same examples on every run, each property under ten seconds).

Four servers run in this process for the module (`ServerThread` on loopback): TextCraft first (AgentGym's
routes in TextCraft's dialect), BabyAI first (BabyAI's dialect) and Deep Search first (SearchQA's), each
serving a second id, and one that wants a token (for the headers' property). Every
request is one a hostile or broken client might send: bytes that are not JSON, JSON of any shape,
every field of every route with a value of any type, hostile values of the right type, huge and
deeply nested bodies, bytes that are not HTTP, OpenEnv frames of any shape, and calls on one
session at once. The properties: every answer is a proper HTTP status with a JSON body, an error
never a 500 (a 500 means the server failed, not the request), and the server answers `/health`
afterwards.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import agentgym_envs  # noqa: F401
from agentgym_envs.remote import wire
from agentgym_envs.remote.server import create_app
from agentgym_envs.remote.server.local import ServerThread

BABYAI = "AgentGym/BabyAI-v0"
TEXTCRAFT = "AgentGym/TextCraft-v0"
DEEPSEARCH = "AgentGym/DeepSearch-v0"
AGENTGYM_ROUTES = ("/create", "/reset", "/step", "/close", "/observation")
MAX_BODY = 1 << 20
#: The token of the third server, which wants one (the headers' property aims at it too).
TOKEN = b"t0k3n-for-the-properties"

BUDGET = settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)
SMALL_BUDGET = settings(BUDGET, max_examples=60)


class Served:
    """One server of the module, with sessions made and reset for the properties to aim at."""

    def __init__(self, first: str, token: str | None = None):
        self.ids = ids = [first, BABYAI if first != BABYAI else TEXTCRAFT]
        self.server = ServerThread(create_app(ids, ttl=None, max_body_bytes=MAX_BODY, token=token)).start()
        headers = {"authorization": f"Bearer {token}"} if token else None
        self.http = httpx.Client(base_url=self.server.base_url, timeout=60, headers=headers)
        self.first = first
        self.sessions = []
        for env_id in ids:
            session_id = self.http.post("/sessions", json={"env_id": env_id}).json()["session_id"]
            assert self.http.post(f"/sessions/{session_id}/reset", json={"seed": 0}).status_code == 200
            self.sessions.append(session_id)
        created = self.http.post("/create", json={}).json()
        self.compat_id = created if isinstance(created, int) else created.get("id", created.get("env_idx"))

    def close(self) -> None:
        self.http.close()
        self.server.stop()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Served]]:
    served = {first: Served(first) for first in (TEXTCRAFT, BABYAI, DEEPSEARCH)}
    served["token"] = Served(TEXTCRAFT, token=TOKEN.decode())
    try:
        yield served
    finally:
        for one in served.values():
            one.close()


FIRSTS = st.sampled_from([TEXTCRAFT, BABYAI, DEEPSEARCH])
#: Texts the server must carry or refuse cleanly: lone surrogates (legal in a Python str, not in UTF-8),
#: NUL, bidirectional controls, digits past Python's int-parsing limit; mixed with any text at all.
HOSTILE_TEXTS = ["\ud800", "a\udfffb", "\udc80", "\x00", "\u202e", "9" * 5000, "", " ", "null", "NaN"]
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=30) | st.sampled_from(HOSTILE_TEXTS)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)
#: The routes that take a JSON body, `{sid}` a session of the server, `{env}` a served id.
POST_ROUTES = [
    "/sessions",
    "/sessions/{sid}/reset",
    "/sessions/{sid}/step",
    "/sessions/{sid}/expert",
    "/sessions/{sid}/expert/act",
    "/batch",
    "/create",
    "/reset",
    "/step",
    "/close",
    "/openenv/{env}/mcp",
]
#: Every field name of those routes' bodies (ours, AgentGym's dialects, OpenEnv's MCP).
FIELDS = [
    *("env_id", "kwargs", "seed", "options", "seq", "action", "observation", "info", "calls"),
    *("session_id", "op", "id", "env_idx", "data_idx", "idx", "commands", "goal", "jsonrpc", "method", "params"),
]
#: Text that is nearly JSON: the fragments it is built of, broken and joined at random.
FRAGMENTS = [
    '{"',
    '"action"',
    '"seed"',
    '"calls"',
    '"id"',
    ":",
    ",",
    "}",
    "[",
    "]",
    '"\\ud800"',
    "1e999",
    "-0",
    "9" * 5000,
]
bodies = st.one_of(
    st.binary(max_size=200),
    json_values.map(json.dumps),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6).map(json.dumps),
    st.lists(st.sampled_from(FRAGMENTS), max_size=20).map("".join),
)


def _path(served: Served, route: str, session: int = 0) -> str:
    return route.format(sid=served.sessions[session % len(served.sessions)], env=served.first)


def _check(reply: httpx.Response, what: str, served: Served | None = None) -> Any:
    """The reply's JSON, after checking it is a proper answer: a status below 500 (or a 501/504 that
    says why), JSON, an error with a `detail` or AgentGym's `error`. On AgentGym's routes of the Deep
    Search server, AgentGym's SearchQA server answers its errors 500 with a detail, and so does its dialect."""
    assert 200 <= reply.status_code < 600, f"{what}: status {reply.status_code}"
    if 300 <= reply.status_code < 400:  # FastAPI's redirect of a path with a trailing slash: no body
        return None
    assert reply.headers.get("content-type", "").startswith("application/json"), f"{what}: {reply.headers}"
    payload = reply.json()
    if reply.status_code >= 400:
        assert isinstance(payload, dict) and isinstance(payload.get("detail") or payload.get("error"), str), (
            f"{what}: {reply.status_code} {reply.text[:500]}"
        )
    searchqa = served is not None and served.first == DEEPSEARCH and reply.url.path in AGENTGYM_ROUTES
    if reply.status_code == 500 and searchqa:  # the dialect's own reply, not a failure of the server
        assert payload["error_type"] == "ValueError" and not payload["detail"].startswith("internal"), what
    else:
        assert reply.status_code not in (500, 502, 503), f"{what}: {reply.status_code} {reply.text[:500]}"
    return payload


def _post(served: Served, path: str, body: Any) -> httpx.Response:
    """POST `body` as JSON the way the client writes it (ASCII; lone surrogates and NaN travel)."""
    return served.http.post(path, content=wire.dumps(body), headers={"content-type": "application/json"})


def _healthy(served: Served) -> None:
    reply = served.http.get("/health")
    assert reply.status_code == 200 and reply.json()["status"] == "ok"


@BUDGET
@given(first=FIRSTS, route=st.sampled_from(POST_ROUTES), body=bodies, session=st.integers(0, 1))
def test_any_body_on_any_route_is_answered_never_500(servers, first, route, body, session) -> None:
    served = servers[first]
    path = _path(served, route, session)
    reply = served.http.post(path, content=body, headers={"content-type": "application/json"})
    _check(reply, f"POST {path} {body[:200]!r}", served)


@BUDGET
@given(
    first=FIRSTS,
    route=st.sampled_from(POST_ROUTES),
    fields=st.dictionaries(st.sampled_from(FIELDS), json_values, min_size=1, max_size=5),
)
def test_wrong_types_in_every_field_are_answered_never_500(servers, first, route, fields) -> None:
    served = servers[first]
    path = _path(served, route)
    if route in ("/reset", "/step", "/close") and "id" not in fields and "env_idx" not in fields:
        fields = {**fields, "id": served.compat_id, "env_idx": served.compat_id}
    _check(_post(served, path, fields), f"POST {path} {fields!r:.300}", served)


#: One hostile value of each kind, for the sweep of every field of every route.
SWEEP_VALUES = ["\ud800", "9" * 5000, None, True, -1, 2**70, 1e308, [], {}, [[["x"]]], {"\udc80": 0}]


@pytest.mark.parametrize("first", [TEXTCRAFT, BABYAI, DEEPSEARCH])
def test_every_field_of_every_route_with_each_hostile_value_is_answered_never_500(servers, first) -> None:
    """A sweep, not a sample: each value alone in each field of each route (found the echoed JSON-RPC id)."""
    served = servers[first]
    for route in POST_ROUTES:
        path = _path(served, route)
        for field in FIELDS:
            for value in SWEEP_VALUES:
                body = {field: value}
                if route in ("/reset", "/step", "/close") and field not in ("id", "env_idx"):
                    body |= {"id": served.compat_id, "env_idx": served.compat_id}
                _check(_post(served, path, body), f"POST {path} {body!r:.200}", served)
    _healthy(served)


big_ints = st.integers() | st.sampled_from([2**31, 2**63, 2**64 + 1, -(2**63) - 1, 10**4000])
options = st.fixed_dictionaries(
    {}, optional={"task_id": json_values | big_ints, "split": any_text | st.sampled_from(["train", "test", "dev"])}
)
batch_calls = st.lists(
    st.fixed_dictionaries(
        {"session_id": st.sampled_from(["0", "nope"]) | any_text, "op": st.sampled_from(["reset", "step"])},
        optional={"action": any_text, "seed": big_ints, "options": options, "seq": big_ints},
    ),
    min_size=1,
    max_size=4,
)


@BUDGET
@given(
    first=FIRSTS,
    call=st.one_of(
        st.tuples(st.just("reset"), st.fixed_dictionaries({}, optional={"seed": big_ints, "options": options})),
        st.tuples(st.just("step"), st.fixed_dictionaries({"action": any_text}, optional={"seq": big_ints})),
        st.tuples(st.just("expert/act"), st.fixed_dictionaries({"observation": any_text, "info": st.just({})})),
        st.tuples(st.just("batch"), st.fixed_dictionaries({"calls": batch_calls})),
        st.tuples(st.just("compat"), st.fixed_dictionaries({"data_idx": big_ints, "idx": big_ints, "id": big_ints})),
    ),
    session=st.integers(0, 1),
)
def test_hostile_values_of_the_right_type_are_answered_never_500(servers, first, call, session) -> None:
    served = servers[first]
    kind, body = call
    session_id = served.sessions[session]
    if kind == "batch":
        body = {
            "calls": [
                {**c, "session_id": session_id if c["session_id"] == "0" else c["session_id"]} for c in body["calls"]
            ]
        }
        path = "/batch"
    elif kind == "compat":
        path = "/reset"
        body = {**body, "id": served.compat_id, "env_idx": served.compat_id}
    else:
        path = f"/sessions/{session_id}/{kind}"
    payload = _check(_post(served, path, body), f"POST {path} {body!r:.300}", served)
    if kind == "batch" and "results" in payload:
        for result in payload["results"]:
            assert result["ok"] or (400 <= result["status"] < 500 or result["status"] in (501, 504)), result


@BUDGET
@given(
    first=FIRSTS,
    route=st.sampled_from(
        [
            *("/sessions/{x}", "/sessions/{sid}/tasks", "/observation", "/openenv/{x}/health", "/openenv/{x}/metadata"),
            *("/openenv/{x}/schema", "/openenv/{x}/openapi.json", "/envs", "/", "/health", "/sessions"),
        ]
    ),
    text=any_text,
    query=st.dictionaries(st.sampled_from(["split", "offset", "limit", "id", "env_idx"]), any_text | big_ints.map(str)),
    method=st.sampled_from(["GET", "GET", "GET", "DELETE", "PUT", "PATCH", "OPTIONS"]),
)
def test_any_path_query_and_method_of_the_get_routes_is_answered_never_500(
    servers, first, route, text, query, method
) -> None:
    served = servers[first]
    path = route.format(x=quote(text.encode("utf-8", "surrogatepass"), safe=""), sid=served.sessions[0])
    encoded = "&".join(
        f"{key}={quote(value.encode('utf-8', 'surrogatepass'), safe='')}" for key, value in query.items()
    )
    reply = served.http.request(method, f"{path}?{encoded}" if encoded else path)
    _check(reply, f"{method} {path} {query!r:.200}", served)


@SMALL_BUDGET
@given(
    first=FIRSTS,
    route=st.sampled_from(POST_ROUTES),
    size=st.integers(0, MAX_BODY + 1000),
    depth=st.integers(0, 100_000),
    chunked=st.booleans(),
)
@example(first=TEXTCRAFT, route="/sessions/{sid}/step", size=MAX_BODY, depth=0, chunked=False)
@example(first=BABYAI, route="/batch", size=MAX_BODY, depth=0, chunked=True)
@example(first=TEXTCRAFT, route="/step", size=10, depth=65, chunked=False)
@example(first=BABYAI, route="/sessions/{sid}/reset", size=10, depth=100_000, chunked=True)
@example(first=TEXTCRAFT, route="/openenv/{env}/mcp", size=10, depth=100_000, chunked=False)
def test_huge_and_deeply_nested_bodies_are_refused_413_or_422(servers, first, route, size, depth, chunked) -> None:
    served = servers[first]
    path = _path(served, route)
    body = b'{"action": "' + b"a" * size + b'", "options": ' + b"[" * depth + b"]" * depth + b"}"
    content: Any = iter([body[i : i + 65536] for i in range(0, len(body), 65536)]) if chunked else body
    reply = served.http.post(path, content=content, headers={"content-type": "application/json"})
    _check(reply, f"POST {path} of {len(body)} bytes, depth {depth}", served)
    if len(body) > MAX_BODY:
        assert reply.status_code == 413
    elif depth > 64:
        assert reply.status_code == 422


REQUEST_LINES = [b"GET / HTTP/1.1\r\n", b"POST /sessions HTTP/1.1\r\n", b"GET /health HTTP/1.0\r\n", b"\x16\x03\x01"]
HEADERS = [
    b"Host: 127.0.0.1\r\n",
    b"Content-Length: 5\r\n",
    b"Content-Length: -1\r\n",
    b"Transfer-Encoding: chunked\r\n",
]
raw_requests = st.lists(
    st.sampled_from([*REQUEST_LINES, *HEADERS, b"\r\n", b"\r\n\r\n", b"0\r\n\r\n", b"\x00", b" ", b":"])
    | st.binary(max_size=30),
    max_size=12,
).map(b"".join)


@SMALL_BUDGET
@given(first=FIRSTS, raw=raw_requests)
def test_bytes_that_are_not_http_get_a_status_or_a_close_and_the_server_goes_on(servers, first, raw) -> None:
    served = servers[first]
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=15) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)  # nothing more is coming: the server answers or closes now
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    if received:  # the first reply: a status below 500, an error in JSON
        assert received.startswith((b"HTTP/1.1 ", b"HTTP/1.0 ")), received[:200]
        status = int(received[9:12])
        head = received.partition(b"\r\n\r\n")[0].lower()
        assert status < 500, received[:500]
        assert status < 400 or b"content-type: application/json" in head, received[:500]
    _healthy(served)


HEADER_NAMES = ["Host", "Origin", "Authorization", "Content-Type", "Content-Length", "Transfer-Encoding"]
HEADER_NAMES += ["Connection", "Upgrade", "Expect", "Sec-WebSocket-Key", "Sec-WebSocket-Version", "X-Forwarded-For"]
#: Header values: any bytes but the line ends, and near-misses of the values the guard reads.
header_values = st.binary(max_size=40).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")) | st.sampled_from(
    [
        *(b"127.0.0.1", b"localhost:1", b"[::1]:80", b"http://127.0.0.1", b"null", b"Bearer ", b"Bearer " + TOKEN),
        *(b"application/json; charset=latin-1", b"chunked", b"chunked, gzip", b"-1", b"99999999999999999999"),
        *(b"websocket", b"application/json;"),
    ]
)


@BUDGET
@given(
    first=st.sampled_from([TEXTCRAFT, BABYAI, DEEPSEARCH, "token"]),
    target=st.sampled_from(["GET /health", "POST /sessions/{sid}/step", "POST /create", "GET /openenv/{env}/ws"]),
    headers=st.lists(st.tuples(st.sampled_from(HEADER_NAMES), header_values), max_size=6),
)
def test_any_headers_are_answered_with_a_status_never_500(servers, first, target, headers) -> None:
    served = servers[first]
    method, path = _path(served, target).split(" ")
    body = b'{"action": "inventory"}' if method == "POST" else b""
    lines = b"".join(name.encode() + b": " + value + b"\r\n" for name, value in headers)
    if not any(name == "Host" for name, _ in headers):
        lines = b"Host: 127.0.0.1\r\n" + lines
    if body and not any(name in ("Content-Length", "Transfer-Encoding") for name, _ in headers):
        lines += b"Content-Length: %d\r\n" % len(body)
    raw = f"{method} {path} HTTP/1.1\r\n".encode() + lines + b"Connection: close\r\n\r\n" + body
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=30) as sock:
        sock.sendall(raw)
        sock.shutdown(socket.SHUT_WR)
        received = b""
        try:
            while chunk := sock.recv(65536):
                received += chunk
        except ConnectionResetError:
            pass
    if received:
        assert received.startswith(b"HTTP/1.1 "), received[:200]
        status = int(received[9:12])
        head = received.partition(b"\r\n\r\n")[0].lower()
        assert status < 500, (raw[:500], received[:500])
        assert status < 400 or b"content-type: application/json" in head, (raw[:500], received[:500])
    _healthy(served)


frames = st.one_of(
    st.binary(max_size=100).map(lambda b: b.decode("latin-1")),
    json_values.map(json.dumps),
    st.fixed_dictionaries(
        {"type": st.sampled_from(["reset", "step", "state", "junk"]) | any_text},
        optional={
            "data": json_values
            | st.dictionaries(
                st.sampled_from(["seed", "task_id", "split", "action", "episode_id", "env_kwargs"]),
                json_values | big_ints,
                max_size=4,
            )
        },
    ).map(json.dumps),
)


@SMALL_BUDGET
@given(first=FIRSTS, env=st.integers(0, 1), batch=st.lists(frames, min_size=1, max_size=6))
def test_any_openenv_frame_gets_a_json_frame_never_a_500(servers, first, env, batch) -> None:
    from websockets.sync.client import connect

    served = servers[first]
    url = f"ws://127.0.0.1:{served.server.port}/openenv/{served.ids[env]}/ws"
    with connect(url, open_timeout=30, close_timeout=5) as websocket:
        for frame in batch:
            websocket.send(frame)
            reply = json.loads(websocket.recv(timeout=60))
            assert reply["type"] in ("observation", "state", "error"), reply
            if reply["type"] == "error":
                assert reply["data"]["status"] != 500 and isinstance(reply["data"]["message"], str), reply
    _healthy(served)


session_calls = st.one_of(
    st.tuples(
        st.just("POST"),
        st.just("reset"),
        st.fixed_dictionaries({}, optional={"seed": st.integers(0, 5), "seq": st.integers(0, 3)}),
    ),
    st.tuples(
        st.just("POST"),
        st.just("step"),
        st.fixed_dictionaries(
            {"action": st.sampled_from(["go forward", "turn left", "inventory", "x"])},
            optional={"seq": st.integers(0, 3)},
        ),
    ),
    st.tuples(st.just("POST"), st.just("expert"), st.just(None)),
    st.tuples(
        st.just("POST"),
        st.just("expert/act"),
        st.fixed_dictionaries({"observation": st.just("you see"), "info": st.just({})}),
    ),
    st.tuples(st.just("GET"), st.just(""), st.just(None)),
    st.tuples(st.just("GET"), st.just("tasks"), st.just(None)),
    st.tuples(st.just("DELETE"), st.just(""), st.just(None)),
    st.tuples(st.just("POST"), st.just("batch"), st.sampled_from(["reset", "step"])),
)


@SMALL_BUDGET
@given(first=FIRSTS, env=st.integers(0, 1), calls=st.lists(session_calls, min_size=2, max_size=8))
def test_concurrent_calls_on_one_session_are_each_answered_and_one_close_wins(servers, first, env, calls) -> None:
    served = servers[first]
    session_id = served.http.post("/sessions", json={"env_id": served.ids[env]}).json()["session_id"]

    def call(spec: tuple[str, str, Any]) -> tuple[str, httpx.Response]:
        method, suffix, body = spec
        if suffix == "batch":
            path, body = "/batch", {"calls": [{"session_id": session_id, "op": body, "action": "inventory"}]}
        else:
            path = f"/sessions/{session_id}/{suffix}".rstrip("/")
        params = {"split": "train", "limit": 3} if suffix == "tasks" else None
        content = None if body is None else wire.dumps(body)
        headers = {"content-type": "application/json"} if content is not None else None
        return method, served.http.request(method, path, content=content, headers=headers, params=params)

    try:
        with ThreadPoolExecutor(len(calls)) as pool:
            replies = list(pool.map(call, calls))
        for (_, reply), spec in zip(replies, calls, strict=True):
            _check(reply, f"{spec} concurrently")
            assert reply.status_code < 500 or reply.status_code in (501,), (spec, reply.text[:300])
        closes = [reply.status_code for method, reply in replies if method == "DELETE"]
        assert closes.count(200) == (1 if closes else 0), closes
        after = served.http.get(f"/sessions/{session_id}")
        assert after.status_code == (404 if closes else 200), after.text
    finally:
        served.http.delete(f"/sessions/{session_id}")
    _healthy(served)


compat_calls = st.one_of(
    st.tuples(st.just("/reset"), st.fixed_dictionaries({}, optional={"data_idx": st.integers(0, 3)})),
    st.tuples(st.just("/step"), st.fixed_dictionaries({"action": st.sampled_from(["inventory", "go forward", "x"])})),
    st.tuples(st.just("/observation"), st.none()),
    st.tuples(st.just("/close"), st.just({})),
)


@SMALL_BUDGET
@given(first=FIRSTS, calls=st.lists(compat_calls, min_size=2, max_size=8))
def test_concurrent_calls_on_one_agentgym_id_are_each_answered_and_one_close_wins(servers, first, calls) -> None:
    served = servers[first]
    created = _check(_post(served, "/create", {}), "POST /create", served)
    compat_id = created if isinstance(created, int) else created.get("id", created.get("env_idx"))
    id_field = "env_idx" if first == DEEPSEARCH else "id"

    def call(spec: tuple[str, Any]) -> httpx.Response:
        path, body = spec
        if body is None:
            return served.http.get(path, params={id_field: compat_id})
        index = {"id": 0} if first == DEEPSEARCH and path == "/reset" else {}  # SearchQA's task index field
        return _post(served, path, {**body, **index, id_field: compat_id})

    with ThreadPoolExecutor(len(calls)) as pool:
        replies = list(pool.map(call, calls))
    payloads = [_check(reply, f"{spec} concurrently", served) for reply, spec in zip(replies, calls, strict=True)]
    closes = [payload is True for (path, _), payload in zip(calls, payloads, strict=True) if path == "/close"]
    assert closes.count(True) == (1 if closes else 0), (calls, payloads)
    after = _post(served, "/close", {id_field: compat_id})
    assert (after.json() is True) == (not closes), after.text  # closed already, or closed now


@SMALL_BUDGET
@given(
    first=FIRSTS,
    env=st.integers(0, 1),
    actions=st.lists(any_text | st.sampled_from(["inventory", "go forward", "turn left"]), min_size=1, max_size=5),
    retried=st.lists(st.booleans(), min_size=5, max_size=5),
)
def test_a_retried_numbered_call_answers_the_same_reply_and_steps_once(servers, first, env, actions, retried) -> None:
    served = servers[first]
    session_id = served.http.post("/sessions", json={"env_id": served.ids[env]}).json()["session_id"]
    try:
        base = f"/sessions/{session_id}"
        first_reset = _post(served, f"{base}/reset", {"seed": 0, "seq": 0})
        assert first_reset.content == _post(served, f"{base}/reset", {"seed": 0, "seq": 0}).content
        steps = 0
        for seq, (action, again) in enumerate(zip(actions, retried, strict=False), start=1):
            reply = _post(served, f"{base}/step", {"action": action, "seq": seq})
            _check(reply, f"step {action!r}", served)
            if reply.status_code != 200:
                break
            steps += 1
            if again:  # the client's retry after a dropped connection
                assert _post(served, f"{base}/step", {"action": action, "seq": seq}).content == reply.content
            if seq > 1:  # an older number, or the same with another call, is refused
                assert _post(served, f"{base}/step", {"action": action, "seq": seq - 1}).status_code == 409
            if json.loads(reply.content)["terminated"] or json.loads(reply.content)["truncated"]:
                break
        assert served.http.get(base).json()["steps"] == steps
    finally:
        served.http.delete(f"/sessions/{session_id}")


def test_an_expert_before_any_reset_is_a_409_not_a_500(servers) -> None:
    """Found by the concurrent calls' property: the envs raise RuntimeError there, which the server answered 500."""
    for served in servers.values():
        for env_id in served.ids:
            session_id = served.http.post("/sessions", json={"env_id": env_id}).json()["session_id"]
            reply = served.http.post(f"/sessions/{session_id}/expert")
            assert reply.status_code == 409 and reply.json()["error_type"] == "ResetNeeded", reply.text
            assert served.http.post(f"/sessions/{session_id}/reset", json={"seed": 0}).status_code == 200
            assert served.http.post(f"/sessions/{session_id}/expert").status_code == 200
            assert served.http.delete(f"/sessions/{session_id}").status_code == 200


def test_bytes_that_are_not_http_are_answered_400_in_json(servers) -> None:
    """Found by the raw bytes' property: uvicorn answered them in plain text."""
    served = servers[BABYAI]
    with socket.create_connection(("127.0.0.1", served.server.port), timeout=15) as sock:
        sock.sendall(b"\x16\x03\x01\x00\r\n\r\n")
        received = sock.recv(65536)
    head, _, body = received.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400") and b"content-type: application/json" in head.lower(), received
    assert json.loads(body)["detail"].startswith("malformed HTTP request: "), body


def test_the_servers_answer_health_after_every_property(servers) -> None:
    for served in servers.values():
        _healthy(served)
        for session_id in served.sessions:  # the sessions the properties aimed at are still served
            assert served.http.get(f"/sessions/{session_id}").status_code == 200
