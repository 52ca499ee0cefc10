"""`agentgym experiment NAME`: the paper's experiments in miniature, each a resumable set of runs.

`horizons` (`agentgym_train.experiments.horizons`) trains the same budget under several max-turn rules
(fixed short, fixed long, ScalingInter stages, the adaptive scheduler) on several seeds and compares them.
Importing this package is light: torch and TRL are imported only when an experiment runs.
"""

from __future__ import annotations

from typing import Any


def add_subcommands(sub: Any) -> None:
    """Register `experiment` (with its experiments as sub-subcommands) on the `agentgym` parser's subparsers."""
    from agentgym_train.experiments import horizons

    p = sub.add_parser("experiment", help="the paper's experiments in miniature: resumable runs, a table, figures")
    experiments = p.add_subparsers(dest="experiment", required=True)
    horizons.add_arguments(experiments)
