"""Generation through vLLM, by way of TRL's own vLLM integration (`trl.generation.VLLMGeneration`).

With `use_vllm=True` TRL's `GRPOTrainer` builds a `VLLMGeneration` (colocated engine or a client of
`trl vllm-serve` / `vllm serve`) and, before each call of the trainer's `rollout_func`, pushes the
current weights to it (`sync_weights`). `VLLMTurnGenerator` makes that object the rollout engine's
`GenerateFn`: each turn, the token ids of every live episode (the prompt and every turn so far, as
ids, never re-rendered text) go to `VLLMGeneration.generate`, and the sampled ids and their logprobs
come back as they were sampled. TRL's importance-sampling correction then compares those logprobs
with the trainer's (`vllm_importance_sampling_correction`), as in its single-turn GRPO.

Under several processes TRL's server mode gathers the prompts of every rank and the colocated engine
with tensor parallelism gathers those of its group: both are collective calls, so every process must
call `generate` the same number of times. `sync_live` tells the rollout engine whether any process
still has a live episode; a process whose episodes have all ended keeps calling with no contexts
until none is live anywhere.

Stop strings: the scenarios' stop strings go to vLLM as `SamplingParams.stop` (one set per call: the
union over the contexts so far). vLLM ends a reply on the token that completes a stop string and
keeps that token in `token_ids` (it trims only the text); the rollout engine cuts the ids at the stop
itself (`agentgym_train.rollout.stops`), as for every backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_train.rollout.lockstep import any_process
from agentgym_train.rollout.stops import StopStrings


class VLLMTurnGenerator:
    """The rollout engine's `GenerateFn` over a `trl.generation.VLLMGeneration` object.

    Args:
        vllm_generation: TRL's `VLLMGeneration` (the trainer's `vllm_generation` attribute).
        eos_token_ids: Tokens that end a reply; sent as vLLM's `stop_token_ids`, so a model whose
            end-of-turn token is not its EOS (Llama 3, Gemma) stops there too.
        accelerator: The trainer's accelerator; with more than one process, `sync_live` reduces
            "still live" over all of them.
    """

    def __init__(self, vllm_generation: Any, eos_token_ids: Sequence[int], accelerator: Any = None):
        self.vllm = vllm_generation
        self.eos_token_ids = [int(t) for t in eos_token_ids]
        self.accelerator = accelerator
        #: Every stop string asked for so far (sent as vLLM's `stop`).
        self.stop_strings: set[str] = set()

    @property
    def collective(self) -> bool:
        return self.accelerator is not None and self.accelerator.num_processes > 1

    def sync_live(self, any_local: bool) -> bool:
        """True while some process still has a live episode (a collective call on every process)."""
        return any_process(self.accelerator, any_local) if self.collective else any_local

    def __call__(
        self, contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None = None
    ) -> list[tuple[list[int], list[float]]]:
        vllm = self.vllm
        saved = vllm.max_completion_length, vllm.generation_kwargs
        user = dict(saved[1] or {})
        stop_ids = sorted({*self.eos_token_ids, *(user.get("stop_token_ids") or [])})
        # kept across calls: in server mode the main process's parameters serve every process's prompts,
        # also on a turn where the main process has no live episode of its own
        self.stop_strings.update(s for x in stop or [] if x for s in x.strings)
        given = user.get("stop") or []
        strings = sorted({*([given] if isinstance(given, str) else given), *self.stop_strings})
        vllm.max_completion_length = max_new_tokens
        vllm.generation_kwargs = {**user, "stop_token_ids": stop_ids, **({"stop": strings} if strings else {})}
        try:
            _, completion_ids, logprobs, token_ids = vllm.generate([list(c) for c in contexts], None, num_generations=1)
        finally:
            vllm.max_completion_length, vllm.generation_kwargs = saved
        if len(completion_ids) != len(contexts):
            raise RuntimeError(f"vLLM returned {len(completion_ids)} completions for {len(contexts)} contexts")
        if logprobs is None or token_ids is None:
            raise RuntimeError("vLLM returned no logprobs; the trainer needs them (VLLMGeneration with logprobs=0)")
        results = []
        for ids, logps, candidates in zip(completion_ids, logprobs, token_ids, strict=True):
            ids = [int(t) for t in ids]
            end = next((i + 1 for i, t in enumerate(ids) if t in self.eos_token_ids), len(ids))
            picked = zip(ids[:end], logps[:end], candidates[:end], strict=True)
            results.append((ids[:end], [_sampled_logprob(t, lp, c) for t, lp, c in picked]))
        return results


def _sampled_logprob(token: int, logprobs: list[float | None], token_ids: list[int]) -> float:
    """The logprob of the sampled token among the (descending) top-N that TRL returns with it."""
    for candidate, logprob in zip(token_ids, logprobs, strict=True):
        if int(candidate) == token:
            # vLLM reports NaN (TRL: None) for a logprob it could not compute; TRL's importance
            # sampling reads NaN as "no correction" for that token
            return float(logprob) if logprob is not None else float("nan")
    raise RuntimeError(f"vLLM's logprobs do not include the sampled token {token}")
