"""`agentgym plan`: the per-GPU memory a training config needs, and whether it fits.

The model's size comes from its config alone (a local `config.json`, the transformers cache, or the
architecture numbers of the Qwen2.5 models below), counted on the meta device: no weights load. What
each GPU holds follows the sharding of an accelerate config (`agentgym_train/configs/accelerate/`):

- DDP: the policy in its training dtype (`agentgym_train.tiny.training_dtype`: bfloat16 under `bf16`),
  its gradients, DDP's gradient buckets (a second copy) and AdamW's two moments, all in that dtype.
- DeepSpeed ZeRO-2 / ZeRO-3: DeepSpeed's own accounting (`estimate_zero2_model_states_mem_needs`,
  `estimate_zero3_model_states_mem_needs`): 16-bit weights (ZeRO-3: sharded, plus 4 bytes per parameter
  of the largest module, gathered), and sharded float32 master weights, gradients and moments.
- FSDP2: float32 shards of the trainable parameters (accelerate upcasts them under mixed precision),
  their gradients and moments, and the 16-bit copies gathered at a time: the root (embeddings, head)
  and two decoder layers, plus one layer's unsharded gradients.

Beside the policy: TRL's KL reference model (beta > 0, not LoRA), frozen, in the policy's dtype, sharded
under ZeRO-3 and FSDP; PPO's critic (`critic="full"`: a trainable copy of the backbone with a value head,
sharded like the policy; `"lora"`: a frozen copy and an adapter); activations of one micro-batch
(`per_device_train_batch_size` sequences of prompt + completion tokens, with or without activation
checkpointing, and the loss's logits over the completion); the rollout: vLLM's reservation
(`vllm_gpu_memory_utilization` of each GPU, colocated) or the HF sampler's KV cache (and, under ZeRO-3,
the weights gathered for generation). Training and rollout are two phases; the peak is the larger.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

GIB = 1024**3
ACCELERATE_DIR = Path(__file__).parent / "configs" / "accelerate"

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

#: The trainer settings `plan` reads, with the defaults they have when a config leaves them out
#: (`MultiTurnPPOConfig` / `PipelineConfig`; `tests/train/test_plan.py` checks they agree).
DEFAULTS: dict[str, Any] = {
    "model": "tiny",
    "algorithm": "grpo",
    "bf16": None,  # TRL: True unless fp16 (on a GPU)
    "fp16": False,
    "beta": 0.001,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "steps_per_generation": None,  # TRL: gradient_accumulation_steps
    "max_completion_length": 1024,
    "activation_checkpointing": None,
    "gradient_checkpointing": True,  # TRL's default
    "use_vllm": False,
    "vllm_mode": "colocate",
    "vllm_gpu_memory_utilization": 0.3,
    "vllm_enable_sleep_mode": False,
    "ds3_gather_for_generation": True,
    "critic": "full",
    "critic_model_name_or_path": None,
    "critic_lora_rank": 16,
    "lora_r": 0,
    "tiny_hidden_size": 128,
    "tiny_layers": 3,
    "tiny_heads": 4,
    "tiny_intermediate_size": 384,
}
SHARDINGS = ("ddp", "zero2", "zero3", "fsdp")


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

    settings = {**DEFAULTS, **(settings or {})}
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
    from agentgym_train.smollm2 import SMOLLM2_NAME

    if name_or_path == SMOLLM2_NAME:
        from agentgym_train.tiny import resolve_model_path

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


def sharding_of(accelerate: str | Path | None) -> str:
    """`ddp`, `zero2`, `zero3` or `fsdp`: the sharding of an accelerate config file or of a packaged
    one's name (`ddp`, `fsdp`, `zero2`, `zero3`); None: plain data parallelism."""
    import yaml

    if accelerate is None:
        return "ddp"
    path = Path(accelerate)
    if not path.is_file():
        path = ACCELERATE_DIR / f"{accelerate}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in ACCELERATE_DIR.glob("*.yaml"))
        raise ValueError(f"no accelerate config {str(accelerate)!r}: give a YAML file or one of {names}")
    config = yaml.safe_load(path.read_text()) or {}
    kind = config.get("distributed_type", "NO")
    if kind == "DEEPSPEED":
        deepspeed = config.get("deepspeed_config") or {}
        if "deepspeed_config_file" in deepspeed:
            raise ValueError(f"{path}: a deepspeed_config_file is not read; give zero_stage in the accelerate config")
        for key in ("offload_optimizer_device", "offload_param_device"):
            if deepspeed.get(key, "none") != "none":
                raise ValueError(f"{path}: {key}={deepspeed[key]} (CPU/NVMe offload) is not modelled; plan without it")
        stage = int(deepspeed.get("zero_stage", 2))
        if stage not in (2, 3):
            raise ValueError(f"{path}: ZeRO stage {stage} is not modelled; use 2 or 3")
        return f"zero{stage}"
    if kind == "FSDP":
        if (config.get("fsdp_config") or {}).get("fsdp_offload_params"):
            raise ValueError(f"{path}: fsdp_offload_params is not modelled; plan without it")
        return "fsdp"
    return "ddp"


