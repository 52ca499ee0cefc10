"""Sessions of a server (`SessionManager`): one env each (a `session.Session`), a lock each, a session cap,
and an idle-TTL reaper.

Each session has its own idle TTL: the server's `ttl`, or `compat_ttl` for sessions made on AgentGym's
routes (whose clients may wait 2,400 s between calls); both are the operator's choice. The manager
remembers the ids it reaped (the last `REAPED_MEMORY`), so a call on one is answered "reaped after N s
idle" rather than "unknown".

The manager runs on the server's event loop; env calls go to the `WorkerPool`, always on the
session's own thread, each within the server's call timeout: a call past it is answered 504 and its
session closed, its env abandoned to the retired thread, while the slot's other sessions go on.
Making and closing an env are not timed (making one may load an index for minutes). Everything here
is free of web-framework code: errors are `ApiError`s that the app turns into JSON replies.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import functools
import gc
import itertools
import logging
import secrets
import sys
import threading
import time
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

import agentgym_envs
from agentgym_envs.core import TextEnv
from agentgym_envs.remote import wire
from agentgym_envs.remote.description import EnvDescription, describe_env
from agentgym_envs.remote.server.policy import KwargsPolicy, env_class
from agentgym_envs.remote.server.session import Session
from agentgym_envs.remote.server.workers import CallTimeout, WorkerPool, restart_clock
from agentgym_envs.remote.wire import ApiError, bounded, env_error

_log = logging.getLogger(__name__)

#: Registered ids that are clients themselves; a server never serves them (no loops).
REMOTE_PREFIX = "AgentGym/Remote"


#: How many reaped session ids the manager remembers, to say "reaped" instead of "unknown".
REAPED_MEMORY = 65_536

#: Seconds an env call (reset, step, expert, tasks) may run before its session is given up.
DEFAULT_CALL_TIMEOUT = 300.0


@functools.cache
def _shares_a_thread(env_id: str) -> bool:
    """Whether `env_id`'s class says its calls are short pure-Python work bound to no thread
    (`TextEnv.shared_server_thread`, True for TextCraft): then every session of it runs on one worker thread.
    Spread over threads, such calls gain nothing (they hold the GIL) and each batch pays a thread switch
    per thread it touches, which costs more than the calls themselves."""
    try:
        creator = env_class(env_id)
    except Exception:  # an id whose class cannot be found fails when it is made, with the real error
        return False
    # A foreign Gymnasium env or a factory function does not declare it: the contract's default.
    return getattr(creator, "shared_server_thread", TextEnv.shared_server_thread) is True


def _batch_error(error: ApiError) -> bytes:
    return wire.dumps({"ok": False, "status": error.status, "detail": error.detail, "error_type": error.error_type})


def _trim_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc), so RSS falls after a reap."""
    gc.collect()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
            ctypes.CDLL("libc.so.6").malloc_trim(0)


@dataclass(eq=False)
class _Progress:
    """How far a batch's group of calls got on its thread, shared with the event loop under `lock`."""

    out: list[tuple[int, bytes]] = field(default_factory=list)
    current: int = 0
    abandoned: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


