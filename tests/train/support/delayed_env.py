"""The delayed env of the async rollout tests (tests/train/rollout/test_async_rollout.py,
test_continuous_batching.py): each step sleeps a task-specific, turn-specific time, so episodes finish their
env calls in an order unlike the order they started in; `Scripted` replies as a function of the episode's
context alone, so lockstep and async rollouts must play the very same episodes, token for token."""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import zlib
from typing import Any

import gymnasium as gym

from agentgym_envs.core import TextEnv
from agentgym_train.rollout import RolloutEngine, Task
from agentgym_wrappers.parsers import register_parser

ENV_ID = "AgentGymTest/Delayed-v0"
TURNS = 5
GATE = threading.Event()  # what a "gate@N" task's step N waits for
register_parser("raw", lambda reply: reply)


class DelayedEnv(TextEnv):
    """Replies are heard as they are; each step sleeps 0-24 ms (drawn from the task and turn).

    Task ids are `"<index>"` or `"<index>:<fault>"`: `raise@N` raises on step N, `hang@N` hangs on step N
    (for 60 s), `gate@N` waits on step N until `GATE` is set (at most 2 s). An episode ends with success
    when a reply says "stop", after `TURNS` turns otherwise; each turn with an even-length reply pays 0.1.
    """

    default_max_turns = TURNS
    action_format = "raw"
    system_prompt = "Say anything; say stop to finish."
    stop_strings = ("\nObservation:",)
    made = 0

    def __init__(self, render_mode: str | None = None):
        super().__init__(render_mode=render_mode)
        type(self).made += 1

    def tasks(self, split: str = "train") -> list[str]:
        return [str(i) for i in range(64)]

    def split_of(self, task_id: str) -> str | None:
        return "train"

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._task_id, self._turn, self._score, self._heard = task_id, 0, 0.0, 0
        return f"task {task_id}: say anything", {"category": "delayed", "instruction": "say anything"}

    def state_key(self) -> Any:
        return (self._turn, self._heard % 3)

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._turn += 1
        kind, _, at = self._task_id.partition(":")[2].partition("@")
        if kind and int(at) == self._turn:
            if kind == "raise":
                raise RuntimeError(f"the backend died on turn {self._turn}")
            if kind == "hang":
                time.sleep(60)
            if kind == "gate":
                GATE.wait(2)
        time.sleep((zlib.crc32(f"{self._task_id}/{self._turn}".encode()) % 25) / 1000)
        self._heard += len(action)
        self._score += 0.1 * (len(action) % 2 == 0)
        stop = "stop" in action
        info = {"valid_action": True, "success": stop}
        return f"turn {self._turn}: heard {len(action)} characters", min(self._score, 1.0), stop, False, info


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=DelayedEnv)

REPLIES = ["hello", "I will stop now", "a long reply that runs well past the reply budget of twelve tokens", "odd",
           "two\nObservation: made up", "fine then"]  # fmt: skip


def task_of(tokenizer, context: list[int]) -> str:
    """The task id an episode's context names (its first observation says it)."""
    return re.search(r"task (\S+):", tokenizer.decode(context)).group(1)


class Scripted:
    """A TurnGenerator whose reply and logprobs depend only on the context; logs each call's tasks."""

    def __init__(self, tokenizer, on_call=None, replies=tuple(REPLIES)):
        self.tokenizer, self.on_call, self.replies, self.calls = tokenizer, on_call, replies, []

    def __call__(self, contexts, max_new_tokens, stop=None):
        self.calls.append([(task_of(self.tokenizer, c), len(c)) for c in contexts])
        if self.on_call is not None:
            self.on_call(self.calls)
        out = []
        for context in contexts:
            digest = zlib.crc32(str(context).encode())
            ids = self.tokenizer(self.replies[digest % len(self.replies)], add_special_tokens=False)["input_ids"]
            if digest % 7 or len(self.replies) == 1:  # most replies end on EOS; the others run to the budget
                ids = [*ids, self.tokenizer.eos_token_id]
            ids = ids[:max_new_tokens]
            out.append((ids, [-((digest >> k) % 97) / 50 for k in range(len(ids))]))
        return out


def engine(tokenizer, mode: str, **kwargs) -> RolloutEngine:
    options = {"max_completion_length": 160, "max_turn_tokens": 20, "num_env_workers": 16, "record_states": True}
    return RolloutEngine(tokenizer, rollout_mode=mode, **{**options, **kwargs})


def fields(episode) -> dict[str, Any]:
    """Everything an episode records, less the wall time its env measured."""
    record = dataclasses.asdict(episode)
    record["stats"] = {k: v for k, v in record["stats"].items() if k != "wall_time"}
    return record


TASKS = [Task(ENV_ID, str(i), seed=i) for i in range(12)] + [
    Task(ENV_ID, "12:raise@2"),
    Task(ENV_ID, "13:raise@1"),
    Task(ENV_ID, "14", seed=3),
]
