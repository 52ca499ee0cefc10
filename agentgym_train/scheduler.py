"""ScalingInter-RL: the max-turn scheduler.

The AgentGym-RL paper trains with a short interaction horizon first (the agent learns to exploit
what it sees) and lengthens it in stages (then to explore and plan). Its stages last a number of
training steps of the RL loop, each one rollout batch: `MaxTurnScheduler` holds the schedule as
(rollout batch, max_turns) pairs and sets the rollout engine's horizon before each rollout batch.
It counts rollout batches, not optimiser updates: with TRL's `num_iterations`, `steps_per_generation`
or gradient accumulation one batch feeds several updates (or micro-steps), and the horizon still
changes after exactly the scheduled number of batches. The trainer counts its rollout batches and
tells the scheduler before and after each (`before_rollout`, `after_rollout`); the count is saved in
checkpoints with the scheduler (`ExportableState`), so a resumed run continues with the right
horizon. `AdaptiveMaxTurnScheduler` raises the horizon when the logged turn-limit truncation rate
and success curve say the current one is too short.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

#: The paper's horizons per scenario and how many training steps (rollout batches) each stage lasts.
PRESETS: dict[str, tuple[tuple[int, ...], int]] = {
    "babyai": ((6, 13, 20), 100),
    "sciworld": ((10, 20, 30), 100),
    "deepsearch": ((5, 8, 10), 100),
    "textcraft": ((10, 20, 30), 100),
    "webarena": ((8, 12, 15), 80),
}


class MaxTurnScheduler(TrainerCallback, ExportableState):
    """Sets the rollout horizon from a schedule of `(first rollout batch, max_turns)` pairs.

    Args:
        schedule: `[(0, 6), (100, 13), (200, 20)]`: rollout batches 0-99 run with a horizon of 6
            turns, batches 100-199 with 13, and so on. The first pair must start at batch 0.

    The trainer binds the callback to its rollout engine (`bind`) and calls `before_rollout(done)`
    before each training rollout batch (`done`: batches generated so far), which sets
    `engine.max_turns`, and `after_rollout(done)` after it. `rollouts` (batches done) is saved in
    checkpoints.

    Examples:
        >>> scheduler = MaxTurnScheduler.preset("babyai")
        >>> [scheduler.max_turns_at(batch) for batch in (0, 99, 100, 150, 250)]
        [6, 6, 13, 13, 20]
        >>> MaxTurnScheduler.preset("webarena").schedule
        [(0, 8), (80, 12), (160, 15)]
    """

    def __init__(self, schedule: Sequence[Sequence[int]]):
        pairs = sorted((int(batch), int(turns)) for batch, turns in schedule)
        if not pairs or pairs[0][0] != 0:
            raise ValueError(
                f"the schedule must start at rollout batch 0, e.g. [(0, 6), (100, 13)]; got {list(schedule)}"
            )
        if any(turns < 1 for _, turns in pairs) or len({batch for batch, _ in pairs}) != len(pairs):
            raise ValueError(f"schedule batches must be distinct and max_turns >= 1; got {pairs}")
        self.schedule = pairs
        self.max_turns = pairs[0][1]
        self.rollouts = 0  # rollout batches generated so far (restored from checkpoints)
        self.engine: Any = None

    @classmethod
    def preset(cls, name: str, every: int | None = None) -> MaxTurnScheduler:
        """The paper's schedule for `name` (babyai, sciworld, deepsearch, textcraft, webarena)."""
        key = name.lower().replace("-", "").replace("_", "").replace(" ", "")
        if key not in PRESETS:
            raise ValueError(f"no max-turn preset {name!r}; choose from {sorted(PRESETS)}")
        horizons, default_every = PRESETS[key]
        every = default_every if every is None else every
        return cls([(i * every, turns) for i, turns in enumerate(horizons)])

    @classmethod
    def stages(cls, horizons: Sequence[int], every: int) -> MaxTurnScheduler:
        """Horizons that change every `every` rollout batches: `stages([6, 13, 20], 100)`."""
        return cls([(i * every, turns) for i, turns in enumerate(horizons)])

    def max_turns_at(self, batch: int) -> int:
        """The horizon of rollout batch `batch` (counted from 0)."""
        return next(turns for start, turns in reversed(self.schedule) if batch >= start)

    def bind(self, engine: Any) -> None:
        """Attach the rollout engine whose `max_turns` this callback sets."""
        self.engine = engine
        engine.max_turns = self.max_turns

    def _apply(self, batch: int) -> None:
        self.max_turns = self.max_turns_at(batch)
        if self.engine is not None:
            self.engine.max_turns = self.max_turns

    def before_rollout(self, done: int) -> None:
        """Called by the trainer before each training rollout batch; `done` batches came before it."""
        self.rollouts = done
        self._apply(done)

    def after_rollout(self, done: int) -> None:
        """Called by the trainer after each training rollout batch; `done` counts it."""
        self.rollouts = done

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._apply(self.rollouts)  # on resume, the checkpoint's count

    def state(self) -> dict[str, Any]:
        return {
            "args": {"schedule": [list(pair) for pair in self.schedule]},
            "attributes": {"max_turns": self.max_turns, "rollouts": self.rollouts},
        }


