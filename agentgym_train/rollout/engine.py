"""The multi-turn rollout engine: many episodes at once, token-in and token-out.

Each turn, every live episode generates together (one left-padded batched `generate`), then the env
steps run concurrently in a thread pool. An episode's tokens are one append-only sequence:

    prompt_ids      the chat template over [system, first observation] with the generation prompt
    completion_ids  reply 1 (as sampled, with its end-of-turn token) | observation 2 rendered as the
                    next user turn (the template's text between the end-of-turn token and the next
                    generation prompt) | reply 2 | ... | reply n (ends on one of the model's end tokens)
    env_mask        1 on the sampled tokens, 0 on the env's
    logprobs        the sampler's log-probability of each sampled token (0.0 where the env spoke)

Sampled ids are never decoded and re-encoded; only the new observation is tokenized (how each turn
is rendered, and end tokens other than the template's end-of-turn token: `agentgym_train.rollout.templates`). The
`max_completion_length` budget covers every turn: when the next observation plus a full reply
(`max_turn_tokens`) would not fit, the episode ends at that turn boundary (`budget_truncated`).

How each reply ended is recorded per turn (`Episode.stopped_by`): `"eos"` (one of the model's end
tokens), `"stop_string"` (the scenario's stop strings, e.g. a new line starting `Observation:`: the
reply is cut there token-exactly and closed with the end-of-turn token, see
`agentgym_train.rollout.stops`) or `"budget"` (no end token and no stop string: the reply budget
`max_turn_tokens`, by default each scenario's `default_max_turn_tokens`, cut it).

Faults: each env call runs on a daemon thread with a timeout (`env_timeout`); an env that raises or
hangs ends its episode (`env_error`, return 0), is dropped and replaced, and the rollout goes on.

Several processes with sharded weights (FSDP, ZeRO-3): a `GenerateFn` with a `sync_live(any_local)`
method makes the turn loop run while any process has a live episode, calling it with no contexts where
none is left here, so every process makes the same forward passes (`agentgym_train.rollout.lockstep`).
"""

from __future__ import annotations

import hashlib
import inspect
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentgym_train.rollout.stops import StopStrings
from agentgym_train.rollout.templates import ChatRenderer
from agentgym_wrappers import MultiTurnWrapper
from agentgym_wrappers.stops import stop_strings_for, turn_tokens_for

logger = logging.getLogger(__name__)

#: (contexts, max_new_tokens) -> per context: (new token ids, their sampler logprobs). A GenerateFn that
#: takes a `stop` keyword gets, per context, the `StopStrings` its reply should stop at; the engine
#: cuts every reply at its stop strings either way (a backend that ignores them only samples longer).
GenerateFn = Callable[[list[list[int]], int], list[tuple[list[int], list[float]]]]


@dataclass(frozen=True)
class Task:
    """One episode to run: an env id and the reset arguments that pick its task."""

    env_id: str
    task_id: str | int | None = None
    split: str | None = None
    seed: int | None = None

    def options(self) -> dict[str, Any] | None:
        options = {k: v for k, v in (("task_id", self.task_id), ("split", self.split)) if v is not None}
        return options or None


