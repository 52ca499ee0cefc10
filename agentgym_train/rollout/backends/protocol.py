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

Continuous batching (`StreamingGenerator`, `CachedSampler`): async rollouts let episodes join a decode
that has started and take each reply back as soon as it ends, one decode step at a time.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
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


class StreamingGenerator(TurnGenerator, Protocol):
    """A `TurnGenerator` that also decodes continuously: rows join and leave between decode steps.

    Async rollouts (`agentgym_train.rollout.asynchronous`) use it when `streaming()` is true: an episode whose
    env call ended `join`s the running decode at once, each `step` is one decode step of every row (after
    the joiners' prompts are prefilled), and a reply that ended (an end token, a stop string, its budget)
    comes back from that very `step`, so its env step starts while the other rows still decode. What a
    row samples depends only on its own context, as in a call. Generators without these methods (vLLM,
    the `generate` sampler, plain functions) are called per batch instead.
    """

    def streaming(self) -> bool:
        """Whether continuous decoding can be used now (else the engine calls the generator per batch)."""
        ...

    def open_stream(self) -> None:
        """Start a rollout's stream: no row decodes, none is kept."""
        ...

    def join(self, key: Hashable, context: list[int], max_new_tokens: int, stop: StopStrings | None) -> None:
        """Add a row for the next reply of episode `key` (its token ids so far, its own reply budget and stop
        strings); it is prefilled at the next `step` and decodes from then on. The state kept for `key` from its
        earlier replies (its KV rows) is reused."""
        ...

    def step(self) -> list[tuple[Hashable, Reply]]:
        """One decode step of every row (joiners prefilled first); returns the replies that ended in it."""
        ...

    def decoding(self) -> int:
        """Rows joined whose reply has not come back yet."""
        ...

    def leave(self, key: Hashable) -> None:
        """Episode `key` ended: drop what is kept for it."""
        ...

    def close_stream(self) -> None:
        """End the stream (also after an error): drop every row."""
        ...
