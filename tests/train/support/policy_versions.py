"""What the async-training tests share (tests/train/trainers/test_async_training.py, test_async_vllm.py): other
policy versions of a model, logprobs under a version worked out by hand, a worker that stamps each group's tokens
with a version, and the checks that a stale group leaves the loss."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from agentgym_train.rollout import Task
from agentgym_train.rollout.versioned import ENV_VERSION
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer


def moved_weights(model: Any, scale: float, seed: int) -> dict[str, torch.Tensor]:
    """The model's weights plus seeded noise: another policy version."""
    gen = torch.Generator().manual_seed(seed)
    return {k: v + scale * torch.randn(v.shape, generator=gen) for k, v in model.state_dict().items()}


def token_logps(model: Any, ids: list[int], start: int) -> list[float]:
    """log p(ids[t] | ids[:t]) under `model` for t >= start: one plain forward pass over the whole sequence
    (temperature 1)."""
    with torch.no_grad():
        logps = torch.log_softmax(model(torch.tensor([ids])).logits[0].float(), dim=-1)
    return [logps[t - 1, ids[t]].item() for t in range(start, len(ids))]


class StampingWorker:
    """Stands in for the async generation worker: plays each job in this process with the trainer's sampler over
    `policy` (its model, or its `VLLMGeneration`) and stamps every sampled token of group g with `versions[g]`."""

    def __init__(self, trainer: MultiTurnGRPOTrainer, versions: list[int], policy: Any):
        self.trainer, self.versions, self.policy, self.jobs = trainer, versions, policy, {}

    def submit(self, index: int, tasks: list[Task], max_turns: int | None = None) -> None:
        self.jobs[index] = tasks

    def result(self, index: int) -> tuple[list[Any], dict[str, Any]]:
        t = self.trainer
        with torch.no_grad():
            episodes = t.engine.run(self.jobs[index], t._sampler(self.policy))
        for j, episode in enumerate(episodes):
            v = self.versions[j // t.num_generations]
            episode.versions = [v if m else ENV_VERSION for m in episode.env_mask]
        return episodes, {"generation_time": 0.0, "env_time": 0.0, "version": max(self.versions)}


def assert_first_group_masked(trainer: MultiTurnGRPOTrainer, out: dict[str, Any]) -> torch.Tensor:
    """The batch's first group (rows 0-3) was stale: every token of it masked, and counted. Returns the mask."""
    mask = out["completion_mask"] * out["tool_mask"]
    assert mask[:4].sum() == 0 and mask[4:].sum() > 0  # the stale group: every token masked
    assert trainer._metrics["train"]["async/stale_groups"][-1] == 1
    return mask


def assert_first_group_moves_no_loss(trainer: MultiTurnGRPOTrainer, out: dict[str, Any]) -> None:
    """The loss and its gradient do not change whatever the first group's advantages are."""

    def loss_and_grad(inputs: dict[str, Any]) -> tuple[float, torch.Tensor]:
        trainer.model.zero_grad()
        loss = trainer._compute_loss(trainer.model, inputs)
        loss.backward()
        return loss.item(), torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])

    loss, grad = loss_and_grad(out)
    changed = dict(out, advantages=out["advantages"].clone())
    changed["advantages"][:4] += 100.0
    loss2, grad2 = loss_and_grad(changed)
    assert loss2 == pytest.approx(loss) and torch.equal(grad, grad2)
