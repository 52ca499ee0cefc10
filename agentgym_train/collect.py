"""`agentgym collect`: episodes of any policy written to JSONL, one line per episode, for SFT, RFT and DPO.

A line holds the conversation in the chat format TRL's trainers read (`messages`: system, user,
assistant, ... ending on the last reply; the observation that answered it is `final_observation`),
and what happened: `env_id`, `task_id`, `split`, `sample` (which of a task's k episodes), `seed`,
`category`, `return`, `success`, `turns`, `truncated`, `invalid_replies`, `policy`, `action_format`
(None: the scenario's own replies; "tools": native tool calls, and then `tools`, the schemas the chat
renders with). An episode of tool calls keeps the assistants' `tool_calls` and the env's `tool`
messages, as chat templates and TRL's SFT datasets take them, so it replays as a demonstration.

Policies: a model (token path of the rollout engine, episodes batched), an OpenAI-compatible
endpoint, the scenario's scripted `expert`, or `random` (the last three on worker threads, one env
each). Collection is resumable: lines are appended as episodes finish, and a rerun skips every
(task, sample) already in the file. A crash can leave a half-written last line; it is cut off on
resume (it is the only line that can be incomplete, so a broken line before the end is an error).
"""

from __future__ import annotations

import json
import os
import random
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym_wrappers import ContextPolicy, MultiTurnWrapper, action_reply, get_context, tool_call_reply

#: (task_id, sample): one episode of a collection.
Job = tuple[str, int]
#: Per episode: (the env after reset, a random generator seeded from the episode) -> a function from
#: (observation, info) to the next reply.
Actor = Callable[[MultiTurnWrapper, random.Random], Callable[[str, dict[str, Any]], str]]