@dataclass
class Episode:
    """One finished episode: its token sequence and what happened."""

    task: Task
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    episode_return: float = 0.0
    turns: int = 0
    success: bool = False
    terminated: bool = False
    truncated: bool = False  # the turn limit (max_turns) or the env's own step budget
    budget_truncated: bool = False  # max_completion_length would have been exceeded
    invalid_replies: int = 0
    category: str | None = None
    kind: str | None = None  # the task's kind where the env reports one (info["kind"])
    stats: dict[str, Any] = field(default_factory=dict)
    env_error: str | None = None  # why the env failed (an exception or a timeout); the episode ended there
    stopped_by: list[str] = field(default_factory=list)  # per reply: "eos", "stop_string" or "budget"
    max_turn_tokens: int = 0  # this episode's reply budget
    stop_strings: tuple[str, ...] = ()  # this episode's stop strings
    turn_rewards: list[float] = field(default_factory=list)  # what the env paid on each turn
    state_keys: list[str] = field(default_factory=list)  # per turn: the state it started from (`state_key`)
    reply_spans: list[tuple[int, int]] = field(default_factory=list)  # per reply: [start, end) in completion_ids

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated or self.budget_truncated or self.env_error is not None

    @property
    def stop_string_hits(self) -> int:
        """Replies that a stop string ended."""
        return self.stopped_by.count("stop_string")

    @property
    def replies_cut(self) -> int:
        """Replies that the reply budget cut (no end token, no stop string)."""
        return self.stopped_by.count("budget")


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
) -> GenerateFn:
    """A `GenerateFn` over transformers `generate`: left-padded batches, sampled ids and their logprobs.

    Logprobs are taken from the raw logits divided by the temperature (the distribution that TRL's
    loss recomputes), for the token actually sampled, as each token is drawn: only one step's
    batch x vocabulary row is held at a time, never every step's (`output_logits` would keep them
    all, in float32). `synced_gpus`: every process steps until all have finished (sharded weights,
    see `agentgym_train.rollout.lockstep`). `stop`: per context, the `StopStrings` at which its reply
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
    ) -> list[tuple[list[int], list[float]]]:
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
        results: list[tuple[list[int], list[float]]] = []
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
                results.append((new[row, :end].tolist(), logps[row, :end].tolist()))
        return results

    return generate


class EnvTimeoutError(TimeoutError):
    """An env call (reset or step) ran past the engine's `env_timeout`."""


def run_calls(calls: Sequence[Callable[[], Any]], workers: int, timeout: float | None) -> list[Any]:
    """Run `calls` concurrently, at most `workers` at a time, each with a wall-clock `timeout`.

    Returns, in order, each call's result or the exception it raised (an `EnvTimeoutError` for one
    that ran past `timeout`). A call that hangs cannot be killed in Python: its thread is abandoned
    (a daemon, so it never holds up the interpreter's exit) and frees its worker slot, so one hung env
    never starves the others or a later rollout.
    """
    results: list[Any] = [None] * len(calls)
    finished: dict[int, Any] = {}
    wake = threading.Condition()

    def body(k: int) -> None:
        try:
            out: Any = calls[k]()
        except Exception as error:  # the env's failure is this call's result
            out = error
        with wake:
            finished[k] = out
            wake.notify()

    pending = list(range(len(calls)))[::-1]
    deadlines: dict[int, float] = {}
    while pending or deadlines:
        while pending and len(deadlines) < max(1, workers):
            k = pending.pop()
            deadlines[k] = time.monotonic() + timeout if timeout is not None else float("inf")
            threading.Thread(target=body, args=(k,), name=f"agentgym-env-{k}", daemon=True).start()
        with wake:
            ready = [k for k in deadlines if k in finished]
            if not ready:
                wake.wait(max(0.0, min(deadlines.values()) - time.monotonic()) if timeout is not None else None)
                ready = [k for k in deadlines if k in finished]
        for k in ready:
            results[k] = finished[k]
            del deadlines[k]
        now = time.monotonic()
        for k in [k for k, deadline in deadlines.items() if now >= deadline and k not in finished]:
            results[k] = EnvTimeoutError(f"the env call took longer than env_timeout={timeout} s; abandoned")
            del deadlines[k]
    return results


class _Slot:
    """One episode's env: taken from the pool or made on a worker thread, dropped if a call fails."""

    def __init__(self, env_id: str, env: MultiTurnWrapper | None):
        self.env_id = env_id
        self.env = env
        self.failed = False
        self.lock = threading.Lock()


