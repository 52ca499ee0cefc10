"""MultiTurnPPOTrainer: a value model, GAE over model tokens, token-level advantages into TRL's loss."""

from __future__ import annotations

from pathlib import Path

import torch
import toy_env

from agentgym_train.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer
from agentgym_train.tiny import load_model


def test_ppo_gives_token_level_advantages_and_fits_its_value_model(toy_model: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(toy_model)
    args = MultiTurnPPOConfig(
        output_dir=str(tmp_path),
        env_id=toy_env.ENV_ID,
        max_turn_tokens=1,
        max_completion_length=64,
        num_generations=4,
        per_device_train_batch_size=16,
        learning_rate=5e-3,
        max_steps=3,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        activation_checkpointing=False,
        disable_tqdm=True,
        dataloader_pin_memory=False,
    )
    trainer = MultiTurnPPOTrainer(model, args, processing_class=tokenizer)
    value_before = [p.detach().clone() for p in trainer.value_model.parameters()]
    policy_before = [p.detach().clone() for p in trainer.model.parameters()]

    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    advantages, mask = out["advantages"], out["completion_mask"] * out["tool_mask"]
    assert advantages.shape == out["completion_ids"].shape  # one advantage per token
    assert torch.count_nonzero(advantages * (1 - mask)) == 0  # none on env tokens or padding
    assert torch.count_nonzero(advantages * mask) > 0
    # whitened over model tokens
    assert abs(float(advantages[mask.bool()].mean())) < 1e-4

    trainer.train()
    trainer.engine.close()
    assert any(not torch.equal(a, b) for a, b in zip(value_before, trainer.value_model.parameters(), strict=True))
    assert any(not torch.equal(a, b) for a, b in zip(policy_before, trainer.model.parameters(), strict=True))
    assert any("value/loss" in row for row in trainer.state.log_history)
