"""ScalingInter-RL: the max-turn scheduler.

The AgentGym-RL paper trains with a short interaction horizon first (the agent learns to exploit
what it sees) and lengthens it in stages (then to explore and plan). `MaxTurnScheduler` holds that
schedule as (step, max_turns) pairs and sets the rollout engine's horizon before each training step;
its state is saved in checkpoints (`ExportableState`), so a run resumed at step 150 continues with
the horizon of step 150. `AdaptiveMaxTurnScheduler` raises the horizon when the logged truncation
rate and success curve say the current one is too short.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState

#: The paper's horizons per scenario and how many steps each stage lasts.
PRESETS: dict[str, tuple[tuple[int, ...], int]] = {
    "babyai": ((6, 13, 20), 100),
    "sciworld": ((10, 20, 30), 100),
    "deepsearch": ((5, 8, 10), 100),
    "textcraft": ((10, 20, 30), 100),
    "webarena": ((8, 12, 15), 80),
}


class MaxTurnScheduler(TrainerCallback, ExportableState):
    """Sets the rollout horizon from a schedule of `(first step, max_turns)` pairs.

    Args:
        schedule: `[(0, 6), (100, 13), (200, 20)]`: from step 0 the horizon is 6 turns, from step
            100 it is 13, and so on. The first pair must start at step 0.

    The trainer binds the callback to its rollout engine (`bind`); `on_step_begin` sets
    `engine.max_turns` before the step's generation.

    Example:
        >>> scheduler = MaxTurnScheduler.preset("babyai")
        >>> [scheduler.max_turns_at(step) for step in (0, 99, 100, 150, 250)]
        [6, 6, 13, 13, 20]
        >>> MaxTurnScheduler.preset("webarena").schedule
        [(0, 8), (80, 12), (160, 15)]
    """

    def __init__(self, schedule: Sequence[Sequence[int]]):
        pairs = sorted((int(step), int(turns)) for step, turns in schedule)
        if not pairs or pairs[0][0] != 0:
            raise ValueError(f"the schedule must start at step 0, e.g. [(0, 6), (100, 13)]; got {list(schedule)}")
        if any(turns < 1 for _, turns in pairs) or len({step for step, _ in pairs}) != len(pairs):
            raise ValueError(f"schedule steps must be distinct and max_turns >= 1; got {pairs}")
        self.schedule = pairs
        self.max_turns = pairs[0][1]
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
        """Horizons that change every `every` steps: `stages([6, 13, 20], 100)`."""
        return cls([(i * every, turns) for i, turns in enumerate(horizons)])

    def max_turns_at(self, step: int) -> int:
        return next(turns for start, turns in reversed(self.schedule) if step >= start)

    def bind(self, engine: Any) -> None:
        """Attach the rollout engine whose `max_turns` this callback sets."""
        self.engine = engine
        engine.max_turns = self.max_turns

    def _apply(self, step: int) -> None:
        self.max_turns = self.max_turns_at(step)
        if self.engine is not None:
            self.engine.max_turns = self.max_turns

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._apply(state.global_step)  # on resume, global_step is the checkpoint's

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._apply(state.global_step)

    def state(self) -> dict[str, Any]:
        return {
            "args": {"schedule": [list(pair) for pair in self.schedule]},
            "attributes": {"max_turns": self.max_turns},
        }


class AdaptiveMaxTurnScheduler(MaxTurnScheduler):
    """Raises the horizon through `horizons` when the current one holds the agent back.

    After at least `min_steps` steps at a horizon, it moves to the next one when the recent
    truncation rate (episodes cut by the turn limit) is at least `truncation_threshold` and the
    success rate has stopped improving (the mean of the last `window` logged values is within
    `plateau_tolerance` of the mean of the `window` before). It reads `episode/truncated` and
    `episode/success` from the trainer's logs.

    Example:
        >>> from types import SimpleNamespace
        >>> s = AdaptiveMaxTurnScheduler([4, 8], min_steps=2, window=2)
        >>> for step, success in enumerate([0.3, 0.3, 0.31, 0.3], start=1):
        ...     logs = {"episode/success": success, "episode/truncated": 0.6}
        ...     s.on_log(None, SimpleNamespace(global_step=step), None, logs)
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
        self.truncation_history.append(float(logs["episode/truncated"]))
        level = self.horizons.index(self.max_turns) if self.max_turns in self.horizons else 0
        since = state.global_step - self.schedule[-1][0]
        if level + 1 >= len(self.horizons) or since < self.min_steps or len(self.success_history) < 2 * self.window:
            return
        recent = self.success_history[-self.window :]
        before = self.success_history[-2 * self.window : -self.window]
        truncation = sum(self.truncation_history[-self.window :]) / self.window
        plateau = sum(recent) / self.window - sum(before) / self.window <= self.plateau_tolerance
        if truncation >= self.truncation_threshold and plateau:
            self.schedule.append((state.global_step, self.horizons[level + 1]))
            self._apply(state.global_step)

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
            "attributes": {"max_turns": self.max_turns},
        }
