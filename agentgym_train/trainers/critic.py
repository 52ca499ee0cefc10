"""Value models (critics) for `MultiTurnPPOTrainer`: one interface, three kinds.

- `ModelCritic` over a token-classification model (`num_labels=1`): a full trainable copy of the
  policy, or a separate, smaller model (`critic_model_name_or_path`).
- `LoRACritic`: a LoRA adapter and a linear value head on a frozen base. When the policy is a PEFT
  model the adapter is added to it (adapter `"critic"`), so critic and policy share one base in memory;
  otherwise the base is a frozen copy in the policy's dtype. Only the adapter and the head train.

Every critic maps `(input_ids, attention_mask)` to one float32 value per position, lists the
parameters its optimiser owns, and saves/loads exactly those (`state`, `load_state`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from functools import partial
from pathlib import Path
from typing import Any

import torch

CRITIC_KINDS = ("full", "lora")
ADAPTER = "critic"
_WEIGHTS = "critic.safetensors"
_OPTIMIZER = "optimizer.pt"


class ModelCritic(torch.nn.Module):
    """A whole model as the critic: its `logits[..., 0]` are the values; every parameter trains.

    The model runs in eval mode (dropout off, e.g. the 0.1 of transformers' token-classification
    heads), in the fit too: the values it is fitted on are those GAE used, as in OpenRLHF and verl.
    """

    def __init__(self, model: Any):
        super().__init__()
        self.model = model.eval()

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).logits[..., 0].float()

    def active(self) -> AbstractContextManager:
        """Where a backward through the critic must run (nothing to switch for a whole model)."""
        return nullcontext()

    def hidden_from_saves(self) -> AbstractContextManager:
        """Around the policy's saves (nothing to hide: this critic is no part of the policy)."""
        return nullcontext()

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def state(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().contiguous().cpu() for k, v in self.model.state_dict().items()}

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
        self.model.load_state_dict(state)


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

    def _adapter_parameters(self) -> list[tuple[str, torch.nn.Parameter]]:
        return [(n, p) for n, p in self.body.named_parameters() if f".{self.adapter}." in n and "lora_" in n]

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for _, p in self._adapter_parameters()] + list(self.head.parameters())

    def state(self) -> dict[str, torch.Tensor]:
        state = {f"adapter.{n}": p.detach().contiguous().cpu() for n, p in self._adapter_parameters()}
        state.update({f"head.{k}": v.detach().contiguous().cpu() for k, v in self.head.state_dict().items()})
        return state

    def load_state(self, state: dict[str, torch.Tensor]) -> None:
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


def save_critic(critic: Any, optimizer: torch.optim.Optimizer, directory: str | Path) -> None:
    """Write the critic's trainable weights and its optimiser's state into `directory`."""
    from safetensors.torch import save_file

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(critic.state(), str(directory / _WEIGHTS))
    torch.save(optimizer.state_dict(), directory / _OPTIMIZER)


def load_critic(critic: Any, optimizer: torch.optim.Optimizer, directory: str | Path) -> None:
    """Restore what `save_critic` wrote."""
    from safetensors.torch import load_file

    directory = Path(directory)
    if not (directory / _WEIGHTS).is_file() or not (directory / _OPTIMIZER).is_file():
        raise FileNotFoundError(
            f"no critic in {directory} (want {_WEIGHTS} and {_OPTIMIZER}); resume PPO from a checkpoint that "
            "MultiTurnPPOTrainer saved"
        )
    critic.load_state(load_file(str(directory / _WEIGHTS)))
    device = critic.trainable_parameters()[0].device
    optimizer.load_state_dict(torch.load(directory / _OPTIMIZER, map_location=device, weights_only=True))
