"""Transformers' `generate` as a backend: every turn reads each episode's whole history afresh.

The fallback of the KV-cached sampler (`cached`): slower on long episodes, but it supports every
generation option of transformers (`repetition_penalty`, `min_p`, ...).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentgym_train.rollout.backends.protocol import Reply, TurnGenerator
from agentgym_train.rollout.stops import StopStrings


def hf_generate_fn(
    model: Any,
    pad_token_id: int,
    eos_token_ids: Sequence[int],
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int | None = None,
    batch_size: int | None = None,
    generation_kwargs: dict[str, Any] | None = None,
    synced_gpus: bool = False,
) -> TurnGenerator:
    """A `TurnGenerator` over transformers `generate`: left-padded batches, sampled ids and their logprobs.

    Logprobs are taken from the raw logits divided by the temperature (the distribution that TRL's
    loss recomputes), for the token actually sampled, as each token is drawn: only one step's
    batch x vocabulary row is held at a time, never every step's (`output_logits` would keep them
    all, in float32). `synced_gpus`: every process steps until all have finished (sharded weights,
    see `agentgym_train.rollout.backends.lockstep`). `stop`: per context, the `StopStrings` at which its reply
    stops (a stopping criterion; the reply ends on the token that completed the stop string, and the
    engine cuts it token-exactly).
    """
    import torch
    from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList

    eos = torch.tensor(list(eos_token_ids))
    scale = temperature if temperature > 0 else 1.0
    # generate runs the transformers model itself (a PEFT wrapper hands it to its base model)
    forward_module = model.get_base_model() if hasattr(model, "get_base_model") else model

    class _Stops(StoppingCriteria):
        """Each row's own stop strings; remembers how many new tokens a row had when it stopped."""

        def __init__(self, stops: Sequence[StopStrings | None], width: int):
            self.stops, self.width = stops, width
            self.ends: dict[int, int] = {}

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            done = torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)
            for row, stop in enumerate(self.stops):
                if stop and row not in self.ends and stop.completed(input_ids[row, self.width :].tolist()):
                    self.ends[row] = input_ids.size(1) - self.width
                done[row] = row in self.ends
            return done

    class _Logprobs(StoppingCriteria):
        """Each step's sampled-token logprob, kept as the token is drawn (never stops a row).

        A forward hook takes each forward pass's last-position logits, the raw logits `generate` samples
        from (its logits processors and warpers come after), as float32 log-probabilities of logits /
        temperature. `generate` then appends the drawn token to `input_ids` and calls its stopping
        criteria: this one gathers that token's logprob and drops the row. Steps that `generate` undoes
        at the end are cut with the sequences.
        """

        def __init__(self) -> None:
            self.step: Any = None
            self.taken: list[Any] = []

        def hook(self, module: Any, args: Any, output: Any) -> None:
            self.step = torch.log_softmax(output.logits[:, -1].float() / scale, dim=-1)

        def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
            self.taken.append(self.step.gather(-1, input_ids[:, -1:].to(self.step.device))[:, 0])
            self.step = None
            return torch.zeros(input_ids.size(0), dtype=torch.bool, device=input_ids.device)

    def generate(
        contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None = None
    ) -> list[Reply]:
        config = GenerationConfig(
            **{
                **(generation_kwargs or {}),
                "max_new_tokens": max_new_tokens,
                "do_sample": temperature > 0,
                "temperature": temperature if temperature > 0 else None,
                "top_p": top_p if temperature > 0 else None,
                "top_k": (top_k or None) if temperature > 0 else None,
                "pad_token_id": pad_token_id,
                "eos_token_id": list(eos_token_ids),
                "return_dict_in_generate": True,
                "disable_compile": True,
            }
        )
        results: list[Reply] = []
        step = batch_size or len(contexts)
        device = next(model.parameters()).device
        for start in range(0, len(contexts), step):
            chunk = contexts[start : start + step]
            width = max(len(c) for c in chunk)
            input_ids = torch.full((len(chunk), width), pad_token_id, dtype=torch.long)
            attention_mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, ids in enumerate(chunk):
                input_ids[row, width - len(ids) :] = torch.tensor(ids)
                attention_mask[row, width - len(ids) :] = 1
            stops = _Stops(list(stop[start : start + step]) if stop else [], width)
            recorder = _Logprobs()
            criteria = [recorder, stops] if any(stops.stops) else [recorder]
            handle = forward_module.register_forward_hook(recorder.hook)
            try:
                with torch.no_grad():
                    out = model.generate(
                        input_ids=input_ids.to(device),
                        attention_mask=attention_mask.to(device),
                        generation_config=config,
                        stopping_criteria=StoppingCriteriaList(criteria),
                        synced_gpus=synced_gpus,
                    )
            finally:
                handle.remove()
            new = out.sequences[:, width:].cpu()
            taken = recorder.taken[: new.size(1)]
            logps = torch.stack(taken, dim=1).cpu() if taken else torch.zeros(new.shape)
            is_eos = torch.isin(new, eos)
            for row in range(len(chunk)):
                hits = is_eos[row].nonzero()
                end = int(hits[0]) + 1 if len(hits) else new.size(1)
                end = min(end, stops.ends.get(row, end))  # after a stop, generate pads (which may be EOS)
                results.append(Reply(new[row, :end].tolist(), logps[row, :end].tolist()))
        return results

    return generate
