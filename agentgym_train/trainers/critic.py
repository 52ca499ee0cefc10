"""Value models (critics) for `MultiTurnPPOTrainer`: one interface, three kinds.

- `ModelCritic` over a token-classification model (`num_labels=1`): a full trainable copy of the
  policy, or a separate, smaller model (`critic_model_name_or_path`).
- `LoRACritic`: a LoRA adapter and a linear value head on a frozen base. When the policy is a PEFT
  model the adapter is added to it (adapter `"critic"`), so critic and policy share one base in memory;
  otherwise the base is a frozen copy in the policy's dtype. Only the adapter and the head train.

Every critic maps `(input_ids, attention_mask)` to one float32 value per position, lists the
parameters its optimiser owns, saves/loads exactly those in full (`state`, `load_state`) and its
optimiser's state (`optimizer_state`, `load_optimizer_state`), and says whether its backward already
averages gradients over processes (`synchronised`: a `ModelCritic` prepared under DDP or FSDP2).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import torch
from accelerate.utils import DistributedType
from torch.distributed.fsdp import FSDPModule
from torch.distributed.tensor import DTensor, distribute_tensor
from torch.nn.parallel import DistributedDataParallel

CRITIC_KINDS = ("full", "lora")
ADAPTER = "critic"
_WEIGHTS = "critic.safetensors"
_OPTIMIZER = "optimizer.pt"


class ModelCritic(torch.nn.Module):
    """A whole model as the critic: its `logits[..., 0]` are the values; every parameter trains.

    Dropout is off (e.g. the 0.1 of transformers' token-classification heads), as TRL does for the
    policy, so the values it is fitted on are those GAE used (OpenRLHF and verl alike). The model stays
    in train mode, where transformers' activation checkpointing applies. `prepare` hands it to the
    accelerator as the Trainer hands the policy: sharded by the FSDP2 plugin, wrapped in DDP, in
    mixed precision; `model` is then what runs (a DDP wrapper or an FSDP2 module).
    """

    def __init__(self, model: Any):
        super().__init__()
        from trl.trainer.utils import disable_dropout_in_model

        disable_dropout_in_model(model)
        self.model = model.train()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits[..., 0].float()

    @property
    def module(self) -> torch.nn.Module:
        """The transformers model inside any DDP wrapper (FSDP2 shards in place)."""
        return self.model.module if isinstance(self.model, DistributedDataParallel) else self.model

    @property
    def synchronised(self) -> bool:
        """Whether DDP or FSDP2 reduce this critic's gradients over processes in its backward."""
        return isinstance(self.model, DistributedDataParallel) or any(
            isinstance(m, FSDPModule) for m in self.model.modules()
        )

    def prepare(
        self, accelerator: Any, learning_rate: float, checkpointing: dict[str, Any] | None
    ) -> torch.optim.Optimizer:
        """Prepare the critic as the policy is prepared, and return its AdamW over the prepared parameters.

        Under FSDP2 the accelerator's plugin shards it (per decoder layer, with the plugin's mixed
        precision, reshard and activation-checkpointing settings); on several processes otherwise it is
        wrapped in DDP, whose backward all-reduces the gradients in buckets; on one process it is moved
        to the device. `bf16`/`fp16` apply as to the policy (autocast, or FSDP2's compute dtype over
        float32 shards). `checkpointing`: transformers' `activation_checkpointing_kwargs` (with
        `every_n_layers` and `offload`), or None for none.

        Raises:
            ValueError: under DeepSpeed, which needs an engine of its own per model, or FSDP1.
        """
        if accelerator.distributed_type == DistributedType.DEEPSPEED:
            raise ValueError(
                "critic='full' is not supported under DeepSpeed: a second trained model needs a DeepSpeed engine "
                "of its own, which MultiTurnPPOTrainer does not build. Use the FSDP2 config "
                "(agentgym_train/configs/accelerate/fsdp.yaml), which shards the critic as the policy, or "
                "critic='lora', whose adapter and head are small enough to replicate"
            )
        if accelerator.distributed_type == DistributedType.FSDP and not accelerator.is_fsdp2:
            raise ValueError(
                "critic='full' under FSDP needs fsdp_version: 2 (as agentgym_train/configs/accelerate/fsdp.yaml "
                "sets); FSDP1's flat parameters are not supported for the critic"
            )
        if checkpointing is not None:
            enable_checkpointing(self.module, checkpointing)
        plugin = getattr(accelerator.state, "fsdp_plugin", None)  # set only under FSDP
        # `prepare` fills the plugin's layer classes from the model it sees; the policy's come later.
        kept = (plugin.auto_wrap_policy, plugin.transformer_cls_names_to_wrap) if plugin is not None else None
        original = self.model
        try:
            if accelerator.is_fsdp2:
                # FSDP2's `prepare` wants an optimiser to re-point at the shards, which it matches by data
                # pointer: shards left empty (the value head's one row on all ranks but the first) share
                # one, and AdamW would miss a parameter. A stand-in takes that part; AdamW comes after.
                stand_in = torch.optim.SGD(self.trainable_parameters(), lr=0.0)
                self.model, prepared = accelerator.prepare(self.model, stand_in)
                accelerator._optimizers.remove(prepared)
            else:
                self.model = accelerator.prepare(self.model)
        finally:
            if plugin is not None:
                plugin.auto_wrap_policy, plugin.transformer_cls_names_to_wrap = kept
        # Out of the accelerator's list, which is the policy's: transformers' evaluation prepares the policy
        # only while `_models` is empty. The optimiser is a plain one: an `AcceleratedOptimizer` skips its
        # steps while the policy accumulates gradients (`sync_gradients` False), when the critic is fitted.
        accelerator._models[:] = [m for m in accelerator._models if m is not original and m is not self.model]
        return torch.optim.AdamW(self.trainable_parameters(), lr=learning_rate)

    def no_sync(self, last: bool) -> AbstractContextManager:
        """Around a micro-batch's backward: under DDP only the `last` one all-reduces (once, bucketed);
        FSDP2 reduce-scatters each (it would otherwise hold unsharded gradients)."""
        if isinstance(self.model, DistributedDataParallel) and not last:
            return self.model.no_sync()
        return nullcontext()

    def active(self) -> AbstractContextManager:
        """Where a backward through the critic must run (nothing to switch for a whole model)."""
        return nullcontext()

    def hidden_from_saves(self) -> AbstractContextManager:
        """Around the policy's saves (nothing to hide: this critic is no part of the policy)."""
        return nullcontext()

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def state(self, keep: bool = True) -> dict[str, torch.Tensor]:
        """The full (unsharded) weights on the CPU, keyed as the plain model's. A collective under FSDP2:
        every process calls it, gathering one tensor at a time; those without `keep` drop each (and
        return an empty dict), so that only the writer holds a full copy."""
        state = {}
        for key, value in self.module.state_dict().items():
            full = _full(value)
            if keep:
                state[key] = full
        return state

    def load_state(self, state: Mapping[str, torch.Tensor]) -> None:
        """Load full weights (what `state` returns); under FSDP2 each process keeps its shard."""
        own = self.module.state_dict()
        self.module.load_state_dict({k: _like(v, own[k]) if k in own else v for k, v in state.items()})

    def optimizer_state(self, optimizer: torch.optim.Optimizer, keep: bool = True) -> dict[str, Any]:
        """`optimizer.state_dict()` with full tensors on the CPU: what one process would hold. A collective
        under FSDP2 (`keep` as for `state`)."""
        state = optimizer.state_dict()
        moments = {}
        for i, values in state["state"].items():  # one parameter's moments at a time
            full = {k: _full(v) for k, v in values.items()}
            if keep:
                moments[i] = full
        return {**state, "state": moments} if keep else {}

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        """Load what `optimizer_state` returned; moments of sharded parameters are sharded alike."""
        params = [p for group in optimizer.param_groups for p in group["params"]]
        per_param = {}
        for i, values in state["state"].items():
            param = params[int(i)]
            per_param[i] = {
                k: _like(v, param) if k != "step" and v.shape == param.shape else v for k, v in values.items()
            }
        optimizer.load_state_dict({**state, "state": per_param})


def _full(tensor: torch.Tensor) -> torch.Tensor:
    """A detached, contiguous CPU copy of `tensor` (a snapshot, also on the CPU), gathered whole when it is a
    DTensor shard."""
    if isinstance(tensor, DTensor):
        tensor = tensor.full_tensor()
    return tensor.detach().to("cpu", memory_format=torch.contiguous_format, copy=True)


def _like(full: torch.Tensor, reference: torch.Tensor) -> torch.Tensor:
    """`full` laid out as `reference`: sharded as it when it is a DTensor, else on its device."""
    if isinstance(reference, DTensor):
        return distribute_tensor(full.to(reference.dtype), reference.device_mesh, reference.placements)
    return full.to(reference.device)


def enable_checkpointing(model: Any, kwargs: dict[str, Any]) -> None:
    """Activation checkpointing on a transformers model as the Trainer turns it on for the policy:
    `kwargs` are `activation_checkpointing_kwargs` (`every_n_layers`, `offload`, the rest for
    `torch.utils.checkpoint`). A model without transformers' switch (a hand-made value model) is left
    alone, with a warning."""
    if not hasattr(model, "activation_checkpointing_enable"):
        warnings.warn(
            f"activation_checkpointing is set but the critic, a {type(model).__name__}, has no "
            "activation_checkpointing_enable (a transformers model has): it runs without checkpointing",
            stacklevel=3,
        )
        return
    options = dict(kwargs)
    every_n_layers, offload = options.pop("every_n_layers", 1), options.pop("offload", False)
    model.activation_checkpointing_enable(
        activation_checkpointing_kwargs=options or None, every_n_layers=every_n_layers, offload=offload
    )


def all_reduce_gradients(parameters: list[torch.nn.Parameter], accelerator: Any) -> None:
    """Average the gradients of replicated `parameters` over processes in one all-reduce per dtype
    (flattened into one buffer, as DDP's buckets), not one per tensor."""
    grads = [p.grad for p in parameters if p.grad is not None]
    for dtype in dict.fromkeys(g.dtype for g in grads):  # the same order on every process
        same = [g for g in grads if g.dtype == dtype]
        flat = accelerator.reduce(torch.cat([g.reshape(-1) for g in same]), reduction="mean")
        for grad, part in zip(same, flat.split([g.numel() for g in same]), strict=True):
            grad.copy_(part.view_as(grad))


class LoRACritic(torch.nn.Module):
    """A LoRA adapter named `adapter` on `peft_model` plus a linear value head on its last hidden state.

    The PEFT model is not a submodule when it is the policy's (`owns_body=False`): `train()`/`eval()`
    and `.to()` then touch only the head, and the policy keeps its own mode. Values are computed with
    the critic's adapter active and the policy's reactivated after, which also hands `requires_grad`
    back to the policy's adapter (PEFT's `set_adapter` moves it), so the policy's optimiser never sees
    the critic's parameters and the critic's backward (run inside `active()`) never reaches the policy's.
    """

    def __init__(self, peft_model: Any, adapter: str = ADAPTER, owns_body: bool = False):
        super().__init__()
        if owns_body:
            self.body = peft_model
        else:
            object.__setattr__(self, "body", peft_model)
        self.owns_body = owns_body
        self.adapter = adapter
        base = peft_model.get_base_model()
        self._decoder = base.base_model  # the transformer without its LM head
        hidden = base.config.get_text_config().hidden_size
        self.head = torch.nn.Linear(hidden, 1, dtype=torch.float32)
        torch.nn.init.normal_(self.head.weight, std=1.0 / (hidden + 1))
        torch.nn.init.zeros_(self.head.bias)
        self.head.to(next(base.parameters()).device)

    @contextmanager
    def active(self) -> Iterator[None]:
        """The critic's adapter active (and trainable) inside, the policy's after. A backward through
        the critic must run inside too: autograd skips parameters whose `requires_grad` went off."""
        tuner = self.body.base_model
        previous = list(tuner.active_adapters)
        tuner.set_adapter(self.adapter)
        try:
            yield
        finally:
            tuner.set_adapter(previous if len(previous) > 1 else previous[0])

    @contextmanager
    def hidden_from_saves(self) -> Iterator[None]:
        """The policy's saves (checkpoints, `save_model`) without the critic's adapter inside: PEFT would
        write every adapter it holds; the critic is saved whole, with its head, in `critic/`."""
        if self.owns_body:
            yield
            return
        policy_adapters = [name for name in self.body.peft_config if name != self.adapter]
        # An instance attribute shadows the method for the saves inside (Trainer calls save_pretrained).
        self.body.save_pretrained = partial(
            type(self.body).save_pretrained, self.body, selected_adapters=policy_adapters
        )
        try:
            yield
        finally:
            del self.body.save_pretrained

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        with self.active():
            hidden = self._decoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.head(hidden.float())[..., 0]

    #: Not wrapped by DDP or FSDP: the trainer averages its gradients over processes itself.
    synchronised = False

    def no_sync(self, last: bool) -> AbstractContextManager:
        """Around a micro-batch's backward (nothing to hold back: the trainer reduces the gradients)."""
        return nullcontext()

    def _adapter_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        return [(n, p) for n, p in self.body.named_parameters() if f".{self.adapter}." in n and "lora_" in n]

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for _, p in self._adapter_parameters()] + list(self.head.parameters())

    def state(self, keep: bool = True) -> dict[str, torch.Tensor]:
        """The adapter's and the head's weights on the CPU (replicated: nothing to gather; `{}` without `keep`)."""
        if not keep:
            return {}
        state = {f"adapter.{n}": p.detach().contiguous().cpu() for n, p in self._adapter_parameters()}
        state.update({f"head.{k}": v.detach().contiguous().cpu() for k, v in self.head.state_dict().items()})
        return state

    def load_state(self, state: Mapping[str, torch.Tensor]) -> None:
        params = dict(self._adapter_parameters())
        expected = {f"adapter.{n}" for n in params} | {f"head.{k}" for k in self.head.state_dict()}
        if set(state) != expected:
            missing, extra = sorted(expected - set(state))[:3], sorted(set(state) - expected)[:3]
            raise ValueError(
                f"the saved critic does not match this LoRA critic (missing {missing}, unexpected {extra})"
            )
        with torch.no_grad():
            for name, param in params.items():
                param.copy_(state[f"adapter.{name}"])
        self.head.load_state_dict({k[len("head.") :]: v for k, v in state.items() if k.startswith("head.")})

    def optimizer_state(self, optimizer: torch.optim.Optimizer, keep: bool = True) -> dict[str, Any]:
        return optimizer.state_dict() if keep else {}

    def load_optimizer_state(self, optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
        optimizer.load_state_dict(state)  # moves the moments to the parameters' device


def lora_critic(policy: Any, source: str | None, rank: int, dtype: torch.dtype) -> LoRACritic:
    """A LoRA critic on the policy's base when the policy is a PEFT model, else on a frozen copy of
    the base at `source` (loaded in `dtype`, the policy's)."""
    from peft import LoraConfig, PeftModel, get_peft_model

    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear")
    if isinstance(policy, PeftModel) and source is None:
        active = policy.active_adapter
        policy.add_adapter(ADAPTER, config)
        policy.base_model.set_adapter(active)  # the policy stays active and alone trainable
        return LoRACritic(policy, ADAPTER, owns_body=False)
    from transformers import AutoModel

    base = AutoModel.from_pretrained(source, dtype=dtype)
    base.requires_grad_(False)
    body = get_peft_model(base, config, adapter_name=ADAPTER)
    return LoRACritic(body, ADAPTER, owns_body=True)


def save_critic(critic: Any, optimizer: torch.optim.Optimizer, directory: str | Path, write: bool = True) -> None:
    """Write the critic's trainable weights and its optimiser's state into `directory`, both full (as one
    process holds them). Every process calls it (gathering sharded weights is a collective); the one with
    `write` writes."""
    from safetensors.torch import save_file

    weights, optimizer_state = critic.state(keep=write), critic.optimizer_state(optimizer, keep=write)
    if not write:
        return
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(weights, str(directory / _WEIGHTS))
    torch.save(optimizer_state, directory / _OPTIMIZER)


def load_critic(critic: Any, optimizer: torch.optim.Optimizer, directory: str | Path) -> None:
    """Restore what `save_critic` wrote. Every process reads the files, a tensor at a time (memory-mapped),
    and keeps its shard."""
    from safetensors import safe_open

    directory = Path(directory)
    if not (directory / _WEIGHTS).is_file() or not (directory / _OPTIMIZER).is_file():
        raise FileNotFoundError(
            f"no critic in {directory} (want {_WEIGHTS} and {_OPTIMIZER}); resume PPO from a checkpoint that "
            "MultiTurnPPOTrainer saved"
        )
    with safe_open(str(directory / _WEIGHTS), framework="pt") as weights:
        critic.load_state(_LazyTensors(weights))
    state = torch.load(directory / _OPTIMIZER, map_location="cpu", weights_only=True, mmap=True)
    critic.load_optimizer_state(optimizer, state)


class _LazyTensors(Mapping):
    """The tensors of an open safetensors file, each read when it is looked up."""

    def __init__(self, handle: Any):
        self._handle = handle

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._handle.get_tensor(key)

    def __iter__(self) -> Iterator[str]:
        return iter(self._handle.keys())

    def __len__(self) -> int:
        return len(self._handle.keys())
