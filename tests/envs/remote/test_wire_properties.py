"""Property-based tests (Hypothesis) of the wire format (`remote.wire`), of how the server decodes a
body (`server.front`) and of how the client reads a reply (`client.transport`), within a fixed,
derandomised budget (the same examples on every run).

The properties: `too_deep` agrees with a plain bracket scan on any bytes, chunk boundaries included,
and with the depth of any JSON value; `dumps` writes JSON that reads back as the value (lone
surrogates, numpy values and anything else included); any bytes sent as a hot route's body decode to
the route's model or a ValidationError (a 422), never another exception; an error a server sends
comes back on the client as the exception the env raised, or as a RemoteEnvError, for any payload;
any bytes a server (or something else at its address) answers with give the client a decoded value
or a RemoteEnvError, never another exception.
"""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from agentgym_envs.core import EpisodeOverError
from agentgym_envs.remote import wire
from agentgym_envs.remote.client.transport import HTTPTransport
from agentgym_envs.remote.server import protocol as P
from agentgym_envs.remote.server.front import _parse, validation_reply

BUDGET = settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

#: Every character class, lone surrogates included (a Python str may hold them, and so may an action).
any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=40)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=30,
)
#: Bytes rich in what the depth scan looks at: brackets, quotes and runs of backslashes.
scan_bytes = st.lists(
    st.sampled_from([b"[", b"]", b"{", b"}", b'"', b"\\", b"\\\\", b"a", b" ", b"\xff", b'\\"']), max_size=120
).map(b"".join)


def _depth_by_scan(raw: bytes) -> int:
    """The deepest bracket nesting outside strings, one byte at a time, by `too_deep`'s documented rule
    (a quote after an odd run of backslashes neither opens nor closes a string, inside a string or not:
    outside one, a backslash is a syntax error where any parser stops, so what follows never nests)."""
    depth = deepest = 0
    inside = escaped = False
    for byte in raw:
        if escaped:
            escaped = False
            if byte in b'"\\':
                continue
        if byte == ord("\\"):
            escaped = True
        elif byte == ord('"'):
            inside = not inside
        elif not inside and byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        elif not inside and byte in b"]}":
            depth -= 1
    return deepest


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@BUDGET
@given(raw=scan_bytes, limit=st.integers(0, 6), chunk=st.sampled_from([1, 2, 3, 7, 1 << 20]))
def test_too_deep_agrees_with_a_plain_scan_on_any_bytes_and_chunking(raw: bytes, limit: int, chunk: int) -> None:
    original = wire._CHUNK
    wire._CHUNK = chunk
    try:
        found = wire.too_deep(raw, limit)
    finally:
        wire._CHUNK = original
    assert found == (_depth_by_scan(raw) > limit)
    assert wire.too_deep(raw.decode("latin-1"), limit) == found  # text: its UTF-8 has the same brackets


@BUDGET
@given(value=json_values, limit=st.integers(0, 5))
def test_too_deep_is_the_json_depth_of_any_value(value: Any, limit: int) -> None:
    raw = wire.dumps(value)
    assert wire.too_deep(raw, limit) == (_depth(value) > limit)
    assert wire.too_deep(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"), limit) == (
        _depth(value) > limit
    )


@BUDGET
@given(value=json_values)
def test_dumps_round_trips_any_json_value_surrogates_included(value: Any) -> None:
    raw = wire.dumps(value)
    assert raw.isascii()
    assert json.loads(raw) == value


@BUDGET
@given(
    value=st.one_of(
        st.integers(-(2**62), 2**62).map(np.int64),
        st.floats(allow_nan=False, width=32).map(np.float32),
        st.lists(st.integers(-100, 100), max_size=5).map(np.array),
        st.sets(st.integers(), max_size=5),
        st.binary(max_size=20),
        st.builds(object),
        st.floats(),
    )
)
def test_dumps_writes_json_for_anything_an_env_may_put_in_info(value: Any) -> None:
    decoded = json.loads(wire.dumps({"info": value}))["info"]
    if isinstance(value, float) and math.isnan(value):
        assert math.isnan(decoded)
    elif isinstance(value, np.ndarray):
        assert decoded == value.tolist()
    elif isinstance(value, (np.integer, np.floating)):
        assert decoded == value.item()
    elif isinstance(value, set):
        assert sorted(decoded) == sorted(value)
    elif not isinstance(value, float):  # bytes, any other object: as text
        assert isinstance(decoded, str)


