"""WebArena's action set, parsed from the action text.

>>> parse_action("click [12]")
Action(kind='click', element_id=12, text='', flag=True)
>>> parse_action("type [7] [usb cable] [0]")
Action(kind='type', element_id=7, text='usb cable', flag=False)
>>> parse_action("stop [$34.99]").text
'$34.99'
>>> parse_action("jump [3]")
Traceback (most recent call last):
...
agentgym_envs.webarena.browser.actions.ActionError: unknown action 'jump'; ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: One line per action, as the agent is told.
ACTION_HELP = (
    "click [id]: click the element with this id.\n"
    "type [id] [text] [press_enter_after=0|1]: type the text into the field (replacing what is there; on a "
    "drop-down list, choose the option with that label); Enter is pressed afterwards unless the last part is [0].\n"
    "hover [id]: hover over the element.\n"
    "press [key_comb]: press a key or a combination, e.g. press [Enter] or press [Control+a].\n"
    "scroll [down] or scroll [up]: scroll the page (and the part of a long page that is shown).\n"
    "new_tab: open a new, empty tab.\n"
    "tab_focus [tab_index]: switch to the tab with this index.\n"
    "close_tab: close the current tab.\n"
    "goto [url]: go to the URL.\n"
    "go_back: go to the previous page.\n"
    "go_forward: go to the next page (after go_back).\n"
    "stop [answer]: finish; give the answer if the task asks for one (N/A if the task is impossible), else stop []."
)

KINDS = (
    "click",
    "type",
    "hover",
    "press",
    "scroll",
    "new_tab",
    "tab_focus",
    "close_tab",
    "goto",
    "go_back",
    "go_forward",
    "stop",
)
_VERB = re.compile(r"^\s*([a-z_]+)", re.IGNORECASE)
_ID = re.compile(r"^\[\s*(\d{1,9})\s*\]$")
_TYPE = re.compile(r"^\[\s*(\d{1,9})\s*\]\s*\[(.*)\]\s*\[\s*([01])\s*\]$", re.DOTALL)
_TYPE_NO_ENTER = re.compile(r"^\[\s*(\d{1,9})\s*\]\s*\[(.*)\]$", re.DOTALL)
_BRACKETED = re.compile(r"^\[(.*)\]$", re.DOTALL)
_SCROLL = re.compile(r"^\[?\s*(up|down)\s*\]?$", re.IGNORECASE)


class ActionError(ValueError):
    """The text is not a well-formed action; the message says what the right form is."""


@dataclass(frozen=True)
class Action:
    """A parsed action: its kind, target element id, text argument and flag (press Enter / scroll down)."""

    kind: str
    element_id: int | None = None
    text: str = ""
    flag: bool = True


def _usage(kind: str) -> str:
    return next(line for line in ACTION_HELP.splitlines() if line.startswith(kind + " ") or line.startswith(kind + ":"))


def parse_action(text: str) -> Action:
    """Parse one action (surrounding whitespace ignored); raise `ActionError` when malformed."""
    match = _VERB.match(text)
    if match is None:
        raise ActionError("an action starts with its name, e.g. click [12]; actions: " + ", ".join(KINDS))
    verb = match.group(1).lower()
    if verb not in KINDS:
        raise ActionError(f"unknown action {match.group(1)[:40]!r}; actions: " + ", ".join(KINDS))
    rest = text[match.end() :].strip()
    if verb in ("new_tab", "close_tab", "go_back", "go_forward"):
        if rest:
            raise ActionError(f"{verb} takes no argument")
        return Action(verb)
    if verb in ("click", "hover"):
        found = _ID.match(rest)
        if found is None:
            raise ActionError(f"expected {_usage(verb)}")
        return Action(verb, element_id=int(found.group(1)))
    if verb == "type":
        found = _TYPE.match(rest)
        if found is not None:
            return Action(verb, element_id=int(found.group(1)), text=found.group(2), flag=found.group(3) == "1")
        found = _TYPE_NO_ENTER.match(rest)
        if found is None:
            raise ActionError(f"expected {_usage(verb)}")
        return Action(verb, element_id=int(found.group(1)), text=found.group(2), flag=True)
    if verb == "scroll":
        found = _SCROLL.match(rest)
        if found is None:
            raise ActionError(f"expected {_usage(verb)}")
        return Action(verb, flag=found.group(1).lower() == "down")
    if verb == "tab_focus":
        found = _ID.match(rest)
        if found is None:
            raise ActionError(f"expected {_usage(verb)}")
        return Action(verb, element_id=int(found.group(1)))
    found = _BRACKETED.match(rest)
    if verb == "stop":
        if not rest:
            return Action(verb)
        if found is None:
            raise ActionError(f"expected {_usage(verb)}")
        return Action(verb, text=found.group(1).strip())
    if found is None or not found.group(1).strip():
        raise ActionError(f"expected {_usage(verb)}")
    return Action(verb, text=found.group(1).strip())
