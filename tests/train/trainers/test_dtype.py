"""Models load, train and decode in the training dtype: bf16 weights where FSDP or DeepSpeed keep float32 masters,
float32 weights under autocast on plain DDP and one process (bf16 / fp16 flags)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from train_helpers import BABYAI, ENV_KWARGS, grpo_args, launch_two_processes, rank_reports

from agentgym_train.models.tiny import keep_master_weights, load_model, sharded_training, training_dtype
from agentgym_train.rollout.backends.cached import CachedSampler
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

SHARDING_ENV = ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED")


@pytest.fixture
def plain_ddp(monkeypatch: pytest.MonkeyPatch) -> None:
    """No `accelerate launch` FSDP / DeepSpeed config in this process's environment."""
    for name in SHARDING_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    ("flags", "dtype"),
    [
        # plain DDP / one process: float32 masters, autocast computes in bf16
        ({"bf16": True, "fp16": False}, torch.float32),
        ({"bf16": False, "fp16": True}, torch.float32),  # GradScaler refuses float16 gradients
        ({"bf16": False, "fp16": False}, torch.float32),
        ({"bf16": None, "fp16": False}, torch.float32),  # TRL's "unset" before its __post_init__
        ({}, torch.float32),
        # FSDP and DeepSpeed keep float32 masters of their own: the weights load in bf16
        ({"bf16": True, "fsdp": True}, torch.bfloat16),
        ({"bf16": True, "deepspeed": "ds_config.json"}, torch.bfloat16),
        ({"bf16": False, "fsdp": True}, torch.float32),
        ({"fp16": True, "deepspeed": {"zero_optimization": {"stage": 3}}}, torch.float32),
    ],
)
def test_training_dtype_follows_the_mixed_precision_flags(plain_ddp: None, flags: dict, dtype: torch.dtype) -> None:
    assert training_dtype(SimpleNamespace(**flags)) is dtype
    assert training_dtype(flags) is dtype


