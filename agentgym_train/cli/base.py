"""The shape of an `agentgym` subcommand: a small class that declares its arguments and runs, and of a command
group (`agentgym GROUP SUBCOMMAND`)."""

from __future__ import annotations

import argparse
from typing import Any


class Command:
    """One subcommand of `agentgym`, as TRL's `trl/cli/commands` shapes its commands.

    A subclass sets `name` and `help` (and `description` where the command's `--help` says more), declares
    its options in `add_arguments`, and in `run` calls library functions and returns the exit code.
    Heavy libraries (torch, TRL, FastAPI) are imported inside `run`, so that building the parser stays light.
    """

    name: str
    help: str
    description: str | None = None

    def register(self, subparsers: Any) -> argparse.ArgumentParser:
        """Add this command's parser to `subparsers` (the `agentgym` parser's, or a command group's)."""
        options = {"help": self.help}
        if self.description is not None:
            options["description"] = self.description
        parser = subparsers.add_parser(self.name, **options)
        self.add_arguments(parser)
        parser.set_defaults(func=self.run)
        return parser

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare the command's arguments on its `parser` (none by default)."""

    def run(self, args: argparse.Namespace) -> int:
        """Carry out the command for the parsed `args`; return the process's exit code."""
        raise NotImplementedError(f"{type(self).__name__} defines no run()")


class Group(Command):
    """A command group, `agentgym NAME SUBCOMMAND ...`: a subclass sets `name`, `help` and `subcommands`."""

    subcommands: tuple[Command, ...] = ()

    def register(self, subparsers: Any) -> argparse.ArgumentParser:
        parser = subparsers.add_parser(self.name, help=self.help)
        commands = parser.add_subparsers(dest=self.name, required=True)
        for command in self.subcommands:
            command.register(commands)
        return parser
