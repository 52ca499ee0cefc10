"""Lockstep generation for sharded training: every process makes the same forward passes.

Under FSDP (1 and 2) and under DeepSpeed ZeRO-3 without `ds3_gather_for_generation`, each forward
pass of the policy is a collective: every sharded layer all-gathers its weights from all processes
first. TRL's `unwrap_model_for_generation` does not change that for FSDP: it gathers the full weights
once only under ZeRO-3 (`ds3_gather_for_generation=True`, TRL's default), and
`summon_full_params(recurse=False)` materialises only the root's own parameters under FSDP 1 (every
wrapped decoder layer still all-gathers in its forward) and is a no-op under FSDP 2 (`fully_shard`
hooks all-gather in every forward). So during a multi-turn rollout a process whose episodes all end
early must keep making forward passes until every process is done, or the others wait for it forever.

The rule, on every process and in the same order:

1. turns: the rollout engine loops while *any* process has a live episode (`sync_live`, one
   all-reduce per turn); a process with none left calls the generator with no contexts;
2. within a call, the generator makes the same forward passes everywhere: a process with no
   contexts runs dummy forwards (one pad token, discarded). The KV-cached sampler asks
   `any_live` (an all-reduce) before each decode step, transformers' `generate` runs with
   `synced_gpus=True`, and calls split into chunks (`generation_chunk_size`) agree on the chunk count.

`LockstepGenerator` wraps the trainer's HF generator so; vLLM's generator (`VLLMTurnGenerator`) has
its own `sync_live`. Under DDP, ZeRO-1/2 and ZeRO-3 with gathered weights the forward passes are
local and no lockstep is used.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentgym_train.rollout.backends.protocol import Reply, TurnGenerator
from agentgym_train.rollout.stops import StopStrings


def needs_lockstep(accelerator: Any, ds3_gather_for_generation: bool = True) -> bool:
    """Whether the policy's forward passes are collectives here (see the module docstring)."""
    if accelerator.num_processes < 2:
        return False
    from trl.distributed import DistributedBackend

    backend = DistributedBackend(accelerator)
    return backend.is_fsdp or (backend.is_zero3 and not ds3_gather_for_generation)


def any_process(accelerator: Any, flag: bool) -> bool:
    """True when `flag` is true on some process (an all-reduce: every process must call it)."""
    total = accelerator.reduce(torch.tensor([1.0 if flag else 0.0], device=accelerator.device), reduction="sum")
    return bool(total.item() > 0)


class LockstepGenerator:
    """A `TurnGenerator` whose forward passes match on every process.

    Args:
        generate: A `CachedSampler` (it exposes the `any_live` decode hook), or an `hf_generate_fn`
            built with `synced_gpus=True` and no `batch_size` (chunks are split here).
        accelerator: The trainer's accelerator.
        pad_token_id: The dummy forward's token.
        chunk_size: Contexts per call of `generate` (None: all at once).
    """

    def __init__(self, generate: TurnGenerator, accelerator: Any, pad_token_id: int, chunk_size: int | None = None):
        self.generate = generate
        self.accelerator = accelerator
        self.pad_token_id = pad_token_id
        self.chunk_size = chunk_size
        self.cached = hasattr(generate, "any_live")
        if self.cached:
            generate.any_live = self.sync_live

    def sync_live(self, any_local: bool) -> bool:
        """True while some process still has a live episode (or reply): a collective call."""
        return any_process(self.accelerator, any_local)

    def __call__(
        self, contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None = None
    ) -> list[Reply]:
        # every process decodes to the same limit (scenarios' reply budgets may differ between processes)
        limit = torch.tensor([max_new_tokens], device=self.accelerator.device)
        max_new_tokens = int(self.accelerator.gather(limit).max().item())
        if self.cached:
            if contexts:
                return self.generate(contexts, max_new_tokens, stop=stop)
            self._dummy_cached(max_new_tokens)
            return []
        step = self.chunk_size or max(1, len(contexts))
        chunks = [contexts[start : start + step] for start in range(0, len(contexts), step)]
        results: list[Reply] = []
        k = 0
        while self.sync_live(k < len(chunks)):
            if k < len(chunks):
                chunk_stop = stop[k * step : (k + 1) * step] if stop else None
                results += self.generate(chunks[k], max_new_tokens, stop=chunk_stop)
            else:  # one token of its own; synced_gpus keeps it stepping until every process's replies end
                self.generate([[self.pad_token_id]], 1)
            k += 1
        return results

    def _dummy_cached(self, max_new_tokens: int) -> None:
        """One pad-token row through the cached sampler; it decodes while any other process does."""
        sampler = self.generate
        sampler.any_live = lambda _local: self.sync_live(False)  # this row's own replies do not count
        try:
            sampler([[self.pad_token_id]], max_new_tokens)
        finally:
            sampler.any_live = self.sync_live