@dataclass
class MemoryPlan:
    """Per-GPU bytes of each part, per phase, and whether the larger phase fits."""

    model: ModelShape
    sharding: str
    gpus: int
    gpu_memory_bytes: int
    dtype: str
    settings: dict[str, Any]
    #: (part, bytes, how it was counted) held through both phases
    states: list[tuple[str, int, str]] = field(default_factory=list)
    train: list[tuple[str, int, str]] = field(default_factory=list)
    rollout: list[tuple[str, int, str]] = field(default_factory=list)

    def total(self, phase: str) -> int:
        return sum(b for _, b, _ in self.states) + sum(b for _, b, _ in getattr(self, phase))

    @property
    def peak_bytes(self) -> int:
        return max(self.total("train"), self.total("rollout"))

    @property
    def fits(self) -> bool:
        return self.peak_bytes <= self.gpu_memory_bytes

    def to_dict(self) -> dict[str, Any]:
        def rows(items: list[tuple[str, int, str]]) -> list[dict[str, Any]]:
            return [{"part": p, "bytes": b, "gib": round(b / GIB, 3), "note": n} for p, b, n in items]

        return {
            "model": asdict(self.model),
            "sharding": self.sharding,
            "gpus": self.gpus,
            "gpu_memory_gib": round(self.gpu_memory_bytes / GIB, 3),
            "dtype": self.dtype,
            "settings": self.settings,
            "states": rows(self.states),
            "train": rows(self.train),
            "rollout": rows(self.rollout),
            "train_total_gib": round(self.total("train") / GIB, 3),
            "rollout_total_gib": round(self.total("rollout") / GIB, 3),
            "peak_gib": round(self.peak_bytes / GIB, 3),
            "fits": self.fits,
        }

    def table(self) -> str:
        m = self.model
        lines = [
            f"{m.name}: {m.parameters / 1e9:.3f}B parameters, {self.sharding} on {self.gpus} GPU(s) of "
            f"{self.gpu_memory_bytes / GIB:.0f} GiB, weights in {self.dtype}",
            f"{'part':<28}{'GiB/GPU':>10}  how",
        ]
        for title, items in (
            ("held throughout", self.states),
            ("training step", self.train),
            ("rollout", self.rollout),
        ):
            lines.append(f"-- {title}")
            lines += [f"{part:<28}{b / GIB:>10.2f}  {note}" for part, b, note in items]
        lines += [
            f"{'training step total':<28}{self.total('train') / GIB:>10.2f}",
            f"{'rollout total':<28}{self.total('rollout') / GIB:>10.2f}",
            f"{'peak':<28}{self.peak_bytes / GIB:>10.2f}  "
            + ("fits" if self.fits else f"does NOT fit in {self.gpu_memory_bytes / GIB:.0f} GiB"),
        ]
        return "\n".join(lines)


