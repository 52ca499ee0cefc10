"""MultiTurnGRPOTrainer: grouping, rewards from the rollout, advantages, logging, estimators."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import BABYAI, ENV_KWARGS, grpo_args

from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer, task_dataset


def test_task_dataset_names_tasks_of_a_split() -> None:
    data = task_dataset(BABYAI, "test", num_tasks=5, env_kwargs=ENV_KWARGS)
    assert data["task_id"] == [f"GoToLocal/{seed}" for seed in range(5)]
    assert set(data["split"]) == {"test"} and set(data["env_id"]) == {BABYAI}
    assert data["seed"] == list(range(5))


def test_groups_are_episodes_of_one_task_and_equal_returns_give_zero_advantages(
    tiny_babyai: Path, tmp_path: Path
) -> None:
    model, tokenizer = load_model(tiny_babyai)  # random init: it never succeeds, every return is 0
    trainer = MultiTurnGRPOTrainer(model, grpo_args(tmp_path), processing_class=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    episodes = trainer.last_episodes
    group = trainer.num_generations
    assert len(episodes) == len(batch) == 8
    for start in range(0, len(episodes), group):
        tasks = {(e.task.task_id, e.task.split, e.task.seed) for e in episodes[start : start + group]}
        assert len(tasks) == 1, f"a GRPO group mixes tasks: {tasks}"
        # and the env really played that task: the same first observation for the whole group
        assert len({tuple(e.prompt_ids) for e in episodes[start : start + group]}) == 1
    assert len({e.task.task_id for e in episodes}) == len(episodes) // group
    assert all(e.episode_return == 0.0 for e in episodes)
    assert torch.count_nonzero(out["advantages"]) == 0
    trainer.engine.close()


def test_rewards_come_from_episode_returns(tiny_babyai: Path, tmp_path: Path) -> None:
    """A reward function sees the rollout's extra fields; unequal returns give group-relative advantages."""
    seen: dict[str, list] = {}

    def shaped(completions, episode_return, turns, success, **kwargs):
        seen.update(turns=list(turns), success=list(success), returns=list(episode_return))
        return [float(len(c)) for c in completions]  # differs inside groups

    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(tmp_path, max_turns=4, temperature=1.5)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[shaped])
    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    assert seen["turns"] == [e.turns for e in trainer.last_episodes]
    texts = tokenizer.batch_decode([e.completion_ids for e in trainer.last_episodes], skip_special_tokens=True)
    rewards = torch.tensor([len(t) for t in texts], dtype=torch.float32).view(-1, trainer.num_generations)
    assert rewards.std(1).min() > 0
    expected = (rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)
    assert torch.allclose(out["advantages"], expected.flatten(), atol=1e-5)
    trainer.engine.close()


@pytest.mark.parametrize("estimator", ["rloo"])  # reinforce++ (per token): tests/train/test_estimators.py
def test_other_estimators_replace_trl_advantages(tiny_babyai: Path, tmp_path: Path, estimator: str) -> None:
    from agentgym_train import estimators

    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(tmp_path, max_turns=4, temperature=1.5, advantage_estimator=estimator)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    trainer.engine.run = _with_returns_from_turns(trainer.engine.run)
    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    returns = torch.tensor([e.episode_return for e in trainer.last_episodes])
    assert returns.std() > 0
    assert torch.allclose(out["advantages"], getattr(estimators, estimator)(returns, trainer.num_generations))
    trainer.engine.close()


def _with_returns_from_turns(run):
    """Make returns differ inside groups (a random model never succeeds) for estimator tests."""

    def wrapped(tasks, generate, progress=None):
        episodes = run(tasks, generate, progress)
        for i, episode in enumerate(episodes):
            episode.episode_return = float(i % 3)
        return episodes

    return wrapped


def test_training_steps_log_the_episode_metrics(tiny_babyai: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    trainer = MultiTurnGRPOTrainer(model, grpo_args(tmp_path, max_turns=2), processing_class=tokenizer)
    trainer.train()
    logs = [row for row in trainer.state.log_history if "episode/return" in row]
    assert len(logs) == 2
    for key in (
        "episode/success",
        "episode/turns",
        "episode/truncated",
        "episode/budget_truncated",
        "episode/invalid_reply_rate",
        "rollout/max_turns",
        "rollout/generation_time",
        "rollout/env_time",
        "rollout/env_time_share",
    ):
        assert key in logs[0], key
    assert logs[0]["rollout/max_turns"] == 2 and logs[0]["episode/turns"] <= 2
    assert logs[0]["episode/invalid_reply_rate"] > 0.5  # a random model does not write "Action: ..."
    trainer.engine.close()


def test_config_checks_the_estimator() -> None:
    with pytest.raises(ValueError, match="advantage_estimator"):
        MultiTurnGRPOConfig(output_dir="x", advantage_estimator="ppo")
