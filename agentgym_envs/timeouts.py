"""Read timeouts for the server's connections, which uvicorn does not have.

uvicorn closes a keep-alive connection that stays idle after a reply, but a connection that sends
nothing, or half a request head, or a body a byte at a time, is kept open forever: enough of them
exhaust the server's file descriptors and memory. `timed_protocol` wraps uvicorn's HTTP protocol
class with two deadlines: the request head must arrive within `header_timeout` of the connection
opening (or of its first byte after a reply), and the body within `body_timeout` of the head. A
connection past either is answered 408 (when no reply is under way) and closed. Both are checked by
timers armed on phase changes, so a request costs a few attribute reads, not a timer per chunk.
With `connections` (a `connections.ConnectionLimit`), the same phase changes tell it which connections
wait for a request, idle or are being answered, so that it bounds the open connections.

The protocol also writes each reply in one piece: uvicorn writes a reply's head and its body separately,
two system calls and two TCP segments (the client may wake for the head alone); `_CoalescingTransport`
holds a connection's writes until the reply is complete or the event loop's current turn ends.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentgym_envs.connections import BUSY, IDLE, READING, ConnectionLimit

DEFAULT_HEADER_TIMEOUT = 10.0
DEFAULT_BODY_TIMEOUT = 60.0
#: A client's model may think for a minute between steps; the connection waits that long, idle.
DEFAULT_KEEP_ALIVE = 75.0

_TIMEOUT_REPLY = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s"
)

_BAD_REQUEST = (
    b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"
)

_HEAD, _BODY = "head", "body"


def timed_protocol(
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    parser: str = "auto",
    connections: ConnectionLimit | None = None,
) -> type:
    """uvicorn's HTTP protocol class with head and body read deadlines (and `connections`' bound, if given).

    `parser`: "httptools" or "h11" (uvicorn's two), or "auto" (httptools where installed, else h11).
    """
    if header_timeout <= 0 or body_timeout <= 0:
        raise ValueError(f"read timeouts must be positive, got header {header_timeout} and body {body_timeout}")
    if parser not in ("auto", "httptools", "h11"):
        raise ValueError(f"parser must be 'auto', 'httptools' or 'h11', got {parser!r}")
    base: Any = None
    if parser != "h11":
        try:
            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
        except ImportError:  # httptools is not installed: the pure-Python parser
            if parser == "httptools":
                raise
    if base is None:
        from uvicorn.protocols.http.h11_impl import H11Protocol as base

    class TimedHTTPProtocol(base):  # type: ignore[valid-type, misc]
        limits = {_HEAD: header_timeout, _BODY: body_timeout}

        def connection_made(self, transport: Any) -> None:
            self._read_timer: asyncio.TimerHandle | None = None
            self._read_phase: str | None = None
            super().connection_made(_CoalescingTransport(transport, self.loop))
            if connections is not None and not connections.admit(self, _address(transport)):
                return  # refused (answered and closed)
            self._arm(_HEAD)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.transport.get_protocol() is not self:  # upgraded to a WebSocket: its own protocol reads now
                self._disarm()
                if connections is not None:
                    connections.state(self, "upgraded")
                return
            self._watch()

        def on_response_complete(self) -> None:
            self.transport.flush()  # the whole reply, head and body, in one write
            super().on_response_complete()
            self._watch(after_reply=True)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if connections is not None:
                connections.release(self)
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            """uvicorn's answer to bytes that are not an HTTP request, as JSON like every other error."""
            body = json.dumps({"detail": f"malformed HTTP request: {msg}", "error_type": "BadRequest"}).encode()
            self.transport.write(_BAD_REQUEST % (len(body), body))
            self.transport.close()

        def _watch(self, after_reply: bool = False) -> None:
            """Arm the deadline of the phase the connection is in: a head or a body being read, or none."""
            cycle = self.cycle
            if cycle is None or cycle.response_complete:
                # Between requests: after a reply, uvicorn's keep-alive timer waits for the first byte;
                # once bytes of a head have come, the head deadline runs.
                if after_reply:
                    self._disarm()
                    if connections is not None:
                        connections.state(self, IDLE)
                elif self._read_phase != _HEAD:
                    self._arm(_HEAD)
            elif cycle.more_body:
                if self._read_phase != _BODY:
                    self._arm(_BODY)
            else:  # a request is being answered (on a kept-alive connection no read deadline ran before it)
                if self._read_phase is not None:
                    self._disarm()
                if connections is not None:
                    connections.state(self, BUSY)

        def _arm(self, phase: str) -> None:
            self._disarm()
            self._read_phase = phase
            if connections is not None:
                connections.state(self, READING)  # a body keeps the place in line its head took
            self._read_timer = self.loop.call_later(self.limits[phase], self._expire, phase)

        def _disarm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
            self._read_timer, self._read_phase = None, None

        def _expire(self, phase: str) -> None:
            self._read_timer, self._read_phase = None, None
            transport = self.transport
            if transport.is_closing() or transport.get_protocol() is not self:
                return
            cycle = self.cycle
            if cycle is None or cycle.response_complete or not cycle.response_started:  # say why before closing
                body = b'{"detail":"the request %s did not arrive within %g s","error_type":"RequestTimeout"}' % (
                    phase.encode(),
                    self.limits[phase],
                )
                transport.write(_TIMEOUT_REPLY % (len(body), body))
            transport.close()

    return TimedHTTPProtocol


class _CoalescingTransport:
    """A connection's transport whose writes go out together: held until `flush` (the protocol's, when a reply
    is complete), the end of the event loop's current turn or `HELD_BYTES` held, whichever comes first, then
    written at once and in order (past `HELD_BYTES` the real transport's buffer and its flow control take
    over, as without this). Closing, aborting or ending the stream writes what is held first; everything
    else is the real transport's."""

    #: Most bytes held before they are written anyway (a large or streamed reply goes out as it comes).
    HELD_BYTES = 1 << 16

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop):
        self._transport = transport
        self._loop = loop
        self._held: list[bytes] = []
        self._size = 0
        self._flush_due = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return
        data = bytes(data)  # a copy: the caller may reuse a bytearray at once
        self._held.append(data)
        self._size += len(data)
        if self._size > self.HELD_BYTES:
            self.flush()
        elif not self._flush_due:
            self._flush_due = True
            self._loop.call_soon(self._flush_soon)

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        """Write what is held, now."""
        held = self._held
        if held:
            self._held, self._size = [], 0
            if not self._transport.is_closing():  # the peer left meanwhile: nothing to write to
                self._transport.write(held[0] if len(held) == 1 else b"".join(held))

    def _flush_soon(self) -> None:
        self._flush_due = False
        self.flush()

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self.flush()
        self._transport.abort()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + self._size

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


def _address(transport: Any) -> Any:
    """The client's address without its port (a TCP peer's host; whatever else the transport gives)."""
    peer = transport.get_extra_info("peername")
    return peer[0] if isinstance(peer, tuple) and peer else peer


def uvicorn_options(
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    keep_alive: float = DEFAULT_KEEP_ALIVE,
    connections: ConnectionLimit | None = None,
) -> dict[str, Any]:
    """The `uvicorn.Config` options of every AgentGym server: the timed protocol (bounded by `connections`,
    if given) and the keep-alive timeout."""
    return {
        "http": timed_protocol(header_timeout, body_timeout, connections=connections),
        "timeout_keep_alive": keep_alive,
    }
