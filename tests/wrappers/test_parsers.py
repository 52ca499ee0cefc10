"""Action parsers: each format, its failure message, and pluggability."""

from __future__ import annotations

import random
import re
from collections.abc import Callable

import pytest

from agentgym_wrappers import PARSERS, REPLIES, ParseError, action_reply, first_of, get_parser, register_parser
from agentgym_wrappers.parsers import _tool_call_text, parse_action_line, parse_fenced, parse_json_tool, parse_tags


@pytest.mark.parametrize(
    ("reply", "action"),
    [
        ("Action: turn left", "turn left"),
        ("I see it.\nAction: go to red ball 1\n", "go to red ball 1"),
        ("**Action:** move forward", "move forward"),
        ("action:   pick up  ", "pick up"),
        ("Thought: Action: is a word\nAction: drop", "drop"),  # the last Action line wins
        ("Action: 'toggle'", "toggle"),
        ("> Action: `turn right`", "turn right"),
    ],
)
def test_action_line(reply: str, action: str) -> None:
    assert parse_action_line(reply) == action


@pytest.mark.parametrize("reply", ["turn left", "", "Action:", "The action is turn left", "Actions: x"])
def test_action_line_missing(reply: str) -> None:
    with pytest.raises(ParseError, match="Action: <action>"):
        parse_action_line(reply)


def test_tags() -> None:
    assert parse_tags("think <search>Peru capital</search> more") == "<search>Peru capital</search>"
    assert parse_tags("<answer> Lima </answer><search>x</search>") == "<answer> Lima </answer>"
    assert parse_tags("<SEARCH>a\nb</SEARCH>") == "<SEARCH>a\nb</SEARCH>"
    for bad in ("<search>unclosed", "no tags", "<think>x</think>"):
        with pytest.raises(ParseError, match="<search>"):
            parse_tags(bad)


def test_fenced() -> None:
    assert parse_fenced("Do it:\n```\nclick [3]\n```") == "click [3]"
    assert parse_fenced("```python\nstop [42]\n```") == "stop [42]"
    assert parse_fenced("```type [7] [laptop] [1]```") == "type [7] [laptop] [1]"
    assert parse_fenced("```a``` then ```b```") == "b"
    with pytest.raises(ParseError, match="code block"):
        parse_fenced("click [3]")


def test_json_tool() -> None:
    assert parse_json_tool('{"name": "act", "arguments": {"action": "turn left"}}') == "turn left"
    assert parse_json_tool('<tool_call>{"name": "click", "arguments": {"id": 12}}</tool_call>') == "click 12"
    assert parse_json_tool('{"name": "go to", "arguments": "{\\"target\\": \\"red ball 1\\"}"}') == "go to red ball 1"
    with pytest.raises(ParseError, match="not valid JSON"):
        parse_json_tool("<tool_call>{name: act}</tool_call>")
    with pytest.raises(ParseError, match="tool call"):
        parse_json_tool("no json here")
    with pytest.raises(ParseError, match="tool call"):
        parse_json_tool('{"arguments": [1, 2]}')


def test_get_parser_and_register() -> None:
    assert get_parser("action_line") is parse_action_line
    custom = lambda reply: reply.upper()  # noqa: E731
    assert get_parser(custom) is custom
    register_parser("shout", custom)
    assert get_parser("shout")("hi") == "HI"
    with pytest.raises(ValueError, match="unknown action parser 'nope'"):
        get_parser("nope")


def test_first_of_combines_messages() -> None:
    parser = first_of(parse_fenced, parse_action_line)
    assert parser("Action: x") == "x"
    with pytest.raises(ParseError, match=r"code block.*Action: <action>"):
        parser("nothing")


# ---- robustness: hostile replies, and the same answers as the pre-fix regexes ----------------------


def test_whitespace_set_is_the_regex_one() -> None:
    from agentgym_wrappers.parsers import _SPACES

    regex = "".join(chr(c) for c in range(0x110000) if re.match(r"\s", chr(c)))
    assert _SPACES == regex == "".join(chr(c) for c in range(0x110000) if chr(c).isspace())


@pytest.mark.parametrize(
    "reply",
    [
        '{"name": "a", "arguments": ' + "[" * 100_000 + "}",  # deeper than the JSON decoder's recursion
        '{"name": "a", "arguments": {"n": ' + "9" * 5000 + "}}",  # past Python's int digit limit
        '{"name": "a", "arguments": "' + "[" * 100_000 + '"}',
        '{"name": "a", "arguments": "{\\"n\\": ' + "9" * 5000 + '}"}',
    ],
)
def test_json_tool_hostile_is_a_parse_error(reply: str) -> None:
    with pytest.raises(ParseError, match="tool call"):
        parse_json_tool(reply)


