"""Every scenario as an agent loop of verl (`verl.experimental.agent_loop`, extra `[verl]`), named `agentgym`.

verl's `AgentLoopWorker` makes one agent loop per dataset row (`hydra.utils.instantiate` of the registry
entry that the row's `agent_name` names) and awaits `run(sampling_params, **row)`. The loop talks to the
rollout servers token-in/token-out through the server manager's `generate(request_id, prompt_ids=...,
sampling_params=...)`, which answers with a `TokenOutput` (the sampled ids, their logprobs), and returns an
`AgentLoopOutput`. `AgentGymAgentLoop` plays one episode of a registered id there:

- The row names the task: its `extra_info` holds `env_id`, `task_id`, `split`, `seed` (and `max_turns`
  where given), as `dataset_rows` writes them (`agentgym prepare verl ENV_ID` writes the parquet). The
  row's `prompt` is not played: the env's own first chat is (the rows hold that same chat, so verl's
  prompt-length filter sees the real lengths).
- The operator's settings are the registry entry's keys (`agent_loop_config`, written to the YAML that
  `actor_rollout_ref.rollout.agent.agent_loop_config_path` names): `env_id` (for rows without one; a remote
  env is `AgentGym/Remote-v0` with `env_kwargs: {base_url: ..., env_id: ...}`), `env_kwargs`, `split`,
  `max_turns`, `max_turn_tokens`, `stop_strings`, `system_prompt`, `eos_token_ids`, `env_timeout`.
- The episode is played through `agentgym_wrappers.MultiTurnWrapper` exactly as our `RolloutEngine` plays
  it, token for token (`agentgym_train.rollout.templates.ChatRenderer` renders; verl's own Continuous Token
  builder is not used): the prompt is the chat template over [system, first observation] with the
  generation prompt; each reply is the ids the server sampled, asked for at most the reply budget
  (`max_turn_tokens`, else the scenario's `default_max_turn_tokens`) and with the scenario's stop strings
  (`stop`), then cut token-exactly at the budget and at the first stop string (`StopStrings`); each
  observation is rendered as the next user turn (response_mask 0), after an end-of-turn token the model
  did not sample (mask 0) where its reply did not end on one. The `response_length` budget covers every
  turn: when the next observation plus a full reply would not fit, the episode ends there.
- The output: `prompt_ids`, `response_ids`, `response_mask` (1 sampled, 0 the env's and the template's
  tokens), `response_logprobs` (where the server returned logprobs; 0.0 off the model's tokens),
  `reward_score` (the episode's return, i.e. its score in [0, 1]: verl puts it on the last response token
  as `rm_scores` and skips its reward function), `num_turns` (messages in the sequence: the first
  observation, the replies and the observations after them), `metrics` (`generate_sequences`: seconds
  generating; `tool_calls`: seconds in env calls) and `extra_fields`: `turn_scores` (the env's reward of
  each turn, verl's key), `tool_rewards` (empty), `reward_extra_info` (`success`, `turns`, `truncated`,
  `invalid_replies`, `env_error`: verl logs them per sample) and `agentgym` (the task, each reply's
  `[start, end)` span in the response, how it ended, each turn's parsed action and validity).
- Envs are made and stepped on threads (the event loop serves the worker's other episodes meanwhile) and
  kept in a per-process pool between episodes (`close_envs()` frees them, as the process's exit does). An
  env that raises or runs past `env_timeout` ends its episode with reward 0 and a response mask of zeros
  (nothing of it enters the loss) and is discarded.

Only the full context is played (one append-only sequence, verl's response layout); the scenarios'
native tool calls (`action_format: tools`) are not.

Example (the YAML and parquet that `agentgym prepare verl` writes; verl's overrides):
    >>> from agentgym_envs.adapters.verl import agent_loop_config, dataset_rows
    >>> entry = agent_loop_config(env_kwargs={"show_actions": False})[0]
    >>> entry["name"], entry["_target_"], entry["env_kwargs"]
    ('agentgym', 'agentgym_envs.adapters.verl.AgentGymAgentLoop', {'show_actions': False})
    >>> row = dataset_rows("AgentGym/TextCraft-v0", split="test", count=1)[0]
    >>> row["agent_name"], row["extra_info"]["env_id"], [m["role"] for m in row["prompt"]]
    ('agentgym', 'AgentGym/TextCraft-v0', ['system', 'user'])
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

logger = logging.getLogger(__name__)

#: The name the loop is registered under (a row's `agent_name`, or `default_agent_loop`).
AGENT_NAME = "agentgym"
#: Where hydra finds the class (built on first access, see `__getattr__`).
TARGET = "agentgym_envs.adapters.verl.AgentGymAgentLoop"
#: What `reward_extra_info` reports, the same keys for every sample (verl reads them off the first one).
REWARD_INFO_KEYS = ("success", "turns", "truncated", "budget_truncated", "invalid_replies", "env_error")


def _plain(value: Any) -> Any:
    """An OmegaConf container as plain dicts and lists (verl's configs and hydra's kwargs are DictConfigs)."""
    try:
        from omegaconf import OmegaConf
    except ImportError:  # pragma: no cover - verl depends on omegaconf
        return value
    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _scalar(value: Any) -> Any:
    """A numpy scalar (verl hands rows over as numpy object arrays) as a Python one."""
    return value.item() if hasattr(value, "item") and not isinstance(value, str | bytes) else value


# ---- envs ----------------------------------------------------------------------------------------------
_POOL: dict[str, list[Any]] = {}
_POOL_LOCK = threading.Lock()


def _pool_key(env_id: str, env_kwargs: Mapping[str, Any], system_prompt: str | None, stops: Any) -> str:
    return json.dumps([env_id, env_kwargs, system_prompt, stops], sort_keys=True, default=repr)


def _take_env(key: str, make: Callable[[], Any]) -> Any:
    with _POOL_LOCK:
        pool = _POOL.get(key)
        if pool:
            return pool.pop()
    return make()


def _give_env(key: str, env: Any) -> None:
    with _POOL_LOCK:
        _POOL.setdefault(key, []).append(env)


def close_envs() -> int:
    """Close every env this process keeps between episodes; return how many."""
    with _POOL_LOCK:
        envs = [env for pool in _POOL.values() for env in pool]
        _POOL.clear()
    for env in envs:
        _close_quietly(env)
    return len(envs)


atexit.register(close_envs)  # a worker process that ends frees its JVMs and browser sessions


def _close_quietly(env: Any) -> None:
    try:
        env.close()
    except Exception as error:  # a dead backend may fail to close; it is dropped either way
        logger.warning("closing an env raised %s: %s", type(error).__name__, error)


def _on_thread(call: Callable[[], Any]) -> asyncio.Future:
    """`call()` on a daemon thread of its own, as a future of this event loop (a hung call is abandoned)."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(result: Any, error: BaseException | None) -> None:
        if not future.done():
            future.set_exception(error) if error is not None else future.set_result(result)

    def body() -> None:
        try:
            result = call()
        except BaseException as error:  # the env's failure is this call's result
            loop.call_soon_threadsafe(settle, None, error)
        else:
            loop.call_soon_threadsafe(settle, result, None)

    threading.Thread(target=body, name="agentgym-verl-env", daemon=True).start()
    return future


