"""Policy versions per token, partial rollouts across weight updates, and the per-token correction.

In async training (`MultiTurnGRPOConfig.async_generation`) the generator runs beside the trainer and
takes new weights while episodes are under way. Three pieces, used by the generation worker
(`agentgym_train.rollout.worker`) and the trainer (`agentgym_train.trainers.async_grpo`):

- `VersionedGenerator`, a `TurnGenerator` over a backend made per weight version. It samples each
  call's replies in segments of `segment_tokens` and, before each segment, asks `poll()` for newer
  weights. When there are some, it loads them and makes a fresh backend (a KV cache computed under
  the old weights would not be the new policy's), and the replies still open continue under the new
  weights from their whole context: a **partial rollout**, as verl's and OpenRLHF's. Each sampled
  token records the version that sampled it.
- `VersionedEngine`, a `RolloutEngine` that keeps those versions on each episode:
  `Episode.versions[t]` is the version that sampled completion token `t`, -1 where the env spoke (or
  where the engine added an end-of-turn token the model did not sample).
- `correction_weights`: per token, the truncated ratio between the current policy and the behaviour
  policy that sampled the token (see `agentgym_train.trainers.async_grpo` for the objective).

With a generation server (vLLM in server mode) the weights change in another process, so the generator
cannot load them itself: a `WeightGate` keeps segments and weight pushes apart. Each segment runs
inside `gate.segment()` (its poll and its request), each push inside `gate.push()`, which waits for the
segment in flight to return and keeps the next one from starting until the push is done; so every
token of a segment was sampled by one known version.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch

from agentgym_train.rollout.backends.protocol import Reply, TurnGenerator
from agentgym_train.rollout.engine import RolloutEngine
from agentgym_train.rollout.episode import Episode
from agentgym_train.rollout.stops import StopStrings

#: The version of a token the model did not sample (the env's, or an added end-of-turn token).
ENV_VERSION = -1


class WeightGate:
    """Segments of generation and weight pushes never overlap, and a waiting push goes before the next segment.

    Any number of segments may run at once (`segment()`); `push()` waits until none runs, and while a push
    waits or runs no segment starts (a writer-preferring lock: a generation loop that takes the gate back at
    once cannot starve the push).
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._segments = 0
        self._pushes_waiting = 0
        self._pushing = False
        #: Pushes done so far.
        self.pushes = 0

    @contextmanager
    def segment(self) -> Iterator[None]:
        with self._cond:
            while self._pushing or self._pushes_waiting:
                self._cond.wait()
            self._segments += 1
        try:
            yield
        finally:
            with self._cond:
                self._segments -= 1
                self._cond.notify_all()

    @contextmanager
    def push(self) -> Iterator[None]:
        with self._cond:
            self._pushes_waiting += 1
            while self._segments or self._pushing:
                self._cond.wait()
            self._pushes_waiting -= 1
            self._pushing = True
        try:
            yield
        finally:
            with self._cond:
                self._pushing = False
                self.pushes += 1
                self._cond.notify_all()

    @property
    def waiting(self) -> bool:
        """Whether a push waits for the segment in flight (tests use it to place a push inside a reply)."""
        with self._cond:
            return self._pushes_waiting > 0


