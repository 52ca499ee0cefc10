"""What a model and its training run hold per GPU, part by part: the formulas `agentgym plan` adds up.

`model_config` finds a model's config (a local `config.json`, the transformers cache, the pipeline's tiny
model, or the Qwen2.5 numbers below) and `model_shape` counts its parameters on the meta device, so no
weights load. The part functions turn a shape into bytes per GPU: trained model states under each
sharding (`model_states`), frozen copies, activations, TRL's fused LM head, a no-grad forward, a colocated
vLLM engine (`vllm_need`) and PPO's critic. `agentgym_train.plan` assembles them into phases and a verdict.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, NamedTuple

GIB = 1024**3
SHARDINGS = ("ddp", "zero2", "zero3", "fsdp")

#: The tiny model's settings (`PipelineConfig`'s defaults) when a config leaves them out.
TINY_DEFAULTS: dict[str, int] = {
    "tiny_hidden_size": 128,
    "tiny_layers": 3,
    "tiny_heads": 4,
    "tiny_intermediate_size": 384,
}

#: Architecture numbers of the Qwen2.5 models (their hub config.json), for planning without a download.
_QWEN25 = {
    "0.5B": dict(hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "1.5B": dict(hidden_size=1536, intermediate_size=8960, num_hidden_layers=28, num_attention_heads=12,
                 num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "3B": dict(hidden_size=2048, intermediate_size=11008, num_hidden_layers=36, num_attention_heads=16,
               num_key_value_heads=2, vocab_size=151936, tie_word_embeddings=True),
    "7B": dict(hidden_size=3584, intermediate_size=18944, num_hidden_layers=28, num_attention_heads=28,
               num_key_value_heads=4, vocab_size=152064, tie_word_embeddings=False),
}  # fmt: skip
KNOWN_MODELS: dict[str, dict[str, Any]] = {
    f"Qwen/Qwen2.5-{size}{suffix}": {"model_type": "qwen2", **numbers}
    for size, numbers in _QWEN25.items()
    for suffix in ("", "-Instruct")
}


@dataclass
class ModelShape:
    """What memory depends on in a decoder-only model (counts from the meta device)."""

    name: str
    parameters: int
    #: DeepSpeed's "largest layer": the most parameters any one module holds itself (often the embeddings).
    largest_module_parameters: int
    #: One decoder layer's parameters, and those outside the decoder layers (FSDP's root unit).
    layer_parameters: int
    root_parameters: int
    lm_head_parameters: int  # 0 when tied to the embeddings
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_key_value_heads: int
    head_dim: int
    vocab_size: int

    def lora_parameters(self, rank: int) -> int:
        """Parameters of a rank-`rank` LoRA adapter on every linear layer of every decoder layer."""
        h, i, kv = self.hidden_size, self.intermediate_size, self.num_key_value_heads * self.head_dim
        per_layer = (h + h) + 2 * (h + kv) + (h + h) + 2 * (h + i) + (i + h)  # q, k and v, o, gate and up, down
        return rank * per_layer * self.num_hidden_layers


def model_config(name_or_path: str, settings: Mapping[str, Any] | None = None) -> Any:
    """A transformers config for a model name without loading weights.

    `tiny`: the pipeline's tiny model from `settings`' tiny_* keys (its vocabulary at most 2,048);
    `smollm2-135m-instruct`; a local directory or file with a config.json; a Qwen2.5 hub id of
    `KNOWN_MODELS`; any id in the local transformers cache.
    """
    from transformers import AutoConfig, Qwen2Config

    settings = {**TINY_DEFAULTS, **(settings or {})}
    if name_or_path == "tiny":
        heads = settings["tiny_heads"]
        return Qwen2Config(
            vocab_size=2048,
            hidden_size=settings["tiny_hidden_size"],
            intermediate_size=settings["tiny_intermediate_size"],
            num_hidden_layers=settings["tiny_layers"],
            num_attention_heads=heads,
            num_key_value_heads=max(1, heads // 2),
            tie_word_embeddings=False,
        )
    from agentgym_train.models.smollm2 import SMOLLM2_NAME

    if name_or_path == SMOLLM2_NAME:
        from agentgym_train.models.tiny import resolve_model_path

        name_or_path = resolve_model_path(name_or_path)
    path = Path(name_or_path)
    if path.is_dir() and (path / "config.json").is_file():
        return AutoConfig.from_pretrained(str(path))
    if path.is_file() and path.suffix == ".json":
        return AutoConfig.from_pretrained(str(path.parent)) if path.name == "config.json" else _config_file(path)
    if name_or_path in KNOWN_MODELS:
        numbers = dict(KNOWN_MODELS[name_or_path])
        numbers.pop("model_type")
        return Qwen2Config(**numbers)
    try:
        return AutoConfig.from_pretrained(name_or_path, local_files_only=True)
    except OSError:
        raise ValueError(
            f"no config for model {name_or_path!r}: not a local directory with a config.json, not in the "
            f"transformers cache, and not one of the ids planned offline ({', '.join(sorted(KNOWN_MODELS))}); "
            "pass a directory holding the model's config.json"
        ) from None


def _config_file(path: Path) -> Any:
    from transformers import AutoConfig

    numbers = json.loads(path.read_text())
    return AutoConfig.for_model(numbers.pop("model_type"), **numbers)


def model_shape(config: Any, name: str = "") -> ModelShape:
    """Count a config's parameters on the meta device (no memory, no weights)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    layers = model.model.layers
    in_layers = sum(p.numel() for p in layers.parameters())
    total = sum(p.numel() for p in model.parameters())
    largest = max(sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules())
    head = model.get_output_embeddings()
    tied = head is None or head.weight is model.get_input_embeddings().weight
    heads = config.num_attention_heads
    return ModelShape(
        name=name,
        parameters=total,
        largest_module_parameters=largest,
        layer_parameters=in_layers // len(layers),
        root_parameters=total - in_layers,
        lm_head_parameters=0 if tied else head.weight.numel(),
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_hidden_layers,
        num_key_value_heads=getattr(config, "num_key_value_heads", None) or heads,
        head_dim=getattr(config, "head_dim", None) or config.hidden_size // heads,
        vocab_size=config.vocab_size,
    )


