"""The TextWorld expert over the whole test split (300 games): it must win every one.

    agentgym prepare textworld --split test   # build the games first (or let this do it)
    python benchmarks/textworld_expert.py [--limit N]

Prints one row per category (games won, mean turns, ms per episode) and writes
benchmarks/results/textworld_expert.json with the games not won, if any.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from pathlib import Path

from agentgym_envs.textworld import games as G
from agentgym_envs.textworld.env import TextWorldEnv

MAX_TURNS = 200


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="only the first N test games")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "textworld_expert.json"))
    args = parser.parse_args()
    env = TextWorldEnv()
    tasks = env.tasks("test")[: args.limit]
    G.ensure(tasks, env.cache_root, workers=2)
    rows: dict[str, dict] = defaultdict(lambda: {"games": 0, "won": 0, "turns": 0, "seconds": 0.0})
    failures = []
    for task in tasks:
        start = time.perf_counter()
        observation, info = env.reset(options={"task_id": task})
        expert = env.make_expert()
        turns, terminated = 0, False
        while not terminated and turns < MAX_TURNS:
            observation, _, terminated, _, info = env.step(expert.act(observation, info))
            turns += 1
        row = rows[info["category"]]
        row["games"] += 1
        row["won"] += int(info["success"])
        row["turns"] += turns
        row["seconds"] += time.perf_counter() - start
        if not info["success"]:
            failures.append({"task_id": task, "turns": turns, "score": info["score"], "last": observation[-300:]})
    env.close()
    print(f"{'category':<26}{'won':>10}{'mean turns':>12}{'ms/episode':>12}")
    for category, row in sorted(rows.items()):
        print(
            f"{category:<26}{row['won']:>5}/{row['games']:<4}{row['turns'] / row['games']:>12.1f}"
            f"{1000 * row['seconds'] / row['games']:>12.1f}"
        )
    won, games = sum(r["won"] for r in rows.values()), sum(r["games"] for r in rows.values())
    print(f"{'all':<26}{won:>5}/{games:<4}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    report = {"won": won, "games": games, "categories": rows, "failures": failures}
    Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