class AdaptiveMaxTurnScheduler(MaxTurnScheduler):
    """Raises the horizon through `horizons` when the current one holds the agent back.

    After at least `min_steps` rollout batches at a horizon, it moves to the next one when the
    recent rate of episodes cut by the turn limit is at least `truncation_threshold` and the
    success rate has stopped improving (the mean of the last `window` logged values is within
    `plateau_tolerance` of the mean of the `window` before). It reads `episode/success`,
    `episode/truncated` and `episode/budget_truncated` from the trainer's logs: an episode cut by
    the token budget (`max_completion_length`) is not held back by the horizon, so the turn-limit
    rate is `episode/truncated - episode/budget_truncated` (the former counts both causes).

    Examples:
        >>> s = AdaptiveMaxTurnScheduler([4, 8], min_steps=2, window=2)
        >>> for done, success in enumerate([0.3, 0.3, 0.31, 0.3], start=1):
        ...     s.after_rollout(done)
        ...     s.on_log(None, None, None, {"episode/success": success, "episode/truncated": 0.6})
        >>> s.max_turns, s.schedule
        (8, [(0, 4), (4, 8)])
    """

    def __init__(
        self,
        horizons: Sequence[int],
        min_steps: int = 50,
        truncation_threshold: float = 0.3,
        window: int = 5,
        plateau_tolerance: float = 0.02,
        success_history: list[float] | None = None,
        truncation_history: list[float] | None = None,
        schedule: Sequence[Sequence[int]] | None = None,
    ):
        self.horizons = [int(h) for h in horizons]
        if not self.horizons or sorted(self.horizons) != self.horizons:
            raise ValueError(f"horizons must be a non-empty increasing list, got {list(horizons)}")
        super().__init__(schedule or [(0, self.horizons[0])])
        self.min_steps = min_steps
        self.truncation_threshold = truncation_threshold
        self.window = window
        self.plateau_tolerance = plateau_tolerance
        self.success_history = list(success_history or [])
        self.truncation_history = list(truncation_history or [])

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, float] | None = None, **kwargs: Any) -> None:
        logs = logs or {}
        if "episode/success" not in logs or "episode/truncated" not in logs:
            return
        self.success_history.append(float(logs["episode/success"]))
        turn_limit = float(logs["episode/truncated"]) - float(logs.get("episode/budget_truncated", 0.0))
        self.truncation_history.append(max(turn_limit, 0.0))
        level = self.horizons.index(self.max_turns) if self.max_turns in self.horizons else 0
        since = self.rollouts - self.schedule[-1][0]
        if level + 1 >= len(self.horizons) or since < self.min_steps or len(self.success_history) < 2 * self.window:
            return
        recent = self.success_history[-self.window :]
        before = self.success_history[-2 * self.window : -self.window]
        truncation = sum(self.truncation_history[-self.window :]) / self.window
        plateau = sum(recent) / self.window - sum(before) / self.window <= self.plateau_tolerance
        if truncation >= self.truncation_threshold and plateau:
            self.schedule.append((self.rollouts, self.horizons[level + 1]))
            self._apply(self.rollouts)

    def state(self) -> dict[str, Any]:
        return {
            "args": {
                "horizons": self.horizons,
                "min_steps": self.min_steps,
                "truncation_threshold": self.truncation_threshold,
                "window": self.window,
                "plateau_tolerance": self.plateau_tolerance,
                "success_history": self.success_history,
                "truncation_history": self.truncation_history,
                "schedule": [list(pair) for pair in self.schedule],
            },
            "attributes": {"max_turns": self.max_turns, "rollouts": self.rollouts},
        }
