"""The page as text: Playwright's accessibility snapshot (`page.aria_snapshot(mode="ai")`) turned into
WebArena-style lines with numeric element ids, and a bounded window over them.

Playwright writes the snapshot as YAML lines such as ``- link "Forums" [ref=e12] [cursor=pointer]:``;
each element with a `ref` can be acted on with the selector ``aria-ref=e12``. We number those
elements 1, 2, 3... in document order (`[3] link 'Forums'`), keep the id -> ref map for the step,
drop unnamed layout containers, and show each element's text, value, state and placeholder.

>>> snapshot = '- heading "Shop" [level=1] [ref=e5]\\n- textbox "Search" [ref=e7]:\\n  - /placeholder: Find'
>>> tree = render_tree(parse_snapshot(snapshot))
>>> tree.lines
["[1] heading 'Shop' level: 1", "[2] textbox 'Search' placeholder: 'Find'"]
>>> tree.refs
{1: 'e5', 2: 'e7'}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

_LINE = re.compile(r"^(?P<indent> *)- (?P<item>.*)$")
_ROLE = re.compile(r"[a-zA-Z]+")
_ATTRIBUTE = re.compile(r"\s*\[(?P<key>[a-z-]+)(?:=(?P<value>[^\]\s]*))?\]")
_VALUE_ESCAPES = {"\\": "\\", '"': '"', "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
#: Containers shown only when they carry a name, text or a pointer cursor.
_LAYOUT_ROLES = frozenset({"generic", "none", "presentation", "group"})
#: Snapshot attributes -> how they read in the observation.
_FLAGS = {
    "checked": "checked",
    "disabled": "disabled",
    "expanded": "expanded",
    "pressed": "pressed",
    "selected": "selected",
    "invalid": "invalid",
    "active": "focused",
}


@dataclass
class Node:
    """One line of the snapshot: an element (role, name, attributes, ref) or a text run."""

    depth: int
    role: str
    name: str = ""
    text: str | None = None
    ref: str | None = None
    attributes: dict[str, str] = field(default_factory=dict)
    props: dict[str, str] = field(default_factory=dict)


@dataclass
class Tree:
    """The rendered page: text lines, and the element behind each numeric id."""

    lines: list[str]
    refs: dict[int, str]
    nodes: dict[int, Node]


def _unquote_key(item: str) -> tuple[str, str]:
    """Split a YAML sequence item into (key, rest after the key); single-quoted keys are unescaped."""
    if item.startswith("'"):
        out, i = [], 1
        while i < len(item):
            if item[i] == "'":
                if item[i + 1 : i + 2] == "'":
                    out.append("'")
                    i += 2
                    continue
                return "".join(out), item[i + 1 :]
            out.append(item[i])
            i += 1
        return "".join(out), ""
    # An unquoted key never holds ": " (the writer quotes such keys), so the first one ends it.
    if item.endswith(":") and ": " not in item:
        return item[:-1], ":"
    key, sep, rest = item.partition(": ")
    return key, (": " + rest) if sep else ""


def _unquote_value(value: str) -> str:
    """A YAML scalar as Playwright writes it: plain, or double-quoted with backslash escapes."""
    if not (len(value) >= 2 and value.startswith('"') and value.endswith('"')):
        return value
    body, out, i = value[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt == "x" and i + 3 < len(body):
                out.append(chr(int(body[i + 2 : i + 4], 16)))
                i += 4
                continue
            out.append(_VALUE_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _parse_key(key: str, depth: int) -> Node | None:
    match = _ROLE.match(key)
    if match is None:
        return None
    node = Node(depth=depth, role=match.group(0))
    pos = match.end()
    rest = key[pos:].lstrip()
    if rest.startswith('"'):
        try:
            node.name, end = json.JSONDecoder().raw_decode(rest)
        except json.JSONDecodeError:
            return None
        rest = rest[end:]
    for attr in _ATTRIBUTE.finditer(rest):
        if attr.group("key") == "ref":
            node.ref = attr.group("value")
        else:
            node.attributes[attr.group("key")] = attr.group("value") or "true"
    return node


def parse_snapshot(snapshot: str) -> list[Node]:
    """The elements and text runs of an AI-mode aria snapshot, in document order."""
    nodes: list[Node] = []
    for line in snapshot.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        depth = len(match["indent"]) // 2
        key, rest = _unquote_key(match["item"])
        value = _unquote_value(rest[2:]) if rest.startswith(": ") else None
        if key.startswith("/"):  # a property of the element above (/url, /placeholder)
            if nodes and value is not None:
                nodes[-1].props[key[1:]] = value
            continue
        if key == "text":
            nodes.append(Node(depth=depth, role="text", text=value or ""))
            continue
        node = _parse_key(key, depth)
        if node is not None:
            node.text = value
            nodes.append(node)
    return nodes


def _quote(text: str) -> str:
    return "'" + " ".join(text.split()) + "'"


def _describe(node: Node) -> str:
    if node.role == "text":
        return f"StaticText {_quote(node.text or '')}"
    parts = [node.role]
    if node.name:
        parts.append(_quote(node.name))
    for key, value in node.attributes.items():
        if key == "level":
            parts.append(f"level: {value}")
        elif key in _FLAGS and value != "false":
            parts.append(_FLAGS[key] if value == "true" else f"{_FLAGS[key]}: {value}")
    if "placeholder" in node.props:
        parts.append(f"placeholder: {_quote(node.props['placeholder'])}")
    line = " ".join(parts)
    if node.text is not None and node.text.strip() and " ".join(node.text.split()) != node.name:
        line += f": {_quote(node.text)[1:-1]}"
    return line


def render_tree(nodes: list[Node]) -> Tree:
    """Number the elements that have refs (1, 2, ... in document order) and write one line each.

    Unnamed layout containers without text are skipped and their children move up a level;
    text runs and elements without refs (e.g. the options of a drop-down) are shown without an id.
    """
    lines: list[str] = []
    refs: dict[int, str] = {}
    by_id: dict[int, Node] = {}
    skipped: list[int] = []  # depths of skipped containers that enclose the current line
    for node in nodes:
        while skipped and skipped[-1] >= node.depth:
            skipped.pop()
        is_layout = node.role in _LAYOUT_ROLES and not node.name and not (node.text or "").strip()
        if is_layout and node.attributes.get("cursor") != "pointer":
            skipped.append(node.depth)
            continue
        indent = "  " * (node.depth - len(skipped))
        line = _describe(node)
        if node.ref is not None:
            element_id = len(refs) + 1
            refs[element_id] = node.ref
            by_id[element_id] = node
            line = f"[{element_id}] {line}"
        lines.append(indent + line)
    return Tree(lines=lines, refs=refs, nodes=by_id)


def window(lines: list[str], offset: int, max_chars: int) -> tuple[str, int, int]:
    """The lines from `offset` that fit in `max_chars`, with notes for what lies above and below.

    Returns (text, first line shown, lines shown). At least one line is shown (cut if longer than
    the budget), so a scroll always makes progress.
    """
    offset = max(0, min(offset, max(0, len(lines) - 1)))
    shown: list[str] = []
    used = 0
    for line in lines[offset:]:
        if shown and used + len(line) + 1 > max_chars:
            break
        if len(line) > max_chars:
            line = line[: max(0, max_chars - 20)] + " ... (line cut)"
        shown.append(line)
        used += len(line) + 1
    above, below = offset, len(lines) - offset - len(shown)
    text = "\n".join(shown)
    if above:
        text = f"(... {above} lines above; scroll [up] to see them)\n" + text
    if below:
        text += (
            f"\n(... {below} more lines of this page are not shown: the observation is truncated to "
            f"{max_chars} characters; scroll [down] to see them)"
        )
    return text, offset, len(shown)


def previous_window_start(lines: list[str], offset: int, max_chars: int) -> int:
    """Where the window that ends just before line `offset` starts (for scrolling up)."""
    used, start = 0, min(offset, len(lines))
    while start > 0 and (start == offset or used + len(lines[start - 1]) + 1 <= max_chars):
        used += len(lines[start - 1]) + 1
        start -= 1
    return start
