"""BabyAI text env vs raw minigrid: random-action steps per second, measured in one run.

Issue 39's target: the text env keeps >= 0.9x the raw minigrid step rate (issue 7 asked 0.5x). Two
workloads, each run on both sides from the same seeds, resetting when an episode ends; the sides
alternate in slices of a quarter second, so that both run under the same load on a busy machine:

- `random`: uniformly random primitives (minigrid's 7 action indices; our 6 primitive texts plus
  `check available actions`). Our env answers impossible actions without stepping minigrid.
- `turns`: random `turn left` / `turn right` only, which always step minigrid: the honest
  per-step overhead of writing the observation text.

    python benchmarks/babyai_speed.py [--seconds 3] [--levels GoToRedBall GoToLocal BossLevel]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import agentgym_envs  # noqa: F401

#: Issue 39's target: the text env keeps at least this share of raw minigrid's step rate (issue 7 asked 0.5).
TARGET_RATIO = 0.9
#: Seconds per slice: the two sides alternate slice by slice (see `measure`).
SLICE_S = 0.25
TEXT_ACTIONS = ["turn left", "turn right", "move forward", "pick up", "drop", "toggle", "check available actions"]


class _Side:
    """One side of the comparison (raw minigrid or the text env): random steps from its own seeds, resetting
    when an episode ends, timed slice by slice so that both sides run under the same load."""

    def __init__(self, step: Callable[[int], bool], reset: Callable[[int], Any], n_actions: int):
        self.step, self.reset, self.n_actions = step, reset, n_actions
        self.rng = np.random.default_rng(0)
        self.seed = self.steps = 0
        self.elapsed = 0.0
        self.resets: list[float] = []
        self.rates: list[float] = []
        self._reset()

    def _reset(self) -> None:
        r0 = time.perf_counter()
        self.reset(self.seed)
        self.resets.append(time.perf_counter() - r0)

    def run(self, seconds: float) -> None:
        """Random steps (and the resets they lead to) for `seconds`."""
        steps, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            for action in self.rng.integers(self.n_actions, size=64):
                steps += 1
                if self.step(int(action)):
                    self.seed += 1
                    self._reset()
        elapsed = time.perf_counter() - t0
        self.steps, self.elapsed = self.steps + steps, self.elapsed + elapsed
        self.rates.append(steps / elapsed)


def measure(level: str, seconds: float, n_actions: int, slice_s: float = SLICE_S) -> dict[str, Any]:
    """Both sides in alternating slices of `slice_s` until each has run `seconds`: on a loaded machine the
    load changes over seconds, and sides timed one after the other would each see a different load."""
    raw = gym.make(f"BabyAI-{level}-v0" if level != "GoToObjS6" else "BabyAI-GoToObjS6-v1")
    text = gym.make(f"AgentGym/BabyAI-{level}-v0")

    def raw_step(a: int) -> bool:
        _, _, term, trunc, _ = raw.step(a)
        return term or trunc

    def text_step(a: int) -> bool:
        _, _, term, trunc, _ = text.step(TEXT_ACTIONS[a])
        return term or trunc

    sides = (
        _Side(raw_step, lambda s: raw.reset(seed=s), n_actions),
        _Side(text_step, lambda s: text.reset(seed=s), n_actions),
    )
    while sides[0].elapsed < seconds or sides[1].elapsed < seconds:
        for side in sides:
            side.run(min(slice_s, max(seconds - side.elapsed, 0.01)))
    raw_side, text_side = sides
    raw_rate, text_rate = raw_side.steps / raw_side.elapsed, text_side.steps / text_side.elapsed
    pairs = [t / r for r, t in zip(raw_side.rates, text_side.rates, strict=False)]
    return {
        "raw_steps_per_s": raw_rate,
        "text_steps_per_s": text_rate,
        "ratio": text_rate / raw_rate,
        "ratio_median_of_slices": float(np.median(pairs)),
        "slices": len(pairs),
        "raw_reset_ms": 1000 * float(np.median(raw_side.resets)),
        "text_reset_ms": 1000 * float(np.median(text_side.resets)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--levels", nargs="+", default=["GoToRedBall", "GoToLocal", "BossLevel"])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "babyai_speed.json"))
    parser.add_argument("--quick", action="store_true", help="one level, 0.3 s per side (agentgym bench --quick)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.levels = 0.4, ["GoToLocal"]
    results = {
        f"{level}/{workload}": measure(level, args.seconds, n_actions)
        for level in args.levels
        for workload, n_actions in (("random", 7), ("turns", 2))
    }
    header = ("raw steps/s", "text steps/s", "ratio", "raw reset ms", "text reset ms")
    print(f"{'level/workload':<24}" + "".join(f"{h:>15}" for h in header))
    for level, r in results.items():
        print(
            f"{level:<24}{r['raw_steps_per_s']:>15,.0f}{r['text_steps_per_s']:>15,.0f}{r['ratio']:>15.2f}"
            f"{r['raw_reset_ms']:>15.2f}{r['text_reset_ms']:>15.2f}"
        )
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({**results, "summary": summary(results)}, indent=2))


def summary(results: dict) -> list[dict]:
    """The headlines for `agentgym bench`: text env steps/s over raw minigrid's, per level and workload."""
    return [
        {
            "measure": f"steps/s {key}",
            "ratio": r["ratio"],
            "baseline": "raw minigrid",
            "target": f">= {TARGET_RATIO}x",
            "met": r["ratio"] >= TARGET_RATIO,
        }
        for key, r in results.items()
    ]


if __name__ == "__main__":
    main()
