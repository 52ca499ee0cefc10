"""The trainers' estimators on real rollouts: every one uses TRL's weighted reward sum, REINFORCE++ folds the
k1 KL against the reference model into the reward, PPO reads values and pays rewards on the right tokens.

Expected values are naive loops written here over the rollout's tokens, never the project's estimator code.
"""

from __future__ import annotations

import functools
import statistics
from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import grpo_args
from trainer_stand_ins import TokenValues

from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer

WEIGHTS = [2.0, 0.01]


class Recorded:
    """Reward functions that remember what they returned: the env's return and a length bonus."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def funcs(self) -> list[Any]:
        def env_return(completions: list[str], episode_return: list[float], **kwargs: Any) -> list[float]:
            self.values["env"] = [float(r) for r in episode_return]
            return self.values["env"]

        def length(completions: list[str], **kwargs: Any) -> list[float]:
            self.values["length"] = [float(len(c)) for c in completions]  # differs inside groups
            return self.values["length"]

        return [env_return, length]

    def weighted(self) -> list[float]:
        return [WEIGHTS[0] * a + WEIGHTS[1] * b for a, b in zip(self.values["env"], self.values["length"], strict=True)]


def _rollout(trainer: Any) -> dict[str, Any]:
    batch = next(iter(trainer.get_train_dataloader()))
    return trainer._generate_and_score_completions(batch)


def _model_tokens(out: dict[str, Any]) -> list[list[int]]:
    mask = out["completion_mask"] * out["tool_mask"]
    return [[t for t in range(mask.size(1)) if mask[b, t]] for b in range(mask.size(0))]


def _whiten(values: dict[tuple[int, int], float], shape: torch.Size) -> torch.Tensor:
    mean, std = statistics.fmean(values.values()), statistics.pstdev(values.values())
    out = torch.zeros(shape)
    for (b, t), v in values.items():
        out[b, t] = (v - mean) / std
    return out


def test_rloo_uses_the_weighted_reward_funcs(tiny_babyai: Path, tmp_path: Path) -> None:
    recorded = Recorded()
    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(tmp_path, max_turns=3, temperature=1.5, advantage_estimator="rloo", reward_weights=WEIGHTS)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=recorded.funcs())
    out = _rollout(trainer)
    trainer.engine.close()
    rewards, group = recorded.weighted(), trainer.num_generations
    expected = []
    for i, r in enumerate(rewards):
        start = i - i % group
        others = [rewards[j] for j in range(start, start + group) if j != i]
        expected.append(r - sum(others) / len(others))
    assert statistics.pstdev(expected) > 0
    torch.testing.assert_close(out["advantages"], torch.tensor(expected), atol=1e-5, rtol=0)


def _completion_logps(model: Any, out: dict[str, Any], temperature: float) -> torch.Tensor:
    """log p(completion token) under `model` at the sampling temperature, from one plain forward pass."""
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    with torch.no_grad():
        logits = model(input_ids=ids, attention_mask=attention).logits.float() / temperature
    start = out["prompt_ids"].size(1)
    predicted = logits[:, start - 1 : -1]  # the logits at position p predict token p + 1
    return torch.log_softmax(predicted, dim=-1).gather(-1, out["completion_ids"].unsqueeze(-1)).squeeze(-1)


@pytest.mark.parametrize("baseline", [False, True])
def test_reinforce_pp_folds_the_k1_kl_into_the_reward_and_trains(
    tiny_babyai: Path, tmp_path: Path, baseline: bool
) -> None:
    beta, gamma, temperature = 0.05, 0.9, 1.5
    recorded = Recorded()
    model, tokenizer = load_model(tiny_babyai)
    torch.manual_seed(0)
    with torch.no_grad():  # move the policy away from the reference (reloaded from disk by TRL)
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    name = "reinforce++_baseline" if baseline else "reinforce++"
    args = grpo_args(
        tmp_path,
        max_turns=3,
        temperature=temperature,
        advantage_estimator=name,
        reward_weights=WEIGHTS,
        beta=beta,
        reinforce_gamma=gamma,
        max_steps=1,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=recorded.funcs())
    out = _rollout(trainer)
    assert "ref_per_token_logps" not in out  # used for the reward; TRL's loss adds no KL term of its own

    reference, _ = load_model(tiny_babyai)
    kl = _completion_logps(model, out, temperature) - _completion_logps(reference, out, temperature)
    rewards, group = recorded.weighted(), trainer.num_generations
    if baseline:
        means = [statistics.fmean(rewards[i - i % group : i - i % group + group]) for i in range(len(rewards))]
        rewards = [r - m for r, m in zip(rewards, means, strict=True)]
    returns, plain = {}, {}
    for b, tokens in enumerate(_model_tokens(out)):
        running = running_plain = 0.0
        for t in reversed(tokens):  # discounted per model token; env tokens are not steps
            reward = -beta * float(kl[b, t]) + (rewards[b] if t == tokens[-1] else 0.0)
            running = reward + gamma * running
            running_plain = (rewards[b] if t == tokens[-1] else 0.0) + gamma * running_plain
            returns[b, t], plain[b, t] = running, running_plain
    expected = _whiten(returns, out["advantages"].shape)
    torch.testing.assert_close(out["advantages"], expected, atol=1e-4, rtol=0)
    assert not torch.allclose(expected, _whiten(plain, out["advantages"].shape), atol=1e-3)  # the KL mattered

    trainer.train()  # a step with the token-level advantages: TRL's loss must not look for a KL of its own
    trainer.engine.close()
    assert trainer.beta == beta
    logged = [row for row in trainer.state.log_history if "kl" in row]
    assert logged and logged[0]["kl"] != 0.0


def test_ppo_pays_the_weighted_reward_on_the_last_model_token_and_reads_values_before_each_token(
    tiny_babyai: Path, tmp_path: Path
) -> None:
    from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

    gamma, lam = 0.9, 0.8
    recorded = Recorded()
    model, tokenizer = load_model(tiny_babyai)
    options = grpo_args(tmp_path, max_turns=3, temperature=1.5, reward_weights=WEIGHTS).to_dict()
    keep = {k: options[k] for k in ("env_id", "env_kwargs", "max_turns", "max_turn_tokens", "max_completion_length")}
    args = MultiTurnPPOConfig(
        output_dir=str(tmp_path),
        **keep,
        num_generations=4,
        per_device_train_batch_size=8,
        temperature=1.5,
        reward_weights=WEIGHTS,
        gae_gamma=gamma,
        gae_lambda=lam,
        report_to="none",
        activation_checkpointing=False,
        disable_tqdm=True,
    )
    critic = TokenValues(model.config.vocab_size)
    table = critic.table.weight.detach().clone()[:, 0]  # read before the rollout fits the critic
    trainer = MultiTurnPPOTrainer(
        model, args, processing_class=tokenizer, reward_funcs=recorded.funcs(), value_model=critic
    )
    out = _rollout(trainer)
    trainer.engine.close()

    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    start = out["prompt_ids"].size(1)
    rewards = recorded.weighted()
    advantages = {}
    for b, tokens in enumerate(_model_tokens(out)):
        # V(state before completion token t) = the critic's output at the token before it
        value = {t: float(table[ids[b, start + t - 1]]) for t in tokens}
        running, next_value = 0.0, 0.0
        for t in reversed(tokens):
            reward = rewards[b] if t == tokens[-1] else 0.0  # the reward on the episode's last model token
            delta = reward + gamma * next_value - value[t]
            running = delta + gamma * lam * running
            advantages[b, t] = running
            next_value = value[t]
    assert statistics.pstdev(rewards) > 0
    torch.testing.assert_close(out["advantages"], _whiten(advantages, out["advantages"].shape), atol=1e-4, rtol=0)


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ["reinforce++", "reinforce++_baseline", "rloo"])
def test_estimator_learns_the_toy_task(toy_model: Path, tmp_path: Path, estimator: str) -> None:
    from toy_training import train

    config = functools.partial(MultiTurnGRPOConfig, advantage_estimator=estimator)
    before, after = train(MultiTurnGRPOTrainer, toy_model, tmp_path, config)
    assert after >= 0.8, f"{estimator} should learn the toy task: {before:.2f} -> {after:.2f}"
