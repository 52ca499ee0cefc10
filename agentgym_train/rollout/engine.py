"""The multi-turn rollout engine: many episodes at once, token-in and token-out.

Lockstep (`rollout_mode="lockstep"`): each turn, every live episode generates together (one call of a
`TurnGenerator` backend, `agentgym_train.rollout.backends`), then the env steps run concurrently
(`agentgym_train.rollout.calls`). Async (`rollout_mode="async"`, `agentgym_train.rollout.asynchronous`):
no turn barrier; each call generates for the episodes whose env calls have returned, while the other
envs step. Both modes keep each turn's books in the same methods (`_take_reply`, `_stepped`), so a
scripted policy plays the same episodes in both.
An episode's tokens are one append-only sequence:

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

Faults: each env call runs on a daemon thread with a timeout (`env_timeout`, `run_calls`); an env that
raises or hangs ends its episode (`env_error`, return 0), is dropped and replaced, and the rollout goes on.

Envs on a Ray cluster (`env_pool`, an `agentgym_envs.cluster.RayEnvPool`): the envs live on Ray actors,
each batch of resets or steps is one Ray call per actor, and an env whose actor died or timed out ends its
episode with `env_error` as above.

Several processes with sharded weights (FSDP, ZeRO-3): a backend with a `sync_live(any_local)` hook
makes the turn loop run while any process has a live episode, calling it with no contexts where none
is left here, so every process makes the same forward passes (`agentgym_train.rollout.backends.lockstep`).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from agentgym_train.rollout import asynchronous
from agentgym_train.rollout.backends.protocol import TurnGenerator
from agentgym_train.rollout.calls import EnvTimeoutError, run_calls
from agentgym_train.rollout.episode import Episode, Task
from agentgym_train.rollout.stops import StopStrings
from agentgym_train.rollout.templates import ChatRenderer
from agentgym_wrappers import ContextPolicy, MultiTurnWrapper, get_context
from agentgym_wrappers.stops import turn_tokens_for

logger = logging.getLogger(__name__)
#: How a rollout's episodes advance: all together turn by turn, or each on its own.
ROLLOUT_MODES = ("lockstep", "async")


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
        record_states: Keep each turn's starting state (`Episode.state_keys`, GiGPO's anchor states); off
            by default, since a state digest costs a sizeable share of a cheap env's step.
        env_pool: Where envs live: None (this process, on threads) or an `agentgym_envs.cluster.RayEnvPool`
            (Ray actors; `env_timeout` then bounds each actor's batch, `num_env_workers` is unused).
        rollout_mode: "lockstep" (each turn every live episode generates in one call, then every env
            steps) or "async" (each episode goes back to the generator as soon as its env call returns:
            `agentgym_train.rollout.asynchronous`; a generator whose calls are collectives across
            processes falls back to lockstep, logged). A plain attribute.
        action_format: None (each scenario's own parser) or "tools": the model acts through the chat
            template's native tool calls (`MultiTurnWrapper(parser="tools")`); prompts and observations are
            rendered with the env's tool schemas and answered as `tool` turns (`ChatRenderer`). Envs in
            process only (the Ray pool mirrors a plain chat).
        context: What each reply is sampled from (`agentgym_wrappers.get_context`): None or "full" (the
            episode's one append-only sequence) or a managed context ("window:k", "summary:k", a
            `ContextPolicy`): each turn's prompt is then the template's rendering of the policy's chat
            (`Episode.turn_prompts`), as deployment renders it, and `max_completion_length` bounds each
            turn's prompt beyond the first one plus its reply. The episode's sequence is still recorded
            whole, but it is not what the replies were sampled from: trainers take only the full context.
            Lockstep and envs in process only.
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
        record_states: bool = False,
        env_pool: Any | None = None,
        rollout_mode: str = "lockstep",
        action_format: str | None = None,
        context: str | ContextPolicy | None = None,
    ):
        if max_completion_length < 1 or (
            max_turn_tokens is not None and not 1 <= max_turn_tokens <= max_completion_length
        ):
            raise ValueError(
                f"need 1 <= max_turn_tokens ({max_turn_tokens}; None: the scenario's) <= max_completion_length "
                f"({max_completion_length})"
            )
        if rollout_mode not in ROLLOUT_MODES:
            raise ValueError(f"rollout_mode must be one of {', '.join(ROLLOUT_MODES)}, got {rollout_mode!r}")
        if env_timeout is not None and env_timeout <= 0:
            raise ValueError(f"env_timeout must be None (no limit) or > 0 seconds, got {env_timeout}")
        if action_format not in (None, "tools"):
            raise ValueError(f"action_format must be None (each scenario's) or 'tools', got {action_format!r}")
        if action_format == "tools" and env_pool is not None:
            raise ValueError("action_format 'tools' runs envs in this process: the Ray pool mirrors a plain chat")
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
        self.record_states = record_states
        self.env_pool = env_pool
        self.rollout_mode = rollout_mode
        self.action_format = action_format
        self.context = get_context(context)
        if not self.context.full and env_pool is not None:
            raise ValueError(f"context {self.context.spec!r} runs envs in this process: the Ray pool keeps a full chat")
        #: The mode the last `run` played in ("lockstep" where async fell back to it).
        self.last_mode = rollout_mode
        self._pool: dict[str, list[MultiTurnWrapper]] = {}
        #: Episodes ended by a failing env, over the engine's life.
        self.env_errors = 0
        #: Seconds of the last `run` spent generating, and waiting for envs with nothing to generate.
        self.timing = {"generation": 0.0, "env": 0.0}

    # ---- envs -------------------------------------------------------------------------------------
    def _make(self, env_id: str) -> MultiTurnWrapper:
        import agentgym_envs  # noqa: F401  (registers the ids, also in worker processes)

        if self.env_pool is not None:  # a PooledEnv: made on its actor at its first reset
            wrapper = {"system_prompt": self.system_prompt, "stop_strings": self.stop_strings}
            return self.env_pool.acquire(env_id, self.env_kwargs, wrapper)
        env = gym.make(env_id, **self.env_kwargs)
        return MultiTurnWrapper(
            env,
            system_prompt=self.system_prompt,
            stop_strings=self.stop_strings,
            parser=self.action_format,
            context=self.context,
        )

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
        self, tasks: Sequence[Task], generate: TurnGenerator, progress: Callable[[int], None] | None = None
    ) -> list[Episode]:
        """Play one episode per task; return them in the order of `tasks`.

        Args:
            tasks: What to play (repeat a task G times for a GRPO group).
            generate: The policy's backend (`make_generator(model, ...)`, or a scripted one in tests).
            progress: Called with the number of episodes that just finished.
        """
        self.timing = {"generation": 0.0, "env": 0.0}
        slots = self._take(tasks)
        try:
            if self.rollout_mode == "async" and not self.context.full:
                raise ValueError(f"rollout_mode 'async' plays the full context only, not {self.context.spec!r}")
            if self.rollout_mode == "async" and asynchronous.supports(generate):
                self.last_mode = "async"
                return asynchronous.play(self, tasks, slots, generate, progress)
            if self.rollout_mode == "async":
                asynchronous.log_fallback(generate)
            self.last_mode = "lockstep"
            return self._play(tasks, slots, generate, progress)
        finally:  # healthy envs go back to the pool (also when generation raised)
            for slot in slots:
                if slot.env is not None and not slot.failed:
                    self._pool.setdefault(slot.env_id, []).append(slot.env)

    def _play(
        self, tasks: Sequence[Task], slots: list[_Slot], generate: TurnGenerator, progress: Callable[[int], None] | None
    ) -> list[Episode]:
        """Lockstep: each turn every live episode generates in one call, then every env steps."""
        started = time.perf_counter()
        resets = self._reset_all(slots, tasks)
        self.timing["env"] += time.perf_counter() - started
        episodes = [self._started(t, s, r, progress) for t, s, r in zip(tasks, slots, resets, strict=True)]
        live = [i for i, episode in enumerate(episodes) if not episode.done]

        # Sharded weights (`agentgym_train.rollout.backends.lockstep`): while any process has a live episode,
        # every process calls `generate`, with no contexts once its own episodes have all ended.
        sync_live = getattr(generate, "sync_live", None)
        # one limit per call for every episode of the run (and so on every process of a sharded run):
        # replies over their own episode's budget are cut to it below
        limit = max([e.max_turn_tokens for e in episodes] + [self.max_turn_tokens or 1])
        while sync_live(bool(live)) if sync_live is not None else live:
            ends = self._generate([episodes[i] for i in live], generate, limit)
            started = time.perf_counter()
            steps = self._step_all([slots[i].env for i in live], [episodes[i].replies[-1] for i in live])
            self.timing["env"] += time.perf_counter() - started
            live = [
                i
                for i, step, end in zip(live, steps, ends, strict=True)
                if self._stepped(episodes[i], slots[i], step, end, progress)
            ]
        return episodes

    # ---- one turn's bookkeeping, shared by lockstep and async rollouts (`asynchronous`) ---------------
    def _started(
        self, task: Task, slot: _Slot, result: Episode | Exception, progress: Callable[[int], None] | None
    ) -> Episode:
        """The episode of a reset's `result` (a new `Episode`, or the exception that ended it before it began)."""
        if isinstance(result, Episode):
            return result
        episode = self._failed_reset(task)
        self._fail(episode, slot, result, progress)
        return episode

    def _generate(self, episodes: list[Episode], generate: TurnGenerator, limit: int) -> list[int | None]:
        """One call of `generate` for `episodes` (all live); records each reply and returns the end token
        each ended on (None: none, see `_end_reply`)."""
        contexts = [e.turn_prompts[-1] if e.turn_prompts else e.prompt_ids + e.completion_ids for e in episodes]
        started = time.perf_counter()
        outputs = generate(contexts, limit, stop=[self._stop_strings(e.stop_strings) for e in episodes])
        self.timing["generation"] += time.perf_counter() - started
        return [self._take_reply(e, ids, logps) for e, (ids, logps) in zip(episodes, outputs, strict=True)]

    def _take_reply(self, episode: Episode, ids: list[int], logps: list[float]) -> int | None:
        """Append a sampled reply (cut by `_end_reply`) to the episode; return the end token it ended on."""
        ids, logps, end = self._end_reply(episode, ids, logps)
        episode.reply_spans.append((len(episode.completion_ids), len(episode.completion_ids) + len(ids)))
        episode.completion_ids += ids
        episode.logprobs += logps
        episode.env_mask += [1] * len(ids)
        episode.replies.append(self.tokenizer.decode(ids[:-1] if end is not None else ids, skip_special_tokens=False))
        return end

    def _stepped(
        self, episode: Episode, slot: _Slot, step: Any, end: int | None, progress: Callable[[int], None] | None
    ) -> bool:
        """Take an env step's result (or the exception it raised) for the episode's last reply, which ended
        on `end`: the turn counted, the observation rendered as the next user turn unless the episode ended
        (by the env, the turn limit, the token budget or a failure), then its statistics. Returns whether the
        episode goes on."""
        episode.turns += 1
        if isinstance(step, Exception):
            self._fail(episode, slot, step, progress)
            return False
        observation, reward, terminated, truncated, info = step
        episode.episode_return += float(reward)
        episode.turn_rewards.append(float(reward))
        episode.invalid_replies += bool(info.get("format_error", False))
        episode.success = bool(info.get("success", False))
        episode.terminated, episode.truncated = bool(terminated), bool(truncated)
        if not episode.done:
            closed = end == self.renderer.end_of_turn_id
            history = slot.env.transcript[:-1] if episode.turn_prompts else slot.env.messages[:-1]
            chunk = self.renderer.observation_ids(observation, closed=closed, history=history, tools=_tools(slot.env))
            used = len(episode.completion_ids) + len(chunk) + episode.max_turn_tokens
            if episode.turn_prompts:  # a managed context: the next turn's prompt, not the whole episode
                prompt = self.renderer.prompt_ids(slot.env.messages, tools=_tools(slot.env))
                used = len(prompt) - len(episode.prompt_ids) + episode.max_turn_tokens
            if used > self.max_completion_length:
                episode.budget_truncated = True
            else:
                if end is not None and not closed:  # another end token: the end-of-turn token replaces it
                    del episode.completion_ids[-1], episode.logprobs[-1], episode.env_mask[-1]
                    start, stop = episode.reply_spans[-1]
                    episode.reply_spans[-1] = (start, stop - 1)
                if self.record_states:
                    episode.state_keys.append(state_key(slot.env, observation))
                if episode.turn_prompts:
                    episode.turn_prompts.append(prompt)
                episode.completion_ids += chunk
                episode.logprobs += [0.0] * len(chunk)
                episode.env_mask += [0] * len(chunk)
                return True
        if episode.stopped_by[-1] == "stop_string" and len(episode.completion_ids) < self.max_completion_length:
            # the last reply ended at a stop string: closed as usual, by a token the model did not sample
            episode.completion_ids.append(self.renderer.end_of_turn_id)
            episode.logprobs.append(0.0)
            episode.env_mask.append(0)
        episode.messages = list(slot.env.transcript if episode.turn_prompts else slot.env.messages)
        episode.stats = {**(info.get(slot.env.stats_key) or self._stats(episode)), **_stop_stats(episode)}
        if progress is not None:
            progress(1)
        return False

    # ---- env calls ----------------------------------------------------------------------------------
    def _reset_all(self, slots: list[_Slot], tasks: Sequence[Task]) -> list[Any]:
        """Each slot's new `Episode`, or the exception its env's making or reset raised."""
        if self.env_pool is None:
            return run_calls(self._reset_calls(slots, tasks), self.num_env_workers, self.env_timeout)
        return self._pool_reset(slots, tasks)

    def _reset_calls(self, slots: Sequence[_Slot], tasks: Sequence[Task]) -> list[Callable[[], Any]]:
        """One call per slot that makes (if needed) and resets its env: the new `Episode`, or raises."""
        if self.env_pool is None:
            return [lambda s=s, t=t: self._reset(s, t) for s, t in zip(slots, tasks, strict=True)]
        return [lambda s=s, t=t: _raised(self._pool_reset([s], [t])[0]) for s, t in zip(slots, tasks, strict=True)]

    def _pool_reset(self, slots: Sequence[_Slot], tasks: Sequence[Task]) -> list[Any]:
        """Reset the slots' envs on the Ray pool in one batch: per slot its `Episode` or an exception."""
        for slot in slots:
            if slot.env is None:
                slot.env = self._make(slot.env_id)
        envs = [slot.env for slot in slots]
        results = self.env_pool.reset(
            envs,
            [t.seed for t in tasks],
            [t.options() for t in tasks],
            max_turns=self.max_turns,
            timeout=self.env_timeout,
            with_state=self.record_states,
        )
        return [
            r if isinstance(r, Exception) else self._episode(env, task, r[0], r[1])
            for env, task, r in zip(envs, tasks, results, strict=True)
        ]

    def _step_all(self, envs: list[Any], replies: list[str]) -> list[Any]:
        """Each env's step result for its reply, or the exception the step raised."""
        if self.env_pool is None:
            return run_calls(self._step_calls(envs, replies), self.num_env_workers, self.env_timeout)
        return self.env_pool.step(envs, replies, timeout=self.env_timeout, with_state=self.record_states)

    def _step_calls(self, envs: Sequence[Any], replies: Sequence[str]) -> list[Callable[[], Any]]:
        """One call per env that steps it with its reply: the step's result, or raises."""
        if self.env_pool is None:
            return [lambda env=env, r=reply: env.step(r) for env, reply in zip(envs, replies, strict=True)]
        pool, timeout, states = self.env_pool, self.env_timeout, self.record_states
        return [
            lambda env=env, r=reply: _raised(pool.step([env], [r], timeout=timeout, with_state=states)[0])
            for env, reply in zip(envs, replies, strict=True)
        ]

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
        env.limit_turns(self.max_turns)
        observation, info = env.reset(seed=task.seed, options=task.options())
        return self._episode(env, task, observation, info)

    def _episode(self, env: Any, task: Task, observation: str, info: dict[str, Any]) -> Episode:
        """A new episode of `env` (a `MultiTurnWrapper`, or a `PooledEnv` that mirrors one), just reset."""
        budget = self.max_turn_tokens or min(turn_tokens_for(env), self.max_completion_length)
        prompt = self.renderer.prompt_ids(env.messages, tools=_tools(env))
        return Episode(
            task=task,
            prompt_ids=prompt,
            turn_prompts=[] if self.context.full else [prompt],
            category=info.get("category"),
            kind=info.get("kind"),
            max_turn_tokens=budget,
            stop_strings=env.stop_strings,
            state_keys=[state_key(env, observation)] if self.record_states else [],
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
        episode.messages = list(getattr(env, "transcript", None) or env.messages) if env is not None else []
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


def _raised(result: Any) -> Any:
    """A pool call's result, raising the exception it holds (as an in-process call would have)."""
    if isinstance(result, BaseException):
        raise result
    return result


def _stop_stats(episode: Episode) -> dict[str, int]:
    return {"stop_string_hits": episode.stop_string_hits, "replies_cut": episode.replies_cut}


def _tools(env: Any) -> list[dict[str, Any]] | None:
    """The tool schemas `env`'s chat renders with: None unless it acts by tool calls (a pooled env never does)."""
    return getattr(env, "tools", None)


def _close_quietly(env: Any) -> None:
    try:
        env.close()
    except Exception as error:  # a dead backend may fail to close; it is dropped either way
        logger.warning("closing a failed env raised %s: %s", type(error).__name__, error)
