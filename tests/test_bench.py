"""`agentgym bench`: one real speed benchmark in quick mode, and stand-in benchmarks for the failure paths."""

from __future__ import annotations

import json

import pytest

from agentgym_train import bench
from agentgym_train.cli import main


def test_every_speed_benchmark_is_found() -> None:
    names = bench.discover(bench.DEFAULT_DIR)
    assert {"babyai", "deepsearch", "remote", "sciworld", "textcraft", "webarena"} <= set(names)
    assert bench.select(names, ["babyai_speed", "remote"]) == {"babyai": names["babyai"], "remote": names["remote"]}
    with pytest.raises(ValueError, match="no speed benchmark named \\['nope'\\]"):
        bench.select(names, ["nope"])


def test_bench_babyai_quick_prints_the_table_and_writes_json(tmp_path, capsys) -> None:
    assert main(["bench", "babyai", "--quick", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("benchmark "))
    assert lines[header].split() == ["benchmark", "measure", "ratio", "baseline", "target", "met"]
    rows = [line for line in lines[header + 1 :] if line.startswith("babyai ")]
    assert len(rows) == 2  # GoToLocal, random and turns workloads
    assert all("raw minigrid" in row and ">= 0.5x" in row and "x  " in row for row in rows)

    produced = json.loads((tmp_path / "quick" / "babyai_speed.json").read_text())
    assert [item["measure"] for item in produced["summary"]] == ["steps/s GoToLocal/random", "steps/s GoToLocal/turns"]
    ratio = produced["summary"][1]["ratio"]
    assert 0 < ratio < 10 and ratio == produced["GoToLocal/turns"]["ratio"]
    summary = json.loads((tmp_path / "quick" / "summary.json").read_text())
    assert summary["quick"] is True and summary["benchmarks"]["babyai"]["returncode"] == 0
    assert summary["benchmarks"]["babyai"]["summary"] == produced["summary"]


def test_a_failing_or_silent_benchmark_is_reported(tmp_path, capsys) -> None:
    """Stand-in benchmarks: one crashes, one writes JSON without a summary, one follows the contract."""
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "crash_speed.py").write_text("raise SystemExit('boom')\n")
    (folder / "silent_speed.py").write_text(
        "import json, sys\nopen(sys.argv[sys.argv.index('--out') + 1], 'w').write(json.dumps({'x': 1}))\n"
    )
    (folder / "good_speed.py").write_text(
        "import json, sys\nrow = {'measure': 'm', 'ratio': 2.5, 'baseline': 'b', 'target': '>= 2x', 'met': True}\n"
        "open(sys.argv[sys.argv.index('--out') + 1], 'w').write(json.dumps({'summary': [row]}))\n"
    )
    (folder / "helper.py").write_text("")  # not a speed benchmark
    assert main(["bench", "--dir", str(folder)]) == 1
    rows = {line.split()[0]: line.split(maxsplit=1)[1] for line in capsys.readouterr().out.splitlines() if line}
    assert rows["crash"].startswith("FAILED: exit status 1")
    assert rows["silent"].startswith("FAILED: ") and "has no 'summary' list" in rows["silent"]
    assert rows["good"].split() == ["m", "2.50x", "b", ">=", "2x", "yes"]
    assert "helper" not in rows
    assert "boom" in (folder / "results" / "crash_speed.log").read_text()
    assert main(["bench", "--dir", str(folder), "--list"]) == 0
    assert capsys.readouterr().out.split() == ["crash", "good", "silent"]
