"""Servers inside this process, on a loopback port.

`local_server()` is what `AgentGym/Remote-v0` talks to when it is given no `base_url`: one server per
process, serving every registered id, started on first use with a random token and stopped at exit.
`ServerThread` runs any app that way (tests use it).
"""

from __future__ import annotations

import atexit
import os
import secrets
import threading
import time
from typing import Any


class ServerThread:
    """An ASGI app served by uvicorn on a daemon thread, bound to `host` (on a free port by default).

    Args:
        app: The ASGI app (e.g. `create_app([...])`).
        host: Address to bind; loopback by default.
        port: Port to bind; 0 picks a free one (`self.port` says which).
        token: The bearer token the app wants, kept here for clients (`None`: none).
        **config: More `uvicorn.Config` options. By default connections are bounded by the app's
            `state.connections` (`create_app` sets it), when it has one.

    Example:
        >>> from agentgym_envs.remote.server import create_app
        >>> with ServerThread(create_app(["AgentGym/BabyAI-GoToLocal-v0"])) as server:
        ...     server.base_url.startswith("http://127.0.0.1:")
        True
    """

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0, token: str | None = None, **config: Any):
        import uvicorn

        from agentgym_envs.timeouts import uvicorn_options

        options = {
            "log_level": "warning",
            "log_config": None,  # leave the host process's logging alone
            "access_log": False,
            "proxy_headers": False,
            "timeout_graceful_shutdown": 5,
            **uvicorn_options(connections=getattr(getattr(app, "state", None), "connections", None)),
            **config,
        }
        self.config = uvicorn.Config(app, host=host, port=port, **options)
        self.server = uvicorn.Server(self.config)
        self._socket = self.config.bind_socket()
        self.port: int = self._socket.getsockname()[1]
        self.base_url = f"http://{host}:{self.port}"
        self.token = token
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self._socket]}, name="agentgym-server", daemon=True
        )

    def start(self, timeout: float = 30.0) -> ServerThread:
        """Start serving; return once the server accepts requests."""
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the in-process server on {self.base_url} did not start")
            time.sleep(0.005)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        """Shut down gracefully (every session is closed) and wait for the thread."""
        self.server.should_exit = True
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(timeout)

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


_lock = threading.Lock()
_local: ServerThread | None = None
_local_pid: int | None = None


def local_server() -> ServerThread:
    """This process's loopback server for every registered id (started on first call, stopped at exit).

    A forked child gets its own (the parent's thread does not survive a fork).
    """
    global _local, _local_pid
    with _lock:
        if _local is None or _local_pid != os.getpid() or not _local.thread.is_alive():
            try:
                from agentgym_envs.remote.server import create_app
            except ImportError as error:
                raise ImportError(
                    f"AgentGym/Remote-v0 without base_url runs an in-process server, which needs FastAPI and "
                    f"uvicorn ({error}): pip install 'agentgym-rl[server]', or pass base_url= of a running "
                    "`agentgym serve`"
                ) from error
            if _local is None:
                atexit.register(_stop_local)
            token = secrets.token_urlsafe(24)
            # Its one client is this process (the token never leaves it), so its kwargs are trusted.
            app = create_app(None, token=token, max_sessions=4096, trust_client_kwargs=True)
            _local = ServerThread(app, token=token).start()
            _local_pid = os.getpid()
        return _local


def _stop_local() -> None:
    if _local is not None and _local_pid == os.getpid():
        _local.stop(timeout=5.0)
