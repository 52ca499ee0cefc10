"""One factory for every backend: the trainer, the evaluator and the collector build theirs here."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_train.rollout.backends.protocol import TurnGenerator

#: The backends `make_generator` builds.
BACKENDS = ("cached", "generate", "vllm")


def make_generator(
    policy: Any,
    pad_token_id: int,
    eos_token_ids: Sequence[int],
    *,
    backend: str = "cached",
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    repetition_penalty: float = 1.0,
    min_p: float | None = None,
    chunk_size: int | None = None,
    accelerator: Any = None,
    ds3_gather_for_generation: bool = True,
) -> TurnGenerator:
    """The `TurnGenerator` of a policy.

    Args:
        policy: A transformers causal LM, or TRL's `VLLMGeneration` for `backend="vllm"` (TRL pushes the
            weights to it before each rollout).
        pad_token_id: Pads batches (and is the dummy token of lockstep generation).
        eos_token_ids: Tokens that end a reply.
        backend: "cached" (`CachedSampler`, the KV cache kept between turns; falls back to "generate"
            when `repetition_penalty` or `min_p` asks for more than it samples with), "generate"
            (transformers' `generate` on every turn's whole history) or "vllm" (`VLLMTurnGenerator`).
        temperature, top_p, top_k: Sampling (temperature 0: greedy).
        repetition_penalty, min_p: transformers' generation options (the "generate" backend).
        chunk_size: Contexts per `generate` call (None: all at once).
        accelerator: The trainer's accelerator: with sharded weights every process generates in
            lockstep (`LockstepGenerator`); vLLM pads its calls across processes. None: one process.
        ds3_gather_for_generation: TRL's flag; ZeRO-3 with gathered weights needs no lockstep.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown generation backend {backend!r}; known: {', '.join(BACKENDS)}")
    if backend == "vllm":
        from agentgym_train.rollout.backends.vllm import VLLMTurnGenerator

        return VLLMTurnGenerator(policy, eos_token_ids, accelerator)
    from agentgym_train.rollout.backends.lockstep import LockstepGenerator, needs_lockstep

    lockstep = accelerator is not None and needs_lockstep(accelerator, ds3_gather_for_generation)
    generate: TurnGenerator
    if backend == "cached" and repetition_penalty == 1.0 and not min_p:
        from agentgym_train.rollout.backends.cached import CachedSampler

        generate = CachedSampler(policy, pad_token_id, eos_token_ids, temperature, top_k, top_p)
    else:
        from agentgym_train.rollout.backends.generate import hf_generate_fn

        generate = hf_generate_fn(
            policy,
            pad_token_id,
            eos_token_ids,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            batch_size=None if lockstep else chunk_size,
            generation_kwargs={"repetition_penalty": repetition_penalty, "min_p": min_p},
            synced_gpus=lockstep,
        )
    return LockstepGenerator(generate, accelerator, pad_token_id, chunk_size) if lockstep else generate
