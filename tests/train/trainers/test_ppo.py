"""MultiTurnPPOTrainer: a value model, GAE over model tokens, token-level advantages into TRL's loss."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import toy_env
from train_helpers import QUIET_RUN

from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer


def test_ppo_gives_token_level_advantages_and_fits_its_value_model(toy_model: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(toy_model)
    args = ppo_args(tmp_path, per_device_train_batch_size=16, steps_per_generation=None, max_steps=3)
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


def ppo_args(tmp_path: Path, **overrides) -> MultiTurnPPOConfig:
    options = {
        "output_dir": str(tmp_path),
        "env_id": toy_env.ENV_ID,
        "max_turn_tokens": 1,
        "max_completion_length": 64,
        "num_generations": 4,
        "per_device_train_batch_size": 4,
        "steps_per_generation": 4,  # a rollout of 16 episodes, value passes in micro-batches of 4
        "learning_rate": 5e-3,
        "max_steps": 1,
        "logging_steps": 1,
        **QUIET_RUN,
        "activation_checkpointing": False,
        "dataloader_pin_memory": False,
        **overrides,
    }
    return MultiTurnPPOConfig(**options)


def rollout_tensors(trainer: MultiTurnPPOTrainer) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, int]:
    trainer.model.eval()  # a rollout without fitting the critic
    out = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    trainer.model.train()
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    return ids, attention, out["completion_mask"] * out["tool_mask"], out["completion_ids"].size(1)


def test_value_passes_in_micro_batches_equal_one_full_batch_pass(toy_model: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(toy_model)
    trainer = MultiTurnPPOTrainer(model, ppo_args(tmp_path), processing_class=tokenizer)
    ids, attention, mask, length = rollout_tensors(trainer)
    assert ids.size(0) == 16 and len(trainer._micro_batches(16)) == 4
    with torch.no_grad():
        micro = trainer._values(ids, attention, length)
        full = trainer.critic(ids, attention)[:, -length - 1 : -1]
    assert micro.shape == mask.shape
    assert torch.allclose(micro, full, atol=1e-5)
    # the fit accumulates micro-batch gradients into the full batch's gradient
    targets = torch.rand(mask.shape)
    trainer.args.value_epochs = 1
    trainer.value_optimizer = torch.optim.SGD(trainer.critic.trainable_parameters(), lr=0.0)
    trainer._fit_values(ids, attention, targets, mask)
    micro_grads = [p.grad.clone() for p in trainer.critic.trainable_parameters()]
    trainer.value_optimizer.zero_grad()
    values = trainer.critic(ids, attention)[:, -length - 1 : -1]
    (((values - targets) ** 2 * mask).sum() / mask.sum()).backward()
    torch.nn.utils.clip_grad_norm_(trainer.critic.trainable_parameters(), 1.0)  # as the fit does
    for a, p in zip(micro_grads, trainer.critic.trainable_parameters(), strict=True):
        assert torch.allclose(a, p.grad, atol=1e-6)
    trainer.engine.close()


def fit_toy_target(trainer: MultiTurnPPOTrainer, steps: int) -> list[float]:
    """Fit the critic to a fixed target (0.7 on every model token); return the losses."""
    ids, attention, mask, _ = rollout_tensors(trainer)
    targets = torch.full(mask.shape, 0.7)
    for _ in range(steps):
        trainer._fit_values(ids, attention, targets, mask)
    return trainer._metrics["train"]["value/loss"][-steps:]


def test_a_lora_critic_on_the_policy_base_trains_and_leaves_the_policy_alone(toy_model: Path, tmp_path: Path) -> None:
    from peft import LoraConfig

    from agentgym_train.trainers.critic import LoRACritic

    model, tokenizer = load_model(toy_model)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    args = ppo_args(tmp_path, critic="lora", critic_lora_rank=4, value_learning_rate=5e-2)
    trainer = MultiTurnPPOTrainer(model, args, processing_class=tokenizer, peft_config=lora)
    critic = trainer.critic
    assert isinstance(critic, LoRACritic) and critic.body is trainer.model  # one base for both
    policy = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if ".critic." not in n}
    critic_names = {n for n, _ in critic._adapter_parameters()}
    assert critic_names and all(".critic." in n for n in critic_names)
    # the policy's optimiser will hold the policy's adapter only
    trainable = {n for n, p in trainer.model.named_parameters() if p.requires_grad}
    assert trainable and all(".default." in n for n in trainable)

    adapter = {n: p.detach().clone() for n, p in critic._adapter_parameters()}
    losses = fit_toy_target(trainer, 5)
    assert losses[-1] < 0.5 * losses[0], losses
    assert any(not torch.equal(adapter[n], p) for n, p in critic._adapter_parameters() if "lora_B" in n)
    after = dict(trainer.model.named_parameters())
    for name, value in policy.items():  # base and policy adapter untouched by the critic's optimiser
        assert torch.equal(value, after[name].detach()), name
    assert trainer.model.active_adapter == "default"
    assert {n for n, p in trainer.model.named_parameters() if p.requires_grad} == trainable
    trainer.create_optimizer()
    in_optimizer = {id(p) for group in trainer.optimizer.param_groups for p in group["params"]}
    assert not in_optimizer & {id(after[n]) for n in critic_names}
    trainer.engine.close()


def test_a_lora_critic_beside_a_fully_trained_policy_uses_a_frozen_copy(toy_model: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(toy_model)
    args = ppo_args(tmp_path, critic="lora", critic_lora_rank=4, value_learning_rate=5e-2)
    trainer = MultiTurnPPOTrainer(model, args, processing_class=tokenizer)
    body = trainer.critic.body
    assert body is not trainer.model
    frozen = {n: p.detach().clone() for n, p in body.named_parameters() if "lora_" not in n}
    assert not any(p.requires_grad for n, p in body.named_parameters() if "lora_" not in n)
    losses = fit_toy_target(trainer, 5)
    assert losses[-1] < 0.5 * losses[0], losses
    for name, param in body.named_parameters():
        if name in frozen:
            assert torch.equal(frozen[name], param.detach()), name
    trainer.engine.close()


def test_ppo_refuses_another_advantage_estimator(toy_model: Path, tmp_path: Path) -> None:
    """GAE makes PPO's advantages; an estimator named beside it would run for nothing (or drop the KL)."""
    model, tokenizer = load_model(toy_model)
    args = MultiTurnPPOConfig(output_dir=str(tmp_path), env_id=toy_env.ENV_ID, advantage_estimator="rloo")
    with pytest.raises(ValueError, match="GAE"):
        MultiTurnPPOTrainer(model, args, processing_class=tokenizer)