class SessionManager:
    """The sessions of one server.

    Args:
        env_ids: The ids this server serves; None serves every registered id (the client's loopback
            server does this), except the remote client ids themselves.
        max_sessions: Sessions allowed at once; creating one more is answered 429.
        ttl: Seconds a session may stay idle before the reaper closes it (0 or None: never).
        compat_ttl: The same for sessions made on AgentGym's routes (`create(..., compat=True)`).
        workers: Threads for blocking env calls.
        call_timeout: Seconds one env call may run (None or 0: no limit); see the module's docstring.
        policy: The operator's kwargs and the check of a client's (default: no operator kwargs, a
            client may pass only what each env declares safe for clients).
    """

    def __init__(
        self,
        env_ids: list[str] | None,
        max_sessions: int = 1024,
        ttl: float | None = 600.0,
        workers: int = 16,
        compat_ttl: float | None = None,
        policy: KwargsPolicy | None = None,
        call_timeout: float | None = DEFAULT_CALL_TIMEOUT,
    ):
        if env_ids is not None:
            unknown = [env_id for env_id in env_ids if env_id not in gym.registry]
            if unknown:
                raise ValueError(f"unknown env ids {unknown}; registered: {agentgym_envs.registered_ids}")
            remote = [env_id for env_id in env_ids if env_id.startswith(REMOTE_PREFIX)]
            if remote:
                raise ValueError(f"{remote} are clients of a server; serve the env they would connect to instead")
            if not env_ids:
                raise ValueError("serve at least one env id")
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        self.env_ids = list(env_ids) if env_ids is not None else None
        self.policy = policy if policy is not None else KwargsPolicy()
        unserved = [env_id for env_id in self.policy.operator_kwargs if not self._serves(env_id)]
        if unserved:
            raise ValueError(f"env kwargs given for ids this server does not serve: {unserved}")
        self.max_sessions = max_sessions
        self.ttl = ttl if ttl and ttl > 0 else None
        self.compat_ttl = compat_ttl if compat_ttl and compat_ttl > 0 else None
        self.pool = WorkerPool(workers)
        self.call_timeout = call_timeout if call_timeout and call_timeout > 0 else None
        #: Sessions closed because a call ran past the call timeout -> that timeout (oldest first).
        self.timed_out_ids: OrderedDict[str, float] = OrderedDict()
        self.sessions: dict[str, Session] = {}
        self.compat: dict[int, str] = {}
        self._compat_ids = itertools.count()
        #: Reaped session ids and compat ids -> the idle TTL they were reaped after (oldest first).
        self.reaped_ids: OrderedDict[str | int, float] = OrderedDict()
        self._pending = 0
        self._descriptions: dict[str, EnvDescription] = {}
        self._reaper: asyncio.Task | None = None
        self.started = time.monotonic()
        self.reaped = 0
        #: The worker slot that every session of a `shared_server_thread` env runs on (None until the first).
        self._shared_slot: int | None = None

    # ---- ids --------------------------------------------------------------------------------------
    def served(self) -> list[str]:
        """The ids this server serves, in order."""
        if self.env_ids is not None:
            return list(self.env_ids)
        return [env_id for env_id in agentgym_envs.registered_ids if not env_id.startswith(REMOTE_PREFIX)]

    def default_env_id(self) -> str:
        """The id a request without one gets (and the AgentGym-compatible routes serve): the first served."""
        return self.served()[0]

    def _serves(self, env_id: str) -> bool:
        if self.env_ids is not None:
            return env_id in self.env_ids
        return env_id in gym.registry and not env_id.startswith(REMOTE_PREFIX)

    def check_env_id(self, env_id: str) -> None:
        if not self._serves(env_id):
            raise ApiError(404, f"env id {env_id!r} is not served here; served ids: {self.served()}", "UnknownEnvId")

    async def description(self, env_id: str) -> EnvDescription:
        """The description of `env_id` with default kwargs (cached; the env is made and closed once)."""
        self.check_env_id(env_id)
        if env_id not in self._descriptions:

            def probe() -> EnvDescription:
                env = gym.make(env_id, **self.policy.operator(env_id))
                try:
                    return describe_env(env_id, env, self.policy.describe(env_id))
                finally:
                    env.close()

            try:
                self._descriptions[env_id] = await self.pool.run(0, probe)
            except Exception as error:
                raise env_error(error, f"describing {env_id}") from error
        return self._descriptions[env_id]

    # ---- lifecycle --------------------------------------------------------------------------------
    async def create(self, env_id: str, client_kwargs: dict[str, Any], compat: bool = False) -> Session:
        """Make `env_id` with the operator's kwargs and those the client may choose (403/422 before any env is made).

        `compat`: a session of AgentGym's routes, idle up to `compat_ttl` rather than `ttl`.
        """
        self.check_env_id(env_id)
        kwargs = self.policy.kwargs_for(env_id, client_kwargs)
        if len(self.sessions) + self._pending >= self.max_sessions:
            raise ApiError(
                429,
                f"this server holds its maximum of {self.max_sessions} sessions (--max-sessions); close some "
                f"(DELETE /sessions/{{id}}) or retry later ({self._reaping()})",
                "TooManySessions",
            )
        self._pending += 1
        shared = _shares_a_thread(env_id)
        slot = self.pool.take(self._shared_slot) if shared and self._shared_slot is not None else self.pool.assign()
        if shared:
            self._shared_slot = slot
        try:

            def make() -> tuple[gym.Env, EnvDescription]:
                env = gym.make(env_id, **kwargs)
                try:
                    return env, describe_env(env_id, env, self.policy.describe(env_id))
                except BaseException:
                    env.close()
                    raise

            try:
                env, description = await self.pool.run(slot, make)
            except TypeError as error:
                raise ApiError(
                    422, f"cannot make {env_id} with kwargs {client_kwargs}: {error}", "TypeError"
                ) from error
            except Exception as error:
                raise env_error(error, f"making {env_id}") from error
        except BaseException:
            self.pool.release(slot)
            raise
        finally:
            self._pending -= 1
        session = Session(secrets.token_hex(8), env_id, dict(client_kwargs), env, slot, description)
        session.ttl = self.compat_ttl if compat else self.ttl
        self.sessions[session.id] = session
        return session

    def _reaping(self) -> str:
        """When idle sessions are closed, in words, with the soonest one due (for the 429)."""

        def after(ttl: float | None, flag: str) -> str:
            return f"after {ttl:g} s idle ({flag})" if ttl else f"never ({flag} 0)"

        words = (
            f"idle sessions are closed {after(self.ttl, '--ttl')}, "
            f"those made on AgentGym's /create {after(self.compat_ttl, '--compat-ttl')}"
        )
        now = time.monotonic()
        due = [s.ttl - (now - s.last_used) for s in self.sessions.values() if s.ttl is not None]
        if due:
            words += f"; the next is due in {max(0.0, min(due)):.0f} s"
        elif self.sessions:
            words += "; none of the open ones will be closed for idleness"
        return words

    def get(self, session_id: str) -> Session:
        session = self.sessions.get(session_id)
        if session is None:
            reaped = self.reaped_ids.get(session_id)
            if reaped is not None:
                raise ApiError(
                    404,
                    f"session {bounded(session_id, 100)!r} was reaped after {reaped:g} s idle (the server's "
                    f"{'--ttl' if reaped == self.ttl else '--compat-ttl'}); "
                    "create a new one with POST /sessions",
                    "SessionNotFound",
                )
            timed_out = self.timed_out_ids.get(session_id)
            if timed_out is not None:
                raise ApiError(
                    404,
                    f"session {bounded(session_id, 100)!r} was closed when a call ran past the server's call "
                    f"timeout ({timed_out:g} s); create a new one with POST /sessions",
                    "SessionNotFound",
                )
            ttl = f", reaped after {self.ttl:g} s idle" if self.ttl else ""
            raise ApiError(
                404,
                f"unknown session {session_id!r}: it was closed{ttl}, or never existed here "
                "(a restarted server forgets its sessions); create one with POST /sessions",
                "SessionNotFound",
            )
        return session

    async def close(self, session: Session) -> bool:
        """Close `session` once its current call (if any) is done; whether this call closed it (False: it
        was closed already, e.g. by a concurrent close waiting on the same call)."""
        async with session.lock:
            if session.closed:
                return False
            session.closed = True
            self.sessions.pop(session.id, None)
            if session.compat_id is not None:
                self.compat.pop(session.compat_id, None)
            await self.pool.run(session.slot, session.do_close)
            self.pool.release(session.slot)
            return True

    async def call(self, session: Session, fn: Any, *args: Any, seq: int | None = None) -> Any:
        """Run `fn(*args)` (a `Session.do_*` method) on the session's thread, under its lock.

        A repeated `seq` returns the reply of the call that carried it without running `fn` again.
        """
        async with session.lock:
            if session.closed:
                self.get(session.id)  # raises the 404 of a session that is gone
            session.last_used = time.monotonic()
            try:
                call = (fn.__name__, *args)
                if seq is not None and (replayed := session.replay(seq, call)) is not None:
                    return replayed
                try:
                    reply = await self.pool.run(
                        session.slot, fn, *args, timeout=self.call_timeout, abandon=session.do_close
                    )
                except CallTimeout as error:
                    raise self._abandon(session, fn.__name__, error.seconds) from None
                if seq is not None:
                    session.last_seq, session.last_call, session.last_reply = seq, call, reply
                return reply
            finally:
                session.last_used = time.monotonic()

    def _abandon(self, session: Session, what: str, seconds: float) -> ApiError:
        """Close `session`, whose call `what` ran past the call timeout (its env is left to the retired
        thread, which closes it if the call ever returns); the reply for that call."""
        session.closed = True
        self.sessions.pop(session.id, None)
        if session.compat_id is not None:
            self.compat.pop(session.compat_id, None)
        self.pool.release(session.slot)
        self.timed_out_ids[session.id] = seconds
        while len(self.timed_out_ids) > REAPED_MEMORY:
            self.timed_out_ids.popitem(last=False)
        _log.warning(
            "%s of session %s (%s) ran past %g s; the session is closed", what, session.id, session.env_id, seconds
        )
        return ApiError(
            504,
            f"{what.removeprefix('do_')} of session {session.id} ({session.env_id}) did not return within the server's "
            f"call timeout of {seconds:g} s: the session is closed and its env abandoned; create a new session",
            "EnvCallTimeout",
        )

    async def batch(self, calls: list[Any]) -> bytes:
        """Run one call per session (objects with `session_id`, `op` "reset"/"step", `action`, `seed`,
        `options`, `seq`), concurrently across worker threads; answer `{"results": [...]}` in call order.

        A failed call gets `{"ok": false, "status", "detail", "error_type"}` and fails alone.
        """
        ids = [call.session_id for call in calls]
        if len(set(ids)) != len(ids):
            repeated = {session_id: n for session_id, n in Counter(ids).items() if n > 1}
            raise ApiError(422, f"a batch holds at most one call per session; repeated: {repeated}", "ValueError")
        results: list[bytes] = [b""] * len(calls)
        found: list[tuple[int, Session]] = []
        sessions = self.sessions
        for i, session_id in enumerate(ids):
            session = sessions.get(session_id)
            if session is not None:
                found.append((i, session))
                continue
            try:
                self.get(session_id)  # raises the 404 saying why it is gone
            except ApiError as error:
                results[i] = _batch_error(error)

        def run_group(items: list[tuple[int, Session, Any]], progress: _Progress) -> list[tuple[int, bytes]]:
            out = progress.out
            for k, (i, session, call) in enumerate(items):
                with progress.lock:  # a timed-out group stops here; its later calls run on the fresh thread
                    if progress.abandoned:
                        break
                    progress.current = k
                restart_clock()  # each call of the group gets the whole call timeout
                try:
                    if call.op == "step":
                        fn, args = session.do_step, (call.action,)
                    else:
                        fn, args = session.do_reset, (call.seed, call.options)
                    key = (fn.__name__, *args)
                    reply = session.replay(call.seq, key) if call.seq is not None else None
                    if reply is None:
                        reply = fn(*args)
                    if call.seq is not None:
                        session.last_seq, session.last_call, session.last_reply = call.seq, key, reply
                    out.append((i, b'{"ok":true,' + reply[1:]))
                except ApiError as error:
                    out.append((i, _batch_error(error)))
            return out

        # Locks are taken in one global order, so that two batches sharing sessions cannot deadlock.
        # Taken one by one (an exit stack's context per lock costs more than a TextCraft step) and released
        # in reverse order, whatever happens.
        held: list[asyncio.Lock] = []
        try:
            for _, session in sorted(found, key=lambda item: item[1].id):
                await session.lock.acquire()
                held.append(session.lock)
            groups: dict[int, list[tuple[int, Session, Any]]] = {}
            now = time.monotonic()
            for i, session in found:
                if session.closed:
                    results[i] = _batch_error(
                        ApiError(404, f"session {session.id!r} was closed meanwhile", "SessionNotFound")
                    )
                    continue
                session.last_used = now
                groups.setdefault(session.slot, []).append((i, session, calls[i]))
            if len(groups) == 1:  # one thread (a `shared_server_thread` env): no task to gather
                ((slot, items),) = groups.items()
                done = [await self._run_group(slot, run_group, items)]
            else:
                done = await asyncio.gather(
                    *(self._run_group(slot, run_group, items) for slot, items in groups.items())
                )
            now = time.monotonic()
            for _, session in found:
                session.last_used = now
        finally:
            for lock in reversed(held):
                lock.release()
        for group in done:
            for i, reply in group:
                results[i] = reply
        return b'{"results":[' + b",".join(results) + b"]}"

    async def _run_group(
        self, slot: int, run_group: Any, items: list[tuple[int, Session, Any]]
    ) -> list[tuple[int, bytes]]:
        """A batch's calls on one thread; past the call timeout, the hung call is answered 504 and the
        calls after it run on the slot's fresh thread."""
        progress = _Progress()

        def abandon() -> None:
            items[progress.current][1].do_close()

        try:
            return await self.pool.run(slot, run_group, items, progress, timeout=self.call_timeout, abandon=abandon)
        except CallTimeout as error:
            with progress.lock:
                progress.abandoned = True
                done, k = list(progress.out), progress.current
            i, session, call = items[k]
            failed = (i, _batch_error(self._abandon(session, f"do_{call.op}", error.seconds)))
            rest = items[k + 1 :]
            return [*done, failed, *(await self._run_group(slot, run_group, rest) if rest else [])]

    def new_compat_id(self, session: Session) -> int:
        session.compat_id = next(self._compat_ids)
        self.compat[session.compat_id] = session.id
        return session.compat_id

    def reaped_after(self, key: str | int) -> float | None:
        """The idle TTL after which the session with id or compat id `key` was reaped; None if it was not."""
        return self.reaped_ids.get(key)

    def _remember_reaped(self, session: Session) -> None:
        assert session.ttl is not None
        for key in (session.id, session.compat_id):
            if key is not None:
                self.reaped_ids[key] = session.ttl
        while len(self.reaped_ids) > REAPED_MEMORY:
            self.reaped_ids.popitem(last=False)

    # ---- the reaper and shutdown -----------------------------------------------------------------
    def start(self) -> None:
        """Start the idle reaper (call on the server's event loop)."""
        if (self.ttl is not None or self.compat_ttl is not None) and self._reaper is None:
            self._reaper = asyncio.get_running_loop().create_task(self._reap_forever())

    async def _reap_forever(self) -> None:
        shortest = min(ttl for ttl in (self.ttl, self.compat_ttl) if ttl is not None)
        interval = min(max(shortest / 4, 0.05), 10.0)
        while True:
            await asyncio.sleep(interval)
            try:
                await self.reap()
            except Exception:  # keep reaping whatever one close did
                _log.exception("reaping idle sessions failed")

    async def reap(self) -> int:
        """Close every session idle for longer than its TTL; return how many were closed."""
        now = time.monotonic()
        idle = [
            s for s in self.sessions.values() if s.ttl is not None and not s.lock.locked() and now - s.last_used > s.ttl
        ]
        if not idle:
            return 0
        for session in idle:
            self._remember_reaped(session)
        # counted before the closes, which drop each session from the listing before its env is closed: a
        # session gone from /sessions is always in /health's count
        self.reaped += len(idle)
        await asyncio.gather(*(self.close(session) for session in idle))
        _log.info("reaped %d idle sessions", len(idle))
        await asyncio.to_thread(_trim_memory)
        return len(idle)

    async def shutdown(self) -> None:
        """Close every session (waiting for calls in flight), then stop the worker threads."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        await asyncio.gather(*(self.close(session) for session in list(self.sessions.values())))
        self.pool.shutdown()  # every queue is empty by now; this only joins the threads
