"""BabyAI text env vs raw minigrid: random-action steps per second, measured in one run.

The issue's target: the text env keeps >= 0.5x the raw minigrid step rate. Two workloads, each run
on both sides from the same seeds, resetting when an episode ends:

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
from pathlib import Path

import gymnasium as gym
import numpy as np

import agentgym_envs  # noqa: F401

#: The issue's target: the text env keeps at least this share of raw minigrid's step rate.
TARGET_RATIO = 0.5
TEXT_ACTIONS = ["turn left", "turn right", "move forward", "pick up", "drop", "toggle", "check available actions"]


def steps_per_second(step, reset, n_actions: int, seconds: float) -> tuple[float, float]:
    """Random steps for `seconds`; returns (steps/s, median reset ms)."""
    rng = np.random.default_rng(0)
    resets, steps, seed = [], 0, 0
    t0 = time.perf_counter()
    r0 = time.perf_counter()
    reset(seed)
    resets.append(time.perf_counter() - r0)
    while time.perf_counter() - t0 < seconds:
        for action in rng.integers(n_actions, size=256):
            steps += 1
            if step(int(action)):
                seed += 1
                r0 = time.perf_counter()
                reset(seed)
                resets.append(time.perf_counter() - r0)
    return steps / (time.perf_counter() - t0), 1000 * float(np.median(resets))


def measure(level: str, seconds: float, n_actions: int) -> dict[str, float]:
    raw = gym.make(f"BabyAI-{level}-v0" if level != "GoToObjS6" else "BabyAI-GoToObjS6-v1")
    text = gym.make(f"AgentGym/BabyAI-{level}-v0")

    def raw_step(a: int) -> bool:
        _, _, term, trunc, _ = raw.step(a)
        return term or trunc

    def text_step(a: int) -> bool:
        _, _, term, trunc, _ = text.step(TEXT_ACTIONS[a])
        return term or trunc

    raw_rate, raw_reset = steps_per_second(raw_step, lambda s: raw.reset(seed=s), n_actions, seconds)
    text_rate, text_reset = steps_per_second(text_step, lambda s: text.reset(seed=s), n_actions, seconds)
    return {
        "raw_steps_per_s": raw_rate,
        "text_steps_per_s": text_rate,
        "ratio": text_rate / raw_rate,
        "raw_reset_ms": raw_reset,
        "text_reset_ms": text_reset,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--levels", nargs="+", default=["GoToRedBall", "GoToLocal", "BossLevel"])
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "babyai_speed.json"))
    parser.add_argument("--quick", action="store_true", help="one level, 0.3 s per side (agentgym bench --quick)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.levels = 0.3, ["GoToLocal"]
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
