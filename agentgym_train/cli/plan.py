"""`agentgym plan CONFIG --gpus N --gpu-memory GIB`: a training config's per-GPU memory and whether it fits
(`agentgym_train.plan`)."""

from __future__ import annotations

import argparse
import json
import sys

from agentgym_train.cli.base import Command


class PlanCommand(Command):
    """`agentgym plan`: print `plan.plan`'s table (or JSON); exit 0 if it fits, 1 if not, 2 on a bad input."""

    name = "plan"
    help = "per-GPU memory of a training config on N GPUs, part by part, and whether it fits"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        p = parser
        p.add_argument("config", help="training YAML or packaged config name (e.g. paper/babyai)")
        p.add_argument("--gpus", type=int, required=True, help="processes, one per GPU")
        p.add_argument("--gpu-memory", type=float, required=True, metavar="GIB", help="each GPU's memory in GiB")
        p.add_argument(
            "--accelerate",
            default=None,
            help="accelerate config (file, or ddp / fsdp / zero2 / zero3 from agentgym_train/configs/accelerate); "
            "default: plain data parallelism",
        )
        p.add_argument(
            "--prompt-tokens", type=int, default=1024, help="an episode's prompt length (TRL does not bound it)"
        )
        p.add_argument("--json", action="store_true", help="print the plan as JSON")

    def run(self, args: argparse.Namespace) -> int:
        from agentgym_train.plan import plan

        try:
            result = plan(args.config, args.gpus, args.gpu_memory, args.accelerate, args.prompt_tokens)
        except ValueError as error:
            print(f"agentgym plan: {error}", file=sys.stderr)
            return 2
        print(json.dumps(result.to_dict(), indent=2) if args.json else result.table())
        return 0 if result.fits else 1
