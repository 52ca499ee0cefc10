"""A bounded pool of worker threads for blocking env calls, with each session pinned to one thread.

Env calls block (minigrid's Python, a JVM round trip, a browser), so the event loop hands them to
this pool and keeps serving other sessions. Every call of a session runs on the same thread: some
backends must be driven from the thread that started them (Playwright's sync API is bound to its
thread), and it keeps one session's calls in order even if a request is abandoned mid-call.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Any


def _resolve(future: asyncio.Future, result: Any, error: BaseException | None) -> None:
    if future.cancelled():
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
        self._queues: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(size)]
        self._load = [0] * size
        self._threads = [
            threading.Thread(target=self._work, args=(q,), name=f"{name}-{i}", daemon=True)
            for i, q in enumerate(self._queues)
        ]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _work(jobs: queue.SimpleQueue) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            loop, future, fn, args = job
            try:
                result, error = fn(*args), None
            except BaseException as exc:  # handed to the awaiting request, which answers with it
                result, error = None, exc
            with contextlib.suppress(RuntimeError):  # the loop closed while the call ran (server shut down)
                loop.call_soon_threadsafe(_resolve, future, result, error)
            # Drop this call's references while waiting for the next: an idle thread must not keep
            # a closed session's env (and its memory) alive.
            del job, future, fn, args, result, error

    def assign(self) -> int:
        """The slot (thread index) for a new session: the thread serving the fewest sessions."""
        slot = min(range(self.size), key=self._load.__getitem__)
        self._load[slot] += 1
        return slot

    def release(self, slot: int) -> None:
        """Forget one session of `slot` (it was closed)."""
        self._load[slot] = max(0, self._load[slot] - 1)

    async def run(self, slot: int, fn: Callable[..., Any], *args: Any) -> Any:
        """Run `fn(*args)` on the thread of `slot`; return its result or raise its exception."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._queues[slot].put((loop, future, fn, args))
        return await future

    def shutdown(self, timeout: float = 10.0) -> None:
        """Let every thread finish its queued calls, then stop it (waits up to `timeout` seconds each)."""
        for jobs in self._queues:
            jobs.put(None)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout)