# The regexes these parsers used before they were made linear (quadratic on hostile replies): the
# reference that the linear versions must agree with, on short replies.
_OLD_ACTION_LINE = re.compile(
    r"^[\s>*_#`-]*action\s*[:\uff1a]\**\s*(?P<action>.*?)[\s*_`]*$", re.IGNORECASE | re.MULTILINE
)
_OLD_TAG = re.compile(r"<(?P<tag>search|answer)>(?P<body>.*?)</(?P=tag)>", re.IGNORECASE | re.DOTALL)
_OLD_TOOL_CALL = re.compile(r"<tool_call>(?P<body>.*?)</tool_call>", re.DOTALL)
_OLD_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _old_action_line(reply: str) -> str:
    matches = [m["action"].strip().strip("'\"`").strip() for m in _OLD_ACTION_LINE.finditer(reply)]
    matches = [m for m in matches if m]
    if not matches:
        raise ParseError("Action: <action>")
    return matches[-1]


def _old_tags(reply: str) -> str:
    match = _OLD_TAG.search(reply)
    if match is None:
        raise ParseError("<search>")
    return match.group(0)


def _old_json_text(reply: str) -> str | None:
    match = _OLD_TOOL_CALL.search(reply) or _OLD_JSON_OBJECT.search(reply)
    return None if match is None else match.group("body") if match.re is _OLD_TOOL_CALL else match.group(0)


def _outcome(parser: Callable[[str], object], reply: str) -> object:
    try:
        return parser(reply)
    except ParseError:
        return ParseError


# Pieces that random replies are made of, separated by "|".
FRAGMENTS = {
    "action_line": "Action|action|ACT\u0130ON|act\u0131on|:|\uff1a| |\n|\t|*|_|`|>|#|-|go|'|\"|\u3000|\x85|\r"
    "|\u2028|Action: x\n|**Action:** y",
    "tags": "<search>|</search>|<answer>|</answer>|<SEARCH>|</Search>|<\u017fearch>|</\u017fearch>|<an\u017fwer>"
    "|</an\u017fwer>|x|\n|<|>|/",
    "json": '{|}|"name"|:|"x"|,|"arguments"|<tool_call>|</tool_call>|[|]|1| |{"name": "a", "arguments": {"b": 1}}|\n',
}


@pytest.mark.parametrize("kind", ["action_line", "tags", "json"])
def test_same_answers_as_the_pre_fix_regexes(kind: str) -> None:
    rng = random.Random(0)
    fragments = FRAGMENTS[kind].split("|")
    answered = 0
    for _ in range(20_000):
        reply = "".join(rng.choice(fragments) for _ in range(rng.randint(0, 16)))
        if kind == "json":
            assert _tool_call_text(reply) == _old_json_text(reply), reply
            answered += _tool_call_text(reply) is not None
            continue
        new, old = (parse_action_line, _old_action_line) if kind == "action_line" else (parse_tags, _old_tags)
        expected = _outcome(old, reply)
        assert _outcome(new, reply) == expected, reply
        answered += expected is not ParseError
    assert answered > 1000  # the replies exercise the parsers, not only their failure


@pytest.mark.parametrize("action_format", ["action_line", "tags", "fenced", "json", "fenced_or_action_line"])
@pytest.mark.parametrize("action", ["go to red ball 1", "<search> capital of Peru </search>", "click [12]"])
def test_action_reply_is_read_back_as_the_action(action_format: str, action: str) -> None:
    if action_format == "tags" and not action.startswith("<"):
        action = f"<answer> {action} </answer>"  # a tag format's actions hold their tags
    assert get_parser(action_format)(action_reply(action, action_format)) == action


def test_action_reply_writes_each_format_as_a_model_would() -> None:
    assert action_reply("turn left", "action_line") == "Action: turn left"
    assert action_reply("stop [42]", "fenced_or_action_line") == "Action: stop [42]"
    assert action_reply("<answer> Lima </answer>", "tags") == "<answer> Lima </answer>"
    assert action_reply("click [12]", "fenced") == "```\nclick [12]\n```"
    assert action_reply("look", "json") == '{"name": "look", "arguments": {}}'


def test_a_registered_format_has_its_own_inverse_and_one_without_gets_the_action() -> None:
    register_parser("shout_test", lambda reply: reply.removeprefix("DO ").lower(), reply=lambda a: f"DO {a.upper()}")
    register_parser("bare_test", lambda reply: reply)
    try:
        assert action_reply("jump", "shout_test") == "DO JUMP"
        assert get_parser("shout_test")(action_reply("jump", "shout_test")) == "jump"
        assert action_reply("jump", "bare_test") == "jump"
    finally:
        for name in ("shout_test", "bare_test"):
            PARSERS.pop(name, None)
            REPLIES.pop(name, None)
