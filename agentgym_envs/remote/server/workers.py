"""A bounded pool of worker threads for blocking env calls, with each session pinned to one thread.

Env calls block (minigrid's Python, a JVM round trip, a browser), so the event loop hands them to
this pool and keeps serving other sessions. Every call of a session runs on the same thread: some
backends must be driven from the thread that started them (Playwright's sync API is bound to its
thread), and it keeps one session's calls in order even if a request is abandoned mid-call.

A call may have a timeout, counted from when its thread starts it (not while it waits its turn). A
call past it raises `CallTimeout` to its awaiter, and its thread, which a hung call may never give
back, is retired: a fresh thread takes over the slot and the calls queued behind the hung one, so
the slot's other sessions go on (a backend bound to the retired thread fails there, and says so).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

_log = logging.getLogger(__name__)


class CallTimeout(Exception):
    """An env call ran past its timeout; its thread was retired, and the call abandoned to it."""

    def __init__(self, seconds: float):
        super().__init__(f"the call did not return within {seconds:g} s")
        self.seconds = seconds


class _Job:
    """One call: what to run, the future its result goes to (None: nobody waits), and when it started."""

    __slots__ = ("args", "fn", "future", "loop", "started", "timer")

    def __init__(
        self, loop: asyncio.AbstractEventLoop | None, future: asyncio.Future | None, fn: Callable, args: tuple
    ):
        self.loop, self.future, self.fn, self.args = loop, future, fn, args
        self.started: float | None = None
        self.timer: asyncio.TimerHandle | None = None  # the timeout check re-armed while the call runs


_running = threading.local()


def restart_clock() -> None:
    """Count the running call's timeout afresh from now: a call that runs several env calls in a row
    (a batch's calls on one thread) calls this before each, so that each gets the whole timeout."""
    job = getattr(_running, "job", None)
    if job is not None:
        job.started = time.monotonic()


def _resolve(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.done():  # cancelled, or already failed with CallTimeout
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class WorkerPool:
    """`size` threads, each draining its own queue; sessions are assigned to the least-loaded one.

    Example:
        >>> import asyncio
        >>> pool = WorkerPool(2)
        >>> slot = pool.assign()
        >>> asyncio.run(pool.run(slot, sum, [1, 2, 3]))
        6
        >>> pool.release(slot); pool.shutdown()
    """

    def __init__(self, size: int, name: str = "agentgym-env"):
        if size < 1:
            raise ValueError(f"the worker pool needs at least one thread, got {size}")
        self.size = size
        self.name = name
        #: Threads retired because a call on them ran past its timeout.
        self.retired = 0
        self._generation = itertools.count(1)
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(size)]
        self._load = [0] * size
        self._threads = [self._start(i, q) for i, q in enumerate(self._queues)]

    def _start(self, slot: int, jobs: queue.SimpleQueue, generation: int = 0) -> threading.Thread:
        suffix = f".{generation}" if generation else ""
        thread = threading.Thread(target=self._work, args=(jobs,), name=f"{self.name}-{slot}{suffix}", daemon=True)
        thread.start()
        return thread

    @staticmethod
    def _work(jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            job.started = time.monotonic()
            _running.job = job
            try:
                result, error = job.fn(*job.args), None
            except BaseException as exc:  # handed to the awaiting request, which answers with it
                result, error = None, exc
            _running.job = None
            if job.future is None:  # nobody waits: a call left to a retired thread
                if error is not None:
                    _log.error("%s failed on a retired worker thread: %r", getattr(job.fn, "__name__", job.fn), error)
            else:
                with contextlib.suppress(RuntimeError):  # the loop closed while the call ran (server shut down)
                    job.loop.call_soon_threadsafe(_resolve, job.future, result, error)
            # Drop this call's references while waiting for the next: an idle thread must not keep
            # a closed session's env (and its memory) alive.
            del job, result, error

    def assign(self) -> int:
        """The slot (thread index) for a new session: the thread serving the fewest sessions."""
        slot = min(range(self.size), key=self._load.__getitem__)
        self._load[slot] += 1
        return slot

    def take(self, slot: int) -> int:
        """`slot` for a new session chosen by the caller (one more session on it); returns `slot`."""
        if not 0 <= slot < self.size:
            raise ValueError(f"no worker slot {slot}; the pool has slots 0 to {self.size - 1}")
        self._load[slot] += 1
        return slot

    def release(self, slot: int) -> None:
        """Forget one session of `slot` (it was closed)."""
        self._load[slot] = max(0, self._load[slot] - 1)

    async def run(
        self,
        slot: int,
        fn: Callable[..., Any],
        *args: Any,
        timeout: float | None = None,
        abandon: Callable[[], Any] | None = None,
    ) -> Any:
        """Run `fn(*args)` on the thread of `slot`; return its result or raise its exception.

        With `timeout` (seconds, from when the thread starts the call), a call past it raises
        `CallTimeout` and retires the thread; `abandon` then runs on the retired thread if the call
        ever returns there (e.g. to close the env the call hung in).
        """
        loop = asyncio.get_running_loop()
        job = _Job(loop, loop.create_future(), fn, args)
        self._queues[slot].put(job)
        if timeout is None:
            return await job.future
        # A timer, not a wait with a timeout: the hot routes pay one timer handle per call.
        timer = loop.call_later(timeout, self._check, slot, job, timeout, abandon)
        try:
            return await job.future
        finally:
            timer.cancel()
            if job.timer is not None:
                job.timer.cancel()

    def _check(self, slot: int, job: _Job, timeout: float, abandon: Callable[[], Any] | None) -> None:
        """On the event loop, `timeout` after the call was queued (and again until it is done): fail a call
        that has run for `timeout` since its thread started it (or restarted its clock) and retire the thread."""
        if job.future.done():
            return
        started = job.started
        left = timeout if started is None else started + timeout - time.monotonic()
        if left > 0:  # still queued behind other calls, or started late
            job.timer = job.loop.call_later(left, self._check, slot, job, timeout, abandon)
            return
        self._retire(slot, abandon)
        job.future.set_exception(CallTimeout(timeout))

    def _retire(self, slot: int, abandon: Callable[[], Any] | None) -> None:
        """Give `slot` a fresh thread and the calls queued on it; the old thread, stuck in a call, gets
        `abandon` and then the order to stop, both run only if that call ever returns."""
        old, new = self._queues[slot], queue.SimpleQueue()
        self._queues[slot] = new  # every put happens on the event loop: nothing is queued on `old` from now
        with contextlib.suppress(queue.Empty):
            while True:
                new.put(old.get_nowait())
        if abandon is not None:
            old.put(_Job(None, None, abandon, ()))
        old.put(None)
        self._threads[slot] = self._start(slot, new, next(self._generation))
        self.retired += 1
        _log.warning("a call on worker slot %d ran past its timeout; the slot has a fresh thread", slot)

    def shutdown(self, timeout: float = 10.0) -> None:
        """Let every thread finish its queued calls, then stop it (waits up to `timeout` seconds each)."""
        for jobs in self._queues:
            jobs.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