class RolloutEngine:
    """Runs batches of episodes of text envs with a language model.

    Faults: every env call (making the env, `reset`, `step`) runs on a worker thread with a
    timeout. An env that raises or runs past `env_timeout` ends its episode there (`Episode.env_error`
    says why; return 0, not a success), is closed in the background and never reused (a fresh one is
    made for a later episode); the other episodes and the training step go on. `env_errors` counts
    such episodes over the engine's life. What training does with a failed episode is the trainer's
    rule (`MultiTurnGRPOTrainer` drops its whole group from the loss).

    Args:
        tokenizer: The model's tokenizer, with a chat template (see `agentgym_train.rollout.templates`).
        max_turns: Turn limit per episode (None: each env's default). A plain attribute: the
            max-turn scheduler changes it between rollouts.
        max_completion_length: Token budget for everything after the prompt, all turns together.
        max_turn_tokens: Most tokens one reply may have (None: each scenario's `default_max_turn_tokens`,
            at most `max_completion_length`).
        stop_strings: Where replies stop (None: each scenario's `stop_strings`; empty: only end tokens
            and the budget end replies).
        env_kwargs: Keyword arguments for `gym.make` (e.g. `{"show_actions": False}` for BabyAI).
        system_prompt: Overrides the scenario's system prompt.
        num_env_workers: Env calls that run at once (each on a thread of its own).
        eos_token_ids: Tokens that end a reply besides the template's end-of-turn token (default: the
            tokenizer's EOS; trainers pass the generation config's end tokens).
        chat_template_kwargs: Template variables, e.g. `{"enable_thinking": False}` for Qwen3.
        env_timeout: Seconds one env call may take (making the env and resetting it count as one
            call); None: no limit.
    """

    def __init__(
        self,
        tokenizer: Any,
        *,
        max_turns: int | None = None,
        max_completion_length: int = 1024,
        max_turn_tokens: int | None = None,
        stop_strings: Sequence[str] | None = None,
        env_kwargs: dict[str, Any] | None = None,
        system_prompt: str | None = None,
        num_env_workers: int = 8,
        eos_token_ids: Sequence[int] | None = None,
        chat_template_kwargs: dict[str, Any] | None = None,
        env_timeout: float | None = 300.0,
    ):
        if max_completion_length < 1 or (
            max_turn_tokens is not None and not 1 <= max_turn_tokens <= max_completion_length
        ):
            raise ValueError(
                f"need 1 <= max_turn_tokens ({max_turn_tokens}; None: the scenario's) <= max_completion_length "
                f"({max_completion_length})"
            )
        if env_timeout is not None and env_timeout <= 0:
            raise ValueError(f"env_timeout must be None (no limit) or > 0 seconds, got {env_timeout}")
        self.renderer = ChatRenderer(tokenizer, chat_template_kwargs)
        self.tokenizer = tokenizer
        self.max_turns = max_turns
        self.max_completion_length = max_completion_length
        self.max_turn_tokens = max_turn_tokens
        self.stop_strings = None if stop_strings is None else tuple(stop_strings)
        self._stops: dict[tuple[str, ...], StopStrings] = {}
        self.env_kwargs = dict(env_kwargs or {})
        self.system_prompt = system_prompt
        self.eos_token_ids = self.renderer.end_token_ids(eos_token_ids)
        self.num_env_workers = max(1, num_env_workers)
        self.env_timeout = env_timeout
        self._pool: dict[str, list[MultiTurnWrapper]] = {}
        #: Episodes ended by a failing env, over the engine's life.
        self.env_errors = 0
        #: Seconds spent generating and stepping envs in the last `run`.
        self.timing = {"generation": 0.0, "env": 0.0}

    # ---- envs -------------------------------------------------------------------------------------
    def _make(self, env_id: str) -> MultiTurnWrapper:
        import agentgym_envs  # noqa: F401  (registers the ids, also in worker processes)

        return MultiTurnWrapper(gym.make(env_id, **self.env_kwargs), system_prompt=self.system_prompt)

    def _take(self, tasks: Sequence[Task]) -> list[_Slot]:
        """A slot per task, with a pooled env where one is free (the others are made on first use)."""
        slots = []
        for task in tasks:
            pool = self._pool.get(task.env_id)
            slots.append(_Slot(task.env_id, pool.pop() if pool else None))
        return slots

    def _discard(self, slot: _Slot) -> None:
        """Never reuse the slot's env; close it on a daemon thread (closing a hung env may hang too)."""
        with slot.lock:
            slot.failed = True
            env, slot.env = slot.env, None
        if env is not None:
            threading.Thread(target=_close_quietly, args=(env,), name="agentgym-env-close", daemon=True).start()

    def close(self) -> None:
        for pool in self._pool.values():
            for env in pool:
                _close_quietly(env)
        self._pool.clear()

    # ---- episodes -----------------------------------------------------------------------------------
    def run(
        self, tasks: Sequence[Task], generate: GenerateFn, progress: Callable[[int], None] | None = None
    ) -> list[Episode]:
        """Play one episode per task; return them in the order of `tasks`.

        Args:
            tasks: What to play (repeat a task G times for a GRPO group).
            generate: The policy (`hf_generate_fn(model, ...)`, or a scripted one in tests).
            progress: Called with the number of episodes that just finished.
        """
        self.timing = {"generation": 0.0, "env": 0.0}
        slots = self._take(tasks)
        try:
            return self._play(tasks, slots, generate, progress)
        finally:  # healthy envs go back to the pool (also when generation raised)
            for slot in slots:
                if slot.env is not None and not slot.failed:
                    self._pool.setdefault(slot.env_id, []).append(slot.env)

    def _play(
        self, tasks: Sequence[Task], slots: list[_Slot], generate: GenerateFn, progress: Callable[[int], None] | None
    ) -> list[Episode]:
        started = time.perf_counter()
        resets = run_calls(
            [lambda s=s, t=t: self._reset(s, t) for s, t in zip(slots, tasks, strict=True)],
            self.num_env_workers,
            self.env_timeout,
        )
        self.timing["env"] += time.perf_counter() - started
        episodes: list[Episode] = []
        live = []
        for i, (slot, task, result) in enumerate(zip(slots, tasks, resets, strict=True)):
            if isinstance(result, Exception):
                episodes.append(self._failed_reset(task))
                self._fail(episodes[i], slot, result, progress)
            else:
                episodes.append(result)
                live.append(i)

        # Sharded weights (`agentgym_train.rollout.lockstep`): while any process has a live episode, every process
        # calls `generate`, with no contexts once its own episodes have all ended.
        sync_live = getattr(generate, "sync_live", None)
        takes_stop = _takes_stop(generate)
        # one limit per call for every episode of the run (and so on every process of a sharded run):
        # replies over their own episode's budget are cut to it below
        limit = max([e.max_turn_tokens for e in episodes] + [self.max_turn_tokens or 1])
        while sync_live(bool(live)) if sync_live is not None else live:
            contexts = [episodes[i].prompt_ids + episodes[i].completion_ids for i in live]
            started = time.perf_counter()
            if takes_stop:
                outputs = generate(contexts, limit, stop=[self._stop_strings(episodes[i].stop_strings) for i in live])
            else:
                outputs = generate(contexts, limit)
            self.timing["generation"] += time.perf_counter() - started
            replies = []
            for i, (ids, logps) in zip(live, outputs, strict=True):
                episode = episodes[i]
                ids, logps, end = self._end_reply(episode, ids, logps)
                episode.reply_spans.append((len(episode.completion_ids), len(episode.completion_ids) + len(ids)))
                episode.completion_ids += ids
                episode.logprobs += logps
                episode.env_mask += [1] * len(ids)
                reply = self.tokenizer.decode(ids[:-1] if end is not None else ids, skip_special_tokens=False)
                episode.replies.append(reply)
                replies.append((reply, end))

            started = time.perf_counter()
            steps = run_calls(
                [lambda env=slots[i].env, r=reply: env.step(r) for i, (reply, _) in zip(live, replies, strict=True)],
                self.num_env_workers,
                self.env_timeout,
            )
            self.timing["env"] += time.perf_counter() - started

            still_live = []
            for j, i in enumerate(live):
                episode, slot = episodes[i], slots[i]
                episode.turns += 1
                if isinstance(steps[j], Exception):
                    self._fail(episode, slot, steps[j], progress)
                    continue
                observation, reward, terminated, truncated, info = steps[j]
                episode.episode_return += float(reward)
                episode.turn_rewards.append(float(reward))
                episode.invalid_replies += bool(info.get("format_error", False))
                episode.success = bool(info.get("success", False))
                episode.terminated, episode.truncated = bool(terminated), bool(truncated)
                if not episode.done:
                    end = replies[j][1]
                    closed = end == self.renderer.end_of_turn_id
                    history = slot.env.messages[:-1]
                    chunk = self.renderer.observation_ids(observation, closed=closed, history=history)
                    used = len(episode.completion_ids) + len(chunk) + episode.max_turn_tokens
                    if used > self.max_completion_length:
                        episode.budget_truncated = True
                    else:
                        if end is not None and not closed:  # another end token: the end-of-turn token replaces it
                            del episode.completion_ids[-1], episode.logprobs[-1], episode.env_mask[-1]
                            start, stop = episode.reply_spans[-1]
                            episode.reply_spans[-1] = (start, stop - 1)
                        episode.state_keys.append(state_key(slot.env, observation))
                        episode.completion_ids += chunk
                        episode.logprobs += [0.0] * len(chunk)
                        episode.env_mask += [0] * len(chunk)
                        still_live.append(i)
                        continue
                if episode.stopped_by[-1] == "stop_string" and len(episode.completion_ids) < self.max_completion_length:
                    # the last reply ended at a stop string: closed as usual, by a token the model did not sample
                    episode.completion_ids.append(self.renderer.end_of_turn_id)
                    episode.logprobs.append(0.0)
                    episode.env_mask.append(0)
                episode.messages = list(slot.env.messages)
                episode.stats = {**(info.get("episode") or self._stats(episode)), **_stop_stats(episode)}
                if progress is not None:
                    progress(1)
            live = still_live
        return episodes

    def _stop_strings(self, strings: tuple[str, ...]) -> StopStrings:
        if strings not in self._stops:
            self._stops[strings] = StopStrings(self.tokenizer, strings)
        return self._stops[strings]

    def _end_reply(
        self, episode: Episode, ids: list[int], logps: list[float]
    ) -> tuple[list[int], list[float], int | None]:
        """A sampled reply cut to the episode's budget and stop strings; records how it ended.

        Returns the ids and logprobs to keep and the end token they end on (None: they end on no end
        token, so the next turn starts with the end-of-turn token).
        """
        ids, logps = list(ids[: episode.max_turn_tokens]), list(logps[: episode.max_turn_tokens])
        end = ids[-1] if ids and ids[-1] in self.eos_token_ids else None
        # a backend that does not apply stop strings samples past them: cut there too
        keep = self._stop_strings(episode.stop_strings).cut(ids[:-1] if end is not None else ids)
        if keep is not None:
            ids, logps, end = ids[:keep], logps[:keep], None
            episode.stopped_by.append("stop_string")
        else:
            episode.stopped_by.append("eos" if end is not None else "budget")
        return ids, logps, end

    def _reset(self, slot: _Slot, task: Task) -> Episode:
        if slot.env is None:
            env = self._make(task.env_id)
            with slot.lock:
                abandoned, slot.env = slot.failed, env
            if abandoned:  # made after its call timed out: nobody will use it
                _close_quietly(env)
                raise EnvTimeoutError("the env was made after its call had timed out")
        env = slot.env
        env.max_turns = self.max_turns if self.max_turns is not None else env.unwrapped.default_max_turns
        observation, info = env.reset(seed=task.seed, options=task.options())
        budget = self.max_turn_tokens or min(turn_tokens_for(env), self.max_completion_length)
        stops = self.stop_strings if self.stop_strings is not None else stop_strings_for(env)
        return Episode(
            task=task,
            prompt_ids=self.renderer.prompt_ids(env.messages),
            category=info.get("category"),
            kind=info.get("kind"),
            max_turn_tokens=budget,
            stop_strings=stops,
            state_keys=[state_key(env, observation)],
        )

    def _failed_reset(self, task: Task) -> Episode:
        """The stand-in episode of a task whose env could not be made or reset: a placeholder prompt and
        one end-of-turn token with mask 0 (nothing sampled, nothing to learn; trainers need a token)."""
        note = [{"role": "user", "content": f"({task.env_id}: the env failed before its first observation)"}]
        eos = self.eos_token_ids[0]
        return Episode(
            task=task, prompt_ids=self.renderer.prompt_ids(note), completion_ids=[eos], logprobs=[0.0], env_mask=[0]
        )

    def _fail(self, episode: Episode, slot: _Slot, error: Exception, progress: Callable[[int], None] | None) -> None:
        """End `episode` where its env failed: score 0, counted, the env discarded."""
        env = slot.env
        self._discard(slot)
        self.env_errors += 1
        episode.env_error = f"{type(error).__name__}: {error}"
        episode.episode_return, episode.success = 0.0, False
        episode.messages = list(env.messages) if env is not None else []
        episode.stats = {
            **self._stats(episode),
            **_stop_stats(episode),
            "truncated": False,
            "budget_truncated": False,
            "env_error": episode.env_error,
        }
        if progress is not None:
            progress(1)

    @staticmethod
    def _stats(episode: Episode) -> dict[str, Any]:
        """Statistics of an episode the engine ended (the wrapper only reports finished ones)."""
        return {
            "turns": episode.turns,
            "return": episode.episode_return,
            "success": episode.success,
            "invalid_replies": episode.invalid_replies,
            "terminated": False,
            "truncated": True,
            "budget_truncated": True,
        }


