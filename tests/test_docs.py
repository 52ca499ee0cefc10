"""The documentation's machinery: the block runner (docs/run_blocks.py) finds and runs what a page
shows, and the env pages are made from the env classes (docs/hooks/generate.py, in the docs env)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

DOCS = Path(__file__).parents[1] / "docs"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


run_blocks = load(DOCS / "run_blocks.py")

PAGE = """# A page

Text with `inline` code.

```python
x = 40
```

<!-- skip: needs a GPU -->
```bash
nvidia-smi
```

~~~py
assert x + 2 == 42  # sees the first block's names
~~~

1. In a list:

    ```sh
    test "$(echo hi)" = hi
    ```

```text
not code
```

<!-- skip: -->
```python
raise SystemExit("never run")
```
"""


def test_blocks_are_found_with_their_languages_and_skips(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    found = run_blocks.blocks(page)
    assert [(b.language, b.skip) for b in found] == [
        ("python", None),
        ("bash", "needs a GPU"),
        ("py", None),
        ("sh", None),
        ("python", ""),
    ]
    assert found[3].code == 'test "$(echo hi)" = hi\n'  # the list's indent is taken off
    assert [b.line for b in found] == [5, 10, 14, 20, 29]


def test_a_page_runs_in_order_and_failures_and_bare_skips_count(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    outcomes = [(b.line, outcome) for b, outcome, _ in run_blocks.run_page(page, run_blocks.blocks(page))]
    # the last block is skipped without a reason, so it is not run and counts as a failure
    assert outcomes == [(5, "passed"), (10, "skipped"), (14, "passed"), (20, "passed"), (29, "failed")]
    broken = tmp_path / "broken.md"
    broken.write_text("```python\nassert 1 == 2, 'the example is wrong'\n```\n")
    ((_, outcome, detail),) = run_blocks.run_page(broken, run_blocks.blocks(broken))
    assert outcome == "failed" and "the example is wrong" in detail


def test_env_pages_follow_the_env_docstring(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("mkdocs")  # the docs env (tox -e docs) runs this test
    from agentgym_envs.babyai.env import BabyAIEnv

    generate = load(DOCS / "hooks" / "generate.py")
    monkeypatch.setenv("AGENTGYM_DOCS_EXPERT_EPISODES", "2")
    monkeypatch.setattr(BabyAIEnv, "__doc__", "Grid worlds.\n\n## Description\nA sentence written for this test.")
    page = generate.env_page("AgentGym/BabyAI-v0", "BabyAI")
    assert page.startswith("# BabyAI: Grid worlds\n")
    assert "### Description\nA sentence written for this test." in page
    assert "| splits (tasks) | train: 400,000, test: 4,000 |" in page
    assert "| expert, first 2 test tasks | 2/2 solved |" in page
    assert "`AgentGym/BabyAI-GoToLocal-v0`" in page


def test_an_args_block_becomes_a_list_of_arguments() -> None:
    pytest.importorskip("mkdocs")  # the docs env (tox -e docs) runs this test
    generate = load(DOCS / "hooks" / "generate.py")
    args = "Args:\n    depths: The depths\n        drawn from.\n    render_mode: None or 'ansi'.\nAfter."
    doc = "Title.\n\n## Description\nText.\n\n" + args
    assert generate.demote(doc).splitlines() == [
        "### Description",
        "Text.",
        "",
        "### Arguments",
        "",
        "- `depths`: The depths drawn from.",
        "- `render_mode`: None or 'ansi'.",
        "After.",
    ]
