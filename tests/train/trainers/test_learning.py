"""GRPO learns a small multi-turn task from a random-init tiny model, and would not with a flipped
advantage sign or a wrong env mask (each fault injected into the same run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from toy_training import train

from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer


class FlippedSign(MultiTurnGRPOTrainer):
    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        output["advantages"] = -output["advantages"]
        return output


class WrongMask(MultiTurnGRPOTrainer):
    """Trains on the env's tokens instead of the model's (the mask inverted inside the completion)."""

    def _generate_and_score_completions(self, inputs):
        output = super()._generate_and_score_completions(inputs)
        output["tool_mask"] = output["completion_mask"] * (1 - output["tool_mask"])
        return output


@pytest.mark.slow
def test_grpo_learns_the_toy_task(toy_model: Path, tmp_path: Path) -> None:
    before, after = train(MultiTurnGRPOTrainer, toy_model, tmp_path)
    assert 0.1 <= before <= 0.45, f"a random-init model should start near 0.25, got {before}"
    assert after >= 0.8, f"GRPO should learn the toy task: {before:.2f} -> {after:.2f}"


@pytest.mark.slow
def test_a_flipped_advantage_sign_unlearns(toy_model: Path, tmp_path: Path) -> None:
    before, after = train(FlippedSign, toy_model, tmp_path)
    assert after <= before + 0.05 and after < 0.3, f"with the sign flipped: {before:.2f} -> {after:.2f}"


@pytest.mark.slow
def test_a_wrong_mask_does_not_learn(toy_model: Path, tmp_path: Path) -> None:
    before, after = train(WrongMask, toy_model, tmp_path)
    assert after < 0.5, f"trained on env tokens instead of replies: {before:.2f} -> {after:.2f}"


@pytest.mark.slow
def test_ppo_learns_the_toy_task(toy_model: Path, tmp_path: Path) -> None:
    from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

    before, after = train(MultiTurnPPOTrainer, toy_model, tmp_path, MultiTurnPPOConfig)
    assert after >= 0.8, f"PPO should learn the toy task: {before:.2f} -> {after:.2f}"
