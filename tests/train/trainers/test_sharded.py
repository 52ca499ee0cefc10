"""Sharded training on 2 CPU processes (gloo): the shipped FSDP config, ranks whose episodes end at
different turns (a collective mismatch or hang without lockstep generation), checkpoints saved by every
rank, the final evaluation on the main process alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from train_helpers import cpu_config, launch_two_processes, rank_reports

#: A 2-process step takes ~20 s here; a hang (ranks waiting in different collectives) fails the test.
TIMEOUT = 180


def launch(config: Path, *job_args: str | Path, job: str = "sharded_job.py") -> list[dict]:
    """Run `job` (sharded_job.py: MODEL_DIR OUT SAMPLER [DS3_GATHER]; pipeline_job.py: MODEL_DIR OUT
    PRECISION) under `accelerate launch --config_file config`; return each rank's report (OUT/rank-<i>.json)."""
    launch_two_processes(job, *job_args, config=config, timeout=TIMEOUT)
    return rank_reports(Path(job_args[1]))


def check_run(reports: list[dict], out: Path, initial_model: Path, lockstep: bool) -> None:
    """Both ranks trained one step, the main one alone evaluated, every rank took part in saving."""
    assert [r["world_size"] for r in reports] == [2, 2]
    assert all(r["global_step"] == 1 for r in reports)
    # rank 0's episodes all end after one turn, rank 1's run on (to 3 turns or their token budget)
    assert set(reports[0]["turns"]) == {1} and max(reports[1]["turns"]) > 1
    if lockstep:  # ... yet both made the same forward passes: rank 0 kept stepping with dummy batches
        assert reports[0]["forwards"] == reports[1]["forwards"]
    else:  # local forward passes (replicated or gathered weights): rank 0 stopped early
        assert reports[0]["forwards"] < reports[1]["forwards"]
    # the main process alone evaluated the saved (plain, unsharded) model
    assert reports[0]["evaluated"] == {"parameter_types": ["Parameter"], "episodes": 2}
    assert reports[1]["evaluated"] is None
    # the checkpoint and the final model hold the full (gathered) weights
    for folder in (out / "checkpoint-1", out / "final"):
        assert (folder / "model.safetensors").is_file(), sorted(p.name for p in folder.iterdir())
    from agentgym_train.models.tiny import load_model

    trained = dict(load_model(str(out / "final"))[0].named_parameters())
    initial = dict(load_model(str(initial_model))[0].named_parameters())
    assert {k: p.shape for k, p in trained.items()} == {k: p.shape for k, p in initial.items()}
    assert any(not torch.equal(trained[k], initial[k]) for k in initial), "the step changed no weight"


@pytest.mark.slow
@pytest.mark.parametrize("sampler", ["cached", "generate"])
def test_fsdp_ranks_with_different_turns_finish_and_save(tiny_babyai: Path, tmp_path: Path, sampler: str) -> None:
    out = tmp_path / "run"
    reports = launch(cpu_config("fsdp.yaml", tmp_path), tiny_babyai, out, sampler)
    assert [r["fsdp_version"] for r in reports] == [2, 2]
    check_run(reports, out, tiny_babyai, lockstep=True)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("config", "sampler", "ds3_gather"),
    [("zero3.yaml", "cached", "0"), ("zero3.yaml", "generate", "1"), ("zero2.yaml", "generate", "1")],
)
def test_deepspeed_ranks_with_different_turns_finish_and_save(
    tiny_babyai: Path, tmp_path: Path, config: str, sampler: str, ds3_gather: str
) -> None:
    pytest.importorskip(
        "deepspeed",
        reason="DeepSpeed is not installed in this environment (`pip install deepspeed`: pure Python, its CPU "
        "accelerator runs over gloo); these tests passed here with it on the Python path",
    )
    out = tmp_path / "run"
    reports = launch(cpu_config(config, tmp_path), tiny_babyai, out, sampler, ds3_gather)
    # ZeRO-3 without ds3_gather_for_generation leaves the weights sharded: every forward is a collective
    check_run(reports, out, tiny_babyai, lockstep=config == "zero3.yaml" and ds3_gather == "0")


@pytest.mark.slow
@pytest.mark.parametrize("config", ["fsdp.yaml", "zero3.yaml"])
def test_pipeline_saves_the_full_sft_model_once_and_evaluates_on_the_training_device(
    tiny_babyai: Path, tmp_path: Path, config: str
) -> None:
    """The pipeline (SFT, eval, GRPO, eval) under FSDP2 or ZeRO-3 in bf16: the main process alone writes the
    SFT and RL checkpoints, the SFT checkpoint holds the full trained weights, and the policy and every
    evaluated model are bf16 on the training device."""
    if config.startswith("zero"):
        pytest.importorskip("deepspeed", reason="DeepSpeed is not installed in this environment")
    out = tmp_path / "run"
    ranks = launch(cpu_config(config, tmp_path), tiny_babyai, out, "bf16", job="pipeline_job.py")
    assert [r["saved"] for r in ranks] == [["sft-model", "rl-model"], []]
    # the SFT checkpoint is the whole model (every parameter at full shape), equal to what SFT trained
    from agentgym_train.models.tiny import load_model

    trained = torch.load(out / "sft-trained.pt")
    saved = load_model(out / "sft-model", "float32")[0].state_dict()
    initial = load_model(tiny_babyai, "float32")[0].state_dict()
    assert {k: v.shape for k, v in saved.items()} == {k: v.shape for k, v in initial.items()}
    assert all(torch.equal(saved[k], trained[k].float()) for k in initial)
    assert any(not torch.equal(saved[k], initial[k]) for k in initial), "SFT changed no weight"
    # loaded in the training dtype (FSDP and DeepSpeed keep float32 shards of the trainable weights themselves)
    assert [r["policy_dtype"] for r in ranks] == ["torch.bfloat16", "torch.bfloat16"]
    # every rank evaluated before RL (ZeRO-3: on weights gathered whole), the main one alone after RL on the
    # unsharded reload, all on the device they trained on and in the training dtype
    assert [[e["description"] for e in r["evaluated"]] for r in ranks] == [
        ["eval before RL", "eval after RL"],
        ["eval before RL"],
    ]
    for rank in ranks:
        for evaluated in rank["evaluated"]:
            assert evaluated["devices"] == [rank["device"]]
            assert evaluated["dtypes"] == ["torch.bfloat16"]
            assert evaluated["parameter_types"] == ["Parameter"]
    results = json.loads((out / "results.json").read_text())
    assert results["after"]["success"]["n"] == 2 and results["before"]["success"]["n"] == 2
