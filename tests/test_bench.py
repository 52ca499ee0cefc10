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
    assert all("raw minigrid" in row and ">= 0.9x" in row and "x  " in row for row in rows)  # issue 39's target

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


def _options_and_summary(path) -> tuple[set[str], bool]:
    """The `--options` a benchmark script declares with `add_argument`, and whether it writes a `summary` key."""
    import ast

    tree = ast.parse(path.read_text())
    options = {
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", None) == "add_argument"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    }
    writes = any(isinstance(node, ast.Constant) and node.value == "summary" for node in ast.walk(tree))
    return options, writes


@pytest.mark.parametrize("name", sorted(bench.discover(bench.DEFAULT_DIR)))
def test_every_listed_benchmark_takes_quick_and_out_and_writes_a_summary(name: str) -> None:
    """The contract `agentgym bench` runs each listed benchmark by (ray_speed.py had no `--quick`, no summary)."""
    options, writes = _options_and_summary(bench.discover(bench.DEFAULT_DIR)[name])
    assert {"--quick", "--out"} <= options and writes, (name, options, writes)


def test_ray_speed_summary_is_its_figures_as_ratios() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("ray_speed", bench.DEFAULT_DIR / "ray_speed.py")
    ray_speed = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ray_speed)
    overhead = {"envs": 64, "actors": 2, "ray_working_calls_ms_p50": 1.3, "ray_empty_calls_ms_p50": 1.2}
    overhead["ray_overhead_ms_per_batch_p50"] = 1.5
    one = {"envs": 128, "in_process": 5000.0, "one_node": {"steps_per_s": 4000.0}, "two_nodes": {"steps_per_s": 2500.0}}
    rows = ray_speed.summary({"overhead": overhead, "throughput": {"babyai": one}})
    assert [set(row) for row in rows] == [{"measure", "ratio", "baseline", "target", "met"}] * 4
    assert rows[0]["baseline"] == "Ray's floor (2 calls doing the same work)" and rows[0]["met"] is True  # 1.5 <= 1.56
    assert rows[0]["ratio"] == pytest.approx(1.3 / 1.5) and rows[0]["target"].startswith(">= 0.83x")
    assert rows[1]["ratio"] == pytest.approx(1.2 / 1.5) and rows[1]["met"] is False  # 1.5 ms > 1.2 x 1.2 ms
    assert rows[1]["baseline"] == "Ray's floor (2 empty calls)"
    assert [row["ratio"] for row in rows[2:]] == [pytest.approx(0.8), pytest.approx(0.5)]
    assert [row["met"] for row in rows[2:]] == [None, None]
    near = ray_speed.summary({"overhead": {**overhead, "ray_overhead_ms_per_batch_p50": 1.44}, "throughput": {}})
    assert near[1]["met"] is True and near[1]["ratio"] == pytest.approx(1.2 / 1.44)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(bench.discover(bench.DEFAULT_DIR)))
def test_every_listed_benchmark_runs_through_agentgym_bench_quick(name: str, tmp_path) -> None:
    """Each benchmark of `agentgym bench --list`, run as `agentgym bench NAME --quick` runs it, meets the contract."""
    path = bench.discover(bench.DEFAULT_DIR)[name]
    entry = bench.run_one(path, tmp_path / f"{name}.json", tmp_path / f"{name}.log", quick=True, timeout=900)
    log = (tmp_path / f"{name}.log").read_text()[-3000:]
    assert "error" not in entry and entry["summary"], (entry, log)
    for row in entry["summary"]:
        assert {"measure", "ratio", "baseline", "target", "met"} <= set(row), row
        assert row["ratio"] is None or row["ratio"] > 0, row
        assert row["met"] in (True, False, None), row