class VersionedGenerator:
    """A `TurnGenerator` whose weights may change between segments of a reply.

    Args:
        make: Builds the backend for the current weights (called again after every weight update).
        eos_token_ids: Tokens that end a reply (a segment ending on one closes its reply).
        poll: Returns `(version, load)` when weights newer than the current ones are available, where
            `load()` puts them into the model `make` samples with; None when there are none.
        version: The version of the weights the model holds now.
        segment_tokens: Tokens sampled between two polls (None: poll once per call, so a reply never
            spans an update).
        gate: Called per segment for a context manager that holds the poll and the segment's sampling
            (`WeightGate.segment` when another process pushes the weights; None: nothing to hold).
    """

    def __init__(
        self,
        make: Callable[[], TurnGenerator],
        eos_token_ids: Sequence[int],
        poll: Callable[[], tuple[int, Callable[[], None]] | None] | None = None,
        version: int = 0,
        segment_tokens: int | None = None,
        gate: Callable[[], AbstractContextManager[Any]] | None = None,
    ):
        if segment_tokens is not None and segment_tokens < 1:
            raise ValueError(f"segment_tokens must be None (one poll per call) or >= 1, got {segment_tokens}")
        self.make = make
        self.eos = set(eos_token_ids)
        self.poll = poll
        self.version = version
        self.segment_tokens = segment_tokens
        self.gate = gate or nullcontext
        self._keep_unmatched = False
        self.backend = make()
        #: Per reply of the last call, in order: the version of each of its sampled tokens.
        self.last_versions: list[list[int]] = []
        #: Weight updates taken so far, and those taken while a reply was open (partial rollouts).
        self.updates = 0
        self.mid_reply_updates = 0

    def refresh(self, mid_reply: bool = False) -> bool:
        """Take the newest weights if `poll` has any; returns whether it did."""
        found = self.poll() if self.poll is not None else None
        if found is None:
            return False
        version, load = found
        load()
        self.version = version
        self.backend = self.make()  # a fresh backend: no KV cache computed under the old weights
        self.keep_unmatched = self._keep_unmatched
        self.updates += 1
        self.mid_reply_updates += bool(mid_reply)
        return True

    # the async engine's row parking (`asynchronous.play`), passed on to a backend that has it
    @property
    def keep_unmatched(self) -> bool:
        return self._keep_unmatched

    @keep_unmatched.setter
    def keep_unmatched(self, value: bool) -> None:
        self._keep_unmatched = value
        if hasattr(self.backend, "keep_unmatched"):
            self.backend.keep_unmatched = value

    def retire(self, context: list[int]) -> None:
        """An episode ended: the backend may drop its cached row."""
        if hasattr(self.backend, "retire"):
            self.backend.retire(context)

    def __call__(
        self, contexts: list[list[int]], max_new_tokens: int, stop: Sequence[StopStrings | None] | None = None
    ) -> list[Reply]:
        stops = list(stop) if stop is not None else [None] * len(contexts)
        ids: list[list[int]] = [[] for _ in contexts]
        logps: list[list[float]] = [[] for _ in contexts]
        versions: list[list[int]] = [[] for _ in contexts]
        open_rows = list(range(len(contexts)))
        left = max_new_tokens
        first = True
        while open_rows and left > 0:
            n = min(self.segment_tokens or left, left)
            with self.gate():  # no weight push between the poll and the end of this segment's sampling
                self.refresh(mid_reply=not first)
                outputs = self.backend(
                    [contexts[i] + ids[i] for i in open_rows], n, stop=[stops[i] for i in open_rows] if stop else None
                )
                version = self.version
            first = False
            still = []
            for i, (new_ids, new_logps) in zip(open_rows, outputs, strict=True):
                ids[i] += list(new_ids)
                logps[i] += list(new_logps)
                versions[i] += [version] * len(new_ids)
                ended = len(new_ids) < n or (new_ids and new_ids[-1] in self.eos)
                if not ended and stops[i] is not None and stops[i].cut(ids[i]) is not None:
                    ended = True  # a stop string, possibly across the segment boundary
                if not ended:
                    still.append(i)
            open_rows, left = still, left - n
        self.last_versions = versions
        return [Reply(i, lp) for i, lp in zip(ids, logps, strict=True)]


class VersionedEngine(RolloutEngine):
    """A `RolloutEngine` that records, per completion token, the policy version that sampled it
    (`Episode.versions`), when its generator is a `VersionedGenerator` (other generators: version 0)."""

    def _generate(self, episodes: list[Episode], generate: TurnGenerator, limit: int) -> list[int | None]:
        ends = super()._generate(episodes, generate, limit)
        replies = getattr(generate, "last_versions", None) or [[0] * limit for _ in episodes]
        for episode, versions in zip(episodes, replies, strict=True):
            start, stop = episode.reply_spans[-1]
            kept = episode.versions[:start]  # the engine may have shortened the previous reply's span since
            episode.versions = kept + [ENV_VERSION] * (start - len(kept)) + versions[: stop - start]
        return ends

    def run(self, tasks: Any, generate: TurnGenerator, progress: Any = None) -> list[Episode]:
        episodes = super().run(tasks, generate, progress)
        for episode in episodes:
            episode.versions = _align(episode)
        return episodes


def _align(episode: Episode) -> list[int]:
    """`episode.versions` laid over its completion: the recorded versions inside reply spans, -1 elsewhere."""
    aligned = [ENV_VERSION] * len(episode.completion_ids)
    for start, stop in episode.reply_spans:
        aligned[start:stop] = episode.versions[start:stop]
    return aligned


def oldest_version(episode: Episode) -> int | None:
    """The oldest policy version among the episode's sampled tokens (None: it sampled none)."""
    sampled = [v for v in episode.versions if v != ENV_VERSION]
    return min(sampled) if sampled else None


def correction_weights(
    current: torch.Tensor,
    behaviour: torch.Tensor,
    mask: torch.Tensor,
    mode: str = "token_truncate",
    clip_min: float | None = None,
    clip_max: float | None = 3.0,
) -> torch.Tensor:
    """(B, T) per-token weights pi_current / pi_behaviour of the sampled tokens, 1 where `mask` is 0.

    `token_truncate` caps each ratio to [clip_min, clip_max] (TRL's `token_truncate`); `token_mask`
    sets a ratio outside that range to 0 (the token leaves the loss). A None bound is no bound.
    """
    if mode not in ("token_truncate", "token_mask"):
        raise ValueError(
            f"the async correction is per token: mode must be 'token_truncate' or 'token_mask', got {mode!r}"
        )
    ratio = torch.exp((current - behaviour) * mask)
    low = clip_min if clip_min is not None else 0.0
    high = clip_max if clip_max is not None else float("inf")
    if mode == "token_truncate":
        ratio = ratio.clamp(min=low, max=high)
    else:
        ratio = ratio.masked_fill((ratio < low) | (ratio > high), 0.0)
    return torch.where(mask.bool(), ratio, torch.ones_like(ratio))
