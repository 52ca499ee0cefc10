"""OpenEnv's protocol on the env server: every served id is an OpenEnv environment at `/openenv/<env id>`.

OpenEnv (`openenv-core`) clients are given a base URL and speak to `<base>/health`, `<base>/schema`,
`<base>/metadata` and the WebSocket `<base>/ws`. Here the base URL of a served id is
`http://HOST:PORT/openenv/<env id>` (e.g. `.../openenv/AgentGym/BabyAI-v0`), so one server serves
OpenEnv clients of every scenario it serves, next to its own routes. Nothing here imports
`openenv-core`: the wire format is written out below.

WebSocket `/ws`: one session per connection, made with the operator's kwargs when the connection
opens and closed when it ends. Frames are JSON objects `{"type": ..., "data": ...}`:

| frame | data | reply |
|---|---|---|
| `reset` | `seed`, `episode_id`, `task_id`, `split`, `env_kwargs` (all optional) | `observation` |
| `step` | `{"action": "<text>"}` | `observation` |
| `state` | - | `state`: `episode_id`, `step_count`, `env_id`, `session_id`, `env_kwargs`, `task_id`, ... |
| `close` | - | none; the server closes the session and the connection |

An `observation` reply's data is `{"observation": {"text", "info", "terminated", "truncated"},
"reward", "done"}` (reward None after reset; done is terminated or truncated). An error reply is
`{"type": "error", "data": {"message", "code", "status", "error_type"}}` with OpenEnv's codes:
`INVALID_JSON`, `UNKNOWN_TYPE`, `VALIDATION_ERROR` (a malformed frame, an unknown reset key, or a
kwarg the client may not choose: status 403), `EXECUTION_ERROR` (the env refused the call, e.g. a
step after the episode ended: status 409), `CAPACITY_REACHED` (the server holds its maximum of
sessions; the connection is closed), `FACTORY_ERROR` (the env could not be made), `SESSION_ERROR`
(the session was reaped after its idle TTL; the next `reset` makes a new one). `status` is the
HTTP status our own routes would answer. Unknown reset keys are refused, not dropped, so a
misspelt `task_id` cannot silently play another task.

Trust: the same as the HTTP routes. The server's Host, Origin and token checks run before a
WebSocket is accepted (a refused handshake is answered 401/403 and never reaches a session), and
`env_kwargs` pass the same client-kwargs policy as `POST /sessions`. OpenEnv's stateless HTTP
`/reset` and `/step` (a fresh env per request) are not served: an episode is played over `/ws`.
"""

from __future__ import annotations

import json
import logging
import secrets
from contextlib import suppress
from importlib import metadata as importlib_metadata
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import Body, FastAPI, Response, WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.types import Scope, Send

from agentgym_envs.remote import wire
from agentgym_envs.remote.wire import ApiError, bounded

if TYPE_CHECKING:
    from agentgym_envs.remote.server.session import Session
    from agentgym_envs.remote.server.sessions import SessionManager

_log = logging.getLogger(__name__)

#: Where each served id's OpenEnv base URL starts: `/openenv/<env id>`.
OPENENV_PREFIX = "/openenv"

#: OpenEnv's error code for each HTTP status our routes would answer.
_CODES = {403: "VALIDATION_ERROR", 404: "SESSION_ERROR", 422: "VALIDATION_ERROR", 429: "CAPACITY_REACHED"}
_MAX_ERRORS = 20


class TextAction(BaseModel):
    """An OpenEnv action: the action text, as a model's parsed reply would give it."""

    model_config = ConfigDict(extra="forbid", title="TextAction")
    action: str = Field(description="The action text, e.g. 'go to red ball 1' or '<search> Peru </search>'")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Ignored; OpenEnv's actions carry it")


