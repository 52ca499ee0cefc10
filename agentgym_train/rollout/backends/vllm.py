"""Generation through vLLM, by way of TRL's own vLLM integration (`trl.generation.VLLMGeneration`).

With `use_vllm=True` TRL's `GRPOTrainer` builds a `VLLMGeneration` (colocated engine or a client of
`trl vllm-serve` / `vllm serve`) and, before each call of the trainer's `rollout_func`, pushes the
current weights to it (`sync_weights`). `VLLMTurnGenerator` makes that object the rollout engine's
`TurnGenerator`: each turn, the token ids of every live episode (the prompt and every turn so far, as
ids, never re-rendered text) go to `VLLMGeneration.generate`, and the sampled ids and their logprobs
come back as they were sampled. TRL's importance-sampling correction then compares those logprobs
with the trainer's (`vllm_importance_sampling_correction`), as in its single-turn GRPO.

Several processes: TRL's server mode gathers the prompts of every rank, the main process asks the
server for all of them at once and rank r keeps the replies `r*len(prompts):(r+1)*len(prompts)`; the
colocated engine with tensor parallelism > 1 gathers and slices the same way inside its group. So
every call is collective, and the slicing is right only when every rank sends as many prompts: after
the first turn they don't (episodes end at different turns), and a rank with fewer would silently
get another rank's replies. The rule here, on every rank of the group that gathers (all processes in
server mode, the tensor-parallel group when colocated; a colocated engine without tensor parallelism
generates alone and is called without padding):

1. turns: the rollout engine loops while *any* process has a live episode (`sync_live`); a process
   whose episodes have all ended calls with no contexts;
2. within a turn, the ranks gather (one `all_gather_object`) how many contexts each has per stop set
   and the reply budget; every rank then makes one `generate` call per stop set present anywhere,
   in the same (sorted) order, each with the largest budget and padded with one-token dummy prompts
   (the first end token) to the largest count any rank has for that set; the dummies' replies are
   dropped. A rank with no context of a set sends dummies only. TRL returns each reply with its
   prompt, and a reply whose prompt is not the context sent raises. (A dummy costs what a short
   prompt costs: vLLM samples its reply to the budget with the others', in the same batch.)

Stop strings: each context's reply goes to vLLM with its own episode's stop strings
(`SamplingParams.stop`, plus any in the trainer's `generation_kwargs`): one set per call, so a batch
that mixes scenarios is one call per stop set, and a reply is never cut at another scenario's stop.
In server mode the main process's parameters serve every rank's prompts, which step 2 makes the same
on every rank. vLLM ends a reply on the token that completes a stop string and keeps that token in
`token_ids` (it trims only the text); the rollout engine cuts the ids at the stop itself
(`agentgym_train.rollout.stops`), as for every backend.

Sleep mode (`vllm_enable_sleep_mode`, colocated engine): TRL's own `generate` wakes the engine for each
call and puts it to sleep at level 2 after it, which discards the weights, so its next call pushes all
of them again (`sync_weights`). Here a call is one turn's stop set: the weights would go over once per
call instead of once per rollout, and under FSDP2 (`full_tensor()`) or ZeRO-3 that push gathers every
parameter over all processes, while a process whose episodes have ended makes no call and processes
with different stop sets make different numbers of calls: they would wait in different collectives.
So the engine is awake for the whole rollout instead: it wakes when the engine's turn loop starts
(`sync_live` first says some episode is live, on every process at once; the weights are pushed then
only if a sleep discarded them since TRL's push before `rollout_func`) and sleeps at level 2 when the
loop ends (`sync_live` says none is left, again on every process at once); TRL's `generate` is called
with its sleep handling off in between. One push per rollout, at the same point on every process.

Async training (`async_generation` with `vllm_mode="server"`): a generation thread in each trainer
process sends its own episodes' turns to the server while the trainer trains, so its calls cannot be
collective (the trainer's thread is inside its own collectives). `ServerGeneration` is what
`VLLMTurnGenerator` needs of a `VLLMGeneration` in server mode, over a `VLLMClient` of this process
alone: no gather, no broadcast, no padding; the server takes every rank's requests concurrently. The
weights still go over TRL's transfer, from the trainer (`agentgym_train.trainers.async_grpo`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from agentgym_train.rollout.backends.lockstep import any_process
from agentgym_train.rollout.backends.protocol import Reply
from agentgym_train.rollout.stops import StopStrings


class ServerGeneration:
    """A `VLLMGeneration` in server mode as `VLLMTurnGenerator` calls it, for this process's prompts only.

    Args:
        client: TRL's `VLLMClient` of this process (not the trainer's: a thread of its own uses it).
        temperature, top_p, top_k, min_p, repetition_penalty: Sampling, as TRL sends them.
        logprobs: Top logprobs per token (0: the sampled token's only).
        generation_kwargs: More request fields (TRL's `generation_kwargs`).
    """

    mode = "server"
    enable_sleep_mode = False

    def __init__(
        self,
        client: Any,
        temperature: float = 1.0,
        top_p: float = 1.0,
        top_k: int = 0,
        min_p: float | None = 0.0,
        repetition_penalty: float = 1.0,
        logprobs: int = 0,
        generation_kwargs: dict[str, Any] | None = None,
    ):
        self.client = client
        self.temperature, self.top_p, self.top_k = temperature, top_p, top_k
        self.min_p, self.repetition_penalty = min_p, repetition_penalty
        self.logprobs = logprobs
        self.generation_kwargs = dict(generation_kwargs or {})
        self.max_completion_length = 16  # set per call by VLLMTurnGenerator

    def generate(self, prompts: list[list[int]], images: Any, num_generations: int = 1) -> tuple:
        """One `/v1/completions` request for `prompts` (TRL's `VLLMClient.generate`): (prompt ids, completion
        ids, logprobs, logprob token ids), as `VLLMGeneration.generate` returns them."""
        if images is not None:
            raise ValueError("async generation through the vLLM server sends token ids only (no images)")
        output = self.client.generate(
            prompts=prompts,
            n=num_generations,
            repetition_penalty=self.repetition_penalty,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=0.0 if self.min_p is None else self.min_p,
            max_tokens=self.max_completion_length,
            logprobs=self.logprobs,
            generation_kwargs=self.generation_kwargs,
        )
        prompt_ids = [ids for ids in output["prompt_ids"] for _ in range(num_generations)]
        return prompt_ids, output["completion_ids"], output["logprobs"], output.get("logprob_token_ids")

    @classmethod
    def like(cls, vllm_generation: Any, client: Any) -> ServerGeneration:
        """The sampling settings of the trainer's `VLLMGeneration`, over `client`."""
        return cls(
            client,
            temperature=vllm_generation.temperature,
            top_p=vllm_generation.top_p,
            top_k=vllm_generation.top_k,
            min_p=vllm_generation.min_p,
            repetition_penalty=vllm_generation.repetition_penalty,
            logprobs=vllm_generation.logprobs if vllm_generation.logprobs is not None else 0,
            generation_kwargs=vllm_generation.generation_kwargs,
        )


class VLLMTurnGenerator:
    """The rollout engine's `TurnGenerator` over a `trl.generation.VLLMGeneration` object.

    Args:
        vllm_generation: TRL's `VLLMGeneration` (the trainer's `vllm_generation` attribute).
        eos_token_ids: Tokens that end a reply; sent as vLLM's `stop_token_ids`, so a model whose
            end-of-turn token is not its EOS (Llama 3, Gemma) stops there too. The first one is the
            dummy prompt that pads a rank's batch (see the module docstring).
        accelerator: The trainer's accelerator (default: `vllm_generation`'s); with more than one
            process, `sync_live` reduces "still live" over all of them and calls are padded.

    A colocated engine in sleep mode is awake from the start of the engine's turn loop to its end
    (`wake`, `sleep`; see the module docstring); a call outside that loop wakes it for that call only.
    """

    def __init__(self, vllm_generation: Any, eos_token_ids: Sequence[int], accelerator: Any = None):
        self.vllm = vllm_generation
        self.eos_token_ids = [int(t) for t in eos_token_ids]
        if not self.eos_token_ids:
            raise ValueError("VLLMTurnGenerator needs at least one end token (eos_token_ids is empty)")
        self.accelerator = accelerator if accelerator is not None else getattr(vllm_generation, "accelerator", None)
        # the colocated engine in sleep mode: awake for a whole rollout here (module docstring, "Sleep mode")
        colocated = getattr(vllm_generation, "mode", "colocate") == "colocate"
        self.sleeps = colocated and bool(getattr(vllm_generation, "enable_sleep_mode", False))
        self.awake = False

    @property
    def collective(self) -> bool:
        return self.accelerator is not None and self.accelerator.num_processes > 1

    @property
    def pads(self) -> bool:
        """Whether TRL gathers the prompts of several processes here, so every rank must send as many."""
        if getattr(self.vllm, "mode", "colocate") == "server":
            return self.collective
        return getattr(self.vllm, "tensor_parallel_size", 1) > 1

    def sync_live(self, any_local: bool) -> bool:
        """True while some process still has a live episode (a collective call on every process).

        In sleep mode the engine wakes on the first True and sleeps on the False that ends the loop: the
        answer is the same on every process, so all of them wake (and push the weights) together.
        """
        live = any_process(self.accelerator, any_local) if self.collective else any_local
        if self.sleeps and live != self.awake:
            if live:
                self.wake()
            else:
                self.sleep()
        return live

    def wake(self) -> None:
        """Make the sleeping colocated engine ready for a rollout: the trainer's weights pushed again if a
        level-2 sleep discarded them since TRL's last push (`sync_weights`: collective under FSDP2 and
        ZeRO-3, so every process must call this at the same point), then its KV cache back."""
        vllm = self.vllm
        # TRL's flag (set by its own sleep); without it, push to be safe: one push, on every process alike
        if getattr(vllm, "_llm_weights_sleeping", True):
            vllm.sync_weights()  # wakes the weights (tags=["weights"]) before loading them
        vllm.llm.wake_up(tags=["kv_cache"])
        self.awake = True

    def sleep(self) -> None:
        """Put the colocated engine to sleep as TRL does after a call (level 2: weights and KV cache freed);
        the next wake pushes the weights again."""
        self.vllm.llm.sleep(level=2)
        self.vllm._llm_weights_sleeping = True  # what TRL's generate and our wake read
        self.awake = False

    def __call__(
        self, contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None = None
    ) -> list[Reply]:
        if self.sleeps and not self.awake:  # called outside the engine's turn loop: awake for this call only
            self.wake()
            try:
                return self._replies(contexts, max_new_tokens, stop)
            finally:
                self.sleep()
        return self._replies(contexts, max_new_tokens, stop)

    def _replies(
        self, contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None
    ) -> list[Reply]:
        given = dict(self.vllm.generation_kwargs or {}).get("stop") or []
        given = {given} if isinstance(given, str) else set(given)
        mine: dict[tuple[str, ...], list[int]] = {}  # this rank's contexts per stop set
        for i in range(len(contexts)):
            strings = stop[i].strings if stop and stop[i] else ()
            mine.setdefault(tuple(sorted(given.union(strings))), []).append(i)
        counts, max_new_tokens = self._agree({key: len(rows) for key, rows in mine.items()}, max_new_tokens)
        results: list[Reply | None] = [None] * len(contexts)
        for key, count in counts:  # the same calls in the same order on every rank of the group
            rows = mine.get(key, [])
            batch = [list(contexts[i]) for i in rows] + [[self.eos_token_ids[0]]] * (count - len(rows))
            replies = self._generate(batch, max_new_tokens, key)
            for i, reply in zip(rows, replies[: len(rows)], strict=True):  # the dummies' replies are dropped
                results[i] = reply
        return results  # type: ignore[return-value]  # every row got its reply above

    def _agree(self, counts: dict[tuple[str, ...], int], max_new_tokens: int) -> tuple[list, int]:
        """Per stop set the batch size every rank sends, and the reply budget (one gather over the group)."""
        if not self.pads:
            return sorted(counts.items()), max_new_tokens
        # server mode: every process (the default group); colocated: the tensor-parallel group
        group = None if self.vllm.mode == "server" else self.vllm.tp_group
        size = torch.distributed.get_world_size(group=group)
        everyone: list[Any] = [None] * size
        torch.distributed.all_gather_object(everyone, (counts, max_new_tokens), group=group)
        keys = sorted({key for rank_counts, _ in everyone for key in rank_counts})
        agreed = [(key, max(rank_counts.get(key, 0) for rank_counts, _ in everyone)) for key in keys]
        return agreed, max(limit for _, limit in everyone)

    def _generate(self, prompts: list[list[int]], max_new_tokens: int, strings: tuple[str, ...]) -> list[Reply]:
        """One `VLLMGeneration.generate` call with these stop strings; each reply cut after its end token."""
        vllm = self.vllm
        saved = vllm.max_completion_length, vllm.generation_kwargs
        if self.sleeps:  # awake for the rollout: TRL's generate must neither push, wake nor sleep per call
            vllm.enable_sleep_mode = False
        kwargs = dict(saved[1] or {})
        kwargs["stop_token_ids"] = sorted({*self.eos_token_ids, *(kwargs.get("stop_token_ids") or [])})
        kwargs.pop("stop", None)
        if strings:
            kwargs["stop"] = list(strings)
        vllm.max_completion_length, vllm.generation_kwargs = max_new_tokens, kwargs
        try:
            prompt_ids, completion_ids, logprobs, token_ids = vllm.generate(prompts, None, num_generations=1)
        finally:
            vllm.max_completion_length, vllm.generation_kwargs = saved
            if self.sleeps:
                vllm.enable_sleep_mode = True
        if len(completion_ids) != len(prompts):
            raise RuntimeError(f"vLLM returned {len(completion_ids)} completions for {len(prompts)} contexts")
        if prompt_ids is not None and [list(p) for p in prompt_ids] != prompts:
            wrong = next(k for k, (p, q) in enumerate(zip(prompt_ids, prompts, strict=True)) if list(p) != q)
            raise RuntimeError(
                f"vLLM's reply {wrong} answers another prompt than the one this process sent (TRL slices the "
                "gathered replies by rank, which is right only when every rank sends as many prompts)"
            )
        if logprobs is None or token_ids is None:
            raise RuntimeError("vLLM returned no logprobs; the trainer needs them (VLLMGeneration with logprobs=0)")
        results = []
        for ids, logps, candidates in zip(completion_ids, logprobs, token_ids, strict=True):
            ids = [int(t) for t in ids]
            end = next((i + 1 for i, t in enumerate(ids) if t in self.eos_token_ids), len(ids))
            picked = zip(ids[:end], logps[:end], candidates[:end], strict=True)
            results.append(Reply(ids[:end], [_sampled_logprob(t, lp, c) for t, lp, c in picked]))
        return results


def _sampled_logprob(token: int, logprobs: list[float | None], token_ids: list[int]) -> float:
    """The logprob of the sampled token among the (descending) top-N that TRL returns with it."""
    for candidate, logprob in zip(token_ids, logprobs, strict=True):
        if int(candidate) == token:
            # vLLM reports NaN (TRL: None) for a logprob it could not compute; TRL's importance
            # sampling reads NaN as "no correction" for that token
            return float(logprob) if logprob is not None else float("nan")
    raise RuntimeError(f"vLLM's logprobs do not include the sampled token {token}")
