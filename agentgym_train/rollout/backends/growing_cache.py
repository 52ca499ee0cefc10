"""A KV cache layer with spare room, so decoding one token costs no copy of the whole cache.

transformers' `DynamicLayer` appends each step's keys and values with `torch.cat`, which copies every
cached column: a reply of n tokens over a context of L costs O(n * L) memory traffic, and on a CPU
that copy outweighs the model itself (SmolLM2-135M, 20 episodes at 1,500 tokens: `aten::cat` took
more than a third of each decode step). `GrowingLayer` writes new columns into spare room of a
buffer, and hands the attention a view of the filled part. A full buffer is replaced by one a
quarter larger (at least 64 columns more): appends cost amortised O(new columns), and the spare
room never exceeds a quarter of the cache (a GPU's memory budget for the cache barely moves).

Operations that replace `keys` / `values` with new tensors stay correct: the next `update` notices
that the tensors are no longer views of its buffer and adopts them into a new one. Those that make
a copy (`batch_select_indices`, the sampler's column repacking through `hold`) free the buffer at
once, so the old buffer and the copy never sit in memory together across the layers.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import DynamicLayer


class GrowingLayer(DynamicLayer):
    """A `DynamicLayer` whose `update` appends in place into a buffer with spare room (amortised O(new)).

    Attributes:
        growth: How much larger a replacement buffer is than what it must hold (and at least 64 columns).
    """

    growth = 1.25

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length, new = self.get_seq_length(), key_states.size(-2)
        if not self._owns(length, key_states) or self._buffers[0].size(-2) < length + new:
            need = length + new
            self._adopt(length, key_states, value_states, capacity=max(int(need * self.growth), need + 64))
        keys, values = self._buffers
        keys[..., length : length + new, :] = key_states
        values[..., length : length + new, :] = value_states
        self.keys, self.values = keys[..., : length + new, :], values[..., : length + new, :]
        return self.keys, self.values

    def _owns(self, length: int, key_states: torch.Tensor) -> bool:
        """Whether `keys` / `values` are still the filled part of this layer's buffers."""
        if self._buffers is None:
            return False
        keys, values = self._buffers
        if length == 0:
            return keys.shape[:2] == key_states.shape[:2]
        return (
            self.keys.data_ptr() == keys.data_ptr()
            and self.values.data_ptr() == values.data_ptr()
            and self.keys.shape[:2] == keys.shape[:2]
            and self.keys.stride() == keys.stride()
        )

    def _adopt(self, length: int, key_states: torch.Tensor, value_states: torch.Tensor, capacity: int) -> None:
        """New buffers of `capacity` columns holding the current `length` cached columns."""
        shape = (*key_states.shape[:2], capacity, key_states.size(-1))
        keys = key_states.new_empty(shape)
        values = value_states.new_empty((*shape[:3], value_states.size(-1)))
        if length:
            keys[..., :length, :] = self.keys
            values[..., :length, :] = self.values
        self._buffers = (keys, values)

    def hold(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Hold these states instead (e.g. the same columns reordered), freeing the buffer."""
        self._buffers = None
        self.keys, self.values = keys, values

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        self._buffers = None  # the selection is a copy: let the buffer go now
        super().batch_select_indices(indices)

    def reset(self) -> None:
        self._buffers = None
        super().reset()


def growing_cache(config: Any) -> Any:
    """A `DynamicCache` for `config` whose full-attention layers are `GrowingLayer`s (sliding-window and
    other layer kinds keep their own)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
