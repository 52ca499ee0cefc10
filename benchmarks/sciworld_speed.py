"""SciWorld step speed: stock `ScienceWorldEnv.step` vs the JVM's raw step vs our env, in one run.

The issue's target: our env keeps >= 0.8x the raw step rate. Every side replays the same actions
with loads excluded from the timing; the sides take turns episode by episode (so that the load of
a shared machine falls on all of them alike), one pass warms the JIT up, `--rounds` passes count.
Workloads: `gold`, the first `--gold-steps` gold actions (fewer where the task ends sooner) of the
first test task of each of the 30 task types; `cheap`, `look around` / `inventory` /
`look at agent` on 10 tasks. Sides:

- `stock env.step`: `scienceworld.ScienceWorldEnv.step`, which computes look, inventory and the
  valid-action list on every step (JVM default heap); only its first `--stock-steps` steps per
  pass are timed, it is slow;
- `stock raw`: `ScienceWorldEnv.server.step`, the bare py4j call into that JVM;
- `our raw (det)` / `our raw (fast)`: the bare step call into our env's own JVM (our py4j-protocol
  client), with and without deterministic hashing (`-XX:hashCode=2`);
- `ours (det)` / `ours (fast)`: `SciWorldEnv.step` on that same env (it also reads the score).

`ours / our raw` is the cost of our env around the JVM; `ours / stock raw` adds the cost of
deterministic hashing (det) or shows the two JVM set-ups side by side (fast).

    python benchmarks/sciworld_speed.py [--rounds 2] [--stock-steps 150] [--gold-steps 20]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym

import agentgym_envs  # noqa: F401
from agentgym_envs.sciworld.gold import packaged
from agentgym_envs.sciworld.tasks import TASK_TYPES, split_ranges

Episode = tuple[str, int, list[str]]
Side = tuple[Callable[[str, int], object], Callable[[str], object]]


def workloads(env: gym.Env, gold_steps: int) -> dict[str, list[Episode]]:
    """The action lists, each cut where `env` (our env) ends the episode."""
    gold = packaged()
    firsts = [(name, split_ranges(count)["test"][0]) for name, (_, count) in TASK_TYPES.items()]
    cheap = ["look around", "inventory", "look at agent"] * 20
    episodes = {
        "gold": [(name, v, gold[f"{name}/{v}"][:gold_steps]) for name, v in firsts],
        "cheap": [(name, v, cheap) for name, v in firsts[:10]],
    }
    for workload in episodes.values():
        for i, (name, v, actions) in enumerate(workload):
            env.reset(options={"task_id": f"{name}/{v}"})
            ends = next((n for n, a in enumerate(actions, 1) if env.step(a)[2]), len(actions))
            workload[i] = (name, v, actions[:ends])
    return episodes


def measure(sides: dict[str, Side], episodes: list[Episode], rounds: int, caps: dict[str, int]) -> dict[str, float]:
    """Steps per second of each side, taking turns per episode; pass 0 is a warm-up."""
    steps, seconds = dict.fromkeys(sides, 0), dict.fromkeys(sides, 0.0)
    for pass_ in range(rounds + 1):
        done = dict.fromkeys(sides, 0)
        for name, variation, actions in episodes:
            for side, (load, step) in sides.items():
                todo = actions[: max(0, caps.get(side, 10**9) - done[side])]
                if not todo:
                    continue
                load(name, variation)
                started = time.perf_counter()
                for action in todo:
                    step(action)
                if pass_:
                    seconds[side] += time.perf_counter() - started
                    steps[side] += len(todo)
                done[side] += len(todo)
    return {side: steps[side] / seconds[side] for side in sides}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--stock-steps", type=int, default=150)
    parser.add_argument("--gold-steps", type=int, default=20)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sciworld_speed.json"))
    parser.add_argument("--quick", action="store_true", help="1 round, 5 gold steps (agentgym bench --quick)")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.stock_steps, args.gold_steps = 1, 20, 5
    from scienceworld import ScienceWorldEnv

    stock = ScienceWorldEnv("", envStepLimit=10**9)
    ours = {mode: gym.make("AgentGym/SciWorld-v0", deterministic=mode == "det").unwrapped for mode in ("det", "fast")}

    def stock_load(name: str, variation: int) -> None:
        stock.load(name, variation)

    sides: dict[str, Side] = {"stock env.step": (stock_load, stock.step), "stock raw": (stock_load, stock.server.step)}
    for mode, env in ours.items():

        def load(name: str, variation: int, env=env) -> None:
            env.reset(options={"task_id": f"{name}/{variation}"})

        sides[f"our raw ({mode})"] = (load, lambda action, env=env: env._jvm.call("step", action))
        sides[f"ours ({mode})"] = (load, env.step)
    results: dict[str, dict[str, float]] = {}
    try:
        for workload, episodes in workloads(ours["det"], args.gold_steps).items():
            rate = measure(sides, episodes, args.rounds, {"stock env.step": args.stock_steps})
            results[workload] = {
                **{f"{side} steps/s": value for side, value in rate.items()},
                "ours (det) / our raw (det)": rate["ours (det)"] / rate["our raw (det)"],
                "ours (fast) / our raw (fast)": rate["ours (fast)"] / rate["our raw (fast)"],
                "ours (det) / stock raw": rate["ours (det)"] / rate["stock raw"],
                "ours (fast) / stock raw": rate["ours (fast)"] / rate["stock raw"],
                "ours (det) / stock env.step": rate["ours (det)"] / rate["stock env.step"],
            }
    finally:
        stock.close()
        for env in ours.values():
            env.close()
    for workload, figures in results.items():
        print(f"\n{workload} workload")
        for key, value in figures.items():
            print(f"  {key:<32}{value:>12,.2f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({**results, "summary": summary(results)}, indent=2))


def summary(results: dict[str, dict[str, float]]) -> list[dict]:
    """The headlines for `agentgym bench`: our env's step rate over the raw JVM step and over stock ScienceWorld."""
    rows = []
    for workload, figures in results.items():
        ratio = figures["ours (det) / our raw (det)"]
        rows.append(
            {
                "measure": f"{workload} steps/s",
                "ratio": ratio,
                "baseline": "the raw JVM step",
                "target": ">= 0.8x",
                "met": ratio >= 0.8,
            }
        )
        rows.append(
            {
                "measure": f"{workload} steps/s",
                "ratio": figures["ours (det) / stock env.step"],
                "baseline": "scienceworld env.step",
                "target": None,
                "met": None,
            }
        )
    return rows


if __name__ == "__main__":
    main()
