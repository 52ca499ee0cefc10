"""`agentgym prepare sciworld|textworld` and `agentgym tasks webarena`: what a scenario builds ahead of time
(ScienceWorld's gold paths, TextWorld's games) and what it holds (WebArena's bundled tasks).

The commands call the scenarios' library functions (`agentgym_envs.sciworld.gold`,
`agentgym_envs.textworld.prepare`, `agentgym_envs.webarena.tasks.splits`), imported when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agentgym_train.cli.base import Command, Group


class SciWorldGoldCommand(Command):
    """`agentgym prepare sciworld (--sample | --split SPLIT [--limit N])`: gold paths outside any env's JVM."""

    name = "sciworld"
    help = "generate ScienceWorld gold paths outside any env's JVM (the packaged sample, or a split's disk cache)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--sample", action="store_true", help="rebuild the packaged gold_test_sample.json.gz")
        group.add_argument("--split", choices=("train", "dev", "test"), help="fill the disk cache for a split")
        parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of the split")

    def run(self, args: argparse.Namespace) -> int:
        from agentgym_envs.sciworld import gold

        if args.sample:
            gold.build_sample()
        else:
            gold.fill_cache(args.split, args.limit, lambda task_id, n: print(task_id, n, flush=True))
        return 0


class TextWorldGamesCommand(Command):
    """`agentgym prepare textworld [--split test] ...`: build a split's games into the cache."""

    name = "textworld"
    help = "build the TextWorld games of a split ahead of time, so that no env waits for the compiler"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from agentgym_envs.textworld import tasks as T

        parser.add_argument("--split", choices=T.SPLITS, default="test")
        parser.add_argument("--challenges", nargs="+", choices=T.CHALLENGES, default=list(T.CHALLENGES))
        parser.add_argument("--difficulties", nargs="+", choices=T.LEVELS, default=list(T.LEVELS))
        parser.add_argument(
            "--limit", type=int, default=None, help="only the first N games (the train split has 120,000)"
        )
        parser.add_argument("--workers", type=int, default=2, help="worker processes building at once")
        parser.add_argument("--cache-dir", default=None, help="default: $AGENTGYM_CACHE_DIR or ~/.cache/agentgym")
        parser.add_argument("--out", default=None, help="write the per-game build times here (JSON)")

    def run(self, args: argparse.Namespace) -> int:
        from agentgym_envs.textworld.prepare import prepare

        start, done = time.perf_counter(), [0]

        def progress(records: list[dict]) -> None:
            done[0] += len(records)
            print(f"\rbuilt {done[0]} games ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr, flush=True)

        try:
            summary, records = prepare(
                args.split,
                tuple(args.challenges),
                tuple(args.difficulties),
                args.limit,
                args.workers,
                args.cache_dir,
                progress,
            )
        except ValueError as error:
            print(f"agentgym prepare textworld: error: {error}", file=sys.stderr)
            return 2
        if records:
            print(file=sys.stderr)
        print(json.dumps(summary, indent=1))
        if args.out:
            Path(args.out).write_text(json.dumps({**summary, "records": records}, indent=1))
        return 0


class PrepareCommand(Group):
    """`agentgym prepare`: a group, one subcommand per scenario that can build its data ahead of time."""

    name = "prepare"
    help = "build a scenario's data ahead of time (ScienceWorld's gold paths, TextWorld's games)"
    subcommands = (SciWorldGoldCommand(), TextWorldGamesCommand())


class WebArenaTasksCommand(Command):
    """`agentgym tasks webarena [--table] [--held-out]`: the bundled tasks' table and the held-out templates."""

    name = "webarena"
    help = "the Markdown table of the bundled WebArena tasks (per site, templates and train/test tasks per kind)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--table", action="store_true", help="print the Markdown table (the default)")
        parser.add_argument("--held-out", action="store_true", help="list the held-out templates")

    def run(self, args: argparse.Namespace) -> int:
        from agentgym_envs.webarena.tasks.catalog import TaskCatalog
        from agentgym_envs.webarena.tasks.splits import site_templates, table

        templates = site_templates()
        if args.table or not args.held_out:
            print(table(list(TaskCatalog.bundled().by_id.values()), templates))
        if args.held_out:
            for site_list in templates.values():
                for template in site_list:
                    if template.held_out:
                        print(f"{template.template_id} ({template.kind}): {template.intent_template}")
        return 0


class TasksCommand(Group):
    """`agentgym tasks`: a group, one subcommand per scenario whose task set has a summary of its own."""

    name = "tasks"
    help = "what a scenario's bundled task set holds (WebArena: per site, templates and tasks per kind)"
    subcommands = (WebArenaTasksCommand(),)