def episode_record(
    env_id: str,
    split: str,
    job: Job,
    seed: int,
    transcript: list[dict[str, str]],
    stats: dict[str, Any],
    category: Any,
    policy: str,
    tools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One JSONL line: the chat up to the last reply, the final observation apart, and the outcome
    (`tools`: the schemas of an episode played through native tool calls)."""
    messages = [dict(m) for m in transcript]
    answered = len(messages) >= 2 and messages[-1]["role"] in ("user", "tool") and messages[-2]["role"] == "assistant"
    final = messages.pop()["content"] if answered else None
    record = {
        "env_id": env_id,
        "task_id": str(job[0]),
        "split": split,
        "sample": job[1],
        "seed": seed,
        "category": None if category is None else str(category),
        "policy": policy,
        "return": float(stats.get("return", 0.0)),
        "success": bool(stats.get("success", False)),
        "turns": int(stats.get("turns", 0)),
        "truncated": bool(stats.get("truncated", False) or stats.get("budget_truncated", False)),
        "invalid_replies": int(stats.get("invalid_replies", 0)),
        "messages": messages,
        "final_observation": final,
        "action_format": "tools" if tools else None,
    }
    if tools:
        record["tools"] = tools
    return record


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Every complete episode line of a collected file (a torn last line from a crash is skipped)."""
    return [record for record, _ in _scan(Path(path))]


def _scan(path: Path) -> Iterator[tuple[dict[str, Any], int]]:
    """(record, byte offset after its line) for each complete line; a broken line that is not the last
    raises, naming its line number."""
    with path.open("rb") as handle:
        data = handle.read()
    offset, number = 0, 0
    while offset < len(data):
        end = data.find(b"\n", offset)
        line = data[offset : len(data) if end < 0 else end]
        number += 1
        after = len(data) if end < 0 else end + 1
        try:
            record = json.loads(line) if line.strip() else None
        except ValueError:
            record = ValueError
        if record is ValueError or (record is not None and end < 0):
            if after < len(data):
                raise ValueError(f"{path}: line {number} is not JSON; only the last line may be cut off by a crash")
            return  # the torn tail: the caller cuts it off before appending
        if record is not None:
            if not isinstance(record, dict) or "task_id" not in record or "sample" not in record:
                raise ValueError(f"{path}: line {number} is no episode record (needs task_id and sample)")
            yield record, after
        offset = after


def finished_jobs(path: Path, env_id: str, split: str) -> set[Job]:
    """The (task, sample) pairs already in `path`; cuts off a torn last line so that appends stay line-aligned."""
    if not path.exists():
        return set()
    done: set[Job] = set()
    good = 0
    for record, end in _scan(path):
        good = end
        if record.get("env_id") != env_id or record.get("split") != split:
            raise ValueError(
                f"{path} holds episodes of {record.get('env_id')!r} ({record.get('split')!r}), not {env_id!r} "
                f"({split!r}); collect into another file"
            )
        done.add((str(record["task_id"]), int(record["sample"])))
    if path.stat().st_size > good:
        with path.open("r+b") as handle:
            handle.truncate(good)
    return done


class _Writer:
    """Appends records as lines, flushed one by one (what a crash leaves is whole lines and at most one torn one)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = path.open("a", encoding="utf-8")
        self.lock = threading.Lock()
        self.count = 0

    def __call__(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self.lock:
            self.handle.write(line)
            self.handle.flush()
            self.count += 1

    def close(self) -> None:
        os.fsync(self.handle.fileno())
        self.handle.close()


def policy_reply(action: str, env: MultiTurnWrapper) -> str:
    """An action as the reply `env`'s parser reads back: the scenario's own format, or, where the env plays
    through tool calls, the call of the tool that makes it (Hermes syntax; the wrapper records it as the
    assistant's `tool_calls`). An action no tool makes stays plain text, a reply without a call."""
    if env.uses_tools:
        try:
            return tool_call_reply(action, env.unwrapped.tools())
        except ValueError:
            return action
    return action_reply(action, env.unwrapped.action_format)


def expert_actor(env: MultiTurnWrapper, rng: random.Random) -> Callable[[str, dict[str, Any]], str]:
    """The scenario's scripted expert; its action becomes a reply the env's parser reads back (a tool call
    where the env plays through tools)."""
    expert = env.unwrapped.make_expert()

    def act(observation: str, info: dict[str, Any]) -> str:
        return policy_reply(expert.act(observation, info), env)

    return act


def random_actor(actions: Sequence[str] | None = None) -> Actor:
    """Uniform choices from `actions` (default: the env's `available_actions`), seeded per episode."""

    def start(env: MultiTurnWrapper, rng: random.Random) -> Callable[[str, dict[str, Any]], str]:
        def act(observation: str, info: dict[str, Any]) -> str:
            return policy_reply(rng.choice(list(actions or info.get("available_actions") or ["?"])), env)

        return act

    return start


def endpoint_actor(endpoint: Callable[..., str]) -> Actor:
    """An OpenAI-compatible endpoint (`ChatEndpoint`): each turn it gets the conversation (the context
    policy's view); where the env plays through tool calls, also the tools (`endpoint(messages,
    tools=...)`), and the reply's calls are the move."""

    def start(env: MultiTurnWrapper, rng: random.Random) -> Callable[[str, dict[str, Any]], str]:
        if env.uses_tools:
            return lambda observation, info: endpoint(env.messages, tools=env.tools)
        return lambda observation, info: endpoint(env.messages)

    return start


@dataclass
class CollectResult:
    """What a collection did: episodes written now, skipped (already in the file), and their success rate."""

    path: Path
    written: int
    skipped: int
    success: float

    def __str__(self) -> str:
        return (
            f"{self.path}: {self.written} episodes written ({self.success:.1%} successful), "
            f"{self.skipped} already there"
        )


def _jobs(
    env_id: str, split: str, num_tasks: int | None, task_ids: Sequence[str] | None, k: int, env_kwargs: dict | None
) -> list[Job]:
    from agentgym_train.evaluation.evaluate import split_tasks

    tasks = [str(t) for t in task_ids] if task_ids is not None else split_tasks(env_id, split, num_tasks, env_kwargs)
    return [(task, sample) for task in tasks for sample in range(k)]


def collect(
    actor: Actor | Any,
    env_id: str,
    out: str | Path,
    *,
    split: str = "train",
    num_tasks: int | None = None,
    task_ids: Sequence[str] | None = None,
    episodes_per_task: int = 1,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    workers: int = 8,
    policy_name: str = "policy",
    progress: bool = True,
    context: str | ContextPolicy | None = None,
    action_format: str | None = None,
) -> CollectResult:
    """Play `episodes_per_task` episodes of each task of `split` (the first `num_tasks`, or `task_ids`) and
    append one line per episode to `out`, skipping (task, sample) pairs already there.

    Args:
        actor: `expert_actor`, `random_actor(...)`, `endpoint_actor(...)` (threads, one env each), or a
            `ModelPolicy` (batched through the rollout engine).
        seed: Episode `sample` of a task resets with `seed + sample`.
        workers: Episodes played at once by a threaded actor.
        context: What an endpoint actor is sent of each episode (`agentgym_wrappers.get_context`: None or
            "full", "window:k", "summary:k", or a `ContextPolicy`); a `ModelPolicy` takes its own. The
            records keep every message either way.
        action_format: How a threaded actor's env reads replies: None (the scenario's own format) or
            "tools" (native tool calls: the expert's and random actions become tool calls, an endpoint is
            sent the tools); a `ModelPolicy` takes its own.
    """
    policy = get_context(context)
    if isinstance(actor, ModelPolicy) and (context is not None or action_format is not None):
        raise ValueError(
            "a ModelPolicy takes its context and action format itself (ModelPolicy(..., context=..., "
            "action_format=...)), not collect(context=, action_format=)"
        )
    if action_format not in (None, "tools"):
        raise ValueError(f"action_format must be None (each scenario's) or 'tools', got {action_format!r}")
    import agentgym_envs  # noqa: F401

    if env_id not in gym.registry:
        raise ValueError(f"unknown env id {env_id!r}; `agentgym list` shows the registered ones")
    path = Path(out)
    done = finished_jobs(path, env_id, split)
    jobs = [job for job in _jobs(env_id, split, num_tasks, task_ids, episodes_per_task, env_kwargs) if job not in done]
    writer = _Writer(path)
    successes = 0

    def write(record: dict[str, Any]) -> None:
        nonlocal successes
        successes += record["success"]
        writer(record)
        bar.update(1)

    from tqdm.auto import tqdm

    try:
        with tqdm(total=len(jobs), desc=f"collect {policy_name}", disable=not progress, leave=False) as bar:
            if isinstance(actor, ModelPolicy):
                actor.play(env_id, split, jobs, seed, max_turns, env_kwargs, write, policy_name)
            else:
                args = (env_id, split, jobs, seed, max_turns, env_kwargs, workers, write, policy_name, policy)
                _play_threads(actor, *args, action_format=action_format)
    finally:
        writer.close()
    return CollectResult(path, writer.count, len(done), successes / max(1, writer.count))


def _play_threads(
    actor: Actor,
    env_id: str,
    split: str,
    jobs: list[Job],
    seed: int,
    max_turns: int | None,
    env_kwargs: dict[str, Any] | None,
    workers: int,
    write: Callable[[dict[str, Any]], None],
    policy_name: str,
    context: ContextPolicy,
    action_format: str | None = None,
) -> None:
    local = threading.local()
    envs: list[MultiTurnWrapper] = []
    lock = threading.Lock()

    def play(job: Job) -> None:
        if not hasattr(local, "env"):
            local.env = MultiTurnWrapper(
                gym.make(env_id, **(env_kwargs or {})), max_turns=max_turns, context=context, parser=action_format
            )
            with lock:
                envs.append(local.env)
        env = local.env
        observation, info = env.reset(seed=seed + job[1], options={"split": split, "task_id": job[0]})
        category = info.get("category")
        act = actor(env, random.Random(f"{seed}/{job[0]}/{job[1]}"))
        while True:
            try:
                reply = act(observation, info)
            except Exception:  # the expert gave up (or the policy failed): the episode ends unsuccessful
                stats = {
                    "turns": env.turns,
                    "return": sum(step["reward"] for step in env.steps),
                    "invalid_replies": sum(step["format_error"] for step in env.steps),
                    "truncated": True,
                }
                break
            observation, _, terminated, truncated, info = env.step(reply)
            if terminated or truncated:
                stats = info["episode"]
                break
        record = episode_record(
            env_id, split, job, seed + job[1], env.transcript, stats, category, policy_name, tools=env.tools
        )
        write(record)

    try:
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for _ in pool.map(play, jobs):
                pass
    finally:
        for env in envs:
            env.close()


def tools_of(env_id: str, env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The tool schemas an episode of `env_id` played through tool calls renders with."""
    import agentgym_envs  # noqa: F401

    env = MultiTurnWrapper(gym.make(env_id, **(env_kwargs or {})), parser="tools")
    try:
        return env.tools
    finally:
        env.close()


class ModelPolicy:
    """A model played through the rollout engine (the training token path), `batch_size` episodes at a time.

    Args:
        model, tokenizer: The policy (any causal LM with a chat template).
        max_turn_tokens: Most tokens in one reply.
        max_completion_length: Token budget of an episode after its prompt.
        temperature: 0 is greedy.
        batch_size: Episodes generated together.
        context: What each turn's prompt holds (`RolloutEngine`'s `context`: None or "full", "window:k",
            "summary:k", a `ContextPolicy`); the records keep every message.
        action_format: None (each scenario's own) or "tools" (native tool calls, `RolloutEngine`'s); the
            records then keep the `tool_calls`, the `tool` answers and the tools.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        max_turn_tokens: int = 64,
        max_completion_length: int = 4096,
        temperature: float = 1.0,
        batch_size: int = 64,
        chat_template_kwargs: dict[str, Any] | None = None,
        env_pool: Any | None = None,
        context: str | ContextPolicy | None = None,
        action_format: str | None = None,
    ) -> None:
        self.model, self.tokenizer = model, tokenizer
        self.action_format = action_format
        self.env_pool = env_pool  # None: envs in this process; an agentgym_envs.cluster.RayEnvPool: on Ray
        self.max_turn_tokens, self.max_completion_length = max_turn_tokens, max_completion_length
        self.temperature, self.batch_size = temperature, batch_size
        self.chat_template_kwargs = chat_template_kwargs
        self.context = context
        #: The last `play`'s episodes (token ids, masks), for callers that train on them directly.
        self.episodes: list[Any] = []

    def play(
        self,
        env_id: str,
        split: str,
        jobs: list[Job],
        seed: int,
        max_turns: int | None,
        env_kwargs: dict[str, Any] | None,
        write: Callable[[dict[str, Any]], None] | None = None,
        policy_name: str = "model",
    ) -> list[Any]:
        """Play `jobs`; write each episode's record as its batch finishes; return the `Episode`s."""
        import torch

        from agentgym_train.rollout import RolloutEngine, Task, make_generator

        tools = tools_of(env_id, env_kwargs) if self.action_format == "tools" else None
        engine = RolloutEngine(
            self.tokenizer,
            max_turns=max_turns,
            max_completion_length=self.max_completion_length,
            max_turn_tokens=self.max_turn_tokens,
            env_kwargs=env_kwargs,
            chat_template_kwargs=self.chat_template_kwargs,
            env_pool=self.env_pool,
            context=self.context,
            action_format=self.action_format,
        )
        generate = make_generator(
            self.model, self.tokenizer.pad_token_id, engine.eos_token_ids, temperature=self.temperature
        )
        was_training = self.model.training
        self.model.eval()
        self.episodes = []
        try:
            for start in range(0, len(jobs), self.batch_size):
                batch = jobs[start : start + self.batch_size]
                tasks = [Task(env_id, task, split, seed + sample) for task, sample in batch]
                with torch.no_grad():
                    episodes = engine.run(tasks, generate)
                self.episodes += episodes
                for job, episode in zip(batch, episodes, strict=True):
                    if write is not None:
                        stats = {**episode.stats, "success": episode.success, "return": episode.episode_return}
                        record = episode_record(
                            env_id,
                            split,
                            job,
                            seed + job[1],
                            episode.messages,
                            stats,
                            episode.category,
                            policy_name,
                            tools=tools,
                        )
                        write(record)
        finally:
            engine.close()
            self.model.train(was_training)
        return self.episodes
