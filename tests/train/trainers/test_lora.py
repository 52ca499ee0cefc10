"""LoRA through `peft_config`: only the adapter trains; the reference is the adapter disabled."""

from __future__ import annotations

from pathlib import Path

import torch
import toy_env

from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer


def test_lora_trains_the_adapter_only(toy_model: Path, tmp_path: Path) -> None:
    from peft import LoraConfig

    model, tokenizer = load_model(toy_model)
    base = {name: p.detach().clone() for name, p in model.named_parameters()}
    args = MultiTurnGRPOConfig(
        output_dir=str(tmp_path),
        env_id=toy_env.ENV_ID,  # returns differ inside groups from the start, so gradients flow
        max_turn_tokens=1,
        max_completion_length=64,
        num_generations=8,
        per_device_train_batch_size=32,
        learning_rate=1e-2,
        max_steps=3,
        beta=0.1,  # the KL term needs reference logprobs: with LoRA, the adapter disabled
        report_to="none",
        save_strategy="no",
        logging_steps=1,
        activation_checkpointing=False,
        disable_tqdm=True,
        dataloader_pin_memory=False,
    )
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, peft_config=lora)
    assert trainer.ref_model is None  # no copy of the model: the reference is the base with adapters off
    adapter = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert adapter and all(p.requires_grad for n, p in trainer.model.named_parameters() if "lora_" in n)
    trainer.train()
    trainer.engine.close()

    after = dict(trainer.model.named_parameters())
    changed = [n for n, p in adapter.items() if not torch.equal(p, after[n].detach())]
    assert any("lora_B" in n for n in changed), "the adapter did not train"
    frozen = {
        n.removeprefix("base_model.model.").replace(".base_layer", ""): p for n, p in after.items() if "lora_" not in n
    }
    assert set(frozen) == set(base)
    for name, value in base.items():
        assert torch.equal(value, frozen[name].detach()), f"base weight {name} changed"
    kl = [row["kl"] for row in trainer.state.log_history if "kl" in row]
    assert kl and kl[-1] > 0  # policy (with adapter) and reference (without) differ after training
