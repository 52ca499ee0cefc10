"""Models load, train and decode in the training dtype (bf16 / fp16 flags), not always in float32."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from train_helpers import grpo_args

from agentgym_train.rollout.backends.cached import CachedSampler
from agentgym_train.tiny import load_model, training_dtype
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer


@pytest.mark.parametrize(
    ("flags", "dtype"),
    [
        ({"bf16": True, "fp16": False}, torch.bfloat16),
        ({"bf16": False, "fp16": True}, torch.float32),  # GradScaler refuses float16 gradients
        ({"bf16": False, "fp16": False}, torch.float32),
        ({"bf16": None, "fp16": False}, torch.float32),  # TRL's "unset" before its __post_init__
        ({}, torch.float32),
    ],
)
def test_training_dtype_follows_the_mixed_precision_flags(flags: dict, dtype: torch.dtype) -> None:
    assert training_dtype(SimpleNamespace(**flags)) is dtype
    assert training_dtype(flags) is dtype


def test_training_dtype_refuses_both_flags() -> None:
    with pytest.raises(ValueError, match="both bf16 and fp16"):
        training_dtype({"bf16": True, "fp16": True})


def test_a_real_trainer_config_maps_to_float32_on_a_cpu(tmp_path: Path) -> None:
    args = grpo_args(tmp_path)  # on a CPU-only machine the config turns TRL's default bf16 off
    assert training_dtype(args) is (torch.bfloat16 if args.bf16 else torch.float32)


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
    """TRL's GRPOTrainer (given a model instance) makes the KL reference with `dtype=self.model.dtype`."""
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
