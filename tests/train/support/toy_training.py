"""A short training run on the toy parity task and its success rate before and after (tests/train/trainers/
test_learning.py, tests/train/test_estimators.py)."""

from __future__ import annotations

from pathlib import Path

import toy_env

from agentgym_train.evaluation.evaluate import evaluate_model
from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer

STEPS = 60


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
