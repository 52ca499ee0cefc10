"""The env server: one HTTP protocol for every registered env (FastAPI + uvicorn).

`create_app(env_ids)` builds the app; `serve(env_ids, host, port)` runs it (`agentgym serve` calls it).

Routes (JSON; the OpenAPI schema at `/openapi.json` and `/docs` has every body):

| route | what |
|---|---|
| `POST /sessions` `{env_id, kwargs}` | make an env, answer its session id and description (201) |
| `GET /sessions`, `GET /sessions/{id}` | the sessions; one session with its env's spaces, splits, prompt |
| `POST /sessions/{id}/reset` `{seed, options, seq}` | `{observation, info}` |
| `POST /sessions/{id}/step` `{action, seq}` | `{observation, reward, terminated, truncated, info}` |
| `DELETE /sessions/{id}` | close the env and free its backend |
| `GET /sessions/{id}/tasks?split=&offset=&limit=` | task ids of a split |
| `POST /sessions/{id}/expert`, `POST /sessions/{id}/expert/act` | the scenario's scripted expert |
| `POST /batch` `{calls: [{session_id, op, ...}]}` | reset/step many sessions in one round trip |
| `GET /envs` | served ids with their splits and sizes |
| `GET /health` | sessions, uptime, memory |
| `/create`, `/reset`, `/step`, `/observation`, `/close`, `/` | AgentGym's routes: the first id, in its dialect |
| `/openenv/<env id>/health`, `/schema`, `/metadata`, `/mcp`, WebSocket `/ws` | OpenEnv's protocol (`dialects`) |

Errors are JSON `{"detail": ..., "error_type": ...}`: unknown session or env id 404, malformed body
422 (so is one nested past 64 levels), step after the episode ended 409, session cap 429, body too
large 413, more open connections than the server keeps 503 (429 from one address), missing token 401,
more than one Authorization header 400, a kwarg the client may not choose 403, a `Host` the server is
not addressed by or a foreign `Origin` 403, a body that is not `application/json` 415, a request head
or body that does not arrive in time 408, a backend failure 500 with its message, an env call past the
call timeout 504 (its session is closed); the server keeps serving. AgentGym's routes answer as
AgentGym's servers do instead (mostly HTTP 200 with `{"error": ...}`), because their clients rely on
it; `dialects.agentgym` says how for each scenario.

Trust: the operator fixes each env's configuration at start (`env_kwargs`); a client may pass only
the kwargs an env declares safe for clients (`client_kwargs`, listed in `GET /envs`).
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
import typing
from collections.abc import Collection
from contextlib import asynccontextmanager, suppress
from typing import Any

from fastapi import FastAPI, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from agentgym_envs.connections import ConnectionLimit
from agentgym_envs.remote import wire
from agentgym_envs.remote.dialects.agentgym import COMPAT_TTL, add_agentgym_routes
from agentgym_envs.remote.dialects.openenv import OPENENV_PREFIX, add_openenv_routes
from agentgym_envs.remote.server import protocol as P
from agentgym_envs.remote.server.front import Front, unexpected_reply, validation_reply
from agentgym_envs.remote.server.guard import RequestGuard, default_allowed_hosts, is_loopback
from agentgym_envs.remote.server.policy import KwargsPolicy
from agentgym_envs.remote.server.sessions import DEFAULT_CALL_TIMEOUT, SessionManager
from agentgym_envs.remote.wire import ApiError
from agentgym_envs.timeouts import (
    DEFAULT_BODY_TIMEOUT,
    DEFAULT_HEADER_TIMEOUT,
    DEFAULT_KEEP_ALIVE,
    uvicorn_options,
)

_log = logging.getLogger(__name__)

DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 1024
DEFAULT_TTL = 600.0
DEFAULT_WORKERS = 16
#: Largest request body accepted (413 beyond): room for a batch of maximal actions.
DEFAULT_MAX_BODY_BYTES = 64 << 20

_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": P.ErrorReply, "description": "More than one Authorization header"},
    401: {"model": P.ErrorReply, "description": "Missing or wrong bearer token"},
    403: {"model": P.ErrorReply, "description": "A kwarg a client may not choose; a foreign Host or Origin"},
    404: {"model": P.ErrorReply, "description": "Unknown session or env id"},
    409: {"model": P.ErrorReply, "description": "Step after the episode ended, or before reset; a reused call number"},
    413: {"model": P.ErrorReply, "description": "Request body too large"},
    415: {"model": P.ErrorReply, "description": "A request body that is not application/json"},
    422: {"model": P.ValidationErrorReply, "description": "Malformed request"},
    429: {"model": P.ErrorReply, "description": "The server holds its maximum of sessions"},
    500: {"model": P.ErrorReply, "description": "The env backend failed"},
    504: {"model": P.ErrorReply, "description": "An env call ran past the call timeout (its session is closed)"},
}


def _json(payload: bytes) -> Response:
    return Response(payload, media_type="application/json")


def _rss(pid: str = "self") -> int | None:
    try:
        with open(f"/proc/{pid}/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _children_rss() -> int | None:
    try:
        import psutil
    except ImportError:
        return None
    total = 0
    for child in psutil.Process().children(recursive=True):
        with suppress(psutil.Error):  # a child that just exited
            total += child.memory_info().rss
    return total


class EnvServerApp(FastAPI):
    """The server's FastAPI app, with `Front` before FastAPI's own stack (`create_app` sets it)."""

    front: Front | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.front is None:
            await super().__call__(scope, receive, send)
        else:
            await self.front(scope, receive, send)


def create_app(
    env_ids: list[str] | None,
    *,
    token: str | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    ttl: float | None = DEFAULT_TTL,
    compat_ttl: float | None = COMPAT_TTL,
    workers: int = DEFAULT_WORKERS,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    env_kwargs: dict[str, dict[str, Any]] | None = None,
    allowed_hosts: Collection[str] | None = None,
    allowed_origins: Collection[str] = (),
    trust_client_kwargs: bool = False,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    max_connections: int | None = None,
    max_connections_per_address: int | None = None,
) -> EnvServerApp:
    """The server app for `env_ids` (None: every registered id but the remote clients).

    Args:
        env_ids: Registered ids to serve; the first is the default and the one AgentGym's routes serve.
        token: When set, every request must carry `Authorization: Bearer <token>`; an empty one is an error.
        max_sessions: Sessions allowed at once (429 past it).
        ttl: Seconds of idleness after which a session is closed (None or 0: never).
        compat_ttl: The same for sessions made on AgentGym's routes (`/create`); the default outlasts
            AgentGym-RL's 2,400 s client timeout (None or 0: never).
        workers: Threads for blocking env calls; each session is pinned to one.
        max_body_bytes: Largest request body (413 past it).
        env_kwargs: The operator's kwargs per served id, applied to every session of that id; a client
            cannot change them and may add only the kwargs the env declares safe for clients.
        allowed_hosts: Host names the server answers to (default: the loopback names; `"*"`: any).
        allowed_origins: Web origins allowed to call the server besides its own.
        trust_client_kwargs: Accept any kwargs from clients. Only for a server whose one client is this
            process (`AgentGym/Remote-v0`'s in-process server, behind a random token).
        call_timeout: Seconds one env call (reset, step, expert, tasks) may run; past it the call is
            answered 504 and its session closed, and the other sessions go on (None or 0: no limit).
        max_connections: Open connections at once, kept below the descriptor limit (None or 0: the soft
            RLIMIT_NOFILE now, less a quarter for the envs' files, pipes and the listening socket); past
            it the connection whose request has been longest in arriving is closed, else the longest
            idle, else the newcomer is answered 503. `app.state.connections` holds the bound; `serve`
            and `ServerThread` apply it to their connections.
        max_connections_per_address: The same for one client address (None or 0: half of
            max_connections; 429 when all of that address's are busy).
    """
    if token is not None and not token.strip():
        raise ValueError("the token is empty, which would leave the server unprotected; pass a non-empty token or none")
    policy = KwargsPolicy(env_kwargs, trust_clients=trust_client_kwargs)
    manager = SessionManager(
        env_ids,
        max_sessions=max_sessions,
        ttl=ttl,
        compat_ttl=compat_ttl,
        workers=workers,
        policy=policy,
        call_timeout=call_timeout,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> typing.AsyncIterator[None]:
        manager.start()
        try:
            yield
        finally:
            await manager.shutdown()

    served = ", ".join(manager.served()[:5]) + (" ..." if len(manager.served()) > 5 else "")
    app = EnvServerApp(
        title="AgentGym env server",
        summary=f"Serves {served}",
        description="\n\n".join(__doc__.split("\n\n")[2:]),
        version="1",
        lifespan=lifespan,
    )
    app.state.manager = manager
    connections = app.state.connections = ConnectionLimit(max_connections, max_connections_per_address)

    async def api_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, ApiError)
        return JSONResponse(error.payload(), status_code=error.status)

    async def validation_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, RequestValidationError)
        return JSONResponse(validation_reply(list(error.errors())), status_code=422)

    async def http_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, StarletteHTTPException)
        if error.status_code == 400:  # FastAPI's answer to a body it cannot decode (not UTF-8): malformed
            reply = {"detail": f"malformed request: {error.detail}", "errors": []}
            return JSONResponse(reply, status_code=422)
        return JSONResponse({"detail": error.detail}, status_code=error.status_code, headers=error.headers)

    async def unexpected(request: Request, error: Exception) -> Response:
        return JSONResponse(unexpected_reply(error), status_code=500)

    app.add_exception_handler(ApiError, api_error)
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, unexpected)

    # ---- sessions ---------------------------------------------------------------------------------
    @app.post("/sessions", response_model=P.SessionInfo, status_code=201, tags=["sessions"], responses=_ERRORS)
    async def create_session(body: P.CreateSessionRequest) -> dict[str, Any]:
        """Make an env of a served id (with `gym.make(env_id, **kwargs)`) in a new session."""
        session = await manager.create(body.env_id or manager.default_env_id(), body.kwargs)
        return {**session.summary(), "description": session.description}

    @app.get("/sessions", response_model=P.SessionList, tags=["sessions"], responses=_ERRORS)
    async def list_sessions() -> dict[str, Any]:
        """Every open session."""
        return {"sessions": [session.summary() for session in manager.sessions.values()]}

    @app.get("/sessions/{session_id}", response_model=P.SessionInfo, tags=["sessions"], responses=_ERRORS)
    async def session_info(session_id: str) -> dict[str, Any]:
        """One session: its env's description (spaces, class attributes, splits) and its counters."""
        session = manager.get(session_id)
        return {**session.summary(), "description": session.description}

    @app.delete("/sessions/{session_id}", response_model=P.CloseResponse, tags=["sessions"], responses=_ERRORS)
    async def close_session(session_id: str) -> dict[str, Any]:
        """Close the session's env (after its call in flight, if any) and free its backend.

        Of concurrent closes of one session, one closes it; the others are answered 404, as a later one is.
        """
        if not await manager.close(manager.get(session_id)):
            manager.get(session_id)  # closed meanwhile: raises the 404 of a session that is gone
        return {"session_id": session_id, "closed": True}

    @app.post("/sessions/{session_id}/reset", response_model=P.ResetResponse, tags=["sessions"], responses=_ERRORS)
    async def reset(session_id: str, body: P.ResetRequest) -> Response:
        """`env.reset(seed=..., options=...)`."""
        session = manager.get(session_id)
        return _json(await manager.call(session, session.do_reset, body.seed, body.options, seq=body.seq))

    @app.post("/sessions/{session_id}/step", response_model=P.StepResponse, tags=["sessions"], responses=_ERRORS)
    async def step(session_id: str, body: P.StepRequest) -> Response:
        """`env.step(action)`."""
        session = manager.get(session_id)
        return _json(await manager.call(session, session.do_step, body.action, seq=body.seq))

    @app.get("/sessions/{session_id}/tasks", response_model=P.TasksResponse, tags=["sessions"], responses=_ERRORS)
    async def tasks(
        session_id: str,
        split: str = Query(description="A split of the env, e.g. train or test"),
        offset: int = Query(0, ge=0),
        limit: int = Query(10_000, ge=1, le=100_000),
    ) -> dict[str, Any]:
        """Task ids of a split, a page at a time (`env.tasks(split)[offset:offset + limit]`)."""
        session = manager.get(session_id)
        return await manager.call(session, session.do_tasks, split, offset, limit)

    @app.post("/sessions/{session_id}/expert", response_model=P.ExpertResponse, tags=["expert"], responses=_ERRORS)
    async def make_expert(session_id: str) -> dict[str, Any]:
        """`env.unwrapped.make_expert()` for the current episode (501 where the scenario has none)."""
        session = manager.get(session_id)
        await manager.call(session, session.do_make_expert)
        return {"session_id": session_id, "ready": True}

    @app.post(
        "/sessions/{session_id}/expert/act", response_model=P.ExpertActResponse, tags=["expert"], responses=_ERRORS
    )
    async def expert_act(session_id: str, body: P.ExpertActRequest) -> Response:
        """The expert's next action for an observation and info."""
        session = manager.get(session_id)
        return _json(await manager.call(session, session.do_expert_act, body.observation, body.info, seq=body.seq))

    # ---- batches ----------------------------------------------------------------------------------
    @app.post("/batch", response_model=P.BatchResponse, tags=["batch"], responses=_ERRORS)
    async def batch(body: P.BatchRequest) -> Response:
        """Reset or step many sessions in one request, one call per session, run concurrently.

        Each result is either the call's reply with `ok: true`, or `ok: false` with the `status` and
        `detail` the call alone would have got; one failed call does not fail the others.
        """
        return _json(await manager.batch(body.calls))

    # ---- the server -------------------------------------------------------------------------------
    @app.get("/envs", response_model=P.EnvList, tags=["server"], responses=_ERRORS)
    async def envs() -> dict[str, Any]:
        """The served ids, each described with its default kwargs (splits with their sizes, spaces, prompt)."""
        return {"envs": [await manager.description(env_id) for env_id in manager.served()]}

    @app.get("/health", response_model=P.Health, tags=["server"], responses=_ERRORS)
    async def health() -> dict[str, Any]:
        """Liveness, sessions, uptime and memory."""
        return {
            "status": "ok",
            "sessions": len(manager.sessions),
            "max_sessions": manager.max_sessions,
            "ttl_s": manager.ttl,
            "reaped": manager.reaped,
            "uptime_s": round(time.monotonic() - manager.started, 3),
            "rss_bytes": _rss(),
            "children_rss_bytes": _children_rss(),
            "workers": manager.pool.size,
            "connections": connections.stats(),
        }

    add_agentgym_routes(app, manager, _ERRORS)  # AgentGym's routes: the first id, in its scenario's dialect
    add_openenv_routes(app, manager)  # OpenEnv's protocol at /openenv/<env id>
    app.front = Front(
        functools.partial(FastAPI.__call__, app),
        token=token,
        max_body_bytes=max_body_bytes,
        session_routes={"reset": reset, "step": step, "expert/act": expert_act},
        batch=batch,
        guard=RequestGuard(allowed_hosts, allowed_origins, _takes_no_body),
    )
    if token:
        _declare_bearer(app)
    return app


def _takes_no_body(path: str) -> bool:
    """POST routes that take no body: AgentGym's `/create` (its BabyAI client posts none), `/sessions/{id}/expert`."""
    return path == "/create" or (path.startswith("/sessions/") and path.endswith("/expert"))


def _declare_bearer(app: FastAPI) -> None:
    """Say in the OpenAPI schema that every route wants a bearer token."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = build()
            schema.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
            schema["security"] = [{"bearer": []}]
            app.openapi_schema = schema
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def resolve_token(token: str | None) -> str | None:
    """The server's token: `token`, else `$AGENTGYM_TOKEN`, else None; an empty one is an error, not "no auth"."""
    if token is None:
        token = os.environ.get(wire.TOKEN_ENV_VAR)
        where = f"${wire.TOKEN_ENV_VAR}"
    else:
        where = "--token"
    if token is not None and not token.strip():
        raise ValueError(
            f"{where} is empty, which would leave the server unprotected: give a token (e.g. "
            f"`python -c 'import secrets; print(secrets.token_urlsafe())'`), or unset {where} to serve without one"
        )
    return token


def serve(
    env_ids: list[str],
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    *,
    token: str | None = None,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
    ttl: float | None = DEFAULT_TTL,
    compat_ttl: float | None = COMPAT_TTL,
    workers: int = DEFAULT_WORKERS,
    env_kwargs: dict[str, dict[str, Any]] | None = None,
    allowed_hosts: Collection[str] = (),
    allowed_origins: Collection[str] = (),
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    body_timeout: float = DEFAULT_BODY_TIMEOUT,
    keep_alive: float = DEFAULT_KEEP_ALIVE,
    call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    max_connections: int | None = None,
    max_connections_per_address: int | None = None,
    log_level: str = "warning",
) -> None:
    """Serve `env_ids` until interrupted (SIGINT/SIGTERM close every session before exiting).

    `token` defaults to `$AGENTGYM_TOKEN` (empty: an error). The server answers to the Host names of
    `default_allowed_hosts(host)` and `allowed_hosts`. Prints one line with the address once
    listening (port 0 picks a free port and prints it). Raises ValueError for a bad configuration.
    """
    import uvicorn

    token = resolve_token(token)
    hosts = default_allowed_hosts(host) | set(allowed_hosts)
    app = create_app(
        env_ids,
        token=token,
        max_sessions=max_sessions,
        ttl=ttl,
        compat_ttl=compat_ttl,
        workers=workers,
        env_kwargs=env_kwargs,
        allowed_hosts=hosts,
        allowed_origins=allowed_origins,
        call_timeout=call_timeout,
        max_connections=max_connections,
        max_connections_per_address=max_connections_per_address,
    )
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        proxy_headers=False,  # no proxy in front by default; saves a middleware layer per request
        timeout_graceful_shutdown=10,
        **uvicorn_options(header_timeout, body_timeout, keep_alive, connections=app.state.connections),
    )
    sock = config.bind_socket()
    sock.listen(config.backlog)  # connections wait in the backlog from now on, not refused until startup
    bound = sock.getsockname()[1]
    if not is_loopback(host) and not token:
        print(
            f"warning: serving on {host} without --token: anyone who can reach port {bound} can run envs here",
            file=sys.stderr,
        )
    auth = "; bearer token required" if token else ""
    openenv = f"; OpenEnv clients at {OPENENV_PREFIX}/<env id>"
    print(f"agentgym serve: {', '.join(env_ids)} on http://{host}:{bound} (docs at /docs{openenv}{auth})", flush=True)
    uvicorn.Server(config).run(sockets=[sock])