#: TRL's colocated engine: `max_num_batched_tokens=4096` (`trl.generation.vllm_generation`), the tokens of
#: vLLM's profiling forward; vLLM's KV cache blocks hold 16 tokens.
VLLM_BATCHED_TOKENS = 4096
VLLM_BLOCK_TOKENS = 16
#: vLLM's memory outside its weights, KV cache and profiled activations: CUDA graphs, NCCL and cuBLAS workspaces.
VLLM_ALLOWANCE_GIB = 1.0
#: TRL's fused LM head computes logits in tiles of 4,096 tokens x 32,768 vocabulary entries
#: (`trl.kernels.chunked_logprob`: TOKEN_CHUNK_SIZE, and `_CHUNKED_LOGPROB_CHUNK_SIZE` in trl.trainer.utils).
HEAD_TILE_TOKENS = 4096
HEAD_TILE_VOCAB = 32768


class Part(NamedTuple):
    """One thing a GPU holds: its name, bytes per GPU, how it was counted, and its `CATEGORIES` entry."""

    name: str
    size: int
    note: str
    category: str


@dataclass
class VLLMNeed:
    """What a colocated vLLM engine needs on each GPU to hold one rollout's contexts without preempting any."""

    weights: int
    kv_cache: int
    activations: int
    allowance: int
    #: TRL's `max_num_seqs`: per_device_train_batch_size x vllm_tensor_parallel_size x steps_per_generation
    max_num_seqs: int
    #: one context at its longest: the prompt and every turn (`prompt_tokens + max_completion_length`)
    sequence_tokens: int
    kv_bytes_per_token: int

    @property
    def total(self) -> int:
        return self.weights + self.kv_cache + self.activations + self.allowance

    def utilization(self, gpu_memory_bytes: int) -> float:
        """The smallest `vllm_gpu_memory_utilization` (in hundredths) that reserves `total` of this GPU."""
        return math.ceil(round(self.total / gpu_memory_bytes * 100, 6)) / 100


