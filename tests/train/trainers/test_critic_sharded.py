"""The PPO critic on 2 CPU processes (gloo): sharded by FSDP2 as the policy is, wrapped in DDP otherwise;
either way its gradient equals the one a single process computes over both ranks' batches, and its
checkpoint restores under sharding. Ranks' episodes end at different turns (see critic_job.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import cpu_config, launch_two_processes, rank_reports

#: A 2-process PPO step takes ~30 s here; a hang (ranks waiting in different collectives) fails the test.
TIMEOUT = 300


def run_job(
    config_name: str, model_dir: Path, tmp_path: Path, precision: str = "no"
) -> tuple[Path, list[dict], list[dict]]:
    """critic_job.py under the shipped accelerate config for 2 processes (`precision`: accelerate's
    mixed_precision); each rank's report and tensors."""
    out = tmp_path / "run"
    launch_two_processes(
        "critic_job.py", model_dir, out, config=cpu_config(config_name, tmp_path, precision), timeout=TIMEOUT
    )
    reports = rank_reports(out)
    tensors = [torch.load(out / f"rank-{r}.pt", weights_only=True) for r in (0, 1)]
    return out, reports, tensors


def reference_gradient(model_dir: Path, state: dict, batches: list[dict]) -> dict[str, torch.Tensor]:
    """On one process: each rank's loss gradient (squared error over its model tokens, divided by their
    count), averaged over the ranks, clipped to norm 1 as the fit clips."""
    from transformers import AutoModelForTokenClassification

    from agentgym_train.trainers.critic import ModelCritic

    critic = ModelCritic(AutoModelForTokenClassification.from_pretrained(str(model_dir), num_labels=1))
    critic.load_state(state)
    named = [(n, p) for n, p in critic.model.named_parameters() if p.requires_grad]
    total = {n: torch.zeros_like(p) for n, p in named}
    for batch in batches:
        critic.zero_grad()
        length = batch["targets"].size(1)
        values = critic(batch["ids"], batch["attention"])[:, -length - 1 : -1]
        loss = ((values - batch["targets"]) ** 2 * batch["mask"]).sum() / batch["mask"].sum()
        loss.backward()
        for n, p in named:
            total[n] += p.grad / len(batches)
    norm = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in total.values()]))
    return {n: g * min(1.0, 1.0 / (float(norm) + 1e-6)) for n, g in total.items()}


def check_common(out: Path, model_dir: Path, reports: list[dict], tensors: list[dict], exact: bool = True) -> None:
    """Both ranks trained the step (uneven episodes), fitted the critic, and (`exact`: in float32) agree
    with one process."""
    from safetensors.torch import load_file

    assert [r["world_size"] for r in reports] == [2, 2] and [r["global_step"] for r in reports] == [1, 1]
    assert set(reports[0]["turns"]) == {1} and max(reports[1]["turns"]) > 1
    assert all(r["value_losses"] and r["value_losses"][0] > 0 for r in reports)
    assert all(r["synchronised"] for r in reports)
    # one critic: the same full weights on both ranks, changed by the step, as the checkpoint saved them
    first, second = tensors[0]["after_step"], tensors[1]["after_step"]
    assert first.keys() == second.keys() and all(torch.equal(first[k], second[k]) for k in first)
    assert any(not torch.equal(first[k], tensors[0]["initial"][k]) for k in first), "the step left the critic alone"
    saved = load_file(str(out / "checkpoint-1" / "critic" / "critic.safetensors"))
    assert saved.keys() == first.keys() and all(torch.equal(saved[k], first[k]) for k in first)
    # the gradient of the extra fit (batches of width 12 and 17) is the one-process gradient over both
    expected = reference_gradient(model_dir, first, [t["batch"] for t in tensors])
    for rank in (0, 1):
        got = tensors[rank]["gradients"]
        assert got.keys() == expected.keys()
        for name, grad in expected.items():
            if exact:
                assert torch.allclose(got[name], grad, rtol=1e-4, atol=1e-6), (rank, name)
            else:  # computed in bfloat16 (8 bits of mantissa): the same direction
                assert torch.cosine_similarity(got[name].flatten(), grad.flatten(), dim=0) > 0.95, (rank, name)
    # restored from checkpoint-1 after that fit had moved the weights: weights and AdamW moments as saved
    assert all(r["fit_changed_weights"] and r["restored_weights"] and r["restored_moments"] for r in reports)


def shard_numel(shape: list[int], rank: int, world: int = 2) -> int:
    """FSDP2's shard of a parameter on `rank`: torch.chunk's piece of dim 0 (none past the last piece)."""
    pieces = torch.empty(shape[0]).chunk(world)
    rows = pieces[rank].numel() if rank < len(pieces) else 0
    return rows * int(torch.tensor(shape[1:]).prod()) if len(shape) > 1 else rows


@pytest.mark.slow
@pytest.mark.parametrize("precision", ["no", "bf16"])
def test_fsdp2_shards_the_critic_and_its_optimizer(tiny_babyai: Path, tmp_path: Path, precision: str) -> None:
    out, reports, tensors = run_job("fsdp.yaml", tiny_babyai, tmp_path, precision)
    check_common(out, tiny_babyai, reports, tensors, exact=precision == "no")
    assert [r["wrapper"] for r in reports] == ["FSDPQwen2ForTokenClassification"] * 2
    # float32 shards (what AdamW updates); the layers compute in the plugin's mixed precision
    compute = "torch.bfloat16" if precision == "bf16" else "torch.float32"
    assert [r["compute_dtypes"] for r in reports] == [[compute], [compute]]
    full = sum(int(torch.tensor(p["shape"]).prod()) for p in reports[0]["parameters"].values())
    for rank, report in enumerate(reports):
        parameters = report["parameters"]
        assert all(p["dtensor"] and p["dtype"] == "torch.float32" for p in parameters.values())
        assert [p["local_numel"] for p in parameters.values()] == [
            shard_numel(p["shape"], rank) for p in parameters.values()
        ]
        local = sum(p["local_numel"] for p in parameters.values())
        assert 0.45 < local / full < 0.55, (rank, local, full)  # about half of the critic on each rank
        # AdamW was made over the shards: its moments are shard-sized
        assert report["moment_local_numels"] == [p["local_numel"] for p in parameters.values()]
    assert sum(sum(p["local_numel"] for p in r["parameters"].values()) for r in reports) == full


@pytest.mark.slow
def test_ddp_wraps_the_critic_and_synchronises_its_gradients(tiny_babyai: Path, tmp_path: Path) -> None:
    out, reports, tensors = run_job("ddp.yaml", tiny_babyai, tmp_path)
    check_common(out, tiny_babyai, reports, tensors)
    assert [r["wrapper"] for r in reports] == ["DistributedDataParallel"] * 2
    assert [r["compute_dtypes"] for r in reports] == [["torch.float32"], ["torch.float32"]]
    for report in reports:  # replicated: every rank holds the whole critic
        assert all(not p["dtensor"] for p in report["parameters"].values())
        assert all(p["local_numel"] == int(torch.tensor(p["shape"]).prod()) for p in report["parameters"].values())
