"""`agentgym experiment NAME`: the paper's experiments in miniature (`agentgym_train.experiments`).

Importing this module is light: torch and TRL are imported only when an experiment runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from agentgym_train.cli.base import Command, Group
from agentgym_train.experiments import horizons


class HorizonsCommand(Command):
    """`agentgym experiment horizons [CONFIG] [--output-dir DIR] [--summary-only] [--key value ...]`."""

    name = "horizons"
    help = "the same RL budget under fixed short / fixed long / ScalingInter / adaptive max turns, several seeds"
    description = (
        "Train from the same start under several max-turn rules on several seeds; evaluate every run "
        "under the same max turns; write a table (markdown, JSON) and figures. Rerunning skips finished runs and "
        "resumes unfinished ones. Keys of CONFIG (default: the packaged CPU miniature) can be overridden: "
        "--max_steps 60 --seeds 1 --rules '{short: {max_turns: [4]}}'."
    )
    #: The options of its own that take a value, and its flags (`config_first` steps over them).
    valued = frozenset({"--output-dir"})
    flags = frozenset({"--summary-only"})

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "config",
            nargs="?",
            default=horizons.DEFAULT_CONFIG.stem,
            help="the experiment's YAML file, or a packaged one's name (horizons: the CPU miniature; gigpo: GiGPO "
            "against GRPO under ScalingInter and a fixed horizon); before any --key value overrides",
        )
        parser.add_argument(
            "--output-dir", default=None, help="where the runs, table and figures go (default: output_dir)"
        )
        parser.add_argument(
            "--summary-only", action="store_true", help="re-read finished runs; write the table and figures"
        )
        parser.add_argument("overrides", nargs=argparse.REMAINDER, help="--key value pairs that override the config")

    def run(self, args: argparse.Namespace) -> int:
        overrides = list(args.overrides)
        for flag in ("--output-dir", "--output_dir"):  # given after CONFIG, argparse leaves them in the remainder
            if flag in overrides:
                i = overrides.index(flag)
                args.output_dir = overrides[i + 1]
                del overrides[i : i + 2]
        if "--summary-only" in overrides:
            overrides.remove("--summary-only")
            args.summary_only = True
        path = Path(args.config)
        if not path.is_file():
            path = horizons.DEFAULT_CONFIG.parent / f"{args.config}.yaml"
        try:
            experiment = horizons.load_experiment(path, overrides, args.output_dir)
            horizons.check_settings(experiment)  # every run's settings parse before anything runs
        except (ValueError, OSError) as error:
            print(f"{args.config}: {error}", file=sys.stderr)
            return 2
        started = time.perf_counter()
        if not args.summary_only:
            horizons.run_experiment(experiment)
        horizons.summarize(experiment)
        print(f"({time.perf_counter() - started:.0f} s)")
        return 0


class ExperimentCommand(Group):
    """`agentgym experiment`: a group, one subcommand per experiment."""

    name = "experiment"
    help = "the paper's experiments in miniature: resumable runs, a table, figures"
    subcommands = (HorizonsCommand(),)