class TextObservation(BaseModel):
    """An OpenEnv observation of a text env (OpenEnv sends `done`, `reward`, `metadata` beside the rest)."""

    model_config = ConfigDict(extra="forbid", title="TextObservation")
    text: str = Field(description="What the env shows the agent")
    info: dict[str, Any] = Field(description="The env's info: task_id, split, category, instruction, score, ...")
    terminated: bool = False
    truncated: bool = False
    done: bool = False
    reward: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class EpisodeState(BaseModel):
    """An OpenEnv state: the episode id and step count, and where the episode stands."""

    model_config = ConfigDict(extra="allow", title="EpisodeState")
    episode_id: str | None = None
    step_count: int = Field(0, ge=0)
    env_id: str
    session_id: str | None = Field(None, description="The session on this server (its /sessions routes)")
    env_kwargs: dict[str, Any] = Field(default_factory=dict, description="The kwargs the client chose")
    task_id: str | None = None
    split: str | None = None
    score: float = 0.0
    success: bool = False
    done: bool = False


class ResetData(BaseModel):
    """The data of a `reset` frame."""

    model_config = ConfigDict(extra="forbid")
    seed: int | None = Field(None, ge=0, description="Picks a task of the split when task_id is not given")
    episode_id: str | None = Field(None, max_length=255, description="Echoed in state; a random one otherwise")
    task_id: str | int | None = Field(None, description="A task id, or an index into the split")
    split: str | None = Field(None, description="train, test (dev where the scenario has one)")
    env_kwargs: dict[str, Any] | None = Field(
        None, description="Constructor kwargs the env lets a client choose (GET /envs lists them); remakes the env"
    )


def _error(message: str, code: str, status: int, error_type: str | None) -> dict[str, Any]:
    return {
        "type": "error",
        "data": {"message": bounded(message), "code": code, "status": status, "error_type": error_type},
    }


def _api_error(error: ApiError, default_code: str = "EXECUTION_ERROR") -> dict[str, Any]:
    return _error(error.detail, _CODES.get(error.status, default_code), error.status, error.error_type)


def _invalid(error: ValidationError, what: str) -> dict[str, Any]:
    errors = error.errors(include_url=False, include_input=False)[:_MAX_ERRORS]
    where = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or what}: {e['msg']}" for e in errors[:5])
    reply = _error(f"malformed {what}: {where}", "VALIDATION_ERROR", 422, "ValidationError")
    reply["data"]["errors"] = [{"loc": list(e["loc"]), "msg": bounded(str(e["msg"]), 300)} for e in errors]
    return reply


def _observation(step: dict[str, Any], reset: bool) -> dict[str, Any]:
    terminated, truncated = bool(step.get("terminated")), bool(step.get("truncated"))
    return {
        "type": "observation",
        "data": {
            "observation": {
                "text": step["observation"],
                "info": step["info"],
                "terminated": terminated,
                "truncated": truncated,
            },
            "reward": None if reset else float(step["reward"]),
            "done": terminated or truncated,
        },
    }