def model_states(shape: ModelShape, trainable: int, sharding: str, gpus: int, dtype_bytes: int) -> list[Part]:
    """Weights, gradients, optimiser state (AdamW) and gathered working copies of one trained model.

    `trainable`: its trainable parameters (all of them, or a LoRA adapter's); `dtype_bytes`: 2 under
    bf16 (weights loaded in bfloat16), else 4.
    """
    phi, psi, n = shape.parameters, trainable, gpus
    frozen = phi - psi if psi < phi else 0
    if sharding == "ddp":
        buckets = dtype_bytes * psi if n > 1 else 0
        how = "trainable, in the weights' dtype" + (" + DDP buckets" if buckets else "")
        return [
            Part("weights", dtype_bytes * phi, f"{dtype_bytes} B x all parameters, replicated", "weights"),
            Part("gradients", dtype_bytes * psi + buckets, how, "gradients"),
            Part("optimizer", 2 * dtype_bytes * psi, "AdamW's two moments in the weights' dtype", "optimizer"),
        ]
    if sharding == "zero2":  # DeepSpeed: 2 = params_16bit; 18 = 2 grads_16bit + 4 grads_32 + 4 params_32 + 8 moments
        return [
            Part("weights", 2 * phi, "16-bit, replicated", "weights"),
            Part("gradients", (2 + 4) * psi // n, "16-bit and float32, sharded", "gradients"),
            Part("optimizer", (4 + 8) * psi // n, "float32 master weights and moments, sharded", "optimizer"),
        ]
    if sharding == "zero3":  # DeepSpeed: 4 x largest layer + 18 = 2 params_16 + 4 grads_32 + 4 params_32 + 8 moments
        gathered = 4 * shape.largest_module_parameters
        return [
            Part("weights", 2 * phi // n, "16-bit, sharded", "weights"),
            Part("gathered module", gathered, "16-bit weights, gradients of the largest", "weights"),
            Part("gradients", 4 * psi // n, "float32, sharded", "gradients"),
            Part("optimizer", (4 + 8) * psi // n, "float32 master weights and moments, sharded", "optimizer"),
        ]
    if sharding == "fsdp":
        gathered = dtype_bytes * (shape.root_parameters + 2 * shape.layer_parameters) + 4 * shape.layer_parameters
        return [
            Part(
                "weights",
                (4 * psi + dtype_bytes * frozen) // n,
                "trainable as float32 shards, frozen as loaded",
                "weights",
            ),
            Part("gathered units", gathered, "root + 2 layers unsharded, 1 layer's gradients", "weights"),
            Part("gradients", 4 * psi // n, "float32, sharded", "gradients"),
            Part("optimizer", 8 * psi // n, "AdamW's moments of the float32 shards", "optimizer"),
        ]
    raise ValueError(f"sharding {sharding!r} is not one of {SHARDINGS}")


def frozen_weights(parameters: int, sharding: str, gpus: int, dtype_bytes: int) -> int:
    """A frozen model's weights per GPU: TRL shards a reference under ZeRO-3 and FSDP (ZeRO-2: stage 0)."""
    return dtype_bytes * parameters // (gpus if sharding in ("zero3", "fsdp") else 1)


def lm_head_bytes(
    shape: ModelShape,
    scored: int,
    dtype_bytes: int,
    backward: bool = True,
    head_trains: bool = True,
    triton: bool = True,
) -> int:
    """TRL's fused LM head over `scored` tokens (`add_fused_lm_head`, `trl.kernels.chunked_logprob`).

    Forward: the scored positions' hidden states, gathered into one tensor (saved for backward), and one
    logits tile of at most 4,096 tokens x 32,768 vocabulary entries; the (batch, tokens, vocabulary) logits
    never exist. Backward adds float32 gradients of those hidden states and of the head's weight (when it
    trains), and a second tile. On CUDA (`triton`) a kernel folds each tile in place and only the
    completion's tokens are scored; elsewhere TRL's torch fallback scores every position and its backward
    holds seven float32 tiles at once (the scaled and tempered logits, log p, p, the gradient, the target
    mask as floats and its product: `_backward_tile`).
    """
    h = shape.hidden_size
    rows, columns = min(scored, HEAD_TILE_TOKENS), min(shape.vocab_size, HEAD_TILE_VOCAB)
    tile = dtype_bytes * rows * columns
    hidden = dtype_bytes * scored * h
    if not backward:
        return hidden + tile
    fallback = 0 if triton else 7 * 4 * rows * columns
    return hidden + 2 * tile + fallback + 4 * scored * h + (4 * shape.vocab_size * h if head_trains else 0)


def activation_bytes(
    shape: ModelShape,
    batch: int,
    sequence: int,
    completion: int,
    checkpointing: bool,
    dtype_bytes: int,
    scored: int | None = None,
    head_trains: bool = True,
    triton: bool = True,
) -> dict[str, int]:
    """Saved activations of one training micro-batch (flash / SDPA attention: no sequence-squared term).

    Per token and decoder layer, autograd keeps: the two RMSNorms' float32 inputs and their outputs
    (2 x (4h + a h)), the attention's query, key and value with the key-value heads repeated, and its
    output (4 a h), and the MLP's gate, up, activated gate and product (4 a i); `a` is the activations'
    bytes. With checkpointing only each layer's input (a h) stays, and one layer is recomputed at a time.
    `logits`: TRL's fused LM head (`lm_head_bytes`) over `scored` tokens (default: the completion's), on
    CUDA with Triton unless `triton` is False.
    """
    h, i, a = shape.hidden_size, shape.intermediate_size, dtype_bytes
    per_layer = 2 * (4 * h + a * h) + 4 * a * h + 4 * a * i
    tokens = batch * sequence
    if checkpointing:
        layers = tokens * (shape.num_hidden_layers * a * h + per_layer)
    else:
        layers = tokens * shape.num_hidden_layers * per_layer
    scored = batch * completion if scored is None else scored
    return {"layers": layers, "logits": lm_head_bytes(shape, scored, a, head_trains=head_trains, triton=triton)}


def forward_bytes(shape: ModelShape, batch: int, sequence: int, completion: int, dtype_bytes: int) -> int:
    """A no-grad forward (scoring): the residual stream with one layer's largest intermediates (its input,
    query, key and value, then the MLP's gate, up and product), then the fused head's forward."""
    h, i, a = shape.hidden_size, shape.intermediate_size, dtype_bytes
    kv = shape.num_key_value_heads * shape.head_dim
    layer = batch * sequence * a * (3 * h + 2 * kv + 3 * i)
    return layer + lm_head_bytes(shape, batch * completion, a, backward=False)


def vllm_need(shape: ModelShape, settings: Mapping[str, Any], prompt_tokens: int) -> VLLMNeed:
    """What TRL's colocated vLLM engine needs per GPU for one rollout (bf16 weights and KV cache, vLLM's default
    for these models).

    TRL sets `max_num_seqs = per_device_train_batch_size x vllm_tensor_parallel_size x steps_per_generation`
    (`GRPOTrainer.__init__`): one rollout's contexts of this rank (of its tensor-parallel group). Each context
    grows to the prompt plus every turn (`max_completion_length`), in blocks of 16 tokens; vLLM also refuses to
    start unless one `vllm_max_model_length` sequence fits. Tensor parallelism splits the weights and the KV
    heads. Activations: vLLM's profiling forward of `max_num_batched_tokens` (4,096 under TRL) tokens, and its
    sampler's float32 logits, probabilities and sorted copies over `max_num_seqs` rows.
    """
    tp = int(settings["vllm_tensor_parallel_size"])
    per_generation = settings["steps_per_generation"] or settings["gradient_accumulation_steps"]
    seqs = int(settings["per_device_train_batch_size"]) * tp * int(per_generation)
    sequence = prompt_tokens + int(settings["max_completion_length"])
    max_len = settings["vllm_max_model_length"]
    if max_len:
        sequence = min(sequence, int(max_len))
    kv_heads = math.ceil(shape.num_key_value_heads / tp)  # fewer KV heads than ranks: each rank keeps one
    per_token = 2 * shape.num_hidden_layers * kv_heads * shape.head_dim * 2  # key and value, bf16
    blocks = math.ceil(sequence / VLLM_BLOCK_TOKENS) * VLLM_BLOCK_TOKENS
    tokens = max(seqs * blocks, int(max_len or 0))
    h, i, kv = shape.hidden_size, shape.intermediate_size, shape.num_key_value_heads * shape.head_dim
    forward = VLLM_BATCHED_TOKENS * 2 * (3 * h + (2 * kv + 3 * i) // tp)
    sampler = 4 * 4 * seqs * shape.vocab_size
    return VLLMNeed(
        weights=2 * shape.parameters // tp,
        kv_cache=tokens * per_token,
        activations=forward + sampler,
        allowance=int(VLLM_ALLOWANCE_GIB * GIB),
        max_num_seqs=seqs,
        sequence_tokens=sequence,
        kv_bytes_per_token=per_token,
    )


def critic_parts(
    settings: Mapping[str, Any], shape: ModelShape, sharding: str, gpus: int, dtype_bytes: int, shares_base: bool
) -> list[Part]:
    """PPO's value model: the backbone without the LM head, plus a one-output head (hidden + 1).

    `shares_base`: the policy is a LoRA model, whose frozen base a `critic="lora"` adapter reuses.
    """
    if settings["critic"] == "full" and sharding in ("zero2", "zero3"):
        raise ValueError(
            "PPO's full critic does not run under DeepSpeed (MultiTurnPPOTrainer refuses it: one engine per model); "
            "plan with --accelerate fsdp, or with critic: lora"
        )
    if settings["critic_model_name_or_path"]:
        name = settings["critic_model_name_or_path"]
        shape = model_shape(model_config(name, settings), name)
    params = shape.parameters - shape.lm_head_parameters + shape.hidden_size + 1
    critic = ModelShape(**{**asdict(shape), "parameters": params, "lm_head_parameters": 0})
    if settings["critic"] == "lora":
        trainable = critic.lora_parameters(int(settings["critic_lora_rank"])) + shape.hidden_size + 1
        adapter = [Part("critic adapter", 16 * trainable, "LoRA + value head, float32 with AdamW", "critic")]
        if shares_base and not settings["critic_model_name_or_path"]:
            return adapter
        base = frozen_weights(params, sharding, gpus, dtype_bytes)
        return [Part("critic base", base, "frozen copy", "critic"), *adapter]
    return [
        Part(f"critic {p.name}", p.size, p.note, "critic")
        for p in model_states(critic, params, sharding, gpus, dtype_bytes)
    ]