def state_key(env: Any, observation: str) -> str:
    """A digest of the env's current state: its `state_key()` where it declares one (equal states with
    different texts then match), else the observation text (GiGPO's anchor states)."""
    declared = getattr(env.unwrapped, "state_key", None)
    key = declared() if callable(declared) else None
    text = repr(key) if key is not None else f"observation:{observation}"
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def _stop_stats(episode: Episode) -> dict[str, int]:
    return {"stop_string_hits": episode.stop_string_hits, "replies_cut": episode.replies_cut}


def _takes_stop(generate: Any) -> bool:
    """Whether `generate` accepts the `stop` keyword (per context `StopStrings`)."""
    try:
        parameters = inspect.signature(generate).parameters.values()
    except (TypeError, ValueError):  # a callable without a readable signature
        return False
    return any(p.name == "stop" or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _close_quietly(env: Any) -> None:
    try:
        env.close()
    except Exception as error:  # a dead backend may fail to close; it is dropped either way
        logger.warning("closing a failed env raised %s: %s", type(error).__name__, error)


def summarize(episodes: Sequence[Episode]) -> dict[str, float]:
    """Mean return, success rate, mean turns, truncation, invalid-reply and env-error rates of a batch, and
    how often replies ended at a stop string or were cut by the reply budget (per reply)."""
    n = max(1, len(episodes))
    turns = sum(e.turns for e in episodes)
    replies = sum(len(e.stopped_by) for e in episodes)
    return {
        "return": sum(e.episode_return for e in episodes) / n,
        "success": sum(e.success for e in episodes) / n,
        "turns": turns / n,
        "truncated": sum(e.truncated or e.budget_truncated for e in episodes) / n,
        "budget_truncated": sum(e.budget_truncated for e in episodes) / n,
        "invalid_reply_rate": sum(e.invalid_replies for e in episodes) / max(1, turns),
        "stop_string_rate": sum(e.stop_string_hits for e in episodes) / max(1, replies),
        "reply_cut_rate": sum(e.replies_cut for e in episodes) / max(1, replies),
        "env_error_rate": sum(e.env_error is not None for e in episodes) / n,
        "model_tokens": sum(sum(e.env_mask) for e in episodes) / n,
        "completion_tokens": sum(len(e.completion_ids) for e in episodes) / n,
    }