def test_ppo_refuses_dynamic_sampling_and_turn_samples(tmp_path: Path) -> None:
    """A flat group carries no signal only under a group-relative estimator, GAE's advantages still move; the
    critic values episodes. The trainer refuses them; the config takes them, since the pipeline parses GRPO
    runs' settings as a `MultiTurnPPOConfig` too."""
    from agentgym_train.pipeline import load_configs
    from agentgym_train.trainers.ppo import check_settings

    for setting, why in (({"dynamic_sampling": True}, "not group-relative"), ({"sample_unit": "turn"}, "critic")):
        args = MultiTurnPPOConfig(output_dir=str(tmp_path), env_id=toy_env.ENV_ID, **setting)
        with pytest.raises(ValueError, match=why):
            check_settings(args)
    demo = Path(__file__).parents[3] / "agentgym_train" / "configs" / "babyai_demo.yaml"
    _, grpo = load_configs(demo, ["--dynamic_sampling", "true", "--sample_unit", "turn", "--context", "window:2"])
    assert grpo.dynamic_sampling and grpo.sample_unit == "turn" and grpo.context == "window:2"


def test_a_full_critic_is_prepared_as_the_policy(toy_model: Path, tmp_path: Path) -> None:
    """In the policy's dtype, dropout off, activation checkpointing as the config says (a decoder layer
    runs again in the backward), a plain AdamW over exactly its parameters, and out of the accelerator's
    model list (which transformers' evaluation reads as the policy's)."""
    model, tokenizer = load_model(toy_model)
    args = ppo_args(tmp_path, activation_checkpointing=True, value_epochs=1)
    trainer = MultiTurnPPOTrainer(model.to(torch.bfloat16), args, processing_class=tokenizer)
    critic = trainer.critic
    assert {p.dtype for p in critic.parameters()} == {torch.bfloat16}
    assert critic.module.is_activation_checkpointing and critic.model.training
    assert all(m.p == 0 for m in critic.modules() if isinstance(m, torch.nn.Dropout))
    assert type(trainer.value_optimizer) is torch.optim.AdamW
    held = [p for group in trainer.value_optimizer.param_groups for p in group["params"]]
    assert all(a is b for a, b in zip(held, critic.parameters(), strict=True))
    assert all(m is not critic.model for m in trainer.accelerator._models)  # (TRL's reference model is there)

    calls = [0]
    critic.module.model.layers[0].self_attn.register_forward_pre_hook(lambda *_: calls.__setitem__(0, calls[0] + 1))
    ids, attention, mask, _ = rollout_tensors(trainer)
    calls[0] = 0
    trainer._fit_values(ids, attention, torch.zeros(mask.shape), mask)
    assert calls[0] == 2 * len(trainer._micro_batches(ids.size(0)))  # forward, then recomputed in the backward
    trainer.engine.close()


def test_a_full_critic_is_refused_under_deepspeed_and_fsdp1(toy_model: Path) -> None:
    from types import SimpleNamespace

    from accelerate.utils import DistributedType
    from transformers import AutoModelForTokenClassification

    from agentgym_train.trainers.critic import ModelCritic

    critic = ModelCritic(AutoModelForTokenClassification.from_pretrained(str(toy_model), num_labels=1))
    with pytest.raises(ValueError, match="DeepSpeed engine"):
        critic.prepare(SimpleNamespace(distributed_type=DistributedType.DEEPSPEED), 1e-3, None)
    with pytest.raises(ValueError, match="fsdp_version: 2"):
        critic.prepare(SimpleNamespace(distributed_type=DistributedType.FSDP, is_fsdp2=False), 1e-3, None)


def test_replicated_critic_gradients_are_averaged_in_one_reduce_per_dtype() -> None:
    from types import SimpleNamespace

    from agentgym_train.trainers.critic import all_reduce_gradients

    reduced = []

    def reduce(tensor: torch.Tensor, reduction: str) -> torch.Tensor:
        reduced.append((tensor.dtype, tensor.numel(), reduction))
        return tensor / 2  # the mean with a process whose gradients are all 0

    parameters = [
        torch.nn.Parameter(torch.zeros(shape, dtype=dtype))
        for shape, dtype in [((2, 3), torch.float32), ((4,), torch.bfloat16), ((5,), torch.float32)]
    ]
    for i, p in enumerate(parameters):
        p.grad = torch.full_like(p, float(i + 1))
    all_reduce_gradients(parameters, SimpleNamespace(reduce=reduce))
    assert sorted(reduced, key=str) == sorted([(torch.float32, 11, "mean"), (torch.bfloat16, 4, "mean")], key=str)
    for i, p in enumerate(parameters):
        assert torch.equal(p.grad, torch.full_like(p, (i + 1) / 2))
