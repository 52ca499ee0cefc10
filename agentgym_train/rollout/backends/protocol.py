"""The one interface of every generation backend: the next reply of every live episode.

Each turn the rollout engine calls its `TurnGenerator` once with the token ids of every live episode
(the prompt and every turn so far, never re-rendered text), one reply budget for the call and, per
context, the `StopStrings` its reply should stop at. Back comes, per context and in order, a `Reply`:
the sampled ids as sampled and the sampler's logprob of each.

How each reply ended is read off the reply by the engine, in one place for every backend
(`RolloutEngine._end_reply`): its last id one of the model's end tokens ("eos"), one of its stop
strings in it ("stop_string": cut there token-exactly, since a backend stops only on the token that
completes the string, which may run past it), or neither ("budget"). A backend may sample past a stop
string or past an episode's own budget (the call's budget is the largest of the batch): the engine
cuts either way.

Hooks for sharded generation (`lockstep`, `vllm`), read with `getattr` so that a plain function is a
backend too:

- `sync_live(any_local) -> bool`: a collective call. With it the engine's turn loop runs while any
  process has a live episode, and a process with none left calls the backend with no contexts, so
  every process makes the same forward passes (or the same vLLM calls).
- `any_live(any_local) -> bool` (settable, `CachedSampler`): asked before each decode step, so every
  process makes the same decode steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple, Protocol

from agentgym_train.rollout.stops import StopStrings


class Reply(NamedTuple):
    """One sampled reply: its token ids as sampled and the sampler's logprob of each."""

    ids: list[int]
    logprobs: list[float]


class TurnGenerator(Protocol):
    """Samples the next reply of every live episode (see the module docstring)."""

    def __call__(
        self, contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None = None
    ) -> list[Reply]:
        """Per context, in order, its reply of at most `max_new_tokens` tokens (a plain `(ids, logprobs)`
        pair reads the same as a `Reply`).

        Args:
            contexts: Each live episode's token ids so far (prompt and completion).
            max_new_tokens: The reply budget of this call (the largest of its episodes').
            stop: Per context, the stop strings its reply should stop at (None: none).
        """
        ...
