"""Turn rewards (issue 25.4): what the env pays during an episode is credited to the turn that earned it, each turn
getting its own discounted return-to-go (`turn_gamma` per turn), for REINFORCE++ and PPO's GAE.

Expected values are naive loops written here; the invariance tests compare with the estimators' pre-turn code path
(`token_rewards`, `returns_to_go` and `gae` called without turns), bit for bit.

SciWorld pays score increments on the way (scripted gold replies through the real env); TextCraft and BabyAI pay at
the end only (TextCraft's intermediate crafts pay 0).
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import grpo_args
from trainer_stand_ins import TokenValues

from agentgym_train import estimators as adv
from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

SCIWORLD, SCIWORLD_TASK = "AgentGym/SciWorld-v0", "find-living-thing/225"
TEXTCRAFT, TEXTCRAFT_TASK = "AgentGym/TextCraft-Depth2-v0", "acacia_boat"


def test_payments_land_on_each_turns_last_model_token() -> None:
    # completion: reply 0 = tokens 0-1, env 2-3, reply 1 = 4-5, env 6-7, reply 2 = 8-9
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 0, 0, 1, 1]])
    spans = [[(0, 2), (4, 6), (8, 10)]]
    paid, ends = adv.turn_payments([[0.25, 0.5, 1.0]], spans, mask)
    # the last turn's payment is left to token_rewards (the rest of the episode's reward)
    assert paid.tolist() == [[0.0, 0.25, 0, 0, 0, 0.5, 0, 0, 0, 0]]
    assert torch.nonzero(ends[0]).flatten().tolist() == [1, 5]
    # reply 1 left out of the loss: no time step, its payment counts at the last model token before it
    masked = torch.tensor([[1, 1, 0, 0, 0, 0, 0, 0, 1, 1]])
    paid, ends = adv.turn_payments([[0.25, 0.5, 1.0]], spans, masked)
    assert paid.tolist() == [[0.0, 0.75, 0, 0, 0, 0, 0, 0, 0, 0]]
    assert torch.nonzero(ends[0]).flatten().tolist() == [1]


def _by_hand_returns(rewards: list[float], turn_of: list[int], gamma: float, turn_gamma: float) -> list[float]:
    """Per model token s >= t: r_s gamma^(model tokens from t to s) turn_gamma^(turns from t to s)."""
    return [
        sum(rewards[s] * gamma ** (s - t) * turn_gamma ** (turn_of[s] - turn_of[t]) for s in range(t, len(rewards)))
        for t in range(len(rewards))
    ]


def test_returns_to_go_discount_per_token_and_per_turn() -> None:
    mask = torch.tensor([[1, 1, 0, 0, 1, 1, 0, 0, 1, 1]])
    paid, ends = adv.turn_payments([[0.25, 0.5, 0.25]], [[(0, 2), (4, 6), (8, 10)]], mask)
    rewards = adv.token_rewards(torch.tensor([2.0]), mask, paid=paid)  # the rest, 2 - 0.75, on token 9
    assert rewards[0, 9].item() == pytest.approx(1.25)
    gamma, turn_gamma = 0.9, 0.5
    got = adv.returns_to_go(rewards, mask, gamma, turn_gamma, ends)
    steps = [0, 1, 4, 5, 8, 9]
    want = _by_hand_returns([0.0, 0.25, 0.0, 0.5, 0.0, 1.25], [0, 0, 1, 1, 2, 2], gamma, turn_gamma)
    assert got[0, steps].tolist() == pytest.approx(want)
    assert got[0, [2, 3, 6, 7]].tolist() == [0.0] * 4


def test_gae_discounts_across_a_turn_end() -> None:
    mask = torch.tensor([[1, 0, 1, 1]])
    ends = torch.tensor([[True, False, False, False]])
    rewards, values = torch.tensor([[0.5, 0.0, 0.0, 1.0]]), torch.tensor([[0.2, 0.0, 0.4, 0.6]])
    gamma, lam, turn_gamma = 0.9, 0.8, 0.5
    got, returns = adv.gae(rewards, values, mask, gamma, lam, turn_gamma, ends)
    # by hand, backwards over the model tokens 3, 2, 0; the discount from 0 to 2 crosses a turn's end
    d3 = 1.0 - 0.6
    a3 = d3
    d2 = 0.0 + gamma * 0.6 - 0.4
    a2 = d2 + gamma * lam * a3
    d0 = 0.5 + gamma * turn_gamma * 0.4 - 0.2
    a0 = d0 + gamma * turn_gamma * lam * a2
    assert got[0].tolist() == pytest.approx([a0, 0.0, a2, a3])
    assert returns[0].tolist() == pytest.approx([a0 + 0.2, 0.0, a2 + 0.4, a3 + 0.6])


def _scripted(tokenizer: Any, actions: list[str]) -> Any:
    """Every episode plays `actions` in order, one per turn (all episodes of the run in step)."""
    replies = [
        tokenizer(f"Action: {a}", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for a in actions
    ]
    turn = iter(range(len(replies)))

    def generate(contexts: list[list[int]], max_new_tokens: int, stop=None) -> list[tuple[list[int], list[float]]]:
        ids = replies[next(turn)]
        assert len(ids) <= max_new_tokens
        return [(ids, [-0.5] * len(ids)) for _ in contexts]

    return generate


def _dataset(env_id: str, task_id: str) -> Any:
    from datasets import Dataset

    return Dataset.from_dict({"prompt": [task_id], "env_id": [env_id], "task_id": [task_id], "seed": [0]})


def _gold(env_id: str, task_id: str) -> list[str]:
    import gymnasium as gym

    import agentgym_envs  # noqa: F401

    env = gym.make(env_id)
    try:
        observation, info = env.reset(options={"task_id": task_id})
        if env_id == SCIWORLD:
            return env.unwrapped.gold_actions()
        from agentgym_envs.textcraft.expert import TextCraftExpert

        expert, actions, done = TextCraftExpert(env.unwrapped), [], False
        while not done:
            actions.append(expert.act(observation, info))
            observation, _, terminated, truncated, info = env.step(actions[-1])
            done = terminated or truncated
        return actions
    finally:
        env.close()


def _trainer(tiny_babyai: Path, tmp_path: Path, env_id: str, task_id: str, ppo: bool = False, **overrides: Any) -> Any:
    actions = _gold(env_id, task_id)
    model, tokenizer = load_model(tiny_babyai)
    options = {
        "env_id": env_id,
        "env_kwargs": None,
        "max_turns": len(actions),
        "max_turn_tokens": 64,
        "max_completion_length": 4000,
        "num_generations": 2,
        "per_device_train_batch_size": 2,
        "advantage_estimator": "reinforce++",
        "beta": 0.0,
        **overrides,
    }
    dataset, table = _dataset(env_id, task_id), None
    if not ppo:
        trainer = MultiTurnGRPOTrainer(
            model, grpo_args(tmp_path, **options), processing_class=tokenizer, train_dataset=dataset
        )
    else:
        from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

        options.pop("advantage_estimator")
        args = MultiTurnPPOConfig(output_dir=str(tmp_path), report_to="none", activation_checkpointing=False, **options)
        critic = TokenValues(model.config.vocab_size)
        table = critic.table.weight.detach().clone()[:, 0]  # read before the rollout fits the critic
        trainer = MultiTurnPPOTrainer(
            model, args, processing_class=tokenizer, train_dataset=dataset, value_model=critic
        )
    trainer._sampler = lambda model: _scripted(tokenizer, actions)
    trainer.model.train()  # a training rollout, as inside trainer.train()
    return trainer, actions, table


def _rollout(trainer: Any) -> dict[str, Any]:
    out = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    trainer.engine.close()
    return out


def _turn_of_tokens(trainer: Any, out: dict[str, Any]) -> list[tuple[list[int], list[int]]]:
    """Per episode: its model tokens (in the loss) and each one's turn."""
    mask = out["completion_mask"] * out["tool_mask"]
    rows = []
    for b, e in enumerate(trainer.last_episodes):
        tokens = [t for t in range(mask.size(1)) if mask[b, t]]
        turn_of = [next(k for k, (start, end) in enumerate(e.reply_spans) if start <= t < end) for t in tokens]
        rows.append((tokens, turn_of))
    return rows


