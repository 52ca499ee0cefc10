"""`agentgym bench [NAMES...]`: run the speed benchmarks, print one table of ratios to their baselines.

A speed benchmark is a script `benchmarks/<name>_speed.py` of a source checkout that
- accepts `--out PATH` (its JSON) and `--quick` (short settings, for a smoke run);
- measures its baseline in the same run and writes, beside its own figures, a `summary` list in its JSON:
  one headline per entry, `{"measure", "ratio", "baseline", "target", "met"}`, where `ratio` is how many
  times better than the baseline ours is (faster, or less memory: > 1 is better), `target` says what
  the project asks in words and `met` whether this run reached it (None where there is no target).

Each benchmark runs in its own process (they pin cores, start JVMs and browsers); its output goes to
`<results>/<name>.log`, its JSON to `<results>/<name>.json` and the table to `<results>/summary.json`.
`--quick` writes under `<results>/quick/`, so a smoke run never replaces a real measurement.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: The benchmarks folder of the source checkout this package is installed from (an editable install).
DEFAULT_DIR = Path(__file__).resolve().parents[1] / "benchmarks"
SUFFIX = "_speed"


def discover(directory: Path) -> dict[str, Path]:
    """The speed benchmarks in `directory`, by name (`babyai` for `babyai_speed.py`)."""
    return {path.stem.removesuffix(SUFFIX): path for path in sorted(directory.glob(f"*{SUFFIX}.py"))}


def select(available: dict[str, Path], names: list[str]) -> dict[str, Path]:
    """The benchmarks named (`babyai` or `babyai_speed`), all of them when `names` is empty."""
    if not names:
        return available
    unknown = [name for name in names if name.removesuffix(SUFFIX) not in available]
    if unknown:
        raise ValueError(f"no speed benchmark named {unknown}; there are: {', '.join(available)}")
    return {name.removesuffix(SUFFIX): available[name.removesuffix(SUFFIX)] for name in names}


def run_one(path: Path, out: Path, log: Path, quick: bool, timeout: float | None) -> dict[str, Any]:
    """Run one benchmark script; return its exit status, wall time and headline summary."""
    argv = [sys.executable, str(path), "--out", str(out), *(["--quick"] if quick else [])]
    out.unlink(missing_ok=True)
    start = time.perf_counter()
    with log.open("w") as sink:
        try:
            returncode = subprocess.run(argv, stdout=sink, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            returncode = None
    seconds = time.perf_counter() - start
    entry: dict[str, Any] = {"seconds": round(seconds, 1), "returncode": returncode, "json": str(out)}
    if returncode != 0:
        entry["error"] = f"timed out after {timeout} s" if returncode is None else f"exit status {returncode}"
    elif not out.is_file():
        entry["error"] = f"wrote no {out}"
    else:
        summary = json.loads(out.read_text()).get("summary")
        if not isinstance(summary, list):
            entry["error"] = f"{out} has no 'summary' list (see agentgym_train/bench.py for the contract)"
        else:
            entry["summary"] = summary
    return entry


def _ratio(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _met(value: Any) -> str:
    return {True: "yes", False: "NO", None: "-"}[value]


def table(results: dict[str, dict[str, Any]]) -> str:
    """One table: a row per headline of every benchmark, or the benchmark's error."""
    header = ("benchmark", "measure", "ratio", "baseline", "target", "met")
    rows: list[tuple[str, ...]] = []
    for name, entry in results.items():
        if "error" in entry:
            rows.append((name, f"FAILED: {entry['error']}", "", "", "", ""))
            continue
        for item in entry["summary"]:
            rows.append(
                (
                    name,
                    str(item["measure"]),
                    _ratio(item.get("ratio")),
                    str(item.get("baseline", "")),
                    str(item.get("target") or "-"),
                    _met(item.get("met")),
                )
            )
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    aligned = [str.ljust, str.ljust, str.rjust, str.ljust, str.ljust, str.ljust]
    return "\n".join(
        "  ".join(align(cell, width) for align, cell, width in zip(aligned, row, widths, strict=True)).rstrip()
        for row in [header, *rows]
    )


def run_benchmarks(
    directory: Path,
    names: list[str],
    *,
    quick: bool = False,
    results_dir: Path | None = None,
    timeout: float | None = None,
    list_only: bool = False,
) -> int:
    """Run the benchmarks `names` (all when empty) of `directory` one after another and print the table.

    Args:
        directory: The benchmarks folder.
        names: Benchmarks to run, e.g. `["babyai", "remote"]`; empty: all.
        quick: Short settings (a smoke run); results go under `<results_dir>/quick/`.
        results_dir: Where the JSON goes (default: `directory/results`).
        timeout: Seconds allowed per benchmark (None: no limit).
        list_only: Print the names of the speed benchmarks and run none.

    Returns:
        The exit code: 0, 1 when one failed or wrote no summary, 2 for no folder or an unknown name.
    """
    if not directory.is_dir():
        print(
            f"no benchmarks folder at {directory}: `agentgym bench` runs from a source checkout "
            "(pip install -e .), or pass --dir",
            file=sys.stderr,
        )
        return 2
    available = discover(directory)
    if list_only:
        print("\n".join(available))
        return 0
    try:
        chosen = select(available, names)
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    results_dir = results_dir or directory / "results"
    if quick:
        results_dir = results_dir / "quick"
    results_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict[str, Any]] = {}
    for i, (name, path) in enumerate(chosen.items(), 1):
        print(f"[{i}/{len(chosen)}] {name} ...", end=" ", flush=True)
        log = results_dir / f"{path.stem}.log"
        entry = run_one(path, results_dir / f"{path.stem}.json", log, quick, timeout)
        results[name] = entry
        print(f"{entry['seconds']:.0f} s" + (f", FAILED ({entry['error']}; see {log})" if "error" in entry else ""))
    print()
    print(table(results))
    summary = results_dir / "summary.json"
    summary.write_text(json.dumps({"quick": quick, "benchmarks": results}, indent=2) + "\n")
    print(f"\nratio: times better than the baseline (> 1: faster or smaller); wrote {summary}")
    return 1 if any("error" in entry for entry in results.values()) else 0
