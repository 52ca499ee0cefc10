"""Rejection-sampling fine-tuning: what is kept, the masks trained on, the kept fraction per round."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import toy_env
from train_helpers import rft_args

from agentgym_train.collect import read_records
from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import Episode, Task
from agentgym_train.trainers.rft import RejectionSamplingTrainer, episode_rows, keep_episodes


def _episode(task: str, success: bool, ret: float, error: str | None = None) -> Episode:
    return Episode(Task(toy_env.ENV_ID, task), [1, 2], [3, 4, 5], env_mask=[1, 0, 1], success=success,
                   episode_return=ret, env_error=error)  # fmt: skip


def test_keep_rules() -> None:
    episodes = [
        _episode("a", True, 0.5),
        _episode("a", True, 0.9),
        _episode("a", False, 0.0),
        _episode("b", True, 0.7, error="EnvTimeoutError"),  # an env failure is never kept
        _episode("c", False, 0.2),
        _episode("d", True, 0.3),
    ]
    kept = keep_episodes(episodes, "success")
    assert [(e.task.task_id, e.episode_return) for e in kept] == [("a", 0.5), ("a", 0.9), ("d", 0.3)]
    best = keep_episodes(episodes, "best")
    assert sorted((e.task.task_id, e.episode_return) for e in best) == [("a", 0.9), ("d", 0.3)]
    with pytest.raises(ValueError, match="keep must be one of"):
        keep_episodes(episodes, "all")


def test_rows_are_the_sampled_tokens_with_the_env_masked() -> None:
    rows = episode_rows([_episode("a", True, 1.0)])
    assert rows["input_ids"] == [[1, 2, 3, 4, 5]]
    assert rows["assistant_masks"] == [[0, 0, 1, 0, 1]]  # prompt and the env's token carry no loss


@pytest.fixture(scope="module")
def rft_run(toy_model: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[RejectionSamplingTrainer, Path]:
    model, tokenizer = load_model(toy_model)
    out = tmp_path_factory.mktemp("rft")
    trainer = RejectionSamplingTrainer(model, rft_args(out), processing_class=tokenizer)
    trainer.train()
    return trainer, out


def test_rounds_log_the_kept_fraction(rft_run: tuple[RejectionSamplingTrainer, Path]) -> None:
    trainer, out = rft_run
    rounds = trainer.rounds
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:
        assert r["episodes"] == 64 and r["tasks"] == 16
        assert r["kept"] == round(r["sample_success"] * 64)  # keep="success": every successful episode
        assert r["kept_fraction"] == pytest.approx(r["kept"] / 64)
        assert 0 < r["kept"] < 64, "a random-init model succeeds on about a quarter of the toy episodes"
        assert r["loss"] is not None
    assert json.loads((out / "rft_rounds.json").read_text()) == rounds
    # fresh tasks each round
    assert not set(trainer.round_tasks(0)) & set(trainer.round_tasks(1))


def test_rft_with_lora_trains_only_the_adapter(toy_model: Path, tmp_path: Path) -> None:
    from peft import LoraConfig

    model, tokenizer = load_model(toy_model)
    base = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = rft_args(
        tmp_path, rounds=1, tasks_per_round=8, max_steps=2, per_device_train_batch_size=8, learning_rate=1e-2, seed=1
    )
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    trainer = RejectionSamplingTrainer(model, args, processing_class=tokenizer, peft_config=lora)
    trainer.train()
    assert trainer.rounds[0]["kept"] > 0
    named = dict(trainer.model.named_parameters())
    changed = [n for n, p in named.items() if "lora_B" in n and p.abs().sum() > 0]
    assert changed, "the adapter did not train"
    frozen = {n.replace("base_model.model.", "").replace(".base_layer", ""): p for n, p in named.items()}
    assert all(torch.equal(frozen[name], value) for name, value in base.items())


@pytest.mark.slow
@pytest.mark.parametrize("config", ["babyai_rft", "babyai_dpo", "babyai_sft"])
def test_the_packaged_configs_run_short(config: str, tmp_path: Path) -> None:
    """`agentgym train babyai_rft|babyai_dpo|babyai_sft` end to end, with everything made tiny."""
    from agentgym_train.cli import main

    overrides = ["--output_dir", str(tmp_path), "--tiny_hidden_size", "32", "--tiny_layers", "1"]
    overrides += ["--sft_episodes", "8", "--sft_steps", "2", "--max_turn_schedule", "3", "--eval_tasks", "3"]
    overrides += ["--eval_episodes_per_task", "1", "--torch_threads", "1", "--disable_tqdm", "true"]
    overrides += ["--rft_rounds", "1", "--rft_tasks", "3", "--rft_samples_per_task", "2", "--rft_steps", "1"]
    overrides += ["--dpo_tasks", "3", "--dpo_samples_per_task", "2", "--dpo_heldout_tasks", "2", "--dpo_steps", "1"]
    assert main(["train", config, *overrides]) == 0
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["before"]["success"]["n"] == 3
    if config == "babyai_sft":
        assert "after" not in results
        return
    assert results["after"]["success"]["n"] == 3
    if config == "babyai_rft":
        assert [r["episodes"] for r in results["rft_rounds"]] == [6]
    else:  # a barely trained model rarely succeeds: pairs may be none, the episodes are written all the same
        assert len(read_records(tmp_path / "dpo-train.jsonl")) == 6
        assert len(read_records(tmp_path / "dpo-heldout.jsonl")) == 4
        assert results["dpo_pairs"] >= 0
    assert (tmp_path / f"{config.split('_')[1]}-model" / "model.safetensors").is_file()
