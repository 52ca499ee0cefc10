"""`benchmarks/gpu_train.py` end to end on CPU at its smallest: the three arms train (multi-turn, TRL's, async
generation), the JSON holds what `agentgym bench` reads, and the token counts, env share and the async arm's
versions are the ones the run produced."""

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
    assert result["trl_error"] is None and result["async_error"] is None
    ours, trl, late = result["multi_turn"], result["trl"], result["async"]
    assert [row["episodes"] for row in ours["per_step"]] == [episodes]
    assert 1 <= ours["mean_turns"] <= 2
    for arm in (ours, trl, late):
        assert 0 < arm["generated_tokens_per_step"] <= most_tokens
        assert arm["generation_tokens_per_s"] > 0 and arm["step_time_s"] > 0
    assert 0 < ours["env_time_share"] < 1
    assert ours["sampler_tokens_per_s"] >= ours["generation_tokens_per_s"]  # the env is outside the sampler's time

    # the async arm: the worker played the step's batch and the next one (lookahead 1 at max_staleness 1), the one
    # step consumed batch 0 at version 0, sampled by version 0, nothing stale
    assert [row["episodes"] for row in late["per_step"]] == [episodes]
    assert late["async"]["lookahead"] == 1 and late["async"]["batches"] == 1
    assert late["async"]["trainer_versions"] == [0] and late["async"]["sampled_versions"] == [0]
    assert late["async"]["stale_groups"] == 0 and late["async"]["correction_mean"] > 0

    measures = [row["measure"] for row in result["summary"]]
    assert [m.split(",")[0].split(" ")[0] for m in measures] == ["generation", "env", "async", "step"]
    assert result["summary"][1]["met"] == (ours["env_time_share"] <= 0.05)
    assert result["summary"][2]["ratio"] == pytest.approx(ours["step_time_s"] / late["step_time_s"])
    rendered = table({"gpu_train": {"summary": result["summary"]}})
    assert rendered.count("gpu_train") == 4 and "TRL GRPOTrainer" in rendered