HOT_MODELS = [P.ResetRequest, P.StepRequest, P.ExpertActRequest, P.BatchRequest, P.CreateSessionRequest]
FIELDS = ["seed", "options", "seq", "action", "observation", "info", "calls", "session_id", "op", "env_id", "kwargs"]
#: JSON text built of fragments near the models' own: field names, values of every type, broken syntax.
body_text = st.one_of(
    st.binary(max_size=200),
    json_values.map(wire.dumps),
    st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6).map(wire.dumps),
    st.lists(
        st.sampled_from(['{"', '"action"', '"seed"', ":", ",", "}", "[", "]", '"\\ud800"', "1e999", "-0", "9" * 5000]),
        max_size=20,
    ).map(lambda parts: "".join(parts).encode()),
)


@BUDGET
@given(raw=body_text, model=st.sampled_from(HOT_MODELS))
def test_any_body_decodes_to_the_model_or_a_validation_error(raw: bytes, model: type) -> None:
    if wire.too_deep(raw):  # Front answers these 422 before decoding
        return
    try:
        body = _parse(model, raw)
    except ValidationError as error:
        reply = validation_reply([{**e, "loc": ("body", *e["loc"])} for e in error.errors(include_input=False)])
        assert reply["detail"].startswith("malformed request: ") and len(reply["detail"]) < 5000
        json.loads(wire.dumps(reply))
        return
    assert isinstance(body, model)


@BUDGET
@given(text=any_text | st.text(max_size=5000), limit=st.integers(1, 100))
def test_bounded_keeps_short_texts_and_cuts_long_ones_saying_how_much(text: str, limit: int) -> None:
    cut = wire.bounded(text, limit)
    if len(text) <= limit:
        assert cut == text
    else:
        assert cut.startswith(text[:limit]) and f"({len(text) - limit:,} more characters)" in cut


KNOWN = [EpisodeOverError, ValueError, TypeError, NotImplementedError, KeyError, RuntimeError, OSError]


@BUDGET
@given(kind=st.sampled_from(KNOWN), message=any_text | st.text(max_size=3000), what=st.sampled_from(["reset", "step"]))
def test_an_env_error_travels_back_as_its_own_class_or_a_remote_error(kind: type, message: str, what: str) -> None:
    error = wire.env_error(kind(message), what)
    assert 400 <= error.status < 600 and len(error.detail) <= wire.MAX_DETAIL_CHARS + 40
    payload = json.loads(wire.dumps(error.payload()))
    again = wire.error_for(error.status, payload, "POST /x")
    if kind in (KeyError, RuntimeError, OSError):
        assert error.status == 500 and type(again) is wire.RemoteEnvError and again.status == 500
    else:
        assert type(again) is kind and error.status in (409, 422, 501)
    assert isinstance(again, Exception)


@BUDGET
@given(
    status=st.integers(100, 599),
    payload=json_values | st.dictionaries(st.sampled_from(["detail", "error_type"]), json_values),
)
def test_any_error_reply_becomes_an_exception_never_a_crash(status: int, payload: Any) -> None:
    error = wire.error_for(status, payload, "GET /health")
    error_type = payload.get("error_type") if isinstance(payload, dict) else None
    names = {"EpisodeOverError": EpisodeOverError, "ValueError": ValueError, "TypeError": TypeError}
    if isinstance(error_type, str) and error_type in names:
        assert type(error) is names[error_type]
    elif error_type == "ResetNeeded" or error_type == "NotImplementedError":
        assert type(error).__name__ == error_type
    elif status in (401, 403):
        assert isinstance(error, wire.AuthenticationError) and error.status == status
    else:
        assert isinstance(error, wire.RemoteEnvError) and error.status == status
    assert isinstance(str(error), str)


