"""The SciWorld expert: replays ScienceWorld's gold action sequence for the task."""

from __future__ import annotations

from typing import Any


class ExpertStuckError(RuntimeError):
    """The gold path is used up, but the episode has not ended."""


class SciWorldExpert:
    """Replays a gold action sequence (from `SciWorldEnv.gold_actions`), one action per `act`.

    ScienceWorld's gold agent plans from the task's initial state, so the expert must start right
    after `reset`; it ignores the observations. Gold paths reach the full score on the packaged
    sample of test tasks (see `benchmarks/sciworld_expert.py` for the measured rate).
    """

    def __init__(self, actions: list[str]):
        self._actions = list(actions)
        self._next = 0

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next gold action."""
        if self._next >= len(self._actions):
            raise ExpertStuckError(f"the gold path ({len(self._actions)} actions) is used up but the episode goes on")
        self._next += 1
        return self._actions[self._next - 1]
