"""`agentgym bench [NAMES...]`: the speed benchmarks under benchmarks/, one table of ratios
(`agentgym_train.bench`)."""

from __future__ import annotations

import argparse
from pathlib import Path

from agentgym_train import bench
from agentgym_train.cli.base import Command


class BenchCommand(Command):
    """`agentgym bench`: `bench.run_benchmarks` over the chosen benchmarks."""

    name = "bench"
    help = "run the speed benchmarks under benchmarks/; one table of ratios to baselines"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        p = parser
        p.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run, e.g. babyai remote (default: all)")
        p.add_argument("--quick", action="store_true", help="short settings: a smoke run, not a measurement")
        p.add_argument(
            "--dir", type=Path, default=bench.DEFAULT_DIR, help="the benchmarks folder (default: %(default)s)"
        )
        p.add_argument("--results", type=Path, default=None, help="where the JSON goes (default: DIR/results)")
        p.add_argument("--timeout", type=float, default=None, help="seconds allowed per benchmark (default: none)")
        p.add_argument("--list", action="store_true", help="list the speed benchmarks and exit")

    def run(self, args: argparse.Namespace) -> int:
        return bench.run_benchmarks(
            args.dir, args.names, quick=args.quick, results_dir=args.results, timeout=args.timeout, list_only=args.list
        )
