"""Env calls with timeouts: many calls at once on daemon threads, each with a wall-clock limit.

The rollout engine makes and resets its envs and steps them through `run_calls`: an env that raises or
hangs ends only its own episode, and a hung call's thread is abandoned rather than waited for.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any


class EnvTimeoutError(TimeoutError):
    """An env call (reset or step) ran past the engine's `env_timeout`."""


def run_calls(calls: Sequence[Callable[[], Any]], workers: int, timeout: float | None) -> list[Any]:
    """Run `calls` concurrently, at most `workers` at a time, each with a wall-clock `timeout`.

    Returns, in order, each call's result or the exception it raised (an `EnvTimeoutError` for one
    that ran past `timeout`). A call that hangs cannot be killed in Python: its thread is abandoned
    (a daemon, so it never holds up the interpreter's exit) and frees its worker slot, so one hung env
    never starves the others or a later rollout.
    """
    results: list[Any] = [None] * len(calls)
    finished: dict[int, Any] = {}
    wake = threading.Condition()

    def body(k: int) -> None:
        try:
            out: Any = calls[k]()
        except Exception as error:  # the env's failure is this call's result
            out = error
        with wake:
            finished[k] = out
            wake.notify()

    pending = list(range(len(calls)))[::-1]
    deadlines: dict[int, float] = {}
    while pending or deadlines:
        while pending and len(deadlines) < max(1, workers):
            k = pending.pop()
            deadlines[k] = time.monotonic() + timeout if timeout is not None else float("inf")
            threading.Thread(target=body, args=(k,), name=f"agentgym-env-{k}", daemon=True).start()
        with wake:
            ready = [k for k in deadlines if k in finished]
            if not ready:
                wake.wait(max(0.0, min(deadlines.values()) - time.monotonic()) if timeout is not None else None)
                ready = [k for k in deadlines if k in finished]
        for k in ready:
            results[k] = finished[k]
            del deadlines[k]
        now = time.monotonic()
        for k in [k for k, deadline in deadlines.items() if now >= deadline and k not in finished]:
            results[k] = EnvTimeoutError(f"the env call took longer than env_timeout={timeout} s; abandoned")
            del deadlines[k]
    return results
