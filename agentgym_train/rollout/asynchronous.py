"""Async rollouts: each episode advances on its own, with no turn barrier.

Lockstep (`RolloutEngine._play`) waits at every turn for every live episode: all of them generate in
one call, then all of their envs step, so one slow page load or JVM step holds every episode and the
generator idles through the others' env time. Here (`rollout_mode="async"`) each episode goes back to
the generator as soon as its env call (reset or step) returns:

1. every episode's reset is submitted to a `CallRunner` (worker threads with `env_timeout`);
2. the main thread waits until at least one env call has ended, takes every call that has ended by
   then (the turn's books: `RolloutEngine._started` for a reset, `RolloutEngine._stepped` for a step),
   and generates, in one call of the `TurnGenerator`, for exactly the episodes that went on (in the
   order of `tasks`, so a KV-cached sampler finds its rows in order);
3. each reply's env step is submitted at once and runs while other episodes generate; repeat until
   no call is left.

The books of a turn are the engine's own methods, the same that lockstep calls, and a reply depends
only on its episode's context: a scripted policy plays the same episodes in both modes whatever order
the envs finish in, and a sampled one plays them with the same distribution (only which contexts share
a generator call changes). The call's reply budget is the largest of its episodes' (lockstep takes the
run's): every reply is cut to its own episode's budget either way.

Generator calls are batched from whatever is ready when the generator is free, gathered briefly: once
an episode is ready, more env calls join the call while they keep ending less than `GATHER_SHARE`
(a tenth) of this run's mean generator call apart, for at most one call's time (before the first call,
the time the first reset took stands in for a call). Envs stepped in waves (fast envs, a few workers)
then share one call, as in lockstep, while envs whose steps end spread out (JVMs, browsers) go on
without waiting for stragglers. Taking each first result alone split BabyAI's turns (fast envs, a 0.2 s
generator, 8 env workers, 32 episodes) into waves of calls: 3.6x slower than lockstep. Waiting for the
stragglers for up to a whole call instead (a fixed window) gave back what async gains on SciWorld: calls
held nearly every episode, as in lockstep. A generator that decodes continuously (a
`StreamingGenerator`, the HF cached sampler: `streams`) takes no calls at all: an episode whose env call
ended joins the running decode between two decode steps, and each reply leaves it as soon as it ends, so
its env step starts while the other rows still decode. Otherwise the cached sampler keeps the rows of
episodes that sit out a call (`CachedSampler.keep_unmatched` parks them), so an episode's history is fed
once, not again at every call it joins.

Collective generators: a generator whose calls must be made by every process alike (sharded weights
under FSDP or ZeRO-3 without gathered weights, `LockstepGenerator`; vLLM padded across ranks or
tensor-parallel, `VLLMTurnGenerator.collective`) cannot take calls whose number and timing differ per
process. With such a generator (a `sync_live` hook and `collective` true, or no `collective` attribute)
the engine falls back to lockstep for the run and logs it once per generator. A generator whose
`sync_live` is local (one-process vLLM, e.g. its sleep mode) is called `sync_live(True)` before the first
generation and `sync_live(False)` at the end, as lockstep's loop would.

Measured (`benchmarks/async_rollout.py`, expert replies after a simulated generator latency, on 2
shared cores): async was not faster where the env's steps are CPU work on this machine's cores (SciWorld,
32 JVMs: 1.08x at 0.1 s per generator call, 0.91x at 0.5 s) or serialize on one thread (WebArena: every
env of a process steps on its one browser thread, 0.92x), and 1.17x (0.1 s) / 0.96x (0.5 s) with BabyAI
behind a 50-600 ms remote wait. Lockstep stays the default: async gains only where env time is waiting
(remote servers, actors on other nodes) and the generator's calls are cheap next to it, and its batches
depend on timing, so a seeded sampled rollout is no longer reproducible (a scripted one still is).

`RolloutEngine.timing`: "generation" counts the seconds in generator calls, "env" the seconds the main
thread waited for env calls with nothing to generate (the generator's idle time).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from agentgym_train.rollout.calls import CallRunner

if TYPE_CHECKING:
    from agentgym_train.rollout.backends.protocol import StreamingGenerator, TurnGenerator
    from agentgym_train.rollout.engine import RolloutEngine, _Slot
    from agentgym_train.rollout.episode import Episode, Task

logger = logging.getLogger(__name__)
_warned: set[int] = set()
#: Once some episode is ready, env calls that end less than this share of a generator call's mean time (this
#: run's; before the first call, the time the first reset took) after the last one join the same call.
GATHER_SHARE = 0.1


def collective(generate: Any) -> bool:
    """Whether `generate`'s calls are collectives over processes (see the module docstring)."""
    sync_live = getattr(generate, "sync_live", None)
    return bool(getattr(generate, "collective", sync_live is not None))


def supports(generate: Any) -> bool:
    """Whether an async rollout can use `generate` (its calls are local to this process)."""
    return not collective(generate)


def streams(generate: Any) -> bool:
    """Whether `generate` decodes continuously (a `StreamingGenerator` whose `streaming()` is true)."""
    streaming = getattr(generate, "streaming", None)
    return (
        callable(streaming)
        and all(
            callable(getattr(generate, name, None)) for name in ("open_stream", "join", "step", "leave", "close_stream")
        )
        and bool(streaming())
    )


def log_fallback(generate: Any) -> None:
    """Say (once per generator) that an async rollout runs in lockstep with `generate`."""
    if id(generate) in _warned:
        return
    _warned.add(id(generate))
    logger.warning(
        "rollout_mode='async' needs a generator whose calls are local to this process; %s makes collective calls "
        "across processes (sharded weights under FSDP/ZeRO-3, or vLLM padded across ranks), which every process "
        "must make alike, so rollouts run in lockstep (set rollout_mode='lockstep' to silence this)",
        type(generate).__name__,
    )