def _token_rewards_by_hand(e: Any, reward: float, tokens: list[int], turn_of: list[int]) -> list[float]:
    """Each turn's payment on its last token; the rest of the episode's reward on the last turn's."""
    out = [0.0] * len(tokens)
    for k, payment in enumerate(e.turn_rewards):
        last = max(j for j, turn in enumerate(turn_of) if turn == k)
        out[last] += payment if k < len(e.turn_rewards) - 1 else reward - sum(e.turn_rewards[:-1])
    return out


def _whiten(values: dict[tuple[int, int], float], shape: torch.Size) -> torch.Tensor:
    mean, std = statistics.fmean(values.values()), statistics.pstdev(values.values())
    out = torch.zeros(shape)
    for (b, t), v in values.items():
        out[b, t] = (v - mean) / std
    return out


def test_reinforce_pp_credits_each_turn_with_its_discounted_return_on_sciworld(
    tiny_babyai: Path, tmp_path: Path
) -> None:
    gamma, turn_gamma = 0.99, 0.5
    trainer, actions, _ = _trainer(
        tiny_babyai, tmp_path, SCIWORLD, SCIWORLD_TASK, reinforce_gamma=gamma, turn_gamma=turn_gamma
    )
    out = _rollout(trainer)
    rewards = trainer.rewards.tolist()
    returns = {}
    for b, (tokens, turn_of) in enumerate(_turn_of_tokens(trainer, out)):
        e = trainer.last_episodes[b]
        assert e.turns == len(actions) and e.success and not e.budget_truncated
        paid_on_the_way = [r for r in e.turn_rewards[:-1] if r]
        assert len(paid_on_the_way) >= 3  # SciWorld's score increments before the last turn
        per_token = _token_rewards_by_hand(e, rewards[b], tokens, turn_of)
        for t, value in zip(tokens, _by_hand_returns(per_token, turn_of, gamma, turn_gamma), strict=True):
            returns[b, t] = value
    torch.testing.assert_close(out["advantages"], _whiten(returns, out["advantages"].shape), atol=1e-4, rtol=0)


