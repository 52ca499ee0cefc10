"""Action parsers: from a model's reply to the action text an environment understands.

A parser is any callable `reply -> action` that raises `ParseError` (with a reminder of the expected
format) when the reply holds no action. Scenarios name theirs in `action_format`:

    >>> parse_action_line("The ball is ahead.\\nAction: move forward")
    'move forward'
    >>> parse_tags("I should look it up. <search> capital of Peru </search>")
    '<search> capital of Peru </search>'
    >>> parse_fenced("Let me click it.\\n```click [12]```")
    'click [12]'
    >>> parse_json_tool('<tool_call>{"name": "go to", "arguments": {"target": "red ball 1"}}</tool_call>')
    'go to red ball 1'
    >>> get_parser("fenced_or_action_line")("Action: stop [42]")
    'stop [42]'
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable

Parser = Callable[[str], str]


class ParseError(ValueError):
    """The reply holds no action; the message says what format was expected."""


# A full-width colon counts too (models trained on Chinese text write it).
_ACTION_LINE = re.compile(r"^[\s>*_#`-]*action\s*[:\uff1a]\**\s*(?P<action>.*?)[\s*_`]*$", re.IGNORECASE | re.MULTILINE)
_TAG = re.compile(r"<(?P<tag>search|answer)>(?P<body>.*?)</(?P=tag)>", re.IGNORECASE | re.DOTALL)
_FENCE = re.compile(r"```(?P<body>.*?)```", re.DOTALL)
_TOOL_CALL = re.compile(r"<tool_call>(?P<body>.*?)</tool_call>", re.DOTALL)
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_action_line(reply: str) -> str:
    """The text after the last `Action:` line (markdown emphasis and quotes are ignored)."""
    matches = [m["action"].strip().strip("'\"`").strip() for m in _ACTION_LINE.finditer(reply)]
    matches = [m for m in matches if m]
    if not matches:
        raise ParseError("Your reply must end with one line of the form 'Action: <action>'.")
    return matches[-1]


def parse_tags(reply: str) -> str:
    """The first complete `<search>...</search>` or `<answer>...</answer>` element, tags included."""
    match = _TAG.search(reply)
    if match is None:
        raise ParseError("Your reply must contain <search> query </search> or <answer> answer </answer>.")
    return match.group(0)


def parse_fenced(reply: str) -> str:
    """The contents of the last fenced code block (a language tag on its first line is dropped)."""
    blocks = [m["body"] for m in _FENCE.finditer(reply)]
    for body in reversed(blocks):
        lines = body.strip("\n").splitlines()
        if len(lines) > 1 and re.fullmatch(r"[A-Za-z0-9_+-]*", lines[0].strip()):
            lines = lines[1:]
        action = "\n".join(lines).strip()
        if action:
            return action
    raise ParseError("Your reply must put the action in a code block, e.g. ```click [12]```.")


def parse_json_tool(reply: str) -> str:
    """A JSON tool call `{"name": ..., "arguments": {...}}` (optionally in `<tool_call>` tags).

    The action text is `arguments["action"]` when present, else the name followed by the argument
    values in order.
    """
    match = _TOOL_CALL.search(reply) or _JSON_OBJECT.search(reply)
    error = ParseError('Your reply must contain a tool call: {"name": "<action>", "arguments": {...}}.')
    if match is None:
        raise error
    try:
        call = json.loads(match.group("body") if match.re is _TOOL_CALL else match.group(0))
    except json.JSONDecodeError as exc:
        raise ParseError(f"Your tool call is not valid JSON ({exc.msg}).") from exc
    if not isinstance(call, dict) or not isinstance(call.get("name", ""), str):
        raise error
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise ParseError(f"The tool call's arguments are not valid JSON ({exc.msg}).") from exc
    if not isinstance(arguments, dict):
        raise error
    if isinstance(arguments.get("action"), str):
        return arguments["action"].strip()
    action = " ".join([call.get("name", ""), *(str(v) for v in arguments.values())]).strip()
    if not action:
        raise error
    return action


def first_of(*parsers: Parser) -> Parser:
    """A parser that tries `parsers` in order and returns the first action found."""

    def parse(reply: str) -> str:
        errors = []
        for parser in parsers:
            try:
                return parser(reply)
            except ParseError as error:
                errors.append(str(error))
        raise ParseError(" Or: ".join(errors))

    return parse


PARSERS: dict[str, Parser] = {
    "action_line": parse_action_line,
    "tags": parse_tags,
    "fenced": parse_fenced,
    "json": parse_json_tool,
    "fenced_or_action_line": first_of(parse_fenced, parse_action_line),
}


def register_parser(name: str, parser: Parser) -> None:
    """Make `parser` available under `name` (for a scenario's `action_format`)."""
    PARSERS[name] = parser


def get_parser(parser: str | Parser) -> Parser:
    """A parser by name (see `PARSERS`), or `parser` itself when it is callable."""
    if callable(parser):
        return parser
    try:
        return PARSERS[parser]
    except KeyError:
        raise ValueError(f"unknown action parser {parser!r}; known: {sorted(PARSERS)}") from None
