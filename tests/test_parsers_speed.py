"""Every parser and action handler runs in linear time: `benchmarks/parsers_speed.py`'s check, at 32k characters.

The benchmark times each function on adversarial shapes at 1 MB; this runs the same shapes at a
size where the pre-fix quadratic parsers already took seconds, with generous bounds for a shared
machine. SciWorld's step needs a JVM and is left to the benchmark; its `normalise_action` is here.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

CHARS = 32_000
MAX_SECONDS = 0.1  # at 32k characters: a linear function takes a few ms, the pre-fix ones 0.4-7 s
MAX_SCALING = 4.0  # time at 2n over time at n
FLOOR_SECONDS = 0.005  # shorter times show no trend on a loaded machine


def _benchmark() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "parsers_speed.py"
    spec = importlib.util.spec_from_file_location("parsers_speed", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


BENCHMARK = _benchmark()
CASES = {case.name: case for case in BENCHMARK.cases(sciworld_step=False)}


@pytest.mark.parametrize("name", CASES)
def test_linear_time(name: str) -> None:
    result = BENCHMARK.measure(CASES[name], CHARS, repeats=2, budget=0.01)
    slow = {
        shape: f"{row['seconds_n']:.4f} s at {CHARS // 2:,}, {row['seconds_2n']:.4f} s at {CHARS:,} chars"
        for shape, row in result["shapes"].items()
        if row["seconds_2n"] > MAX_SECONDS or (row["scaling"] > MAX_SCALING and row["seconds_2n"] >= FLOOR_SECONDS)
    }
    assert not slow, f"{name} is not linear on: {slow}"
