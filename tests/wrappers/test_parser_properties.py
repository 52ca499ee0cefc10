"""Property-based tests (Hypothesis) of the action parsers and stop strings: any text at all, and
replies built around a known action, within a fixed, derandomised budget (the same examples on
every run, so CI stays reproducible and its time bounded).

The properties: a parser either returns an action or raises `ParseError` (never another
exception); the action a reply was built around is the one parsed back out, whatever text comes
before it; `find_stop` finds what a plain scan finds.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym_wrappers import ParseError
from agentgym_wrappers.parsers import get_parser, parse_action_line, parse_fenced, parse_json_tool, parse_tags
from agentgym_wrappers.stops import find_stop

#: The built-in formats (tests elsewhere register their own in the same registry).
FORMATS = ("action_line", "tags", "fenced", "json", "fenced_or_action_line")
BUDGET = settings(
    max_examples=300, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)

#: Pieces that the parsers look for, mixed into random text so that near-misses are common.
FRAGMENTS = [
    "Action:",
    "action\uff1a",
    "**Action:**",
    "\n",
    "<search>",
    "</search>",
    "<answer>",
    "</answer>",
    "<\u017fearch>",
    "```",
    "```python\n",
    "<tool_call>",
    "</tool_call>",
    "{",
    "}",
    '{"name": ',
    '"arguments": ',
    "[",
    "]",
    "9" * 5000,
    "\ud800",
    "\x00",
    "\u202e",
]
hostile = st.lists(st.one_of(st.text(max_size=40), st.sampled_from(FRAGMENTS)), max_size=30).map("".join)
#: Actions as the scenarios spell them: words, numbers and brackets, single spaces inside.
actions = st.from_regex(r"[a-z0-9\[\]]+( [a-z0-9\[\]]+){0,5}", fullmatch=True)
#: Text before an action that holds none of the markers the parsers look for.
plain = st.text(st.characters(blacklist_characters="<>`{}:\uff1a", blacklist_categories=["Cs"]), max_size=200)


@BUDGET
@given(hostile)
def test_every_parser_returns_an_action_or_a_parse_error(reply: str) -> None:
    for name in FORMATS:
        try:
            action = get_parser(name)(reply)
        except ParseError as error:
            assert str(error), name  # the reminder the model is shown
        else:
            assert isinstance(action, str) and action, name


@BUDGET
@given(plain, actions, st.booleans())
def test_the_last_action_line_is_parsed_back(thought: str, action: str, earlier: bool) -> None:
    thought = f"Action: an earlier one\n{thought}" if earlier else thought
    assert parse_action_line(f"{thought}\nAction: {action}") == action
    assert parse_action_line(f"{thought}\n**Action:** `{action}`  \n") == action


@BUDGET
@given(plain, st.sampled_from(["search", "answer", "Search", "ANSWER"]), actions, plain)
def test_the_first_tag_element_is_parsed_back(before: str, tag: str, query: str, after: str) -> None:
    element = f"<{tag}> {query} </{tag}>"
    assert parse_tags(f"{before}{element}{after}<answer>later</answer>") == element


@BUDGET
@given(plain, actions, st.sampled_from(["", "python\n", "\n"]))
def test_the_last_fenced_block_is_parsed_back(before: str, action: str, language: str) -> None:
    assert parse_fenced(f"```first```{before}```{language}{action}```") == action


@BUDGET
@given(plain, actions, st.booleans())
def test_a_json_tool_call_is_parsed_back(before: str, action: str, string_arguments: bool) -> None:
    arguments = json.dumps({"action": action}) if string_arguments else {"action": action}
    call = json.dumps({"name": "act", "arguments": arguments})
    assert parse_json_tool(f"{before}<tool_call>{call}</tool_call>") == action


@BUDGET
@given(st.text(max_size=300), st.lists(st.text(min_size=1, max_size=8), max_size=4))
def test_find_stop_finds_the_earliest_stop(text: str, stops: list[str]) -> None:
    at = find_stop(text, stops)
    starts = [i for i in range(len(text)) if any(text.startswith(s, i) for s in stops)]
    assert at == (starts[0] if starts else None)
