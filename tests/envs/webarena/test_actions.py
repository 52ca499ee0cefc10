"""WebArena action parsing: every action form, and malformed actions rejected with the right usage."""

from __future__ import annotations

import contextlib

import pytest
from envs.test_fuzz import hostile_strings

from agentgym_envs.webarena.browser.actions import KINDS, Action, ActionError, parse_action


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("click [12]", Action("click", element_id=12)),
        ("  Click [ 7 ]  ", Action("click", element_id=7)),
        ("hover [3]", Action("hover", element_id=3)),
        ("type [7] [usb cable] [1]", Action("type", element_id=7, text="usb cable", flag=True)),
        ("type [7] [usb cable] [0]", Action("type", element_id=7, text="usb cable", flag=False)),
        ("type [7] [usb cable]", Action("type", element_id=7, text="usb cable", flag=True)),  # Enter by default
        ("type [7] [a [b] c] [0]", Action("type", element_id=7, text="a [b] c", flag=False)),
        ("type [7] []", Action("type", element_id=7, text="", flag=True)),
        ("press [Control+a]", Action("press", text="Control+a")),
        ("scroll [down]", Action("scroll", flag=True)),
        ("scroll [up]", Action("scroll", flag=False)),
        ("scroll down", Action("scroll", flag=True)),
        ("new_tab", Action("new_tab")),
        ("tab_focus [2]", Action("tab_focus", element_id=2)),
        ("close_tab", Action("close_tab")),
        ("goto [http://shop.test/cart]", Action("goto", text="http://shop.test/cart")),
        ("go_back", Action("go_back")),
        ("go_forward", Action("go_forward")),
        ("stop [$34.99]", Action("stop", text="$34.99")),
        ("stop [The answer is [42]]", Action("stop", text="The answer is [42]")),
        ("stop []", Action("stop", text="")),
        ("stop", Action("stop", text="")),
    ],
)
def test_actions_parse(text: str, expected: Action) -> None:
    assert parse_action(text) == expected


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("click 12", "expected click [id]"),
        ("click [abc]", "expected click [id]"),
        ("type [7]", "expected type [id] [text]"),
        ("scroll [left]", "expected scroll"),
        ("goto []", "expected goto [url]"),
        ("press", "expected press [key_comb]"),
        ("go_back [1]", "go_back takes no argument"),
        ("jump [3]", "unknown action 'jump'"),
        ("[12]", "an action starts with its name"),
        ("", "an action starts with its name"),
        ("stop now", "expected stop [answer]"),
    ],
)
def test_malformed_actions_say_what_is_expected(text: str, hint: str) -> None:
    with pytest.raises(ActionError, match=hint.replace("[", r"\[")):
        parse_action(text)


def test_every_kind_is_documented_and_hostile_strings_are_rejected() -> None:
    from agentgym_envs.webarena.browser.actions import ACTION_HELP

    assert all(any(line.startswith(kind) for line in ACTION_HELP.splitlines()) for kind in KINDS)
    accepted = []
    for text in hostile_strings(1000):
        with contextlib.suppress(ActionError):
            accepted.append(parse_action(text))
    assert accepted == []