@pytest.mark.parametrize("model", HOT_MODELS)
def test_lone_surrogates_in_a_body_decode(model: type) -> None:
    raw = b'{"action": "\\ud800", "observation": "\\udfff", "env_id": "\\ud83d"}'
    try:
        _parse(model, raw)
    except ValidationError as error:  # extra or missing fields, never a decoding failure
        assert not any(e["type"] == "json_invalid" for e in error.errors())


class _Stub:
    """A loopback TCP server that answers every connection with `reply` (after reading the request head)
    and closes it."""

    def __init__(self) -> None:
        self.reply = b""
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:  # closed
                return
            with connection:
                connection.settimeout(5)
                received = b""
                try:
                    while b"\r\n\r\n" not in received and (chunk := connection.recv(65536)):
                        received += chunk
                    connection.sendall(self.reply)
                except OSError:
                    pass


@pytest.fixture(scope="module")
def stub() -> Iterator[_Stub]:
    server = _Stub()
    try:
        yield server
    finally:
        server.listener.close()


STATUS_LINES = [b"HTTP/1.1 200 OK\r\n", b"HTTP/1.1 422 X\r\n", b"HTTP/1.0 500 X\r\n", b"HTTP/1.1 20", b"SSH-2.0\r\n"]
STATUS_LINES += [b"HTTP/1.1 2\xb2\xb2 OK\r\n"]  # digits to str.isdigit, not to int()
REPLY_HEADERS = [
    *(b"Content-Length: 2\r\n", b"Content-Length: abc\r\n", b"Content-Length: -5\r\n", b"Content-Length: 99\r\n"),
    *(b"Content-Length: 99999999999999\r\n", b"Content-Length: 1e3\r\n", b"Content-Length:\r\n", b": \r\n"),
    *(b"Transfer-Encoding: chunked\r\n", b"Connection: close\r\n", b"Content-Type: application/json\r\n"),
]
BODIES = [b"{}", b"[]", b'{"detail": "x", "error_type": "ValueError"}', b'{"error_type": [1]}', b"[" * 5000, b"\xff"]
BODIES += [b'{"detail": "x", "error_type": "ResetNeeded"}', b"NaN", b'"\\ud800"', b"9" * 5000]
CHUNKS = [b"2\r\n{}\r\n", b"0\r\n\r\n", b"zz\r\n", b"-1\r\n", b"ffffffffff\r\n", b"1;x\r\n[\r\n", b"\r\n"]
#: Replies shaped like HTTP (a status line, headers, a body), every part of which may be wrong, and noise.
replies = st.one_of(
    st.builds(
        lambda status, headers, body: status + b"".join(headers) + b"\r\n" + body,
        st.sampled_from(STATUS_LINES) | st.binary(max_size=12),
        st.lists(st.sampled_from(REPLY_HEADERS) | st.binary(max_size=12), max_size=4),
        st.lists(st.sampled_from([*BODIES, *CHUNKS]) | st.binary(max_size=12), max_size=4).map(b"".join),
    ),
    st.lists(
        st.sampled_from([*STATUS_LINES, *REPLY_HEADERS, b"\r\n", *BODIES, *CHUNKS]) | st.binary(max_size=20),
        max_size=10,
    ).map(b"".join),
)


@settings(BUDGET, max_examples=300)
@given(reply=replies)
def test_any_reply_gives_the_client_a_value_or_a_remote_error(stub: _Stub, reply: bytes) -> None:
    stub.reply = reply
    transport = HTTPTransport(f"http://127.0.0.1:{stub.port}", timeout=5, connect_timeout=5, retries=0)
    try:
        transport.request("POST", "/sessions/x/step", {"action": "go"})
    except wire.RemoteEnvError:
        pass
    except (EpisodeOverError, ValueError, TypeError, NotImplementedError) as error:
        # the env's own exception, mapped back from an error reply that names it
        assert type(error).__name__.encode() in reply, f"{type(error).__name__}: {error} from {reply[:300]!r}"
    except Exception as error:
        if type(error).__name__ != "ResetNeeded" or b"ResetNeeded" not in reply:
            raise
    finally:
        transport.close()
