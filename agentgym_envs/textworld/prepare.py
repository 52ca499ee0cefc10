"""Build the TextWorld games of a split ahead of time, so that no env has to wait for the compiler.

    agentgym prepare textworld --split test [--workers 2] [--challenges cooking simple]

Games already in the cache are skipped; several processes (or machines sharing the cache folder)
may prepare at once, each game is built once. `prepare` returns the CPU time per game (generation
and compilation); the command prints it at the end and, with `--out`, writes it as JSON.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from agentgym_envs.textworld import games as G
from agentgym_envs.textworld import tasks as T


def split_tasks(split: str, challenges: tuple[str, ...], difficulties: tuple[str, ...], limit: int | None) -> list[str]:
    """The task ids of `split` for the challenges and difficulties, in the env's order (the first `limit`)."""
    settings = T.ordered_settings(challenges, difficulties)
    seeds = T.SPLIT_SEEDS[split]
    count = len(settings) * len(seeds) if limit is None else min(limit, len(settings) * len(seeds))
    return [T.task_id(*settings[i % len(settings)], seeds[i // len(settings)]) for i in range(count)]


def prepare(
    split: str = "test",
    challenges: tuple[str, ...] = T.CHALLENGES,
    difficulties: tuple[str, ...] = T.LEVELS,
    limit: int | None = None,
    workers: int = 2,
    cache_dir: str | None = None,
    progress: Callable[[list[dict]], None] | None = None,
) -> tuple[dict, list[dict]]:
    """Build the games of `split` not yet in the cache; return a summary and one record per game built.

    The summary holds the split, the number of games, how many were built, the cache folder and, when
    any was built, the mean, median and max CPU seconds of generation and compilation and the wall time.
    `progress` is called with each batch of records as it is built.

    Raises:
        ValueError: for the train split without a `limit` (it has 120,000 games).
    """
    if split == "train" and limit is None:
        raise ValueError("the train split has 120,000 games; give --limit N")
    root = G.cache_root(cache_dir)
    task_ids = split_tasks(split, tuple(challenges), tuple(difficulties), limit)
    start = time.perf_counter()
    records = G.ensure(task_ids, root, workers=workers, progress=progress)
    summary = {"split": split, "games": len(task_ids), "built": len(records), "cache": str(root)}
    if records:
        for key in ("generate_s", "compile_s"):
            values = [record[key] for record in records]
            summary[f"{key.removesuffix('_s')}_cpu_s"] = {
                "mean": round(statistics.fmean(values), 3),
                "median": round(statistics.median(values), 3),
                "max": round(max(values), 3),
            }
        summary["wall_s"] = round(time.perf_counter() - start, 1)
    return summary, records