class _Connection:
    """One WebSocket's session and episode."""

    def __init__(self, manager: SessionManager, env_id: str):
        self.manager = manager
        self.env_id = env_id
        self.session: Session | None = None
        self.episode_id: str | None = None
        self.steps = 0
        self.reset_done = False

    async def open(self) -> None:
        self.session = await self.manager.create(self.env_id, {})

    async def close(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            await self.manager.close(session)

    async def handle(self, raw: str | bytes) -> tuple[dict[str, Any] | None, bool]:
        """The reply to one frame (None for none) and whether the connection ends."""
        if wire.too_deep(raw):  # before the parser recurses into it
            detail = f"the frame nests arrays and objects more than {wire.MAX_JSON_DEPTH} deep (the limit)"
            return _error(detail, "INVALID_JSON", 422, "ValueError"), False
        try:
            frame = json.loads(raw)
        except ValueError as error:
            return _error(f"invalid JSON: {error}", "INVALID_JSON", 422, "JSONDecodeError"), False
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            return _error('a frame is a JSON object {"type": ..., "data": ...}', "VALIDATION_ERROR", 422, None), False
        kind, data = frame["type"], frame.get("data") or {}
        try:
            if kind == "reset":
                return await self.reset(ResetData.model_validate(data)), False
            if kind == "step":
                return await self.step(TextAction.model_validate(data)), False
            if kind == "state":
                return {"type": "state", "data": self.state()}, False
            if kind == "close":
                return None, True
        except ValidationError as error:
            return _invalid(error, f"{kind} data"), False
        except ApiError as error:
            if error.status == 404:  # reaped while idle: the next reset makes a new session
                self.session, self.reset_done = None, False
            return _api_error(error), False
        expected = "expected reset, step, state or close"
        return _error(f"unknown frame type {bounded(kind, 100)!r}; {expected}", "UNKNOWN_TYPE", 422, None), False

    async def reset(self, data: ResetData) -> dict[str, Any]:
        wanted = data.env_kwargs
        if self.session is None or (wanted is not None and wanted != self.session.kwargs):
            # The policy decides before the old env is closed, so a refused kwarg costs nothing.
            self.manager.policy.kwargs_for(self.env_id, wanted or {})
            await self.close()
            try:
                self.session = await self.manager.create(self.env_id, wanted or {})
            except ApiError as error:
                if error.status >= 500:
                    return _api_error(error, "FACTORY_ERROR")
                raise
        options = {key: value for key, value in (("task_id", data.task_id), ("split", data.split)) if value is not None}
        session = self.session
        reply = json.loads(await self.manager.call(session, session.do_reset, data.seed, options or None))
        self.episode_id = data.episode_id or secrets.token_hex(8)
        self.steps, self.reset_done = 0, True
        return _observation(reply, reset=True)

    async def step(self, action: TextAction) -> dict[str, Any]:
        if self.session is None or not self.reset_done:
            raise ApiError(409, "send a reset frame before the first step", "ResetNeeded")
        session = self.session
        reply = json.loads(await self.manager.call(session, session.do_step, action.action))
        self.steps += 1
        return _observation(reply, reset=False)

    def state(self) -> dict[str, Any]:
        session = self.session
        info = (session.info if session is not None and self.reset_done else None) or {}
        return EpisodeState(
            episode_id=self.episode_id,
            step_count=self.steps,
            env_id=self.env_id,
            session_id=session.id if session is not None else None,
            env_kwargs=session.kwargs if session is not None else {},
            task_id=None if info.get("task_id") is None else str(info["task_id"]),
            split=info.get("split"),
            score=float(info.get("score", 0.0)),
            success=bool(info.get("success", False)),
            done=bool(session is not None and session.episode_over),
        ).model_dump()


def _metadata(env_id: str) -> dict[str, Any]:
    from agentgym_envs.remote.server.policy import env_class

    doc = (getattr(env_class(env_id), "__doc__", None) or "").strip()
    try:
        version = importlib_metadata.version("agentgym-rl")
    except importlib_metadata.PackageNotFoundError:
        version = None
    return {
        "name": env_id,
        "description": doc.split("\n\n", 1)[0].replace("\n", " ") or f"AgentGym text environment {env_id}",
        "readme_content": doc or None,
        "version": version,
        "author": None,
        "documentation_url": None,
    }


def _schemas() -> dict[str, Any]:
    return {
        "action": TextAction.model_json_schema(),
        "observation": TextObservation.model_json_schema(),
        "state": EpisodeState.model_json_schema(),
    }


def add_openenv_routes(app: FastAPI, manager: SessionManager) -> None:
    """Add OpenEnv's routes for every id `manager` serves, under `/openenv/<env id>`."""
    tags = ["openenv"]
    prefix = OPENENV_PREFIX + "/{env_id:path}"

    @app.get(prefix + "/health", tags=tags)
    async def openenv_health(env_id: str) -> dict[str, str]:
        """OpenEnv's health check for one served id."""
        manager.check_env_id(env_id)
        return {"status": "healthy"}

    @app.get(prefix + "/metadata", tags=tags)
    async def openenv_metadata(env_id: str) -> dict[str, Any]:
        """OpenEnv's environment metadata: the id and its class's description."""
        manager.check_env_id(env_id)
        return _metadata(env_id)

    @app.get(prefix + "/schema", tags=tags)
    async def openenv_schema(env_id: str) -> dict[str, Any]:
        """JSON schemas of the action, observation and state sent over `/ws`."""
        manager.check_env_id(env_id)
        return _schemas()

    @app.post(prefix + "/mcp", tags=tags)
    async def openenv_mcp(env_id: str, body: Annotated[dict[str, Any] | None, Body()] = None) -> Response:
        """OpenEnv's MCP endpoint: a JSON-RPC error, since these envs expose no MCP tools."""
        manager.check_env_id(env_id)
        request_id = body.get("id") if isinstance(body, dict) and isinstance(body.get("id"), (int, str)) else None
        reply = {
            "jsonrpc": "2.0",
            "id": request_id,
            "error": {
                "code": -32601,
                "message": f"{env_id} exposes no MCP tools: play it over the WebSocket {OPENENV_PREFIX}/{env_id}/ws",
            },
        }
        # wire.dumps escapes the id the client chose, which FastAPI's encoder refuses for a lone surrogate (a 500)
        return Response(wire.dumps(reply), media_type="application/json")

    @app.get(prefix + "/openapi.json", include_in_schema=False)
    async def openenv_openapi(env_id: str) -> dict[str, Any]:
        """The OpenAPI document of one id's OpenEnv routes, as an OpenEnv server at that base URL has."""
        manager.check_env_id(env_id)
        schema = app.openapi()
        stem = prefix.replace(":path", "")
        paths = {path[len(stem) :]: item for path, item in schema["paths"].items() if path.startswith(stem + "/")}
        return {"openapi": schema["openapi"], "info": schema["info"], "paths": paths}

    @app.websocket(prefix + "/ws")
    async def openenv_ws(websocket: WebSocket, env_id: str) -> None:
        """OpenEnv's WebSocket session (see the module docstring for its frames)."""
        await websocket.accept()
        connection = _Connection(manager, env_id)
        try:
            try:
                await connection.open()
            except ApiError as error:
                await websocket.send_text(_text(_api_error(error, "FACTORY_ERROR")))
                return
            while True:
                message = await websocket.receive()
                if message["type"] == "websocket.disconnect":
                    break
                raw = message.get("text")
                if raw is None:
                    raw = message.get("bytes") or b""
                try:
                    reply, done = await connection.handle(raw)
                except Exception as error:  # an unexpected failure answers this frame; the session goes on
                    _log.exception("OpenEnv frame on %s failed", env_id)
                    reply, done = _error(f"{type(error).__name__}: {error}", "EXECUTION_ERROR", 500, None), False
                if reply is not None:
                    await websocket.send_text(_text(reply))
                if done:
                    break
        finally:
            await connection.close()
            with suppress(RuntimeError, WebSocketDisconnect):  # the client may have closed first
                await websocket.close()


def _text(reply: dict[str, Any]) -> str:
    return wire.dumps(reply).decode("utf-8", "surrogatepass")


async def refuse_websocket(scope: Scope, send: Send, status: int, payload: dict[str, Any]) -> None:
    """Refuse a WebSocket handshake before it is accepted: HTTP `status` with the JSON `payload` where the
    server supports denial responses, else a plain 403 (closing before accepting)."""
    if "websocket.http.response" in scope.get("extensions", {}):
        body = wire.dumps(payload)
        head = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        await send({"type": "websocket.http.response.start", "status": status, "headers": head})
        await send({"type": "websocket.http.response.body", "body": body})
    else:
        await send({"type": "websocket.close", "code": 1008})