# ---- the renderer --------------------------------------------------------------------------------------
_RENDERERS: dict[tuple[int, str], tuple[Any, Any]] = {}


def _renderer(tokenizer: Any, chat_template_kwargs: Mapping[str, Any]) -> Any:
    """One `ChatRenderer` per tokenizer and template kwargs (it probes the template once)."""
    from agentgym_train.rollout.templates import ChatRenderer

    key = (id(tokenizer), json.dumps(chat_template_kwargs, sort_keys=True, default=repr))
    held = _RENDERERS.get(key)
    if held is None or held[0] is not tokenizer:
        held = _RENDERERS[key] = (tokenizer, ChatRenderer(tokenizer, dict(chat_template_kwargs)))
    return held[1]


# ---- the agent loop ------------------------------------------------------------------------------------
@functools.cache
def agent_loop_class() -> type:
    """The `AgentLoopBase` subclass (made on first use, when verl is imported), registered as `agentgym` unless
    verl's registry already has an entry of that name."""
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopOutput, _agent_loop_registry, register

    import agentgym_envs  # noqa: F401  (registers the ids)
    from agentgym_train.rollout.calls import EnvTimeoutError
    from agentgym_train.rollout.stops import StopStrings
    from agentgym_wrappers import MultiTurnWrapper
    from agentgym_wrappers.stops import turn_tokens_for

    class AgentGymAgentLoop(AgentLoopBase):
        """One episode of a registered AgentGym id per dataset row (see the module docstring).

        Args:
            *args: verl's (`trainer_config`, `server_manager`, `tokenizer`, `processor`, `dataset_cls`,
                `data_config`), passed on to `AgentLoopBase`.
            env_id: The scenario of rows whose `extra_info` names none.
            env_kwargs: The scenario's constructor kwargs (the operator's).
            split: The split of rows that name none.
            max_turns: Turn limit (None: the scenario's `default_max_turns`); a row's `max_turns` wins.
            max_turn_tokens: Most tokens one reply may have (None: the scenario's `default_max_turn_tokens`,
                at most `response_length`).
            stop_strings: Where replies stop (None: the scenario's; empty: end tokens and the budget only).
            system_prompt: Overrides the scenario's system prompt.
            eos_token_ids: Tokens that end a reply besides the template's end-of-turn token (default: the
                tokenizer's EOS).
            env_timeout: Seconds one env call may take (None: no limit).
            **kwargs: verl's other keywords (`hf_model_type`, `tools`, the entry's `name`).
        """

        def __init__(
            self,
            *args: Any,
            env_id: str | None = None,
            env_kwargs: Mapping[str, Any] | None = None,
            split: str = "train",
            max_turns: int | None = None,
            max_turn_tokens: int | None = None,
            stop_strings: Sequence[str] | None = None,
            system_prompt: str | None = None,
            eos_token_ids: Sequence[int] | None = None,
            env_timeout: float | None = 300.0,
            **kwargs: Any,
        ):
            kwargs.pop("name", None)  # the registry entry's own key, handed on by hydra
            super().__init__(*args, **kwargs)
            self.env_id = env_id
            self.env_kwargs = dict(_plain(env_kwargs) or {})
            self.split = split
            self.max_turns = max_turns
            self.max_turn_tokens = max_turn_tokens
            self.stop_strings = None if stop_strings is None else tuple(_plain(stop_strings))
            self.system_prompt = system_prompt
            self.env_timeout = env_timeout
            self.prompt_length = int(self.rollout_config.prompt_length)
            self.response_length = int(self.rollout_config.response_length)
            self.renderer = _renderer(self.tokenizer, _plain(self.apply_chat_template_kwargs) or {})
            eos = None if eos_token_ids is None else [int(i) for i in _plain(eos_token_ids)]
            self.end_ids = self.renderer.end_token_ids(eos)

        # ---- the task --------------------------------------------------------------------------------
        def task_of(self, row: Mapping[str, Any]) -> dict[str, Any]:
            """`env_id`, `task_id`, `split`, `seed`, `max_turns` of a row (its `extra_info`, then its columns)."""
            info = {**dict(_plain(row.get("extra_info")) or {}), **{k: v for k, v in row.items() if k != "extra_info"}}
            env_id = info.get("env_id") or self.env_id
            if not env_id:
                raise ValueError("the row names no env_id (extra_info.env_id) and the agent loop has none (env_id=)")
            seed, task_id, max_turns = (_scalar(info.get(k)) for k in ("seed", "task_id", "max_turns"))
            return {
                "env_id": str(env_id),
                "task_id": task_id,
                "split": str(info.get("split") or self.split),
                "seed": None if seed is None else int(seed),
                "max_turns": int(max_turns) if max_turns is not None else self.max_turns,
            }

        def _make(self, env_id: str) -> Any:
            return MultiTurnWrapper(
                gym.make(env_id, **self.env_kwargs), system_prompt=self.system_prompt, stop_strings=self.stop_strings
            )

        async def _env_call(self, call: Callable[[], Any], metrics: dict[str, Any]) -> Any:
            started = time.perf_counter()
            try:
                return await asyncio.wait_for(_on_thread(call), self.env_timeout)
            except TimeoutError:
                raise EnvTimeoutError(f"the env call took longer than env_timeout={self.env_timeout} s") from None
            finally:
                metrics["tool_calls"] += time.perf_counter() - started

        # ---- one episode -----------------------------------------------------------------------------
        async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
            """Play the row's task (see the module docstring)."""
            task = self.task_of(kwargs)
            key = _pool_key(task["env_id"], self.env_kwargs, self.system_prompt, self.stop_strings)
            metrics: dict[str, Any] = {"generate_sequences": 0.0, "tool_calls": 0.0, "num_preempted": -1}
            env = None
            try:
                env = await self._env_call(lambda: _take_env(key, lambda: self._make(task["env_id"])), metrics)
                options = {
                    "split": task["split"],
                    **({"task_id": task["task_id"]} if task["task_id"] is not None else {}),
                }

                def reset() -> tuple[str, dict[str, Any]]:
                    env.limit_turns(task["max_turns"])
                    return env.reset(seed=task["seed"], options=options)

                _, info = await self._env_call(reset, metrics)
            except Exception as error:
                if env is not None:
                    threading.Thread(target=_close_quietly, args=(env,), daemon=True).start()
                return self._failed_start(task, error, metrics)
            episode = _Episode(task=task, info=info)
            try:
                await self._play(env, episode, sampling_params, metrics, kwargs)
            except Exception as error:
                if not isinstance(error, EnvTimeoutError | _EnvError):
                    _give_env(key, env)  # not the env's fault (the server's): the env itself is fine
                    raise
                threading.Thread(target=_close_quietly, args=(env,), daemon=True).start()
                cause = error.__cause__ if isinstance(error, _EnvError) else error
                episode.env_error = f"{type(cause).__name__}: {cause}"
                episode.mask = [0] * len(episode.mask)  # the episode leaves the loss
                episode.episode_return, episode.success = 0.0, False
            else:
                _give_env(key, env)
            return self._output(episode, metrics)

        async def _play(
            self,
            env: Any,
            episode: _Episode,
            sampling_params: dict[str, Any],
            metrics: dict[str, Any],
            row: Mapping[str, Any],
        ) -> None:
            budget = self.max_turn_tokens or min(turn_tokens_for(env), self.response_length)
            episode.budget = budget
            stops = StopStrings(self.tokenizer, env.stop_strings)
            episode.prompt_ids = self._cap_text_prompt_length(self.renderer.prompt_ids(env.messages))
            params = {**sampling_params, "max_tokens": budget}
            if stops:
                params["stop"] = list(stops.strings)
            request_id = uuid.uuid4().hex  # one per episode: a sticky session, the server's prefix cache
            while True:
                started = time.perf_counter()
                output = await self.server_manager.generate(
                    request_id=request_id,
                    prompt_ids=episode.prompt_ids + episode.response_ids,
                    sampling_params=params,
                    priority=int(_scalar(row.get("priority", 0)) or 0),
                )
                metrics["generate_sequences"] += time.perf_counter() - started
                if output.num_preempted is not None:
                    metrics["num_preempted"] = max(0, metrics["num_preempted"]) + int(output.num_preempted)
                ids, logps, end = self._end_reply(episode, list(output.token_ids), output.log_probs, stops)
                start = len(episode.response_ids)
                episode.spans.append((start, start + len(ids)))
                episode.response_ids += ids
                episode.mask += [1] * len(ids)
                if logps is not None and episode.logprobs is not None:
                    episode.logprobs += logps
                else:
                    episode.logprobs = None
                reply = self.tokenizer.decode(ids[:-1] if end is not None else ids, skip_special_tokens=False)
                try:
                    step = await self._env_call(lambda r=reply: env.step(r), metrics)
                except EnvTimeoutError:
                    raise
                except Exception as error:
                    raise _EnvError() from error
                if not self._stepped(env, episode, step, end):
                    return

        def _end_reply(
            self, episode: _Episode, ids: list[int], logps: Sequence[float] | None, stops: Any
        ) -> tuple[list[int], list[float] | None, int | None]:
            """The sampled reply cut to the budget and the stop strings, and the end token it ends on (as the
            engine's `_end_reply`)."""
            logps = None if not logps else list(logps)
            ids = ids[: episode.budget]
            logps = None if logps is None else logps[: episode.budget]
            end = ids[-1] if ids and ids[-1] in self.end_ids else None
            keep = stops.cut(ids[:-1] if end is not None else ids)
            if keep is not None:
                ids, end = ids[:keep], None
                logps = None if logps is None else logps[:keep]
                episode.stopped_by.append("stop_string")
            else:
                episode.stopped_by.append("eos" if end is not None else "budget")
            return ids, logps, end

        def _stepped(self, env: Any, episode: _Episode, step: Any, end: int | None) -> bool:
            """Take the env's answer to the last reply; render it as the next turn unless the episode ended.
            Returns whether the episode goes on."""
            observation, reward, terminated, truncated, info = step
            episode.info = info
            episode.turn_scores.append(float(reward))
            episode.episode_return += float(reward)
            episode.success = bool(info.get("success", False))
            episode.terminated, episode.truncated = bool(terminated), bool(truncated)
            episode.steps.append(
                {
                    "action": None if info.get("format_error") else info.get("action"),
                    "format_error": bool(info.get("format_error", False)),
                    "valid_action": not info.get("format_error") and info.get("valid_action", True) is not False,
                }
            )
            if not (terminated or truncated):
                closed = end == self.renderer.end_of_turn_id
                chunk = self.renderer.observation_ids(observation, closed=closed, history=env.messages[:-1])
                if len(episode.response_ids) + len(chunk) + episode.budget > self.response_length:
                    episode.budget_truncated = True
                else:
                    if end is not None and not closed:  # another end token: the end-of-turn token replaces it
                        del episode.response_ids[-1], episode.mask[-1]
                        if episode.logprobs is not None:
                            del episode.logprobs[-1]
                        start, stop = episode.spans[-1]
                        episode.spans[-1] = (start, stop - 1)
                    episode.response_ids += chunk
                    episode.mask += [0] * len(chunk)
                    if episode.logprobs is not None:
                        episode.logprobs += [0.0] * len(chunk)
                    episode.observations += 1
                    return True
            if episode.stopped_by[-1] == "stop_string" and len(episode.response_ids) < self.response_length:
                # the last reply ended at a stop string: closed by a token the model did not sample
                episode.response_ids.append(self.renderer.end_of_turn_id)
                episode.mask.append(0)
                if episode.logprobs is not None:
                    episode.logprobs.append(0.0)
            return False

        # ---- outputs ---------------------------------------------------------------------------------
        def _failed_start(self, task: dict[str, Any], error: Exception, metrics: dict[str, Any]) -> AgentLoopOutput:
            """The output of a task whose env could not be made or reset: a note as the prompt and one
            end-of-turn token with mask 0 (nothing sampled, nothing to learn; verl needs a response token)."""
            logger.warning("%s: the env failed before its first observation: %r", task["env_id"], error)
            note = [{"role": "user", "content": f"({task['env_id']}: the env failed before its first observation)"}]
            episode = _Episode(task=task, info={}, prompt_ids=self.renderer.prompt_ids(note))
            episode.response_ids, episode.mask, episode.logprobs = [self.end_ids[0]], [0], None
            episode.env_error = f"{type(error).__name__}: {error}"
            return self._output(episode, metrics)

        def _output(self, episode: _Episode, metrics: dict[str, Any]) -> AgentLoopOutput:
            n = self.response_length
            turns = len(episode.spans)
            logprobs = episode.logprobs[:n] if episode.logprobs and len(episode.logprobs) == len(episode.mask) else None
            record = {
                "env_id": episode.task["env_id"],
                "task_id": episode.info.get("task_id", episode.task["task_id"]),
                "split": episode.task["split"],
                "category": episode.info.get("category"),
                "success": episode.success,
                "return": episode.episode_return,
                "turns": turns,
                "terminated": episode.terminated,
                "truncated": episode.truncated,
                "budget_truncated": episode.budget_truncated,
                "env_error": episode.env_error,
                "reply_spans": [list(span) for span in episode.spans],
                "stopped_by": list(episode.stopped_by),
                "steps": list(episode.steps),
            }
            reward_info = {
                "success": float(episode.success),
                "turns": turns,
                "truncated": float(episode.truncated or episode.budget_truncated),
                "budget_truncated": float(episode.budget_truncated),
                "invalid_replies": sum(s["format_error"] for s in episode.steps),
                "env_error": float(episode.env_error is not None),
            }
            return AgentLoopOutput(
                prompt_ids=episode.prompt_ids,
                response_ids=episode.response_ids[:n],
                response_mask=episode.mask[:n],
                response_logprobs=logprobs,
                reward_score=float(episode.episode_return),
                num_turns=1 + turns + episode.observations,
                metrics=metrics,
                extra_fields={
                    "turn_scores": list(episode.turn_scores),
                    "tool_rewards": [],
                    "reward_extra_info": {key: reward_info[key] for key in REWARD_INFO_KEYS},
                    "agentgym": record,
                },
            )

    AgentGymAgentLoop.__module__ = __name__
    AgentGymAgentLoop.__qualname__ = "AgentGymAgentLoop"
    # Hydra builds the class on its first lookup of an entry that verl's worker loaded from the YAML file, with
    # the operator's options: that entry stays; only a process without one gets the bare name.
    if AGENT_NAME not in _agent_loop_registry:
        register(AGENT_NAME)(AgentGymAgentLoop)
    return AgentGymAgentLoop


