"""What the rollout engine plays and what it returns: a `Task` (an env id and the reset arguments that pick
its task), an `Episode` (its token sequence, laid out as `agentgym_train.rollout.engine` describes, and what
happened), and `summarize`, a batch's rates."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Task:
    """One episode to run: an env id and the reset arguments that pick its task."""

    env_id: str
    task_id: str | int | None = None
    split: str | None = None
    seed: int | None = None

    def options(self) -> dict[str, Any] | None:
        options = {k: v for k, v in (("task_id", self.task_id), ("split", self.split)) if v is not None}
        return options or None


@dataclass
class Episode:
    """One finished episode: its token sequence and what happened."""

    task: Task
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    episode_return: float = 0.0
    turns: int = 0
    success: bool = False
    terminated: bool = False
    truncated: bool = False  # the turn limit (max_turns) or the env's own step budget
    budget_truncated: bool = False  # max_completion_length would have been exceeded
    invalid_replies: int = 0
    category: str | None = None
    kind: str | None = None  # the task's kind where the env reports one (info["kind"])
    stats: dict[str, Any] = field(default_factory=dict)
    env_error: str | None = None  # why the env failed (an exception or a timeout); the episode ended there
    stopped_by: list[str] = field(default_factory=list)  # per reply: "eos", "stop_string" or "budget"
    max_turn_tokens: int = 0  # this episode's reply budget
    stop_strings: tuple[str, ...] = ()  # this episode's stop strings
    turn_rewards: list[float] = field(default_factory=list)  # what the env paid on each turn
    state_keys: list[str] = field(default_factory=list)  # per turn: its start state (with `record_states`)
    reply_spans: list[tuple[int, int]] = field(default_factory=list)  # per reply: [start, end) in completion_ids
    versions: list[int] = field(default_factory=list)  # per completion token: its policy version (rollout.versioned)
    turn_prompts: list[list[int]] = field(default_factory=list)  # per reply: its prompt (managed context only)

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated or self.budget_truncated or self.env_error is not None

    @property
    def stop_string_hits(self) -> int:
        """Replies that a stop string ended."""
        return self.stopped_by.count("stop_string")

    @property
    def replies_cut(self) -> int:
        """Replies that the reply budget cut (no end token, no stop string)."""
        return self.stopped_by.count("budget")


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean return, success rate, mean turns, truncation, invalid-reply and env-error rates of a batch, and
    how often replies ended at a stop string or were cut by the reply budget (per reply)."""
    n = max(1, len(episodes))
    turns = sum(e.turns for e in episodes)
    replies = sum(len(e.stopped_by) for e in episodes)
    return {
        "return": sum(e.episode_return for e in episodes) / n,
        "success": sum(e.success for e in episodes) / n,
        "turns": turns / n,
        "truncated": sum(e.truncated or e.budget_truncated for e in episodes) / n,
        "budget_truncated": sum(e.budget_truncated for e in episodes) / n,
        "invalid_reply_rate": sum(e.invalid_replies for e in episodes) / max(1, turns),
        "stop_string_rate": sum(e.stop_string_hits for e in episodes) / max(1, replies),
        "reply_cut_rate": sum(e.replies_cut for e in episodes) / max(1, replies),
        "env_error_rate": sum(e.env_error is not None for e in episodes) / n,
        "model_tokens": sum(sum(e.env_mask) for e in episodes) / n,
        "completion_tokens": sum(len(e.completion_ids) for e in episodes) / n,
    }
