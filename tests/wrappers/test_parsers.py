"""Action parsers: each format, its failure message, and pluggability."""

from __future__ import annotations

import pytest

from agentgym_wrappers import ParseError, first_of, get_parser, register_parser
from agentgym_wrappers.parsers import parse_action_line, parse_fenced, parse_json_tool, parse_tags


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
