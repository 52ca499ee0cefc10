"""Run every Python and shell block of the documentation, so that its examples cannot rot.

Pages: `docs/**/*.md` (the written ones; generated pages hold no examples) and `README.md`. Per page,
the Python blocks run in order in one fresh interpreter (a later block sees the names an earlier one
made), in a temporary folder, with no standard input; each shell block (`bash`, `sh`, `shell`, `console`) runs with
`bash -euo pipefail` in that folder, the `agentgym` command of this environment on the PATH. A block
that must not run here says why in an HTML comment on the line before it:

    <!-- skip: needs a GPU -->

Usage: `python docs/run_blocks.py [PAGE ...]` (default: every page). Prints one line per block and a
summary; exits 1 when a block failed or a skip gave no reason.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = {"python", "py", "python3"}
SHELL = {"bash", "sh", "shell", "console"}
SKIP = re.compile(r"<!--\s*skip:(?P<reason>.*?)-->")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
#: Seconds one page's Python blocks, or one shell block, may take.
TIMEOUT = 900


@dataclass
class Block:
    page: Path
    line: int  # of the opening fence, 1-based
    language: str
    code: str
    skip: str | None  # the reason, when marked


def blocks(page: Path) -> list[Block]:
    """The fenced blocks of `page` in Python or shell, in order (one pass over its lines)."""
    found, lines = [], page.read_text(encoding="utf-8").splitlines()
    i, previous = 0, ""
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            if lines[i].strip():
                previous = lines[i]
            i += 1
            continue
        indent, fence = opening["indent"], opening["fence"]
        language = (opening["info"].strip().split() or [""])[0].lower()
        body, j = [], i + 1
        while j < len(lines) and not _closes(lines[j], fence):
            body.append(lines[j][len(indent) :] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if language in PYTHON | SHELL:
            marked = SKIP.search(previous)
            found.append(Block(page, i + 1, language, "\n".join(body) + "\n", marked and marked["reason"].strip()))
        previous, i = "", j + 1
    return found


def _closes(line: str, fence: str) -> bool:
    """A closing fence: only the opening's character, at least as many of it."""
    text = line.strip()
    return len(text) >= len(fence) and set(text) == {fence[0]}


def run_page(page: Path, page_blocks: list[Block]) -> list[tuple[Block, str, str]]:
    """(block, "passed" | "failed" | "skipped", detail) for each block of one page."""
    results = []
    bin_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory(prefix="agentgym-docs-") as folder:
        python = [b for b in page_blocks if b.language in PYTHON and b.skip is None]
        if python:
            script = "".join(f"# {b.page.name}:{b.line}\n{b.code}" for b in python)
            outcome = _run([sys.executable, "-c", script], folder, env)
            results += [(b, *outcome) for b in python]
        for block in page_blocks:
            if block.skip is not None:
                results.append((block, "skipped" if block.skip else "failed", block.skip or "a skip needs a reason"))
            elif block.language in SHELL:
                code = "\n".join(line.removeprefix("$ ") for line in block.code.splitlines())
                results.append((block, *_run(["bash", "-euo", "pipefail", "-c", code], folder, env)))
    return sorted(results, key=lambda r: r[0].line)


def _run(command: list[str], folder: str, env: dict[str, str]) -> tuple[str, str]:
    try:
        done = subprocess.run(
            command, cwd=folder, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT
        )
    except subprocess.TimeoutExpired:
        return "failed", f"ran past {TIMEOUT} s"
    if done.returncode != 0:
        return "failed", (done.stderr or done.stdout)[-2000:]
    return "passed", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pages", nargs="*", type=Path, help="pages to check (default: docs/**/*.md and README.md)")
    pages = parser.parse_args(argv).pages or [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for page in pages:
        for block, outcome, detail in run_page(page, blocks(page)):
            counts[outcome] += 1
            where = f"{page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}:{block.line}"
            print(f"{outcome:8} {where} ({block.language}){': ' + detail if outcome == 'skipped' else ''}")
            if outcome == "failed":
                print(textwrap.indent(detail, "    "))
    print(f"docs: {counts['passed']} passed, {counts['failed']} failed, {counts['skipped']} skipped")
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
