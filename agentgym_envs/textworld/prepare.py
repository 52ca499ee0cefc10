"""Build the TextWorld games of a split ahead of time, so that no env has to wait for the compiler.

    python -m agentgym_envs.textworld.prepare --split test [--workers 2] [--challenges cooking simple]

Games already in the cache are skipped; several processes (or machines sharing the cache folder)
may prepare at once, each game is built once. Prints the CPU time per game (generation and
compilation) at the end and, with `--out`, writes it as JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from agentgym_envs.textworld import games as G
from agentgym_envs.textworld import tasks as T


def split_tasks(split: str, challenges: tuple[str, ...], difficulties: tuple[str, ...], limit: int | None) -> list[str]:
    """The task ids of `split` for the challenges and difficulties, in the env's order (the first `limit`)."""
    settings = T.ordered_settings(challenges, difficulties)
    seeds = T.SPLIT_SEEDS[split]
    count = len(settings) * len(seeds) if limit is None else min(limit, len(settings) * len(seeds))
    return [T.task_id(*settings[i % len(settings)], seeds[i // len(settings)]) for i in range(count)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=T.SPLITS, default="test")
    parser.add_argument("--challenges", nargs="+", choices=T.CHALLENGES, default=list(T.CHALLENGES))
    parser.add_argument("--difficulties", nargs="+", choices=T.LEVELS, default=list(T.LEVELS))
    parser.add_argument("--limit", type=int, default=None, help="only the first N games (the train split has 120,000)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes building at once")
    parser.add_argument("--cache-dir", default=None, help="default: $AGENTGYM_CACHE_DIR or ~/.cache/agentgym")
    parser.add_argument("--out", default=None, help="write the per-game build times here (JSON)")
    args = parser.parse_args(argv)
    if args.split == "train" and args.limit is None:
        parser.error("the train split has 120,000 games; give --limit N")
    root = G.cache_root(args.cache_dir)
    task_ids = split_tasks(args.split, tuple(args.challenges), tuple(args.difficulties), args.limit)
    start = time.perf_counter()
    done = [0]

    def progress(records: list[dict]) -> None:
        done[0] += len(records)
        print(f"\rbuilt {done[0]} games ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr, flush=True)

    records = G.ensure(task_ids, root, workers=args.workers, progress=progress)
    if records:
        print(file=sys.stderr)
    summary = {"split": args.split, "games": len(task_ids), "built": len(records), "cache": str(root)}
    if records:
        for key in ("generate_s", "compile_s"):
            values = [record[key] for record in records]
            summary[f"{key.removesuffix('_s')}_cpu_s"] = {
                "mean": round(statistics.fmean(values), 3),
                "median": round(statistics.median(values), 3),
                "max": round(max(values), 3),
            }
        summary["wall_s"] = round(time.perf_counter() - start, 1)
    print(json.dumps(summary, indent=1))
    if args.out:
        Path(args.out).write_text(json.dumps({**summary, "records": records}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
