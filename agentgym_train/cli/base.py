"""The shape of an `agentgym` subcommand: a small class that declares its arguments and runs, and of a command
group (`agentgym GROUP SUBCOMMAND`)."""

from __future__ import annotations

import argparse
from typing import Any

#: The extra of pyproject.toml that brings each optional top-level import a command may need.
EXTRA_OF_MODULE: dict[str, str] = {
    **dict.fromkeys(("torch", "transformers", "trl", "peft", "accelerate", "datasets", "matplotlib", "yaml"), "train"),
    **dict.fromkeys(("playwright", "starlette", "jinja2"), "web"),
    **dict.fromkeys(("fastapi", "uvicorn", "httptools", "uvloop", "httpx", "websockets"), "server"),
    "sentence_transformers": "dense",
    "textworld": "textworld",
    "jericho": "textworld",
    "openenv": "openenv",
    "verifiers": "verifiers",
    "gem": "gem",
    "skyrl_gym": "skyrl",
    "verl": "verl",
    "ray": "ray",
}


def missing_extra(error: ImportError) -> str | None:
    """What to tell a user whose command stopped on `error`, when a missing optional package caused it.

    None when `error` is not about an optional package (a bug, to be raised as it is). Our scenarios' own
    import errors already name their extra (`pip install 'agentgym-rl[textworld]'`) and are passed on as they are.
    """
    if "agentgym-rl[" in str(error):
        return str(error)
    module = (error.name or "").partition(".")[0]
    if module in EXTRA_OF_MODULE:
        extra = EXTRA_OF_MODULE[module]
        return f"needs the [{extra}] extra ({error}): pip install 'agentgym-rl[{extra}]'"
    return None


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


#: `--context`'s help, the same for every command that prompts a model.
CONTEXT_HELP = (
    "what each turn's prompt holds: full (default), window[:k] (system prompt, task, last k turns) or "
    "summary[:k] (the scenario's state in place of older turns); use the context the model was trained with"
)


ACTION_FORMAT_HELP = (
    "how the model acts: the scenario's own reply format (default), or 'tools': native tool calls, the env's "
    "tools rendered by the chat template (an endpoint is sent them as tools=) and each call answered as a tool "
    "turn; use the format the model was trained with"
)


def context_spec(text: str) -> str:
    """An argparse type: a context spec that `agentgym_wrappers.get_context` reads, normalised."""
    from agentgym_wrappers.context import get_context

    try:
        return get_context(text).spec
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
