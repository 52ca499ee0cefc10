"""What the server and the client share with no extra dependency: JSON on the wire and the errors.

Errors travel as JSON `{"detail": "<what went wrong, in words>", "error_type": "<exception name>"}` with
an HTTP status. On the server an `ApiError` is such a reply (`env_error` makes one of an exception an
env call raised); on the client `error_for` turns it back into the exception the in-process env would
have raised, so code written against a local env behaves the same against a remote one.
"""

from __future__ import annotations

import json
import json.encoder as _json_encoder
from math import isfinite as _isfinite
from typing import Any

from gymnasium.error import ResetNeeded

from agentgym_envs.core import EpisodeOverError

#: Environment variable holding the bearer token (read by `agentgym serve` and by the client).
TOKEN_ENV_VAR = "AGENTGYM_TOKEN"

#: Longest `detail` of an error reply: an env's message may quote a megabyte action back.
MAX_DETAIL_CHARS = 2000


#: Deepest nesting of arrays and objects a request body may have (422 past it): far above what any
#: request of these protocols needs, far below where the JSON parsers run out of stack (RecursionError).
MAX_JSON_DEPTH = 64

#: Bytes of a body scanned at once by `too_deep` (its arrays stay a few MiB whatever the body).
_CHUNK = 1 << 20


def too_deep(raw: bytes | str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether the JSON text `raw` nests arrays and objects more than `limit` deep, found without decoding it.

    A linear scan of the raw bytes (vectorised, a chunk at a time): a quote opens or closes a string
    unless an odd run of backslashes precedes it, and brackets count only outside strings. Past an
    unterminated string nothing counts, as a parser reads no further.
    """
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if raw.count(b"[") + raw.count(b"{") <= limit:  # nearly every body: fewer openings than the bound
        return False
    import numpy as np

    data = np.frombuffer(raw, dtype=np.uint8)
    depth = quotes = run = 0  # carried over chunks: the depth, the quotes so far, trailing backslashes
    for start in range(0, len(data), _CHUNK):
        chunk = data[start : start + _CHUNK]
        backslash = chunk == ord("\\")
        quote = chunk == ord('"')
        if run or backslash.any():
            index = np.arange(len(chunk), dtype=np.int32)
            # The last byte at or before each position that is not a backslash (-1 - run: an earlier chunk's).
            last = np.maximum.accumulate(np.where(backslash, np.int32(-1 - run), index))
            quote &= (index - np.concatenate(([-1 - run], last[:-1]))) % 2 == 1  # an even run before it
            run = len(chunk) - 1 - int(last[-1])
        else:
            run = 0
        seen = np.cumsum(quote, dtype=np.int32) + quotes
        steps = ((chunk == ord("[")) | (chunk == ord("{"))).view(np.int8) - ((chunk == ord("]")) | (chunk == ord("}")))
        steps[seen % 2 == 1] = 0  # inside a string
        running = np.cumsum(steps, dtype=np.int32) + depth
        if running.max() > limit:
            return True
        depth, quotes = int(running[-1]), int(seen[-1])
    return False


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


#: One encoder for every reply (`json.dumps` with options builds a new one per call; encoding is stateless).
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=_jsonable)

#: The C encoder `_ENCODER.encode` builds on each call, made once and without the circular-reference check
#: (its `markers` dict): the same bytes for ~1 us less a reply. A cycle then ends in RecursionError, and
#: `dumps` encodes again with the checked encoder, which raises what `json` raises for it.
_FAST = (
    _json_encoder.c_make_encoder(
        None, _jsonable, _json_encoder.encode_basestring_ascii, None, ":", ",", False, False, True
    )
    if _json_encoder.c_make_encoder is not None
    and _json_encoder.encode_basestring_ascii is _json_encoder.c_encode_basestring_ascii
    else None
)


def dumps(payload: Any) -> bytes:
    """Encode `payload` as compact JSON bytes (ASCII-escaped, so lone surrogates in texts survive)."""
    if _FAST is not None and type(payload) is dict:
        try:
            return "".join(_FAST(payload, 0)).encode()
        except RecursionError:  # a cycle, or nesting past the stack: the checked encoder says which
            pass
    return _ENCODER.encode(payload).encode()


def step_reply(observation: Any, reward: float, terminated: bool, truncated: bool, info: Any) -> bytes:
    """`dumps` of a step's reply, `{"observation", "reward", "terminated", "truncated", "info"}`, the same bytes
    written from a template when the observation is a text, the reward a finite float and the info a dict
    (every text env's step): ~0.6 us less a step than encoding the outer object too."""
    if (
        _FAST is not None
        and type(observation) is str
        and type(reward) is float
        and _isfinite(reward)
        and type(terminated) is bool
        and type(truncated) is bool
        and type(info) is dict
    ):
        try:
            info_text = "".join(_FAST(info, 0))
        except RecursionError:  # a cycle: `dumps` says so
            pass
        else:
            return (
                f'{{"observation":{_json_encoder.encode_basestring_ascii(observation)},"reward":{float.__repr__(reward)},'
                f'"terminated":{_BOOL_TEXT[terminated]},"truncated":{_BOOL_TEXT[truncated]},"info":{info_text}}}'
            ).encode()
    return dumps(
        {"observation": observation, "reward": reward, "terminated": terminated, "truncated": truncated, "info": info}
    )


_BOOL_TEXT = {False: "false", True: "true"}


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
    if not isinstance(error_type, str):  # a broken or hostile server's reply: no class to map back
        error_type = None
    known = _KNOWN.get(error_type or "")
    if known is not None:
        return known[1](detail)
    message = f"{what} failed with HTTP {status}: {detail}"
    if status in (401, 403):
        return AuthenticationError(message, status, error_type)
    if status == 404 and error_type == "SessionNotFound":
        return SessionLostError(message, status, error_type)
    return RemoteEnvError(message, status, error_type)
