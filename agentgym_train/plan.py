"""`agentgym plan`: the per-GPU memory a training config needs, whether it fits, and the vLLM settings to use.

The model's size comes from its config alone (`agentgym_train.model_shapes`: counted on the meta device,
no weights load). What each GPU holds follows the sharding of an accelerate config
(`agentgym_train/configs/accelerate/`):

- DDP: the policy in its training dtype (`agentgym_train.models.tiny.training_dtype`: bfloat16 under `bf16`),
  its gradients, DDP's gradient buckets (a second copy) and AdamW's two moments, all in that dtype.
- DeepSpeed ZeRO-2 / ZeRO-3: DeepSpeed's own accounting (`estimate_zero2_model_states_mem_needs`,
  `estimate_zero3_model_states_mem_needs`): 16-bit weights (ZeRO-3: sharded, plus 4 bytes per parameter
  of the largest module, gathered), and sharded float32 master weights, gradients and moments.
- FSDP2: float32 shards of the trainable parameters (accelerate upcasts them under mixed precision),
  their gradients and moments, and the 16-bit copies gathered at a time: the root (embeddings, head)
  and two decoder layers, plus one layer's unsharded gradients.

Beside the policy: TRL's KL reference model (beta > 0, not LoRA), frozen, in the policy's dtype, sharded
under ZeRO-3 and FSDP; PPO's critic (`critic="full"`: a trainable copy of the backbone with a value head,
sharded like the policy; `"lora"`: a frozen copy and an adapter). A step has three phases, and the peak
is the largest:

- rollout: vLLM colocated holds `vllm_gpu_memory_utilization` of the whole GPU (its weights, activations,
  and a KV cache filling the rest), or the HF sampler holds its KV cache (and, under ZeRO-3, the weights
  gathered for generation);
- scoring: the no-grad forwards of the reference and the old policy over one micro-batch. Under FSDP2 TRL
  shards the reference with one root `fully_shard` (`trl.models.prepare_fsdp`), so its forward gathers
  the whole model, and FSDP2's all-gather buffer holds a second copy while it is copied out;
- train: one micro-batch's saved activations (prompt + completion tokens, with or without activation
  checkpointing) and TRL's fused LM head (`trl.trainer.utils.add_fused_lm_head`: the logits are computed
  in tiles, never whole; its backward holds float32 gradients of the head and the scored hidden states).

TRL's `vllm_gpu_memory_utilization` is not verl's `gpu_memory_utilization`: verl's is a share of the memory
left free after the actor loads, and verl frees the KV cache after each rollout; TRL's is a share of the
whole GPU, held through training unless `vllm_enable_sleep_mode` (then vLLM sleeps at level 2 outside the
rollout, its weights and KV cache released: `agentgym_train.rollout.backends.vllm` wakes it once per
rollout). So `plan` computes what vLLM needs
(`vllm_need`: weights + `max_num_seqs` x sequence x KV bytes per token + activations) and suggests the
utilization that holds it (`MemoryPlan.suggested`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentgym_train.memory import (
    GIB,
    KNOWN_MODELS,
    SHARDINGS,
    TINY_DEFAULTS,
    ModelShape,
    Part,
    VLLMNeed,
    activation_bytes,
    critic_parts,
    forward_bytes,
    frozen_weights,
    lm_head_bytes,
    model_config,
    model_shape,
    model_states,
    vllm_need,
)

__all__ = [
    "CATEGORIES",
    "DEFAULTS",
    "GIB",
    "KNOWN_MODELS",
    "PHASES",
    "MemoryPlan",
    "ModelShape",
    "Part",
    "VLLMNeed",
    "activation_bytes",
    "compare_shardings",
    "lm_head_bytes",
    "model_config",
    "model_shape",
    "plan",
    "predict_memory",
    "sharding_of",
    "vllm_need",
]

ACCELERATE_DIR = Path(__file__).parent / "configs" / "accelerate"

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
    "vllm_tensor_parallel_size": 1,
    "vllm_max_model_length": None,
    "ds3_gather_for_generation": True,
    "critic": "full",
    "critic_model_name_or_path": None,
    "critic_lora_rank": 16,
    "lora_r": 0,
    **TINY_DEFAULTS,
}
PHASES = ("rollout", "scoring", "train")
#: What each part of a plan is, for `MemoryPlan.breakdown` and `predict_memory`.
CATEGORIES = (
    "weights",
    "gradients",
    "optimizer",
    "activations",
    "logits",
    "reference",
    "critic",
    "vllm",
    "hf_kv_cache",
    "overhead",
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
    """Per-GPU bytes of each part, per phase, whether the largest phase fits, and the vLLM settings to use."""

    model: ModelShape
    sharding: str
    gpus: int
    gpu_memory_bytes: int
    dtype: str
    settings: dict[str, Any]
    #: held through every phase
    states: list[Part] = field(default_factory=list)
    rollout: list[Part] = field(default_factory=list)
    scoring: list[Part] = field(default_factory=list)
    train: list[Part] = field(default_factory=list)
    #: colocated vLLM only: what it needs, and what `vllm_gpu_memory_utilization` reserves
    vllm: VLLMNeed | None = None
    vllm_reserved: int = 0
    #: settings under which this run fits (`vllm_gpu_memory_utilization`, `vllm_enable_sleep_mode`)
    suggested: dict[str, Any] = field(default_factory=dict)

    def total(self, phase: str) -> int:
        if phase not in PHASES:
            raise ValueError(f"phase {phase!r} is not one of {PHASES}")
        return sum(p.size for p in self.states) + sum(p.size for p in getattr(self, phase))

    @property
    def peak_phase(self) -> str:
        return max(PHASES, key=self.total)

    @property
    def peak_bytes(self) -> int:
        return self.total(self.peak_phase)

    @property
    def problems(self) -> list[str]:
        """Why the run does not fit, each with what would (empty when it fits)."""
        found = []
        if self.peak_bytes > self.gpu_memory_bytes:
            found.append(
                f"the {self.peak_phase} phase needs {self.peak_bytes / GIB:.1f} GiB per GPU, more than "
                f"{self.gpu_memory_bytes / GIB:.0f} GiB"
            )
        if self.vllm is not None and self.vllm_reserved < self.vllm.total:
            found.append(
                f"vLLM's reservation ({self.settings['vllm_gpu_memory_utilization']} of the GPU, "
                f"{self.vllm_reserved / GIB:.1f} GiB) is below its need of {self.vllm.total / GIB:.1f} GiB; "
                f"set vllm_gpu_memory_utilization: {self.vllm.utilization(self.gpu_memory_bytes)}"
            )
        return found

    @property
    def fits(self) -> bool:
        return not self.problems

    def breakdown(self, phase: str) -> dict[str, int]:
        """Bytes per GPU of each of `CATEGORIES` during `phase` (the states held throughout included)."""
        sums = dict.fromkeys(CATEGORIES, 0)
        for part in [*self.states, *getattr(self, phase)]:
            sums[part.category] += part.size
        return sums

    def to_dict(self) -> dict[str, Any]:
        def rows(items: list[Part]) -> list[dict[str, Any]]:
            return [
                {"part": p.name, "bytes": p.size, "gib": round(p.size / GIB, 3), "note": p.note, "category": p.category}
                for p in items
            ]

        vllm = None
        if self.vllm is not None:
            vllm = {**asdict(self.vllm), "need": self.vllm.total, "reserved": self.vllm_reserved}
            vllm["awake_in_training"] = not self.settings["vllm_enable_sleep_mode"]
        return {
            "model": asdict(self.model),
            "sharding": self.sharding,
            "gpus": self.gpus,
            "gpu_memory_gib": round(self.gpu_memory_bytes / GIB, 3),
            "dtype": self.dtype,
            "settings": self.settings,
            "states": rows(self.states),
            **{phase: rows(getattr(self, phase)) for phase in PHASES},
            **{f"{phase}_total_gib": round(self.total(phase) / GIB, 3) for phase in PHASES},
            "peak_phase": self.peak_phase,
            "peak_gib": round(self.peak_bytes / GIB, 3),
            "vllm": vllm,
            "suggested": self.suggested,
            "problems": self.problems,
            "fits": self.fits,
        }

    def table(self) -> str:
        m = self.model
        lines = [
            f"{m.name}: {m.parameters / 1e9:.3f}B parameters, {self.sharding} on {self.gpus} GPU(s) of "
            f"{self.gpu_memory_bytes / GIB:.0f} GiB, weights in {self.dtype}",
            f"{'part':<32}{'GiB/GPU':>10}  how",
        ]
        for title, items in (("held throughout", self.states), *((phase, getattr(self, phase)) for phase in PHASES)):
            lines.append(f"-- {title}")
            lines += [f"{p.name:<32}{p.size / GIB:>10.2f}  {p.note}" for p in items]
        lines += [f"{phase + ' total':<32}{self.total(phase) / GIB:>10.2f}" for phase in PHASES]
        lines.append(
            f"{'peak (' + self.peak_phase + ')':<32}{self.peak_bytes / GIB:>10.2f}  "
            + ("fits" if self.fits else "does NOT fit: " + "; ".join(self.problems))
        )
        if self.vllm is not None:
            need = self.vllm
            lines.append(
                f"vLLM needs {need.total / GIB:.2f} GiB: weights {need.weights / GIB:.2f} + KV cache "
                f"{need.kv_cache / GIB:.2f} ({need.max_num_seqs} x {need.sequence_tokens} tokens x "
                f"{need.kv_bytes_per_token:,} B) + activations {need.activations / GIB:.2f} + graphs and "
                f"workspaces {need.allowance / GIB:.2f}"
            )
        if self.suggested:
            lines.append("suggested: " + ", ".join(f"{k}: {v}" for k, v in self.suggested.items()))
        return "\n".join(lines)


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

    Returns:
        The plan of the config as it is; its `suggested` settings are those under which it fits (for a
        colocated vLLM: the utilization that holds vLLM's need, and sleep mode only where the run does not
        fit with vLLM awake through training).
    """
    from agentgym_train.models.tiny import training_dtype

    if gpus < 1 or gpu_memory_gib <= 0:
        raise ValueError(f"gpus must be >= 1 and gpu_memory_gib > 0 (got {gpus}, {gpu_memory_gib})")
    settings = {**DEFAULTS, **(_read_config(config) if not isinstance(config, Mapping) else dict(config))}
    sharding = sharding_of(accelerate)
    bf16 = settings["bf16"] if settings["bf16"] is not None else not settings["fp16"]
    # FSDP and DeepSpeed keep float32 master weights themselves, so bf16 loads the model in bfloat16 there
    flags = {
        "bf16": bf16,
        "fp16": settings["fp16"],
        "fsdp": sharding == "fsdp",
        "deepspeed": sharding != "ddp" and sharding != "fsdp",
    }
    dtype = training_dtype(flags)
    shape = model_shape(model_config(settings["model"], settings), settings["model"])

    def assemble(values: Mapping[str, Any]) -> MemoryPlan:
        return _assemble(values, shape, sharding, gpus, int(gpu_memory_gib * GIB), dtype, prompt_tokens, overhead_gib)

    result = assemble(settings)
    if result.vllm is not None:
        utilization = result.vllm.utilization(result.gpu_memory_bytes)
        suggested = {**settings, "vllm_gpu_memory_utilization": utilization, "vllm_enable_sleep_mode": False}
        # sleep mode only where vLLM awake through training does not fit: each wake maps the KV cache again
        # and pushes every weight again (a level-2 sleep discards them)
        sleep = not assemble(suggested).fits
        result.suggested = {"vllm_gpu_memory_utilization": utilization, "vllm_enable_sleep_mode": sleep}
    return result


