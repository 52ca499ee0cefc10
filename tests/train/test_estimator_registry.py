"""The advantage-estimator registry (issue 25, design): a user's estimator, registered by name, is what the trainer
trains on, with no edit to the trainer; the config's validation names the registered estimators."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import grpo_args

from agentgym_train import estimators
from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

NAME = "test_median_baseline"


@pytest.fixture
def registered() -> Iterator[list[estimators.EstimatorInput]]:
    """Registers NAME: each reward minus its group's median, times 3 (no built-in gives that); records its inputs."""
    seen: list[estimators.EstimatorInput] = []

    @estimators.register_estimator(NAME)
    def median_baseline(batch: estimators.EstimatorInput) -> torch.Tensor:
        seen.append(batch)
        groups = batch.rewards.view(-1, batch.group_size)
        return (3 * (groups - groups.median(dim=1, keepdim=True).values)).flatten()[batch.rows]

    yield seen
    del estimators.ESTIMATORS[NAME]


def test_a_registered_estimator_is_what_the_trainer_trains_on(
    registered: list[estimators.EstimatorInput], tiny_babyai: Path, tmp_path: Path
) -> None:
    model, tokenizer = load_model(tiny_babyai)
    trainer = MultiTurnGRPOTrainer(
        model, grpo_args(tmp_path, max_turns=2, advantage_estimator=NAME), processing_class=tokenizer
    )
    run = trainer.engine.run

    def scripted(tasks: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        episodes = run(tasks, *args, **kwargs)
        for i, episode in enumerate(episodes):
            episode.episode_return = float(i % 4)  # 0 1 2 3 in each group: median 1
        return episodes

    trainer.engine.run = scripted
    out = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    assert out["advantages"].tolist() == [-3.0, 0.0, 3.0, 6.0] * 2
    (batch,) = registered
    assert batch.group_size == 4 and batch.rows == slice(0, 8) and batch.config is trainer.args
    assert list(batch.episodes) == trainer.last_episodes
    assert batch.mask.shape == out["completion_ids"].shape
    trainer.engine.close()


def test_config_names_the_registered_estimators(registered: list[estimators.EstimatorInput], tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=f"one of .*'gigpo', '{NAME}'.*got 'nope'"):
        grpo_args(tmp_path, advantage_estimator="nope")
    with pytest.raises(ValueError, match="already registered"):
        estimators.register_estimator(NAME)(lambda batch: batch.grpo)


def test_built_in_estimators_are_registered_with_what_the_trainer_needs() -> None:
    assert list(estimators.ESTIMATORS)[:5] == ["grpo", "rloo", "reinforce++", "reinforce++_baseline", "gigpo"]
    assert [n for n, e in estimators.ESTIMATORS.items() if e.kl_in_reward] == list(estimators.KL_IN_REWARD)
    assert [n for n, e in estimators.ESTIMATORS.items() if e.record_states] == ["gigpo"]
    assert [n for n, e in estimators.ESTIMATORS.items() if e.any_aggregation] == ["grpo"]
