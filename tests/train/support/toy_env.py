"""A toy multi-turn task for learning tests: a random-init model starts near 0.25 success.

Each of `TURNS` turns shows a cue, "even" or "odd" (drawn from the task's seed); the reply is right
when the parity of its length in characters matches the cue. One wrong reply ends the episode
(failed); all right is success. A random-init model writes replies of arbitrary length, so it is
right about half the time per turn (~0.25 over two turns); a policy has to read each cue and pick
its reply length accordingly. Replies are taken as they are (the "raw" parser).
"""

from __future__ import annotations

import random
import zlib
from typing import Any

import gymnasium as gym

from agentgym_envs.core import TextEnv
from agentgym_wrappers.parsers import register_parser

ENV_ID = "AgentGymTest/Parity-v0"
TURNS = 2
CUE_REPEATS = 8
register_parser("raw", lambda reply: reply)


class ParityEnv(TextEnv):
    """Answer each cue with a reply of even or odd length (a test task, not a registered scenario)."""

    default_max_turns = TURNS
    action_format = "raw"
    system_prompt = "Reply to each cue. An even cue wants a reply of even length, an odd cue one of odd length."

    def tasks(self, split: str = "train") -> list[str]:
        return [f"{split}-{i}" for i in range(1000 if split == "train" else 100)]

    def split_of(self, task_id: str) -> str | None:
        split, _, index = task_id.partition("-")
        return split if split in self.splits and index.isdigit() else None

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        rng = random.Random(zlib.crc32(task_id.encode()))
        self._cues = [rng.choice(("even", "odd")) for _ in range(TURNS)]
        self._turn = 0
        return self._cue(0), {"category": "parity", "instruction": "match each cue"}

    def _cue(self, turn: int) -> str:
        # The cue word is repeated so that, even at random init, it dominates what the model attends
        # to: learning starts without a long symmetry-breaking plateau.
        return f"Cue {turn + 1}: " + " ".join([self._cues[turn]] * CUE_REPEATS)

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        right = (len(action) % 2 == 0) == (self._cues[self._turn] == "even")
        self._turn += 1
        info = {"valid_action": True, "success": right and self._turn == TURNS}
        if not right:
            return "Wrong.", 0.0, True, False, info
        if self._turn == TURNS:
            return "All right!", 1.0, True, False, info
        return f"Right. {self._cue(self._turn)}", 0.0, False, False, info


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=ParityEnv)


def toy_corpus() -> list[str]:
    """Text for the toy model's tokenizer (every observation the env can show)."""
    cues = [f"Cue {k}: " + " ".join([c] * CUE_REPEATS) for k in (1, 2) for c in ("even", "odd")]
    return [ParityEnv.system_prompt, *cues * 20, "Right.", "Wrong.", "All right!"]