class _EnvError(Exception):
    """An env step raised (its cause): the episode ends there, not the worker."""


class _Episode:
    """One episode's sequence and record while it is played."""

    def __init__(self, task: dict[str, Any], info: dict[str, Any], prompt_ids: list[int] | None = None):
        self.task = task
        self.info = info
        self.prompt_ids: list[int] = prompt_ids or []
        self.response_ids: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] | None = []
        self.spans: list[tuple[int, int]] = []
        self.stopped_by: list[str] = []
        self.steps: list[dict[str, Any]] = []
        self.turn_scores: list[float] = []
        self.observations = 0
        self.budget = 0
        self.episode_return = 0.0
        self.success = self.terminated = self.truncated = self.budget_truncated = False
        self.env_error: str | None = None


def __getattr__(name: str) -> Any:
    # hydra resolves `TARGET` with getattr on this module; the class needs verl, so it is built here.
    if name == "AgentGymAgentLoop":
        return agent_loop_class()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def register_agent_loop(name: str = AGENT_NAME) -> str:
    """Register the loop in this process's verl registry under `name` too (`agentgym` is registered on first
    use); return the name. A verl run registers it in its workers through `agent_loop_config_path` instead."""
    from verl.experimental.agent_loop.agent_loop import register

    register(name)(agent_loop_class())
    return name


