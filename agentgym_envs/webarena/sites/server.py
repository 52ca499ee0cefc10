"""Serving the embedded sites: one uvicorn server on a free loopback port, in a thread of this process.

The browser reaches it as an HTTP proxy (Playwright's per-context `proxy` setting), so pages carry
stable origins such as `http://shop.test` whatever port the server got: observations, reference
URLs and evaluations do not depend on the port, and two processes see the same text.

The port is open to every local process, so the server answers only requests that carry the
episode's secret in a cookie (`SECRET_COOKIE`), which the env sets on its own browser context and
renews at every reset: another process cannot read or change an episode's state.
"""

from __future__ import annotations

import hmac
import socket
import threading
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

import uvicorn

from agentgym_envs.timeouts import timed_protocol

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]
#: The cookie that carries the episode's secret.
SECRET_COOKIE = "agentgym_episode"
_FORBIDDEN = (
    b"<!doctype html><title>Forbidden</title><h1>Forbidden</h1>"
    b"<p>This site answers only the browser of the episode it belongs to.</p>"
)


def cookie_value(header: bytes, name: str) -> bytes | None:
    """The value of cookie `name` in a `Cookie` request header, or None."""
    prefix = name.encode() + b"="
    for part in header.split(b";"):
        part = part.strip()
        if part.startswith(prefix):
            return part[len(prefix) :]
    return None


class HostDispatcher:
    """An ASGI app that routes each request to the site named by its host.

    A browser talking to a proxy sends absolute-form targets (`GET http://shop.test/cart HTTP/1.1`);
    these are turned back into an origin-form path. A host that is not one of the sites gets 403:
    the server never forwards anything anywhere. A request without the current `secret` in the
    `SECRET_COOKIE` cookie gets 403 before any site sees it.

    Args:
        apps: Host name -> the site's ASGI app.
        secret: The episode's secret; assign a new one to `secret` to lock out the previous episode.
    """

    def __init__(self, apps: dict[str, ASGIApp], secret: str):
        self.apps = {host.lower(): app for host, app in apps.items()}
        self.secret = secret

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return  # no websockets, and lifespan is off
        headers = dict(scope.get("headers") or [])
        given = cookie_value(headers.get(b"cookie", b""), SECRET_COOKIE)
        if given is None or not hmac.compare_digest(given, self.secret.encode()):
            await _reply(send, 403, "text/html; charset=utf-8", _FORBIDDEN)
            return
        host = headers.get(b"host", b"").decode("latin-1")
        path: str = scope["path"]
        if path.startswith(("http://", "https://")):
            try:
                target = urlsplit(path)
            except ValueError:  # e.g. an unclosed IPv6 bracket
                await _reply(send, 400, "text/plain", b"malformed request target")
                return
            host, path = target.netloc, target.path or "/"
            raw = bytes(scope.get("raw_path") or path.encode())
            raw_path = b"/" + raw.split(b"/", 3)[3] if raw.count(b"/") >= 3 else b"/"
            scope = {**scope, "path": path, "raw_path": raw_path}
        app = self.apps.get(host.lower().removesuffix(":80"))
        if app is None:
            body = f"this server only serves {', '.join(sorted(self.apps))}".encode()
            await _reply(send, 403, "text/plain", body)
            return
        await app(scope, receive, send)


async def _reply(send: Any, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class EmbeddedServer:
    """uvicorn serving `app` on 127.0.0.1 at a free port, in a daemon thread; `stop()` ends it."""

    def __init__(self, app: ASGIApp, header_timeout: float = 10.0):
        self.app = app
        self.header_timeout = header_timeout  # a local process cannot hold connections open with half a request
        self.port: int | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> int:
        """Start serving; return the port."""
        if self._thread is not None:
            assert self.port is not None
            return self.port
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        # h11 parses the proxy-style requests Chromium sends; log_config=None leaves the user's logging alone.
        config = uvicorn.Config(
            self.app,
            http=timed_protocol(self.header_timeout, parser="h11"),
            lifespan="off",
            log_config=None,
            log_level="error",
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=f"agentgym-site-{self.port}", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the embedded web server did not start on 127.0.0.1 within {timeout} s")
            time.sleep(0.005)
        return self.port

    def stop(self) -> None:
        """Stop serving and wait for the thread (idempotent)."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None
