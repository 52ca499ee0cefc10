"""What the server and the client share with no extra dependency: JSON on the wire and the errors.

Errors travel as JSON `{"detail": "<what went wrong, in words>", "error_type": "<exception name>"}` with
an HTTP status. On the server an `ApiError` is such a reply (`env_error` makes one of an exception an
env call raised); on the client `error_for` turns it back into the exception the in-process env would
have raised, so code written against a local env behaves the same against a remote one.
"""

from __future__ import annotations

import json
from typing import Any

from gymnasium.error import ResetNeeded

from agentgym_envs.core import EpisodeOverError

#: Environment variable holding the bearer token (read by `agentgym serve` and by the client).
TOKEN_ENV_VAR = "AGENTGYM_TOKEN"

#: Longest `detail` of an error reply: an env's message may quote a megabyte action back.
MAX_DETAIL_CHARS = 2000


def _jsonable(value: Any) -> Any:
    """JSON form of what `json` cannot encode itself: numpy scalars and arrays, sets, anything else as text."""
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():
        return item()
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def dumps(payload: Any) -> bytes:
    """Encode `payload` as compact JSON bytes (ASCII-escaped, so lone surrogates in texts survive)."""
    return json.dumps(payload, separators=(",", ":"), default=_jsonable).encode()


class RemoteEnvError(RuntimeError):
    """The server answered an error (or could not be reached); `status` and `detail` say which."""

    def __init__(self, detail: str, status: int | None = None, error_type: str | None = None):
        super().__init__(detail)
        self.detail = detail
        self.status = status
        self.error_type = error_type


class ServerUnavailableError(RemoteEnvError, ConnectionError):
    """No server answered at the base URL (refused, reset, unreachable) after the bounded retries."""


class SessionLostError(RemoteEnvError, LookupError):
    """The server does not know the session (closed, reaped after its idle TTL, or the server restarted)."""


class AuthenticationError(RemoteEnvError, PermissionError):
    """The server wants a bearer token and the request had none or a wrong one."""


class RemoteTimeoutError(RemoteEnvError, TimeoutError):
    """The server accepted the request but did not answer within the client's timeout."""


# Exceptions an env call may raise on purpose, by name: the status the server answers with, and the
# class the client raises again. Everything else is a backend failure (500, RemoteEnvError).
_KNOWN: dict[str, tuple[int, type[Exception]]] = {
    "EpisodeOverError": (409, EpisodeOverError),
    "ResetNeeded": (409, ResetNeeded),
    "ValueError": (422, ValueError),
    "TypeError": (422, TypeError),
    "NotImplementedError": (501, NotImplementedError),
}


def bounded(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    """`text`, cut to `limit` characters with a note saying how much was left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


class ApiError(Exception):
    """An error reply: HTTP `status`, a human-readable `detail`, and the `error_type` a client maps back."""

    def __init__(self, status: int, detail: str, error_type: str | None = None):
        detail = bounded(detail)
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.error_type = error_type

    def payload(self) -> dict[str, Any]:
        return {"detail": self.detail, "error_type": self.error_type}


def env_error(error: BaseException, what: str) -> ApiError:
    """The reply for an exception raised by an env call (`what` says which call)."""
    return ApiError(status_for(error), f"{what}: {type(error).__name__}: {error}", error_name(error))


def status_for(error: BaseException) -> int:
    """The HTTP status for an exception raised by an env call (500 unless the env raised it on purpose)."""
    for cls in type(error).__mro__:
        known = _KNOWN.get(cls.__name__)
        if known is not None and known[1] is cls:
            return known[0]
    return 500


def error_name(error: BaseException) -> str:
    """The name the client maps back: the nearest known class in the MRO, else the exception's own name."""
    for cls in type(error).__mro__:
        known = _KNOWN.get(cls.__name__)
        if known is not None and known[1] is cls:
            return cls.__name__
    return type(error).__name__


def error_for(status: int, payload: Any, what: str) -> Exception:
    """The exception to raise for an error reply `payload` with `status` to the request `what`."""
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if not isinstance(detail, str):
        detail = json.dumps(payload)[:2000] if payload is not None else "(no body)"
    error_type = payload.get("error_type") if isinstance(payload, dict) else None
    known = _KNOWN.get(error_type or "")
    if known is not None:
        return known[1](detail)
    message = f"{what} failed with HTTP {status}: {detail}"
    if status in (401, 403):
        return AuthenticationError(message, status, error_type)
    if status == 404 and error_type == "SessionNotFound":
        return SessionLostError(message, status, error_type)
    return RemoteEnvError(message, status, error_type)