def model_states(
    shape: ModelShape, trainable: int, sharding: str, gpus: int, dtype_bytes: int
) -> list[tuple[str, int, str]]:
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
            ("weights", dtype_bytes * phi, f"{dtype_bytes} B x all parameters, replicated"),
            ("gradients", dtype_bytes * psi + buckets, how),
            ("optimizer", 2 * dtype_bytes * psi, "AdamW's two moments in the weights' dtype"),
        ]
    if sharding == "zero2":  # DeepSpeed: 2 = params_16bit; 18 = 2 grads_16bit + 4 grads_32 + 4 params_32 + 8 moments
        return [
            ("weights", 2 * phi, "16-bit, replicated"),
            ("gradients", (2 + 4) * psi // n, "16-bit and float32, sharded"),
            ("optimizer", (4 + 8) * psi // n, "float32 master weights and moments, sharded"),
        ]
    if sharding == "zero3":  # DeepSpeed: 4 x largest layer + 18 = 2 params_16 + 4 grads_32 + 4 params_32 + 8 moments
        return [
            ("weights", 2 * phi // n, "16-bit, sharded"),
            ("gathered module", 4 * shape.largest_module_parameters, "16-bit weights, gradients of the largest"),
            ("gradients", 4 * psi // n, "float32, sharded"),
            ("optimizer", (4 + 8) * psi // n, "float32 master weights and moments, sharded"),
        ]
    if sharding == "fsdp":
        gathered = dtype_bytes * (shape.root_parameters + 2 * shape.layer_parameters) + 4 * shape.layer_parameters
        return [
            ("weights", (4 * psi + dtype_bytes * frozen) // n, "trainable as float32 shards, frozen as loaded"),
            ("gathered units", gathered, "root + 2 layers unsharded, 1 layer's gradients"),
            ("gradients", 4 * psi // n, "float32, sharded"),
            ("optimizer", 8 * psi // n, "AdamW's moments of the float32 shards"),
        ]
    raise ValueError(f"sharding {sharding!r} is not one of {SHARDINGS}")


def frozen_weights(parameters: int, sharding: str, gpus: int, dtype_bytes: int) -> int:
    """A frozen model's weights per GPU: TRL shards a reference under ZeRO-3 and FSDP (ZeRO-2: stage 0)."""
    return dtype_bytes * parameters // (gpus if sharding in ("zero3", "fsdp") else 1)


def activation_bytes(
    shape: ModelShape, batch: int, sequence: int, completion: int, checkpointing: bool, dtype_bytes: int
) -> dict[str, int]:
    """Saved activations of one training micro-batch (flash / SDPA attention: no sequence-squared term).

    Per token and decoder layer, autograd keeps: the two RMSNorms' float32 inputs and their outputs
    (2 x (4h + a h)), the attention's query, key and value with the key-value heads repeated, and its
    output (4 a h), and the MLP's gate, up, activated gate and product (4 a i); `a` is the activations'
    bytes. With checkpointing only each layer's input (a h) stays, and one layer is recomputed at a time.
    The loss's backward holds about six completion-logits-sized tensors at once (the tempered logits it
    saved, the gradients of the gather and of the log-sum-exp, their sum, the temperature's and the
    slice's): measured on TRL's `selective_log_softmax` with SmolLM2 (`tests/train/test_plan.py`).
    """
    h, i, a = shape.hidden_size, shape.intermediate_size, dtype_bytes
    per_layer = 2 * (4 * h + a * h) + 4 * a * h + 4 * a * i
    tokens = batch * sequence
    if checkpointing:
        layers = tokens * (shape.num_hidden_layers * a * h + per_layer)
    else:
        layers = tokens * shape.num_hidden_layers * per_layer
    return {"layers": layers, "logits": 6 * a * batch * completion * shape.vocab_size}


def plan(
    config: str | Path | Mapping[str, Any],
    gpus: int,
    gpu_memory_gib: float,
    accelerate: str | Path | None = None,
    prompt_tokens: int = 1024,
    overhead_gib: float = 1.0,
) -> MemoryPlan:
    """The per-GPU memory of a training config on `gpus` GPUs of `gpu_memory_gib` each.

    Args:
        config: A training YAML (path or packaged name, e.g. `paper/babyai`) or its settings.
        gpus: Processes, one per GPU.
        gpu_memory_gib: Each GPU's memory.
        accelerate: An accelerate config (path or `ddp` / `fsdp` / `zero2` / `zero3`); None: DDP.
        prompt_tokens: An episode's prompt (system prompt and first observation); TRL does not bound it.
        overhead_gib: The CUDA context and the allocator's slack.
    """
    from agentgym_train.tiny import training_dtype

    if gpus < 1 or gpu_memory_gib <= 0:
        raise ValueError(f"gpus must be >= 1 and gpu_memory_gib > 0 (got {gpus}, {gpu_memory_gib})")
    settings = {**DEFAULTS, **(_read_config(config) if not isinstance(config, Mapping) else dict(config))}
    sharding = sharding_of(accelerate)
    bf16 = settings["bf16"] if settings["bf16"] is not None else not settings["fp16"]
    dtype = training_dtype({"bf16": bf16, "fp16": settings["fp16"]})
    dtype_bytes = dtype.itemsize
    shape = model_shape(model_config(settings["model"], settings), settings["model"])
    lora = int(settings.get("lora_r") or 0)
    trainable = shape.lora_parameters(lora) if lora else shape.parameters
    if lora and sharding in ("zero2", "zero3"):
        # frozen weights in 16 bits, then DeepSpeed's accounting for the adapter alone
        base = [("base weights", frozen_weights(shape.parameters, sharding, gpus, 2), "frozen, 16-bit")]
        adapter = ModelShape(**{**asdict(shape), "parameters": trainable, "largest_module_parameters": 0})
        states = base + [(f"adapter {p}", b, n) for p, b, n in model_states(adapter, trainable, sharding, gpus, 2)]
    else:
        states = model_states(shape, trainable, sharding, gpus, dtype_bytes)
    states = [(f"policy {p}", b, n) for p, b, n in states]
    if settings["beta"] > 0 and not lora:
        reference = frozen_weights(shape.parameters, sharding, gpus, dtype_bytes)
        states.append(("reference model", reference, "beta > 0: frozen copy in the policy's dtype"))
    if settings["algorithm"] == "ppo":
        states += _critic(settings, shape, sharding, gpus, dtype_bytes, shares_base=bool(lora))
    states.append(("CUDA context, allocator", int(overhead_gib * GIB), "fixed allowance"))

    completion = int(settings["max_completion_length"])
    sequence = prompt_tokens + completion
    batch = int(settings["per_device_train_batch_size"])
    checkpointing = settings["activation_checkpointing"]
    checkpointing = bool(settings["gradient_checkpointing"] if checkpointing is None else checkpointing)
    acts = activation_bytes(shape, batch, sequence, completion, checkpointing, dtype_bytes)
    train = [
        ("activations", acts["layers"], f"{batch} x {sequence} tokens, checkpointing {['off', 'on'][checkpointing]}"),
        ("loss logits", acts["logits"], f"{batch} x {completion} completion tokens x {shape.vocab_size:,} vocabulary"),
    ]
    rollout = []
    gpu_bytes = int(gpu_memory_gib * GIB)
    if settings["use_vllm"] and settings["vllm_mode"] == "colocate":
        reserved = int(settings["vllm_gpu_memory_utilization"] * gpu_bytes)
        rollout.append(("vLLM reservation", reserved, f"{settings['vllm_gpu_memory_utilization']} of the GPU"))
        if not settings["vllm_enable_sleep_mode"]:
            train.append(("vLLM reservation", reserved, "colocated, awake during training"))
    elif not settings["use_vllm"]:
        per_generation = settings["steps_per_generation"] or settings["gradient_accumulation_steps"]
        episodes = batch * int(per_generation)
        kv = 2 * shape.num_hidden_layers * shape.num_key_value_heads * shape.head_dim * dtype_bytes
        rollout.append(("HF sampler KV cache", episodes * sequence * kv, f"{episodes} episodes x {sequence} tokens"))
        if sharding == "zero3" and settings["ds3_gather_for_generation"]:
            rollout.append(("gathered weights", 2 * shape.parameters, "ds3_gather_for_generation"))
    return MemoryPlan(
        model=shape,
        sharding=sharding,
        gpus=gpus,
        gpu_memory_bytes=gpu_bytes,
        dtype=str(dtype).removeprefix("torch."),
        settings={k: settings[k] for k in DEFAULTS if not k.startswith("tiny_")} | {"prompt_tokens": prompt_tokens},
        states=states,
        train=train,
        rollout=rollout,
    )


def _critic(
    settings: Mapping[str, Any], shape: ModelShape, sharding: str, gpus: int, dtype_bytes: int, shares_base: bool
) -> list[tuple[str, int, str]]:
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
        adapter = [("critic adapter", 16 * trainable, "LoRA + value head, float32 with AdamW")]
        if shares_base and not settings["critic_model_name_or_path"]:
            return adapter
        return [("critic base", frozen_weights(params, sharding, gpus, dtype_bytes), "frozen copy"), *adapter]
    return [(f"critic {p}", b, n) for p, b, n in model_states(critic, params, sharding, gpus, dtype_bytes)]


def _read_config(config: str | Path) -> dict[str, Any]:
    import yaml

    path = Path(config)
    if not path.is_file():
        path = Path(__file__).parent / "configs" / f"{config}.yaml"
    if not path.is_file():
        raise ValueError(f"no config file {str(config)!r} and no packaged config of that name")
    return yaml.safe_load(path.read_text()) or {}
