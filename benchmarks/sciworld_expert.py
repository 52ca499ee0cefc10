"""SciWorld expert: success of the gold-path expert on the packaged sample of test tasks.

The issue's target: >= 95% success on a fixed sample of test tasks covering all 30 task types.
The sample is the first five test variations of each task type (149 tasks), whose gold paths
ship with the package. Prints per-type results and the failures, and writes JSON.

    python benchmarks/sciworld_expert.py [--deterministic | --fast]
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

import gymnasium as gym

import agentgym_envs  # noqa: F401
from agentgym_envs.sciworld.gold import sample_tasks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fast", action="store_true", help="run the JVM without deterministic hashing")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    mode = "fast" if args.fast else "deterministic"
    out = Path(args.out or Path(__file__).parent / "results" / f"sciworld_expert_{mode}.json")

    env = gym.make("AgentGym/SciWorld-v0", deterministic=not args.fast)
    per_type: dict[str, list[bool]] = defaultdict(list)
    failures, steps, started = [], 0, time.perf_counter()
    try:
        for task_id in sample_tasks():
            observation, info = env.reset(options={"task_id": task_id})
            expert = env.unwrapped.make_expert()
            terminated = truncated = False
            error = None
            while not (terminated or truncated):
                try:
                    action = expert.act(observation, info)
                except RuntimeError as stuck:
                    error = str(stuck)
                    break
                observation, _, terminated, truncated, info = env.step(action)
                steps += 1
            per_type[info["category"]].append(bool(info["success"]))
            if not info["success"]:
                failures.append(
                    {"task_id": task_id, "score": info["score"], "error": error, "last_observation": observation[-300:]}
                )
    finally:
        env.close()
    solved = sum(sum(v) for v in per_type.values())
    total = sum(len(v) for v in per_type.values())
    result = {
        "mode": mode,
        "tasks": total,
        "solved": solved,
        "success_rate": solved / total,
        "steps": steps,
        "seconds": time.perf_counter() - started,
        "per_type": {name: f"{sum(v)}/{len(v)}" for name, v in per_type.items()},
        "failures": failures,
    }
    for name, v in per_type.items():
        print(f"{name:<52}{sum(v)}/{len(v)}")
    print(f"expert success {solved}/{total} = {solved / total:.1%} ({steps} steps in {result['seconds']:.0f} s)")
    for failure in failures:
        print("FAILED", failure["task_id"], failure["score"], failure["error"] or failure["last_observation"][-120:])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
