"""WebArena observation text: parsing Playwright's AI snapshot, numbering elements, the bounded window."""

from __future__ import annotations

from agentgym_envs.webarena.browser.observation import parse_snapshot, previous_window_start, render_tree, window

SNAPSHOT = """\
- generic [active] [ref=e1]:
  - navigation "Main" [ref=e2]:
    - link "Home" [ref=e3] [cursor=pointer]:
      - /url: /
    - link "Cart (1)" [ref=e4] [cursor=pointer]:
      - /url: /cart
  - 'heading "Chef''s: \\"best\\" knives" [level=1] [ref=e5]'
  - generic [ref=e6]:
    - textbox "Search" [ref=e7]:
      - /placeholder: Search products
    - button "Go" [disabled] [ref=e8]
  - paragraph [ref=e9]: "Price: $12.99"
  - combobox "Rating" [ref=e10]:
    - option "1 star"
    - option "5 stars" [selected]
  - checkbox "Remember me" [checked] [ref=e11]
  - text: Plain text run
  - spinbutton "Quantity" [ref=e12]: "3"
  - iframe [ref=e13]:
    - button "Inner" [ref=f1e2]"""


def test_snapshot_is_parsed_with_names_values_attributes_and_props() -> None:
    nodes = parse_snapshot(SNAPSHOT)
    by_ref = {node.ref: node for node in nodes if node.ref}
    assert by_ref["e3"].role == "link" and by_ref["e3"].name == "Home" and by_ref["e3"].props == {"url": "/"}
    assert by_ref["e5"].name == 'Chef\'s: "best" knives' and by_ref["e5"].attributes["level"] == "1"
    assert by_ref["e7"].props["placeholder"] == "Search products"
    assert by_ref["e8"].attributes["disabled"] == "true"
    assert by_ref["e9"].text == "Price: $12.99"
    assert by_ref["e12"].text == "3"
    assert by_ref["f1e2"].name == "Inner"
    texts = [node.text for node in nodes if node.role == "text"]
    assert texts == ["Plain text run"]


def test_elements_get_consecutive_ids_and_layout_containers_are_dropped() -> None:
    tree = render_tree(parse_snapshot(SNAPSHOT))
    assert tree.lines[0] == "[1] navigation 'Main'"  # the unnamed root generic is dropped, children move up
    assert "  [2] link 'Home'" in tree.lines
    assert "[4] heading 'Chef's: \"best\" knives' level: 1" in tree.lines
    assert "[5] textbox 'Search' placeholder: 'Search products'" in tree.lines  # the generic [ref=e6] is gone
    assert "[6] button 'Go' disabled" in tree.lines
    assert "[7] paragraph: Price: $12.99" in tree.lines
    assert "  option '5 stars' selected" in tree.lines  # options have no ref, hence no id
    assert "[9] checkbox 'Remember me' checked" in tree.lines
    assert "StaticText 'Plain text run'" in tree.lines
    assert "[10] spinbutton 'Quantity': 3" in tree.lines
    assert tree.refs == {
        1: "e2", 2: "e3", 3: "e4", 4: "e5", 5: "e7", 6: "e8", 7: "e9", 8: "e10", 9: "e11", 10: "e12", 11: "e13",
        12: "f1e2",
    }  # fmt: skip
    assert tree.nodes[12].role == "button" and tree.nodes[12].name == "Inner"


def test_window_truncates_with_notes_and_scrolls() -> None:
    lines = [f"[{i}] link 'Product number {i}'" for i in range(1, 101)]
    text, first, shown = window(lines, 0, 300)
    assert first == 0 and 5 <= shown < 100
    assert text.startswith("[1] link")
    assert f"{100 - shown} more lines of this page are not shown" in text and "scroll [down]" in text
    assert len(text) < 300 + 200  # the page part plus one note
    text2, first2, _ = window(lines, shown, 300)
    assert first2 == shown and text2.startswith(f"(... {shown} lines above; scroll [up]")
    assert f"[{shown + 1}] link" in text2
    assert previous_window_start(lines, first2, 300) == 0  # scrolling up returns to the start
    last, first3, _ = window(lines, 10_000, 300)  # past the end: the last line is still shown
    assert first3 == 99 and "[100] link" in last and "more lines" not in last


def test_a_single_huge_line_is_cut_so_the_bound_holds() -> None:
    text, _, shown = window(["x" * 5000], 0, 300)
    assert shown == 1 and len(text) <= 300 and text.endswith("(line cut)")
