"""Stand-ins that trainer tests share: a critic that is a lookup table, a callback that interrupts a run."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch
from transformers import TrainerCallback


class TokenValues(torch.nn.Module):
    """A stand-in critic: the value at a position is a fixed number per token id (a lookup table)."""

    def __init__(self, vocab_size: int):
        super().__init__()
        self.table = torch.nn.Embedding(vocab_size, 1)
        with torch.no_grad():
            self.table.weight.copy_(torch.linspace(-1.0, 1.0, vocab_size).unsqueeze(1))

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> Any:
        return SimpleNamespace(logits=self.table(input_ids))


class StopAt(TrainerCallback):
    """Stops training after `step` (the checkpoint of that step is still written): an interruption."""

    def __init__(self, step: int):
        self.step = step

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step == self.step:
            control.should_training_stop = True
        return control
