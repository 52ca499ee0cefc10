"""GRPO learns a small multi-turn task from a random-init tiny model, and would not with a flipped
advantage sign or a wrong env mask (each fault injected into the same run)."""

from __future__ import annotations

from pathlib import Path

import pytest
import toy_env

from agentgym_train.evaluation.evaluate import evaluate_model
from agentgym_train.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer

STEPS = 60


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


def success(model, tokenizer) -> float:
    result = evaluate_model(
        model, tokenizer, toy_env.ENV_ID, num_tasks=100, max_turn_tokens=1, max_completion_length=64, progress=False
    )
    return result.success.mean


def train(
    trainer_class: type[MultiTurnGRPOTrainer],
    model_dir: Path,
    output_dir: Path,
    config_class: type = MultiTurnGRPOConfig,
) -> tuple[float, float]:
    model, tokenizer = load_model(model_dir)
    before = success(model, tokenizer)
    args = config_class(
        output_dir=str(output_dir),
        env_id=toy_env.ENV_ID,
        max_turn_tokens=1,  # one-token replies: the task is which token to say after each cue
        max_completion_length=64,
        num_generations=8,
        per_device_train_batch_size=64,
        learning_rate=5e-3,
        max_steps=STEPS,
        logging_steps=10,
        report_to="none",
        save_strategy="no",
        activation_checkpointing=False,
        disable_tqdm=True,
        dataloader_pin_memory=False,
        seed=0,
    )
    trainer = trainer_class(model, args, processing_class=tokenizer)
    trainer.train()
    trainer.engine.close()
    return before, success(model, tokenizer)


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