def predict_memory(
    config: str | Path | Mapping[str, Any],
    gpus: int,
    gpu_memory_gib: float,
    accelerate: str | Path | None = None,
    prompt_tokens: int = 1024,
    overhead_gib: float = 1.0,
) -> dict[str, Any]:
    """`plan`'s prediction as plain numbers: per phase, the bytes per GPU of each of `CATEGORIES`.

    Takes `plan`'s arguments (`overhead_gib=0` leaves out the CUDA context, for a comparison with
    `torch.cuda.max_memory_allocated`). Returns `phases` ({phase: {category: bytes}}), `totals`
    ({phase: bytes}), `peak_phase`, `peak_bytes`, `fits`, `gpu_memory_bytes`, `vllm` (None, or vLLM's need
    part by part with `need` and `reserved`) and `suggested`.
    """
    result = plan(config, gpus, gpu_memory_gib, accelerate, prompt_tokens, overhead_gib)
    data = result.to_dict()
    return {
        "phases": {phase: result.breakdown(phase) for phase in PHASES},
        "totals": {phase: result.total(phase) for phase in PHASES},
        "peak_phase": result.peak_phase,
        "peak_bytes": result.peak_bytes,
        "fits": result.fits,
        "gpu_memory_bytes": result.gpu_memory_bytes,
        "vllm": data["vllm"],
        "suggested": result.suggested,
    }


