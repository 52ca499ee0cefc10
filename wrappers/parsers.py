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

Their inverse, `action_reply(action, action_format)`, writes an action (an expert's, a random
choice) as the reply that the format's parser reads back, as a model would write it:

    >>> action_reply("move forward", "action_line")
    'Action: move forward'
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable

Parser = Callable[[str], str]


class ParseError(ValueError):
    """The reply holds no action; the message says what format was expected."""


# Unicode whitespace as `str.isspace` and the regex `\s` define it (a test checks that they agree).
_SPACES = "".join(c for c in map(chr, range(0x3001)) if c.isspace())
# After the action, on its line: whitespace and markdown emphasis, which are dropped.
_TRAILING = _SPACES + "*_`"
# An `Action:` line: markdown or quote marks, the word, a colon (a full-width one too: models trained
# on Chinese text write it), emphasis and spaces (across line breaks), then the action's line. The
# leading marks stay on one line, so that a run of blank lines is scanned once, not once per line.
_ACTION_LINE = re.compile(
    rf"^[{re.escape(_SPACES.replace(chr(10), ''))}>*_#`-]*action\s*[:\uff1a]\**\s*([^\n]*)",
    re.IGNORECASE | re.MULTILINE,
)
# How `<search>` and `<answer>` are spelled, lower-cased, under case-insensitive matching: `s` also
# matches the long s (U+017F), whose lower case is itself.
_TAG_NAMES = frozenset({"search", "\u017fearch", "answer", "an\u017fwer"})
_FENCE = re.compile(r"```(?P<body>.*?)```", re.DOTALL)
_TOOL_OPEN, _TOOL_CLOSE = "<tool_call>", "</tool_call>"

# Every parser runs in time linear in the reply (benchmarks/parsers_speed.py): a model's reply is
# untrusted input, and a regex that backtracks over it can stall a training step or a server.


def parse_action_line(reply: str) -> str:
    """The text after the last `Action:` line (markdown emphasis and quotes are ignored)."""
    for line in reversed(_ACTION_LINE.findall(reply)):
        action = line.rstrip(_TRAILING).strip().strip("'\"`").strip()
        if action:
            return action
    raise ParseError("Your reply must end with one line of the form 'Action: <action>'.")


def _spelled(name: str) -> str:
    """A pattern for a lower-cased tag name: its ASCII letters in either case, other characters as they are."""
    return "".join(f"[{c}{c.upper()}]" if c.isascii() else re.escape(c) for c in name)


@functools.cache
def _opening_tags(names: frozenset[str]) -> re.Pattern[str]:
    return re.compile(f"<(?P<tag>{'|'.join(_spelled(name) for name in sorted(names))})>")


@functools.cache
def _closing_tag(name: str) -> re.Pattern[str]:
    return re.compile(f"</{_spelled(name)}>")


def parse_tags(reply: str) -> str:
    """The first complete `<search>...</search>` or `<answer>...</answer>` element, tags included."""
    names, pos = _TAG_NAMES, 0
    while names and (opening := _opening_tags(names).search(reply, pos)) is not None:
        name = opening["tag"].lower()
        closing = _closing_tag(name).search(reply, opening.end())
        if closing is not None:
            return reply[opening.start() : closing.end()]
        names -= {name}  # no closing tag after this opening, so none after a later one either
        pos = opening.end()
    raise ParseError("Your reply must contain <search> query </search> or <answer> answer </answer>.")


def parse_fenced(reply: str) -> str:
    """The contents of the last fenced code block (a language tag on its first line is dropped)."""
    for body in reversed(_FENCE.findall(reply)):
        if body.isspace() or not body:
            continue
        lines = body.strip("\n").splitlines()
        if len(lines) > 1 and re.fullmatch(r"[A-Za-z0-9_+-]*", lines[0].strip()):
            lines = lines[1:]
        action = "\n".join(lines).strip()
        if action:
            return action
    raise ParseError("Your reply must put the action in a code block, e.g. ```click [12]```.")


def _tool_call_text(reply: str) -> str | None:
    """The body of the first closed `<tool_call>` element, else the text from the first `{` to the last `}`."""
    start = reply.find(_TOOL_OPEN)
    if start != -1:
        end = reply.find(_TOOL_CLOSE, start + len(_TOOL_OPEN))
        if end != -1:
            return reply[start + len(_TOOL_OPEN) : end]
    start, end = reply.find("{"), reply.rfind("}")
    return reply[start : end + 1] if start != -1 and end > start else None


def _load_json(text: str, what: str) -> object:
    """`json.loads`, with every way that text can fail (depth, huge numbers) as a `ParseError`."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{what} not valid JSON ({exc.msg}).") from exc
    except ValueError as exc:  # an integer beyond Python's digit limit
        raise ParseError(f"{what} not valid here: it holds a number with too many digits.") from exc
    except RecursionError as exc:
        raise ParseError(f"{what} not valid here: it nests arrays or objects too deeply.") from exc


def parse_json_tool(reply: str) -> str:
    """A JSON tool call `{"name": ..., "arguments": {...}}` (optionally in `<tool_call>` tags).

    The action text is `arguments["action"]` when present, else the name followed by the argument
    values in order.
    """
    text = _tool_call_text(reply)
    error = ParseError('Your reply must contain a tool call: {"name": "<action>", "arguments": {...}}.')
    if text is None:
        raise error
    call = _load_json(text, "Your tool call is")
    if not isinstance(call, dict) or not isinstance(call.get("name", ""), str):
        raise error
    arguments = call.get("arguments") or {}
    if isinstance(arguments, str):  # OpenAI sends arguments as a JSON string
        arguments = _load_json(arguments, "The tool call's arguments are")
    if not isinstance(arguments, dict):
        raise error
    if isinstance(arguments.get("action"), str):
        return arguments["action"].strip()
    try:
        action = " ".join([call.get("name", ""), *(str(v) for v in arguments.values())]).strip()
    except RecursionError as exc:  # a value nested almost as deeply as the decoder allows
        raise ParseError("Your tool call's arguments nest too deeply to be an action.") from exc
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


#: Per format, the parser's inverse: action -> a reply that the parser reads back as that action.
REPLIES: dict[str, Callable[[str], str]] = {
    "action_line": lambda action: f"Action: {action}",
    "tags": lambda action: action,  # a tag format's action holds its tags (`<search> ... </search>`)
    "fenced": lambda action: f"```\n{action}\n```",
    "json": lambda action: json.dumps({"name": action, "arguments": {}}),
    "fenced_or_action_line": lambda action: f"Action: {action}",
}


def register_parser(name: str, parser: Parser, reply: Callable[[str], str] | None = None) -> None:
    """Make `parser` available under `name` (for a scenario's `action_format`), with its inverse `reply`
    (action -> reply, `action_reply`) where given."""
    PARSERS[name] = parser
    if reply is not None:
        REPLIES[name] = reply


def action_reply(action: str, action_format: str) -> str:
    """The reply that `action_format`'s parser reads back as `action` (the parsers' inverse, `REPLIES`).

    A format registered without an inverse gets the action as it is.
    """
    inverse = REPLIES.get(action_format)
    return inverse(action) if inverse is not None else action


def get_parser(parser: str | Parser) -> Parser:
    """A parser by name (see `PARSERS`), or `parser` itself when it is callable."""
    if callable(parser):
        return parser
    try:
        return PARSERS[parser]
    except KeyError:
        raise ValueError(f"unknown action parser {parser!r}; known: {sorted(PARSERS)}") from None
