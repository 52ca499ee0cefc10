"""`agentgym train` / `agentgym eval`, and the light import of the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from train_helpers import BABYAI

from agentgym_train.cli import main
from agentgym_train.config_files import DEFAULT_CONFIG, packaged_configs

REPO = Path(__file__).resolve().parents[3]


def test_list_and_play_do_not_import_torch() -> None:
    code = (
        "import sys; from agentgym_train.cli import main; main(['list', 'AgentGym/BabyAI-GoToLocal-v0']); "
        "print(sorted(m for m in ('torch', 'trl', 'transformers') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_the_demo_config_parses_into_pipeline_and_grpo_settings() -> None:
    from agentgym_train.pipeline import load_configs

    assert "babyai_demo" in packaged_configs() and DEFAULT_CONFIG.is_file()
    pipeline, grpo = load_configs(DEFAULT_CONFIG, ["--max_steps", "7", "--max_turn_schedule", "4", "8"])
    assert grpo.max_steps == 7 and pipeline.max_turn_schedule == [4, 8]
    assert grpo.env_id == "AgentGym/BabyAI-GoToObj-v0" and grpo.env_kwargs == {"show_actions": False}
    assert grpo.num_generations == 8 and grpo.loss_type == "grpo" and grpo.beta > 0


def test_eval_prints_and_writes_the_random_baseline(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "random.json"
    args = ["eval", "random", BABYAI, "--tasks", "10", "--max-turns", "5", "--json", str(out)]
    assert main([*args, "--actions", "turn left,move forward", "--env-kwargs", '{"show_actions": false}']) == 0
    printed = capsys.readouterr().out
    assert "success" in printed and "all" in printed
    result = json.loads(out.read_text())
    assert result["success"]["n"] == 10 and len(result["episodes"]) == 10
    assert all(e["turns"] <= 5 for e in result["episodes"])


def test_train_refuses_an_unknown_config(capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "no-such-config"]) == 2
    assert "babyai_demo" in capsys.readouterr().err


def test_train_refuses_an_unknown_algorithm(capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "babyai_demo", "--algorithm", "a2c"]) == 2
    assert "algorithm must be one of ['dpo', 'grpo', 'ppo', 'rft', 'sft']" in capsys.readouterr().err


def test_train_overrides_without_a_config_name_apply_to_the_default_config(capsys: pytest.CaptureFixture) -> None:
    assert main(["train", "--output_dir", "unused", "--algorithm", "a2c"]) == 2
    assert "algorithm must be one of" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "config", "overrides"),
    [
        (["experiment", "horizons", "--seeds", "1"], "horizons", ["--seeds", "1"]),
        (["experiment", "horizons", "--output-dir", "out", "--seeds", "1"], "horizons", ["--seeds", "1"]),
        (
            ["experiment", "horizons", "--output-dir=out", "--summary-only", "--seeds", "1"],
            "horizons",
            ["--seeds", "1"],
        ),
        (["experiment", "horizons", "my.yaml", "--seeds", "1"], "my.yaml", ["--seeds", "1"]),
        (["train", "--max_steps", "3"], DEFAULT_CONFIG.stem, ["--max_steps", "3"]),
    ],
)
def test_overrides_without_a_config_name_go_after_the_default_config(
    argv: list[str], config: str, overrides: list[str]
) -> None:
    from agentgym_train.cli import build_parser, config_first

    args = build_parser().parse_args(config_first(argv))
    assert args.config == config and args.overrides == overrides


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["grpo", "ppo"])
def test_a_short_pipeline_run_writes_results_and_a_plot(tmp_path: Path, algorithm: str) -> None:
    overrides = [
        "--output_dir",
        str(tmp_path),
        "--tiny_hidden_size",
        "32",
        "--tiny_layers",
        "1",
        "--sft_episodes",
        "20",
    ]
    overrides += ["--sft_steps", "3", "--max_steps", "2", "--max_turn_schedule", "2", "3", "--max_turn_every", "1"]
    overrides += ["--eval_tasks", "4", "--per_device_train_batch_size", "8", "--num_generations", "4"]
    overrides += ["--algorithm", algorithm, "--torch_threads", "1"]
    assert main(["train", "babyai_demo", *overrides]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["before"]["success"]["n"] == 4 and results["after"]["success"]["n"] == 4
    assert [r["rollout/max_turns"] for r in results["log_history"] if "rollout/max_turns" in r] == [2, 3]
    assert (tmp_path / "training.png").stat().st_size > 10_000
    assert (tmp_path / "rl-model" / "model.safetensors").is_file()
    if algorithm == "ppo":
        assert any("value/loss" in row for row in results["log_history"])


@pytest.mark.slow
def test_gpu_benchmark_smoke_configuration_runs_on_cpu() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "gpu_train.py"), "--smoke"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "generation tokens/s" in done.stdout and "step time" in done.stdout