def play(
    engine: RolloutEngine,
    tasks: Sequence[Task],
    slots: list[_Slot],
    generate: TurnGenerator,
    progress: Callable[[int], None] | None,
) -> list[Episode]:
    """Play one episode per task with no turn barrier; return them in the order of `tasks`.

    If `generate` raises, the env calls in flight are awaited (each within `env_timeout`) before the
    error goes on, so that no env still stepping returns to the engine's pool; envs whose call failed
    are discarded.
    """
    # Ray pool calls bound themselves (the pool's timeout kills the actor); threads only wait for them
    pooled = engine.env_pool is not None
    runner = CallRunner(len(tasks) if pooled else engine.num_env_workers, None if pooled else engine.env_timeout)
    for i, call in enumerate(engine._reset_calls(slots, tasks)):
        runner.submit(i, call)
    episodes: list[Any] = [None] * len(tasks)
    ends: dict[int, int | None] = {}  # per episode with a step in flight: the end token of its last reply
    sync_live = getattr(generate, "sync_live", None)
    awake = False
    finished = False
    stream = streams(generate)
    # a sampler with per-episode state (`CachedSampler`'s KV rows) keeps it for episodes that sit out a call
    parks = not stream and hasattr(generate, "keep_unmatched") and hasattr(generate, "retire")
    if parks:
        parked_before, generate.keep_unmatched = generate.keep_unmatched, True
    if stream:
        generate.open_stream()

    def wake() -> None:
        nonlocal awake
        if sync_live is not None and not awake:
            awake = sync_live(True)

    def take(results: list[tuple[Any, Any]]) -> list[int]:
        """The books of the env calls that ended; returns the episodes that go on."""
        ready = []
        for i, result in results:
            if episodes[i] is None:
                episodes[i] = engine._started(tasks[i], slots[i], result, progress)
                live = not episodes[i].done
            else:
                live = engine._stepped(episodes[i], slots[i], result, ends.pop(i), progress)
                if not live and stream:
                    generate.leave(i)
                elif not live and parks:
                    generate.retire(episodes[i].prompt_ids + episodes[i].completion_ids)
            if live:
                ready.append(i)
        return ready

    started, calls = time.perf_counter(), 0
    try:
        if stream:
            _stream(engine, tasks, slots, generate, runner, take, episodes, ends, wake)
        while len(runner):
            waited = time.perf_counter()
            ready = take(runner.collect(block=True))
            if ready:  # env calls that end in quick succession join this generation (see GATHER_SHARE)
                basis = engine.timing["generation"] / calls if calls else time.perf_counter() - started
                until = time.perf_counter() + basis
                while len(runner) and (left := until - time.perf_counter()) > 0:
                    more = runner.collect(block=True, wait=min(left, GATHER_SHARE * basis))
                    if not more:
                        break
                    ready += take(more)
            engine.timing["env"] += time.perf_counter() - waited
            if not ready:
                continue
            ready.sort()
            wake()
            batch = [episodes[i] for i in ready]
            limit = max([e.max_turn_tokens for e in batch] + [engine.max_turn_tokens or 1])
            calls += 1
            for i, end in zip(ready, engine._generate(batch, generate, limit), strict=True):
                ends[i] = end
                runner.submit(i, engine._step_calls([slots[i].env], [episodes[i].replies[-1]])[0])
        finished = True
    finally:
        if parks:
            generate.keep_unmatched = parked_before
        if stream:
            generate.close_stream()
        if not finished:
            _drain(engine, runner, slots)
    if sync_live is not None:
        sync_live(False)
    return episodes


def _stream(
    engine: RolloutEngine,
    tasks: Sequence[Task],
    slots: list[_Slot],
    generate: StreamingGenerator,
    runner: CallRunner,
    take: Callable[[list[tuple[Any, Any]]], list[int]],
    episodes: list[Any],
    ends: dict[int, int | None],
    wake: Callable[[], None],
) -> None:
    """Continuous batching: between decode steps, the episodes whose env calls ended join the decode, and each
    reply that ended goes to its env step at once (see the module docstring)."""
    while len(runner) or generate.decoding():
        busy = bool(generate.decoding())
        waited = time.perf_counter()
        ready = take(runner.collect(block=not busy))  # idle: wait for an env call; decoding: take what ended
        if not busy:
            engine.timing["env"] += time.perf_counter() - waited
        if ready:
            wake()
        for i in sorted(ready):
            episode = episodes[i]
            context = episode.turn_prompts[-1] if episode.turn_prompts else episode.prompt_ids + episode.completion_ids
            budget = max(episode.max_turn_tokens, 1)
            generate.join(i, context, budget, engine._stop_strings(episode.stop_strings))
        if not generate.decoding():
            continue
        started = time.perf_counter()
        replies = generate.step()
        engine.timing["generation"] += time.perf_counter() - started
        for i, (ids, logps) in replies:
            ends[i] = engine._take_reply(episodes[i], ids, logps)
            runner.submit(i, engine._step_calls([slots[i].env], [episodes[i].replies[-1]])[0])


def _drain(engine: RolloutEngine, runner: CallRunner, slots: list[_Slot]) -> None:
    """Wait for the env calls in flight; discard the envs whose call failed or timed out."""
    while len(runner):
        for i, result in runner.collect(block=True):
            if isinstance(result, Exception):
                engine._discard(slots[i])