def test_ppo_pays_sciworlds_increments_on_their_turns(tiny_babyai: Path, tmp_path: Path) -> None:
    gamma, lam, turn_gamma = 0.99, 0.9, 0.5
    trainer, _, table = _trainer(
        tiny_babyai, tmp_path, SCIWORLD, SCIWORLD_TASK, ppo=True, gae_gamma=gamma, gae_lambda=lam, turn_gamma=turn_gamma
    )
    out = _rollout(trainer)
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    start = out["prompt_ids"].size(1)
    rewards = trainer.rewards.tolist()
    advantages = {}
    for b, (tokens, turn_of) in enumerate(_turn_of_tokens(trainer, out)):
        e = trainer.last_episodes[b]
        per_token = _token_rewards_by_hand(e, rewards[b], tokens, turn_of)
        value = [float(table[ids[b, start + t - 1]]) for t in tokens]
        running, next_value = 0.0, 0.0
        for j in reversed(range(len(tokens))):
            crosses = j + 1 < len(tokens) and turn_of[j + 1] != turn_of[j]
            discount = gamma * (turn_gamma if crosses else 1.0)
            delta = per_token[j] + discount * next_value - value[j]
            running = delta + discount * lam * running
            advantages[b, tokens[j]] = running
            next_value = value[j]
    torch.testing.assert_close(out["advantages"], _whiten(advantages, out["advantages"].shape), atol=1e-4, rtol=0)


def test_terminal_only_rewards_at_turn_gamma_1_change_nothing_on_textcraft(tiny_babyai: Path, tmp_path: Path) -> None:
    """TextCraft pays for the goal only (its intermediate crafts pay 0): at turn_gamma=1 the trainer's REINFORCE++
    advantages are bit for bit those without turns, and GAE's with turns are GAE's without."""
    gamma = 0.9
    trainer, actions, _ = _trainer(tiny_babyai, tmp_path, TEXTCRAFT, TEXTCRAFT_TASK, reinforce_gamma=gamma)
    out = _rollout(trainer)
    episodes = trainer.last_episodes
    assert all(e.success and e.turns == len(actions) >= 3 for e in episodes)
    assert all(r == 0.0 for e in episodes for r in e.turn_rewards[:-1]) and any(
        a.startswith("craft") for a in actions[:-1]
    )
    mask = out["completion_mask"] * out["tool_mask"]
    scores = trainer.rewards
    before = adv.masked_whiten(adv.returns_to_go(adv.token_rewards(scores, mask), mask, gamma), mask)
    assert torch.equal(out["advantages"], before)
    paid, ends = trainer.turn_payments(mask)
    assert ends.any()  # the turns are there; at turn_gamma=1 they change nothing
    rewards = adv.token_rewards(scores, mask, paid=paid)
    assert torch.equal(rewards, adv.token_rewards(scores, mask))
    values = torch.linspace(-1, 1, mask.numel()).view_as(mask).float() * mask
    with_turns = adv.gae(rewards, values, mask, 0.99, 0.95, 1.0, ends)
    without = adv.gae(adv.token_rewards(scores, mask), values, mask, 0.99, 0.95)
    assert all(torch.equal(a, b) for a, b in zip(with_turns, without, strict=True))
    # a per-turn discount below 1 does change them: the turns are in play
    discounted = adv.returns_to_go(rewards, mask, gamma, 0.5, ends)
    assert not torch.allclose(adv.masked_whiten(discounted, mask), before)
