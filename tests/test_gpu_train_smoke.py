"""`benchmarks/gpu_train.py` end to end on CPU at its smallest: both arms train, the JSON holds what
`agentgym bench` reads, and the token counts and env share are the ones the run produced."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from agentgym_train.bench import table


def _benchmark() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_train.py"
    spec = importlib.util.spec_from_file_location("gpu_train", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_smoke_run_writes_a_bench_summary(tmp_path: Path) -> None:
    out = tmp_path / "gpu_train.json"
    argv = ["--smoke", "--steps", "1", "--tasks-per-step", "2", "--generations", "2", "--max-turns", "2"]
    result = _benchmark().main([*argv, "--threads", "1", "--out", str(out)])

    assert json.loads(out.read_text()) == json.loads(json.dumps(result))
    episodes, most_tokens = 4, 4 * 2 * 8  # episodes x turns x tokens a turn
    assert result["trl_error"] is None
    ours, trl = result["multi_turn"], result["trl"]
    assert [row["episodes"] for row in ours["per_step"]] == [episodes]
    assert 1 <= ours["mean_turns"] <= 2
    for arm in (ours, trl):
        assert 0 < arm["generated_tokens_per_step"] <= most_tokens
        assert arm["generation_tokens_per_s"] > 0 and arm["step_time_s"] > 0
    assert 0 < ours["env_time_share"] < 1
    assert ours["sampler_tokens_per_s"] >= ours["generation_tokens_per_s"]  # the env is outside the sampler's time

    measures = [row["measure"] for row in result["summary"]]
    assert [m.split(",")[0].split(" ")[0] for m in measures] == ["generation", "env", "step"]
    assert result["summary"][1]["met"] == (ours["env_time_share"] <= 0.05)
    rendered = table({"gpu_train": {"summary": result["summary"]}})
    assert rendered.count("gpu_train") == 3 and "TRL GRPOTrainer" in rendered
