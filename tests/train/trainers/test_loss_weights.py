"""The weight each model token gets in TRL's GRPO loss, per `loss_type`, against the AgentGym-RL paper's.

AgentGym-RL's verl (AgentGym-RL/verl/workers/agent_actor/dp_actor.py:226-271, core_algos.py:305,
utils/torch_functional.py:118-120) has no `loss_agg_mode`: each micro-batch's loss is the mean over its
response tokens, divided by the number of micro-batches in the mini-batch, and its scripts set
ppo_micro_batch_size_per_gpu=1, so a micro-batch is one episode. A token of an episode of n model tokens
thus weighs 1 / (n * micro-batches), whatever the other episodes' lengths: TRL's `grpo`, not the token
mean over the mini-batch (TRL's `dapo`, later verl's loss_agg_mode=token-mean).

The weights are measured on a real `MultiTurnGRPOTrainer`: the gradient of the accumulated loss with
respect to each per-token logprob of the model's forward pass, with advantage 1, no KL and the ratio at 1
(the loss per token is then -weight * ratio).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import grpo_args

from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

ENV_TOKENS = 4  # an observation between the two replies of each episode (mask 0)
LENGTHS = (10, 100)  # model tokens of the two episodes


def verl_weights(lengths: tuple[int, ...], micro_batch: int) -> list[float]:
    """AgentGym-RL's verl, by hand: token mean per micro-batch, divided by the micro-batches per update."""
    accumulation = len(lengths) // micro_batch
    weights = []
    for start in range(0, len(lengths), micro_batch):
        tokens = sum(lengths[start : start + micro_batch])
        weights += [1 / tokens / accumulation] * micro_batch
    return weights


def generation_batch(lengths: tuple[int, ...], vocab: int) -> dict[str, torch.Tensor]:
    """Episodes of two replies each with an observation between them, right-padded as TRL pads them."""
    width = max(lengths) + ENV_TOKENS + 1  # one padding column for every episode
    generator = torch.Generator().manual_seed(0)
    completion_mask = torch.zeros(len(lengths), width, dtype=torch.long)
    tool_mask = torch.ones(len(lengths), width, dtype=torch.long)  # TRL pads the env mask with 1
    for row, n in enumerate(lengths):
        first = n // 2
        completion_mask[row, : n + ENV_TOKENS] = 1
        tool_mask[row, first : first + ENV_TOKENS] = 0
    return {
        "prompt_ids": torch.randint(3, vocab, (len(lengths), 6), generator=generator),
        "prompt_mask": torch.ones(len(lengths), 6, dtype=torch.long),
        "completion_ids": torch.randint(3, vocab, (len(lengths), width), generator=generator),
        "completion_mask": completion_mask,
        "tool_mask": tool_mask,
        "advantages": torch.ones(len(lengths)),
        "num_items_in_batch": (completion_mask * tool_mask).sum(),  # TRL's: over the whole generation batch
    }


def token_weights(
    model_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loss_type: str, micro_batch: int
) -> tuple[list[list[float]], dict[str, torch.Tensor]]:
    """Per episode, the weight of each model token, and of anything else, in one accumulated update."""
    accumulation = len(LENGTHS) // micro_batch
    model, tokenizer = load_model(model_dir)
    args = grpo_args(
        tmp_path,
        loss_type=loss_type,
        beta=0.0,
        num_generations=2,
        per_device_train_batch_size=micro_batch,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,  # one generation batch is one update, as in the paper configs
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    trainer.engine.close()
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = accumulation  # what Trainer's loop sets for each update

    logps: list[torch.Tensor] = []
    forward = trainer._get_per_token_logps_and_entropies

    def keep_logps(*a: Any, **k: Any) -> Any:
        out = forward(*a, **k)
        out[0].retain_grad()
        logps.append(out[0])
        return out

    monkeypatch.setattr(trainer, "_get_per_token_logps_and_entropies", keep_logps)
    batch = generation_batch(LENGTHS, len(tokenizer))
    for start in range(0, len(LENGTHS), micro_batch):  # the accumulation steps of one optimiser update
        micro = {k: v if v.dim() == 0 else v[start : start + micro_batch] for k, v in batch.items()}
        trainer.compute_loss(trainer.model, micro).backward()
    grads = -torch.cat([x.grad for x in logps])  # d loss / d logp = -weight
    return grads.tolist(), batch


def assert_weights(grads: list[list[float]], batch: dict[str, torch.Tensor], expected: list[float]) -> None:
    """Each episode's model tokens all weigh its expected weight; observations and padding weigh 0."""
    model = (batch["completion_mask"] * batch["tool_mask"]).bool()
    for row, mask, weight, n in zip(grads, model, expected, LENGTHS, strict=True):
        assert int(mask.sum()) == n
        assert [w for w, m in zip(row, mask, strict=True) if not m] == [0.0] * (len(row) - n)
        assert [w for w, m in zip(row, mask, strict=True) if m] == pytest.approx([weight] * n, rel=1e-5)


def test_grpo_weighs_tokens_as_the_papers_verl(tiny_babyai: Path, tmp_path: Path, monkeypatch) -> None:
    """Episodes of 10 and 100 model tokens, one per micro-batch, accumulation 2: 1/20 and 1/200 per token."""
    grads, batch = token_weights(tiny_babyai, tmp_path, monkeypatch, "grpo", micro_batch=1)
    paper = verl_weights(LENGTHS, micro_batch=1)
    assert paper == pytest.approx([1 / 20, 1 / 200])
    assert_weights(grads, batch, paper)


@pytest.mark.parametrize(
    ("loss_type", "micro_batch", "expected"),
    [
        ("dapo", 1, [1 / 110, 1 / 110]),  # the token mean over the update: not the paper's
        ("bnpo", 1, [1 / 20, 1 / 200]),  # the token mean of a micro-batch of one episode: the paper's
        ("bnpo", 2, [1 / 110, 1 / 110]),  # ... but of two episodes once a micro-batch holds them both
        ("grpo", 2, [1 / 20, 1 / 200]),  # grpo keeps the paper's weights at any micro-batch size
    ],
)
def test_other_losses_and_micro_batches(
    loss_type: str, micro_batch: int, expected: list[float], tiny_babyai: Path, tmp_path: Path, monkeypatch
) -> None:
    grads, batch = token_weights(tiny_babyai, tmp_path, monkeypatch, loss_type, micro_batch)
    assert_weights(grads, batch, expected)