def agent_loop_config(name: str = AGENT_NAME, **options: Any) -> list[dict[str, Any]]:
    """The entries of the YAML file that verl's `actor_rollout_ref.rollout.agent.agent_loop_config_path` names:
    the loop under `name`, with `options` (the constructor's keywords: `env_id`, `env_kwargs`, `max_turns`,
    ...; None values are left out)."""
    return [{"name": name, "_target_": TARGET, **{k: v for k, v in options.items() if v is not None}}]


def dataset_rows(
    env_id: str,
    split: str = "train",
    count: int | None = None,
    env_kwargs: Mapping[str, Any] | None = None,
    agent_name: str = AGENT_NAME,
    max_turns: int | None = None,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """verl dataset rows naming the first `count` tasks of `split` (None: all), in verl's columns.

    Each row holds `data_source` (the env id), `prompt` (the task's first chat: the scenario's system
    prompt and first observation, what the loop plays), `agent_name`, `ability` ("agent"), `reward_model`
    (`{"style": "env", "ground_truth": ""}`: the env scores the episode) and `extra_info`: `index`, `env_id`,
    `task_id`, `split`, `seed` (and `max_turns` where given). Write them with `write_parquet`.
    """
    import agentgym_envs  # noqa: F401  (registers the ids)
    from agentgym_envs.core import task_rows
    from agentgym_wrappers import MultiTurnWrapper

    env = MultiTurnWrapper(gym.make(env_id, **dict(env_kwargs or {})))
    try:
        rows = []
        for index, task_id in task_rows(env.unwrapped, split, count):
            env.reset(seed=seed, options={"split": split, "task_id": task_id})
            extra = {"index": index, "env_id": env_id, "task_id": task_id, "split": split, "seed": seed}
            if max_turns is not None:
                extra["max_turns"] = int(max_turns)
            rows.append(
                {
                    "data_source": env_id,
                    "prompt": [{"role": m["role"], "content": m["content"]} for m in env.messages],
                    "agent_name": agent_name,
                    "ability": "agent",
                    "reward_model": {"style": "env", "ground_truth": ""},
                    "extra_info": extra,
                }
            )
        return rows
    finally:
        env.close()


def write_parquet(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Write dataset rows to a parquet file (pyarrow, which verl's `datasets` reads); return its path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([dict(row) for row in rows]), path)
    return path
