"""Expert success on the BabyAI test split, per level (the issue asks >= 95% on bot-supported levels).

    python benchmarks/babyai_expert.py [--seeds 100] [--levels GoToLocal BossLevel ...]

Prints one row per level (success, mean turns, ms per episode, failure reasons) and the total over
the levels minigrid's bot supports; writes benchmarks/results/babyai_expert.json.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import gymnasium as gym

import agentgym_envs  # noqa: F401
from agentgym_envs.babyai import levels as L
from agentgym_envs.babyai.expert import ExpertStuckError


def run_level(level: str, seeds: int) -> dict:
    env = gym.make(f"AgentGym/BabyAI-{level}-v0").unwrapped
    successes, turns, failures = 0, 0, Counter()
    start = time.perf_counter()
    for seed in list(L.TEST_SEEDS)[:seeds]:
        observation, info = env.reset(options={"task_id": L.task_id(level, seed)})
        expert = env.make_expert()
        try:
            while True:
                observation, _, terminated, truncated, info = env.step(expert.act(observation, info))
                turns += 1
                if terminated or truncated:
                    break
        except ExpertStuckError as error:
            failures[f"stuck: {str(error)[:50]}"] += 1
            continue
        successes += info["success"]
        if not info["success"]:
            failures["mission failed" if terminated else "out of steps"] += 1
    env.close()
    return {
        "success": successes / seeds,
        "episodes": seeds,
        "mean_turns": turns / seeds,
        "ms_per_episode": 1000 * (time.perf_counter() - start) / seeds,
        "supported": level not in L.BOT_UNSUPPORTED,
        "failures": dict(failures),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=len(L.TEST_SEEDS))
    parser.add_argument("--levels", nargs="+", default=list(L.AGENTGYM_LEVELS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "babyai_expert.json"))
    args = parser.parse_args()
    results = {}
    for level in args.levels:
        r = results[level] = run_level(level, args.seeds)
        note = "" if r["supported"] else "  (bot unsupported)"
        row = f"{level:<24}{r['success']:>7.1%}{r['mean_turns']:>8.1f} turns{r['ms_per_episode']:>8.0f} ms"
        print(f"{row}  {r['failures'] or ''}{note}", flush=True)
    supported = [r for r in results.values() if r["supported"]]
    total = sum(r["success"] * r["episodes"] for r in supported) / max(1, sum(r["episodes"] for r in supported))
    print(f"{'supported levels':<24}{total:>7.1%}  over {sum(r['episodes'] for r in supported)} episodes")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"levels": results, "supported_success": total}, indent=2))


if __name__ == "__main__":
    main()
