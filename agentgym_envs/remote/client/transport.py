"""The client's HTTP/1.1 connection: keep-alive, timeouts, bounded retries, errors mapped to exceptions.

Standard library only, so the client works on the core install. It speaks just the HTTP/1.1 a
JSON API needs (one request at a time on a keep-alive socket, Content-Length or chunked replies)
in one `sendall` per request: about a quarter of `http.client`'s CPU per call, which matters when
a trainer drives hundreds of envs from one process. Not thread-safe: one transport per env (or
per vector env).
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import time
from typing import Any
from urllib.parse import urlsplit

from agentgym_envs.remote import wire

_HEAD_LIMIT = 64 << 10
#: Most bytes asked of one recv: a reply's announced length is the server's word, not memory to allocate.
_RECV_LIMIT = 4 << 20
#: Refusals of a server at its connection bound (`connections.ConnectionLimit`), sent before the request
#: was read: retried like a refused connection.
_UNREAD = ("TooManyConnections", "Overloaded")


class _Disconnected(ConnectionError):
    """The server closed the connection before a whole reply arrived."""


class HTTPTransport:
    """JSON requests to one server over one keep-alive connection.

    Args:
        base_url: `http://host:port` (or https), optionally with a path prefix.
        token: Bearer token; defaults to `$AGENTGYM_TOKEN`.
        timeout: Seconds to wait for an answer (a slow env step counts).
        connect_timeout: Seconds to wait for the connection itself.
        retries: Extra attempts after a connection error or a server's refusal at its connection bound, with
            growing pauses (0.1 s, 0.2 s, ...).
            Safe for calls that change an env: they carry a sequence number the server deduplicates.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
    ):
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base_url must look like http://host:port, got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self._tls = ssl.create_default_context() if parts.scheme == "https" else None
        self._host = parts.hostname
        self._port = parts.port or (443 if self._tls else 80)
        self._prefix = parts.path.rstrip("/")
        token = token if token is not None else os.environ.get(wire.TOKEN_ENV_VAR)
        headers = f"Host: {parts.netloc}\r\nAccept: application/json\r\nContent-Type: application/json\r\n"
        if token:
            headers += f"Authorization: Bearer {token}\r\n"
        self._headers = headers
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.retries = max(0, int(retries))
        self._sock: socket.socket | None = None
        self._buffer = b""

    # ---- the socket -------------------------------------------------------------------------------
    def _connection(self) -> socket.socket:
        if self._sock is None:
            sock = socket.create_connection((self._host, self._port), timeout=self.connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._tls is not None:
                sock = self._tls.wrap_socket(sock, server_hostname=self._host)
            sock.settimeout(self.timeout)
            self._sock, self._buffer = sock, b""
        return self._sock

    def close(self) -> None:
        """Drop the connection (a later request opens a new one)."""
        if self._sock is not None:
            self._sock.close()
            self._sock, self._buffer = None, b""

    def _fill(self, sock: socket.socket) -> None:
        data = sock.recv(1 << 16)
        if not data:
            raise _Disconnected("the server closed the connection")
        self._buffer += data

    def _read_exactly(self, sock: socket.socket, size: int) -> bytes:
        while len(self._buffer) < size:
            chunks, have = [self._buffer], len(self._buffer)
            while have < size:
                data = sock.recv(min(max(1 << 16, size - have), _RECV_LIMIT))
                if not data:
                    raise _Disconnected("the server closed the connection in the middle of a reply")
                chunks.append(data)
                have += len(data)
            self._buffer = b"".join(chunks)
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _read_line(self, sock: socket.socket) -> bytes:
        while b"\r\n" not in self._buffer:
            self._fill(sock)
        line, self._buffer = self._buffer.split(b"\r\n", 1)
        return line

    def _exchange(self, method: str, path: str, data: bytes) -> tuple[int, bytes, bool]:
        """One request and its reply: (status, body, whether the server keeps the connection)."""
        sock = self._connection()
        head = f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._headers}Content-Length: {len(data)}\r\n\r\n"
        sock.sendall(head.encode("latin-1") + data)
        while b"\r\n\r\n" not in self._buffer:
            if len(self._buffer) > _HEAD_LIMIT:
                raise _Disconnected("the reply's head is too long: not an AgentGym server?")
            self._fill(sock)
        raw_head, self._buffer = self._buffer.split(b"\r\n\r\n", 1)
        status_line, *header_lines = raw_head.decode("latin-1").split("\r\n")
        version, _, rest = status_line.partition(" ")
        if not version.startswith("HTTP/") or not (rest[:3].isascii() and rest[:3].isdigit()):  # not '²
            raise _Disconnected(f"not an HTTP reply: {status_line[:80]!r}")
        headers = {}
        for line in header_lines:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        keep = headers.get("connection", "").lower() != "close" and version != "HTTP/1.0"
        if "chunked" in headers.get("transfer-encoding", "").lower():
            chunks = []
            while True:
                size = _length(self._read_line(sock).split(b";", 1)[0].strip(), 16, "chunk size")
                if size == 0:
                    while self._read_line(sock):  # trailers, up to the empty line
                        pass
                    break
                chunks.append(self._read_exactly(sock, size + 2)[:-2])
            body = b"".join(chunks)
        elif "content-length" in headers:
            body = self._read_exactly(sock, _length(headers["content-length"].encode(), 10, "Content-Length"))
        else:  # the reply runs to the end of the connection
            chunks = [self._buffer]
            while data := sock.recv(1 << 16):
                chunks.append(data)
            body, self._buffer, keep = b"".join(chunks), b"", False
        return int(rest[:3]), body, keep

    # ---- requests ---------------------------------------------------------------------------------
    def request(
        self, method: str, path: str, body: Any = None, *, retries: int | None = None, encoded: bytes | None = None
    ) -> Any:
        """Send one request; return the decoded JSON reply.

        `encoded`: the body already encoded as `wire.dumps(body)` would (sent as it is, instead of `body`).

        Raises:
            ServerUnavailableError: No server answered after the retries.
            RemoteTimeoutError: The server did not answer within `timeout`.
            RemoteEnvError (or the env's own exception type, e.g. ValueError): an error reply.
        """
        data = encoded if encoded is not None else wire.dumps(body) if body is not None else b""
        attempts = 1 + (self.retries if retries is None else retries)
        started = time.monotonic()
        for attempt in range(attempts):
            connecting = self._sock is None
            try:
                status, raw, keep = self._exchange(method, path, data)
            except TimeoutError as error:
                self.close()
                if connecting and attempt + 1 < attempts:
                    time.sleep(0.1 * 2**attempt)
                    continue
                what = "accept a connection" if connecting else f"answer {method} {path}"
                limit = self.connect_timeout if connecting else self.timeout
                raise wire.RemoteTimeoutError(
                    f"the AgentGym server at {self.base_url} did not {what} within {limit:g} s"
                ) from error
            except OSError as error:  # refused, reset, unreachable, closed mid-reply
                self.close()
                if attempt + 1 < attempts:
                    time.sleep(0.1 * 2**attempt)
                    continue
                raise wire.ServerUnavailableError(
                    f"the AgentGym server at {self.base_url} is unreachable ({type(error).__name__}: {error}) "
                    f"after {attempts} attempt{'s' * (attempts > 1)} over {time.monotonic() - started:.1f} s "
                    f"({method} {path}); is `agentgym serve` running there?"
                ) from error
            if not keep:
                self.close()
            try:
                payload = json.loads(raw) if raw else None
            except (ValueError, RecursionError):  # not JSON, or nested past the parser's stack
                if status < 400:
                    raise wire.RemoteEnvError(
                        f"{method} {path}: the server at {self.base_url} answered HTTP {status} with a body that is "
                        f"not JSON: {raw[:200]!r}; is it an AgentGym server?",
                        status,
                    ) from None
                payload = {"detail": raw[:2000].decode("utf-8", "replace")}
            if status >= 400:
                shed = isinstance(payload, dict) and payload.get("error_type") in _UNREAD
                if shed and attempt + 1 < attempts:  # the server read none of the request: sending it again is safe
                    self.close()
                    time.sleep(0.1 * 2**attempt)
                    continue
                raise wire.error_for(status, payload, f"{method} {path}")
            return payload
        raise AssertionError("unreachable")


def _length(text: bytes, base: int, what: str) -> int:
    """A length the reply announces (digits in `base`); a malformed one means the reply cannot be read."""
    digits = b"0123456789abcdefABCDEF"[: 10 if base == 10 else 22]
    if not text or len(text) > 16 or text.strip(digits):
        raise _Disconnected(f"a malformed reply: {what} {text[:40]!r}")
    return int(text, base)