def compare_shardings(
    config: str | Path | Mapping[str, Any], gpus: int, gpu_memory_gib: float, prompt_tokens: int = 1024
) -> dict[str, MemoryPlan | str]:
    """`plan` under each packaged sharding (`SHARDINGS`); a sharding the run cannot use maps to the reason."""
    plans: dict[str, MemoryPlan | str] = {}
    for sharding in SHARDINGS:
        try:
            plans[sharding] = plan(config, gpus, gpu_memory_gib, sharding, prompt_tokens)
        except ValueError as error:
            if "no config" in str(error):  # the config or the model, not the sharding
                raise
            plans[sharding] = str(error)
    return plans


def _assemble(
    settings: Mapping[str, Any],
    shape: ModelShape,
    sharding: str,
    gpus: int,
    gpu_bytes: int,
    dtype: Any,
    prompt_tokens: int,
    overhead_gib: float,
) -> MemoryPlan:
    """The parts of one plan, for settings already merged with `DEFAULTS`."""
    a = dtype.itemsize
    lora = int(settings.get("lora_r") or 0)
    trainable = shape.lora_parameters(lora) if lora else shape.parameters
    if lora and sharding in ("zero2", "zero3"):
        # frozen weights in 16 bits, then DeepSpeed's accounting for the adapter alone
        base = [Part("base weights", frozen_weights(shape.parameters, sharding, gpus, 2), "frozen, 16-bit", "weights")]
        adapter = ModelShape(**{**asdict(shape), "parameters": trainable, "largest_module_parameters": 0})
        states = base + [
            p._replace(name=f"adapter {p.name}") for p in model_states(adapter, trainable, sharding, gpus, 2)
        ]
    else:
        states = model_states(shape, trainable, sharding, gpus, a)
    states = [p._replace(name=f"policy {p.name}") for p in states]
    reference = settings["beta"] > 0 and not lora  # LoRA: the adapter, disabled, is the reference
    if reference:
        weights = frozen_weights(shape.parameters, sharding, gpus, a)
        states.append(Part("reference model", weights, "beta > 0: frozen copy in the policy's dtype", "reference"))
    if settings["algorithm"] == "ppo":
        states += critic_parts(settings, shape, sharding, gpus, a, shares_base=bool(lora))
    states.append(Part("CUDA context, allocator", int(overhead_gib * GIB), "fixed allowance", "overhead"))

    completion = int(settings["max_completion_length"])
    sequence = prompt_tokens + completion
    batch = int(settings["per_device_train_batch_size"])
    checkpointing = settings["activation_checkpointing"]
    checkpointing = bool(settings["gradient_checkpointing"] if checkpointing is None else checkpointing)
    acts = activation_bytes(shape, batch, sequence, completion, checkpointing, a, head_trains=not lora)
    on = ["off", "on"][checkpointing]
    train = [
        Part("activations", acts["layers"], f"{batch} x {sequence} tokens, checkpointing {on}", "activations"),
        Part("LM head (fused)", acts["logits"], f"{batch} x {completion} tokens scored in tiles", "logits"),
    ]
    forward = forward_bytes(shape, batch, sequence, completion, a)
    scoring = [Part("scoring forward", forward, "no grad, one micro-batch", "activations")]
    if reference and sharding == "fsdp":
        note = "one root fully_shard: the whole model unsharded + FSDP2's all-gather buffer"
        scoring.append(Part("reference gathered", 2 * a * shape.parameters, note, "reference"))
    elif reference and sharding == "zero3":
        gathered = 2 * shape.largest_module_parameters
        scoring.append(Part("reference gathered module", gathered, "16-bit weights of the largest", "reference"))
    rollout: list[Part] = []
    need, reserved = None, 0
    if settings["use_vllm"] and settings["vllm_mode"] == "colocate":
        need = vllm_need(shape, settings, prompt_tokens)
        share = settings["vllm_gpu_memory_utilization"]
        reserved = int(share * gpu_bytes)
        rollout.append(Part("vLLM", reserved, f"{share} of the GPU: weights, activations, KV cache", "vllm"))
        if not settings["vllm_enable_sleep_mode"]:
            awake = Part("vLLM (awake)", reserved, "held through training: vllm_enable_sleep_mode off", "vllm")
            scoring.append(awake)
            train.append(awake)
    elif not settings["use_vllm"]:
        per_generation = settings["steps_per_generation"] or settings["gradient_accumulation_steps"]
        episodes = batch * int(per_generation)
        kv = 2 * shape.num_hidden_layers * shape.num_key_value_heads * shape.head_dim * a
        note = f"{episodes} episodes x {sequence} tokens"
        rollout.append(Part("HF sampler KV cache", episodes * sequence * kv, note, "hf_kv_cache"))
        if sharding == "zero3" and settings["ds3_gather_for_generation"]:
            rollout.append(Part("gathered weights", 2 * shape.parameters, "ds3_gather_for_generation", "weights"))
    return MemoryPlan(
        model=shape,
        sharding=sharding,
        gpus=gpus,
        gpu_memory_bytes=gpu_bytes,
        dtype=str(dtype).removeprefix("torch."),
        settings={k: settings[k] for k in DEFAULTS if not k.startswith("tiny_")} | {"prompt_tokens": prompt_tokens},
        states=states,
        rollout=rollout,
        scoring=scoring,
        train=train,
        vllm=need,
        vllm_reserved=reserved,
    )


def _read_config(config: str | Path) -> dict[str, Any]:
    import yaml

    path = Path(config)
    if not path.is_file():
        path = Path(__file__).parent / "configs" / f"{config}.yaml"
    if not path.is_file():
        raise ValueError(f"no config file {str(config)!r} and no packaged config of that name")
    return yaml.safe_load(path.read_text()) or {}