@pytest.mark.parametrize("variable", SHARDING_ENV)
def test_accelerate_launch_with_a_sharded_config_loads_bf16(
    plain_ddp: None, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    """`accelerate launch --config_file fsdp.yaml / zero3.yaml` says so in the environment, not in the config."""
    assert not sharded_training({"bf16": True})
    monkeypatch.setenv(variable, "true")
    assert sharded_training({"bf16": True})
    assert training_dtype({"bf16": True}) is torch.bfloat16
    monkeypatch.setenv(variable, "false")
    assert training_dtype({"bf16": True}) is torch.float32


def test_training_dtype_refuses_both_flags() -> None:
    with pytest.raises(ValueError, match="both bf16 and fp16"):
        training_dtype({"bf16": True, "fp16": True})


def test_a_real_trainer_config_maps_to_float32_without_sharding(plain_ddp: None, tmp_path: Path) -> None:
    args = grpo_args(tmp_path)  # on a CPU-only machine the config turns TRL's default bf16 off
    assert training_dtype(args) is torch.float32
    args = grpo_args(tmp_path, bf16=True, use_cpu=True)
    assert args.bf16 and training_dtype(args) is torch.float32


def test_keep_master_weights_upcasts_16_bit_trainable_weights_without_sharding() -> None:
    def model(dtype: torch.dtype) -> torch.nn.Module:
        return torch.nn.Sequential(torch.nn.Linear(2, 2, dtype=dtype), torch.nn.LayerNorm(2, dtype=dtype))

    for dtype, flag in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        net = model(dtype)
        values = [p.detach().clone() for p in net.parameters()]
        with pytest.warns(UserWarning, match=rf"{flag}: true under plain DDP .* 4 trainable {dtype} .* float32"):
            assert keep_master_weights(net, {flag: True}, sharded=False) == ["0.weight", "0.bias", "1.weight", "1.bias"]
        assert {p.dtype for p in net.parameters()} == {torch.float32}
        assert all(torch.equal(p.detach(), v.float()) for p, v in zip(net.parameters(), values, strict=True))
    # left alone: sharded (FSDP / DeepSpeed keep float32 masters), no mixed precision (16-bit training chosen),
    # frozen 16-bit weights (a LoRA base); only the trainable part of a partly frozen model is upcast
    for net, args, sharded in (
        (model(torch.bfloat16), {"bf16": True}, True),
        (model(torch.bfloat16), {"bf16": False}, False),
        (model(torch.bfloat16).requires_grad_(False), {"bf16": True}, False),
    ):
        assert keep_master_weights(net, args, sharded) == []
        assert {p.dtype for p in net.parameters()} == {torch.bfloat16}
    net = model(torch.bfloat16)
    net[0].requires_grad_(False)
    with pytest.warns(UserWarning):
        assert keep_master_weights(net, {"bf16": True}, sharded=False) == ["1.weight", "1.bias"]
    assert [p.dtype for p in net.parameters()] == [torch.bfloat16] * 2 + [torch.float32] * 2


def test_the_trainer_keeps_float32_masters_of_a_bf16_model_under_bf16(
    plain_ddp: None, tiny_babyai: Path, tmp_path: Path
) -> None:
    """A bf16 model handed to the trainer with `bf16: true` on one process trains float32 masters (with a warning);
    TRL built the frozen KL reference before, in bf16."""
    model, tokenizer = load_model(tiny_babyai, dtype=torch.bfloat16)
    args = grpo_args(tmp_path, bf16=True, use_cpu=True, beta=0.04)
    with pytest.warns(UserWarning, match="upcast them to float32 master weights"):
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    try:
        assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
        assert {p.dtype for p in trainer.ref_model.parameters()} == {torch.bfloat16}
    finally:
        trainer.engine.close()


@pytest.mark.parametrize("dtype", [torch.bfloat16, "bfloat16", torch.float16])
def test_load_model_loads_every_weight_in_the_dtype(tiny_babyai: Path, dtype: torch.dtype | str) -> None:
    model, _ = load_model(tiny_babyai, dtype=dtype)
    expected = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    assert {p.dtype for p in model.parameters()} == {expected}
    # half the bytes of the float32 load
    full, _ = load_model(tiny_babyai)
    size = sum(p.numel() * p.element_size() for p in model.parameters())
    assert size * 2 == sum(p.numel() * p.element_size() for p in full.parameters())


def test_load_model_names_a_bad_dtype(tiny_babyai: Path) -> None:
    with pytest.raises(ValueError, match="'bf16' is not a torch dtype"):
        load_model(tiny_babyai, dtype="bf16")


def test_trl_builds_the_reference_model_in_the_policy_dtype(tiny_babyai: Path, tmp_path: Path) -> None:
    """TRL's GRPOTrainer (given a model instance) makes the KL reference with `dtype=self.model.dtype` (here bf16
    weights without mixed precision: the user's own choice, which the trainer allows)."""
    model, tokenizer = load_model(tiny_babyai, dtype=torch.bfloat16)
    trainer = MultiTurnGRPOTrainer(model, grpo_args(tmp_path, beta=0.04), processing_class=tokenizer)
    try:
        assert trainer.ref_model is not None
        assert {p.dtype for p in trainer.ref_model.parameters()} == {torch.bfloat16}
        assert {p.dtype for p in trainer.model.parameters()} == {torch.bfloat16}
    finally:
        trainer.engine.close()


def test_a_model_path_loads_in_model_init_kwargs_dtype_else_float32(tiny_babyai: Path, tmp_path: Path) -> None:
    """Given a path, TRL loads the policy (and so its reference) in `model_init_kwargs["dtype"]`, and in
    float32 without it: a caller that passes a path must set that dtype (`training_dtype(args)`)."""
    _, tokenizer = load_model(tiny_babyai)
    for init, dtype in ((None, torch.float32), ({"dtype": torch.bfloat16}, torch.bfloat16)):
        args = grpo_args(tmp_path / str(dtype), beta=0.04, model_init_kwargs=init)
        trainer = MultiTurnGRPOTrainer(str(tiny_babyai), args, processing_class=tokenizer)
        try:
            assert {p.dtype for p in trainer.model.parameters()} == {dtype}
            assert {p.dtype for p in trainer.ref_model.parameters()} == {dtype}
        finally:
            trainer.engine.close()


def test_cached_sampler_decodes_in_the_model_dtype(tiny_babyai: Path) -> None:
    """A bfloat16 model's sampler keeps a bfloat16 cache and weights; each logprob is the float32
    log-softmax of the model's own (bfloat16) logits for the sampled token."""
    model, tokenizer = load_model(tiny_babyai, dtype=torch.bfloat16)
    sampler = CachedSampler(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=0.7)
    contexts = [tokenizer.encode("Action: go forward"), tokenizer.encode("You see a red ball 2 steps ahead")]
    torch.manual_seed(0)
    replies = sampler(contexts, max_new_tokens=5)
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    assert {layer.keys.dtype for layer in sampler.cache.layers} == {torch.bfloat16}
    for context, (ids, logprobs) in zip(contexts, replies, strict=True):
        assert len(ids) == len(logprobs) >= 1
        # one unpadded forward pass over the sequence: the logits the trainer recomputes
        with torch.no_grad():
            logits = model(torch.tensor([context + ids])).logits[0, len(context) - 1 : -1]
        expected = torch.log_softmax(logits.float() / 0.7, dim=-1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
        # bfloat16 arithmetic differs between a cached and a full pass by a few of its 8 mantissa bits
        assert torch.allclose(torch.tensor(logprobs), expected, atol=0.15), (logprobs, expected)


@pytest.mark.slow
def test_bf16_under_ddp_moves_every_weight_that_gets_a_gradient_at_lr_1e_6(tiny_babyai: Path, tmp_path: Path) -> None:
    """Plain DDP (2 processes, gloo) with `bf16: true` at the paper's lr 1e-6: the policy loads as the pipeline loads
    it, in float32; bf16 autocast computes the forward; AdamW updates float32 weights with float32 moments, so every
    weight element that got a nonzero gradient moved. bf16 weights would move ~2% of them (rounding eats the rest)."""
    launch_two_processes("dtype_job.py", tiny_babyai, tmp_path, 2, timeout=600)
    reports = rank_reports(tmp_path)
    for report in reports:
        assert report["world_size"] == 2 and report["global_step"] == 2
        assert report["distributed_type"] == "MULTI_CPU" and report["mixed_precision"] == "bf16"
        weights = report["weights"]
        got = sum(w["gradient"] for w in weights.values())
        assert got > 0.5 * sum(_numel(tiny_babyai).values())  # most elements got a gradient
        # bf16 weights: 3,123 of 150,524 moved (2.1%) in this job
        stuck = {name: w["gradient"] - w["moved_with_gradient"] for name, w in weights.items()}
        assert sum(stuck.values()) == 0, f"{sum(stuck.values())} of {got} weights with a gradient did not move"
        assert all(w["moved_without_gradient"] == 0 for w in weights.values())  # no weight decay: nothing else moves
        assert report["load_dtype"] == "torch.float32"
        assert report["weight_dtypes"] == ["torch.float32"] and report["moment_dtypes"] == ["torch.float32"]
        assert report["computed_in"] == ["torch.bfloat16"]  # autocast: the decoder's matmuls ran in bf16
    # DDP kept the replicas identical
    assert [w["checksum"] for w in reports[0]["weights"].values()] == pytest.approx(
        [w["checksum"] for w in reports[1]["weights"].values()], rel=1e-12
    )


def _numel(model_dir: Path) -> dict[str, int]:
    model, _ = load_model(model_dir)
    return {name: p.numel() for name, p in model.named_parameters()}


@pytest.mark.slow
def test_the_pipeline_trains_float32_masters_under_ddp_with_bf16(tiny_babyai: Path, tmp_path: Path) -> None:
    """`agentgym train` (SFT, eval, GRPO, eval) under plain DDP with `bf16: true` (2 CPU processes, gloo): the policy
    loads in float32 and SFT trains it; what RL trains and every evaluation runs is float32 (the FSDP / ZeRO
    counterpart, bf16 weights, is test_sharded.py's pipeline test)."""
    launch_two_processes("dtype_job.py", tiny_babyai, tmp_path, 1, "pipeline", timeout=600)
    ranks = rank_reports(tmp_path)
    assert [(r["distributed_type"], r["mixed_precision"]) for r in ranks] == [("MULTI_CPU", "bf16")] * 2
    assert [r["policy_dtypes"] for r in ranks] == [["torch.float32"]] * 2
    # every rank evaluates before RL, the main one after RL
    assert [r["evaluated"] for r in ranks] == [[["torch.float32"]] * 2, [["torch.float32"]]]
    saved = load_model(tmp_path / "sft-model", "float32")[0]
    initial = dict(load_model(tiny_babyai, "float32")[0].named_parameters())
    assert any(not torch.equal(p, initial[name]) for name, p in saved.named_parameters()), "SFT changed no weight"


@pytest.mark.parametrize("given", [False, True])
def test_ppo_critic_keeps_float32_masters_under_bf16(
    plain_ddp: None, tiny_babyai: Path, tmp_path: Path, given: bool
) -> None:
    """A full critic copied from an upcast bf16 policy, or a bf16 value model handed in, trains float32 weights."""
    from transformers import AutoModelForTokenClassification

    from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

    model, tokenizer = load_model(tiny_babyai, dtype=torch.bfloat16)
    value = AutoModelForTokenClassification.from_pretrained(tiny_babyai, num_labels=1, dtype=torch.bfloat16)
    args = MultiTurnPPOConfig(
        output_dir=str(tmp_path),
        env_id=BABYAI,
        env_kwargs=ENV_KWARGS,
        max_turn_tokens=6,
        num_generations=4,
        per_device_train_batch_size=4,
        bf16=True,
        use_cpu=True,
        report_to="none",
        activation_checkpointing=False,
    )
    with pytest.warns(UserWarning, match="upcast them to float32 master weights"):
        trainer = MultiTurnPPOTrainer(model, args, processing_class=tokenizer, value_model=value if given else None)
    try:
        assert {p.dtype for p in trainer.model.parameters()} == {torch.float32}
        assert {p.dtype for p in trainer.critic.trainable_parameters()} == {torch.float32}
    finally:
        trainer.engine.close()
