"""A test env whose task ids say how its backend fails: raise or hang, at reset or on a chosen turn.

Task ids are `"<index>:<fault>"` with fault `ok`, `raise@N`, `hang@N` (N = 0: at reset, else on turn
N), or `once@N` (raise on turn N in the first episode of that task in this process only, so that one
episode of a GRPO group fails and its siblings do not). Every step is a valid action that pays 0.5
on turn 1 and the rest on turn `TURNS`, so an episode that fails late would have a return to lose.
A hung call waits on `RELEASE` (tests set it when they are done) so that no thread outlives them long.
"""

from __future__ import annotations

import threading
from typing import Any

import gymnasium as gym

from agentgym_envs.core import TextEnv
from agentgym_wrappers.parsers import register_parser

ENV_ID = "AgentGymTest/Faulty-v0"
TURNS = 3
FAULTS = ("ok", "raise@0", "raise@1", "raise@2", "hang@0", "hang@1", "hang@2", "once@1")
RELEASE = threading.Event()
register_parser("raw", lambda reply: reply)


class FaultyEnv(TextEnv):
    """A stand-in for a backend that dies (a JVM, a browser, a server): it fails where its task says."""

    default_max_turns = TURNS
    action_format = "raw"
    system_prompt = "Say anything."
    made = 0  # instances created (fresh envs replace failed ones)
    closed = 0  # instances closed
    failed_once: set[str] = set()

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        type(self).made += 1
        self._open = True

    def tasks(self, split: str = "train") -> list[str]:
        return [f"{i}:{fault}" for i, fault in enumerate(FAULTS * 4)]

    def _fault(self, turn: int) -> None:
        kind, _, at = self._task_id.split(":")[1].partition("@")
        if kind == "ok" or int(at) != turn:
            return
        if kind == "hang":
            RELEASE.wait(60)
            raise RuntimeError("released after hanging")
        if kind == "once":
            if self._task_id in type(self).failed_once:
                return
            type(self).failed_once.add(self._task_id)
        raise RuntimeError(f"the backend died on turn {turn}")

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._task_id, self._turn = task_id, 0
        self._fault(0)
        return f"task {task_id}: say anything", {"category": "faulty", "instruction": "say anything"}

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        self._fault(self._turn)
        score = 1.0 if self._turn == TURNS else 0.5
        info = {"valid_action": True, "success": self._turn == TURNS}
        return f"turn {self._turn} heard", score, self._turn == TURNS, False, info

    def close(self) -> None:
        if self._open:
            type(self).closed += 1
            self._open = False
        super().close()


# By name, not by class: pytest's doctest collection imports this file under another module name too,
# and the tests read the counters of the class that `import faulty_env` gives them.
if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point="faulty_env:FaultyEnv")
