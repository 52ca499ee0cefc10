"""Evaluation: success, return and turns with confidence intervals, overall and per category.

`evaluate_model` plays held-out tasks with a model through the rollout engine (the same token path
and budget as training); `evaluate_random` plays them with a uniformly random policy under the same
max turns, the baseline every result should be read against; `evaluate_expert` with the scenario's
scripted expert, the ceiling. Intervals are 95% normal intervals over per-task means (episodes of one
task are not independent draws). Every episode row is a transcript record
(`agentgym_train.evaluation.transcripts`): the figures plus messages, per-turn steps and end reason.
"""

from __future__ import annotations

import math
import random
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import gymnasium as gym

from agentgym_train.evaluation.transcripts import END_REASONS, episode_record
from agentgym_train.rollout import Episode, RolloutEngine, Task, make_generator
from agentgym_wrappers import MultiTurnWrapper, action_reply

Z95 = 1.959964


@dataclass
class Estimate:
    """A mean with its 95% confidence interval."""

    mean: float
    low: float
    high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def __str__(self) -> str:
        return f"{self.mean:.3f} ± {self.half_width:.3f}"


def estimate(values: Sequence[float]) -> Estimate:
    """Mean and normal 95% interval of `values` (one value per task)."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    mean = sum(values) / n
    half = Z95 * statistics.stdev(values) / math.sqrt(n) if n > 1 else math.inf
    return Estimate(mean, mean - half, mean + half, n)


@dataclass
class EvalResult:
    """Outcome of an evaluation: overall estimates, per-category estimates, and every episode."""

    success: Estimate
    episode_return: Estimate
    turns: Estimate
    categories: dict[str, dict[str, Estimate]] = field(default_factory=dict)
    episodes: list[dict[str, Any]] = field(default_factory=list)
    pass_at_k: Estimate | None = None  # tasks with at least one success, when k > 1 episodes per task
    #: What was evaluated: `policy`, `env_id`, `split`, `max_turns` (written to JSON, read by `agentgym report`).
    meta: dict[str, Any] = field(default_factory=dict)

    def table(self) -> str:
        """Overall and per-category figures as aligned text (success is Avg@k with k episodes per task)."""
        head = f"{'':<14}{'tasks':>6}  {'success':>15}  {'return':>15}  {'turns':>14}"
        lines = [head]
        rows = [("all", {"success": self.success, "return": self.episode_return, "turns": self.turns})]
        rows += sorted(self.categories.items()) if len(self.categories) > 1 else []
        for name, block in rows:
            lines.append(
                f"{name:<14}{block['success'].n:>6}  {block['success']!s:>15}  {block['return']!s:>15}  "
                f"{block['turns']!s:>14}"
            )
        if self.pass_at_k is not None:
            lines.append(f"pass@k (any success among a task's episodes): {self.pass_at_k}")
        reasons = end_reason_counts(self.episodes)
        if reasons:
            lines.append("episodes ended: " + ", ".join(f"{END_REASONS.get(k, k)} {n}" for k, n in reasons.items()))
        return "\n".join(lines)

    def grouped_by(self, key: str) -> EvalResult:
        """The same episodes with `categories` grouped by another key of theirs (e.g. `kind`, WebArena's
        task kind); episodes without it form the group `None`."""
        return replace(summarize_episodes(self.episodes, by=key), meta=self.meta)

    def to_dict(self) -> dict[str, Any]:
        def as_dict(e: Estimate) -> dict[str, float]:
            return {"mean": e.mean, "low": e.low, "high": e.high, "n": e.n}

        return {
            **self.meta,
            "success": as_dict(self.success),
            "return": as_dict(self.episode_return),
            "turns": as_dict(self.turns),
            "categories": {c: {k: as_dict(v) for k, v in m.items()} for c, m in self.categories.items()},
            "pass_at_k": as_dict(self.pass_at_k) if self.pass_at_k is not None else None,
            "episodes": self.episodes,
        }


def task_means(rows: Sequence[dict[str, Any]], key: str = "success") -> dict[str, float]:
    """Per task (`task_id`), the mean of `key` over its episode rows: the unit every interval here is over."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_task[str(row["task_id"])].append(float(row[key]))
    return {task: sum(v) / len(v) for task, v in by_task.items()}


def summarize_episodes(rows: list[dict[str, Any]], by: str = "category") -> EvalResult:
    """Estimates over per-task means of episode rows (`task_id`, `category`, `success`, `return`, `turns`),
    overall and per value of the row key `by`."""

    def block(selected: list[dict[str, Any]]) -> dict[str, Estimate]:
        return {key: estimate(list(task_means(selected, key).values())) for key in ("success", "return", "turns")}

    overall = block(rows)
    categories = {
        group: block([r for r in rows if str(r.get(by)) == group]) for group in sorted({str(r.get(by)) for r in rows})
    }
    by_task: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        by_task[str(row["task_id"])].append(float(row["success"]))
    k = max((len(v) for v in by_task.values()), default=1)
    pass_at_k = estimate([float(max(v)) for v in by_task.values()]) if k > 1 else None
    return EvalResult(overall["success"], overall["return"], overall["turns"], categories, rows, pass_at_k)


def end_reason_counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many episodes ended for each reason (rows without `end_reason` are not counted)."""
    counts: dict[str, int] = defaultdict(int)
    for row in rows:
        if "end_reason" in row:
            counts[row["end_reason"]] += 1
    return dict(sorted(counts.items(), key=lambda item: -item[1]))


def _row(episode: Episode, sample: int, max_turns: int | None) -> dict[str, Any]:
    return episode_record(
        task_id=episode.task.task_id,
        sample=sample,
        category=episode.category,
        kind=episode.kind,
        stats={**episode.stats, "budget_truncated": episode.budget_truncated},
        messages=episode.messages,
        max_turns=max_turns,
        turn_flags=[{"stopped_by": how} for how in episode.stopped_by],
        env_error=episode.env_error,
    )


def episode_row(
    task_id: str,
    info: dict[str, Any],
    *,
    messages: list[dict[str, str]] | None = None,
    sample: int = 0,
    max_turns: int | None = None,
    turn_flags: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An evaluation row (a transcript record) from the final `info` of a `MultiTurnWrapper` episode;
    pass the wrapper's `messages` (and the episode's index among its task's) for a full transcript."""
    return episode_record(
        task_id=task_id,
        sample=sample,
        category=info.get("category"),
        kind=info.get("kind"),
        stats=info["episode"],
        messages=messages or [],
        max_turns=max_turns,
        turn_flags=turn_flags,
    )


def split_tasks(
    env_id: str, split: str = "test", num_tasks: int | None = None, env_kwargs: dict | None = None
) -> list[str]:
    """The first `num_tasks` task ids of a split (all of them when None)."""
    return _split(env_id, split, num_tasks, env_kwargs)[0]


def _split(env_id: str, split: str, num_tasks: int | None, env_kwargs: dict | None) -> tuple[list[str], int | None]:
    """The first `num_tasks` task ids of a split, and the env's default max turns."""
    import agentgym_envs  # noqa: F401
    from agentgym_envs.core import task_rows

    env = gym.make(env_id, **(env_kwargs or {}))
    base = env.unwrapped
    ids = [task_id for _, task_id in task_rows(base, split, num_tasks)]
    default = getattr(base, "default_max_turns", None)
    env.close()
    return ids, default


def evaluate_model(
    model: Any,
    tokenizer: Any,
    env_id: str,
    *,
    split: str = "test",
    num_tasks: int | None = 100,
    episodes_per_task: int = 1,
    max_turns: int | None = None,
    max_completion_length: int = 1024,
    max_turn_tokens: int | None = None,  # None: the scenario's reply budget (default_max_turn_tokens)
    stop_strings: Sequence[str] | None = None,  # None: the scenario's; (): replies end only at end tokens or the budget
    temperature: float = 1.0,
    env_kwargs: dict[str, Any] | None = None,
    batch_size: int = 64,
    seed: int = 0,
    progress: bool = True,
    description: str = "eval",
    env_pool: Any | None = None,
    action_format: str | None = None,
    context: Any = None,
) -> EvalResult:
    """Play `episodes_per_task` episodes of each of the first `num_tasks` tasks of `split` with the model
    (envs in this process, or on a Ray cluster with `env_pool`, an `agentgym_envs.cluster.RayEnvPool`;
    `action_format`: None for each scenario's own, or "tools", as `RolloutEngine` takes it; `context`: what
    each turn's prompt holds, None or "full", "window:k", "summary:k" or a `ContextPolicy`, the one the model
    was trained with)."""
    import torch
    from tqdm.auto import tqdm

    task_ids, default_turns = _split(env_id, split, num_tasks, env_kwargs)
    limit = max_turns if max_turns is not None else default_turns
    tasks = [Task(env_id, t, split, seed + k) for t in task_ids for k in range(episodes_per_task)]
    engine = RolloutEngine(
        tokenizer,
        max_turns=max_turns,
        max_completion_length=max_completion_length,
        max_turn_tokens=max_turn_tokens,
        stop_strings=stop_strings,
        env_kwargs=env_kwargs,
        env_pool=env_pool,
        action_format=action_format,
        context=context,
    )
    torch.manual_seed(seed)
    generate = make_generator(model, tokenizer.pad_token_id, engine.eos_token_ids, temperature=temperature)
    was_training = model.training
    model.eval()
    rows: list[dict[str, Any]] = []
    try:
        with tqdm(total=len(tasks), desc=description, disable=not progress, leave=False) as bar:
            for start in range(0, len(tasks), batch_size):
                episodes = engine.run(tasks[start : start + batch_size], generate, progress=bar.update)
                rows += [_row(e, (start + i) % episodes_per_task, limit) for i, e in enumerate(episodes)]
    finally:
        engine.close()
        model.train(was_training)
    result = summarize_episodes(rows)
    name = getattr(getattr(model, "config", None), "name_or_path", None) or "model"
    result.meta = {"policy": name, "env_id": env_id, "split": split, "max_turns": limit}
    result.meta["context"] = engine.context.spec
    result.meta["action_format"] = action_format  # None: each scenario's own; "tools": native tool calls
    return result


def evaluate_random(
    env_id: str,
    *,
    split: str = "test",
    num_tasks: int | None = 100,
    episodes_per_task: int = 1,
    max_turns: int | None = None,
    actions: Sequence[str] | None = None,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
) -> EvalResult:
    """A uniformly random policy under the same max turns.

    Each turn it picks uniformly from `actions` when given (e.g. BabyAI's six primitive actions),
    else from the env's `info["available_actions"]`.
    """
    rng = random.Random(seed)

    def act(observation: str, info: dict[str, Any], env: MultiTurnWrapper) -> str:
        return rng.choice(list(actions or info.get("available_actions") or ["?"]))

    return _play_policy("random", act, env_id, split, num_tasks, episodes_per_task, max_turns, env_kwargs, seed)


def evaluate_expert(
    env_id: str,
    *,
    split: str = "test",
    num_tasks: int | None = 100,
    episodes_per_task: int = 1,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
) -> EvalResult:
    """The scenario's scripted expert (`env.unwrapped.make_expert()`) under the same max turns: the
    ceiling to read a model against. Where the expert gives up (raises), the episode ends there."""
    expert: list[Any] = [None]  # this episode's expert, made after each reset

    def act(observation: str, info: dict[str, Any], env: MultiTurnWrapper) -> str | None:
        if env.turns == 0:
            expert[0] = env.unwrapped.make_expert()
        try:
            return expert[0].act(observation, info)
        except Exception:  # the expert has no move here; the episode ends as it stands
            return None

    return _play_policy("expert", act, env_id, split, num_tasks, episodes_per_task, max_turns, env_kwargs, seed)


def _play_policy(
    name: str,
    act: Any,
    env_id: str,
    split: str,
    num_tasks: int | None,
    episodes_per_task: int,
    max_turns: int | None,
    env_kwargs: dict[str, Any] | None,
    seed: int,
) -> EvalResult:
    """Play every episode with `act(observation, info, env) -> action text` (None: give up) in one env.

    The action becomes the reply the scenario's parser reads (`action_reply`: `Action: ...` for action-line formats).
    """
    import agentgym_envs  # noqa: F401

    env = MultiTurnWrapper(gym.make(env_id, **(env_kwargs or {})), max_turns=max_turns)
    action_format = env.unwrapped.action_format
    rows = []
    try:
        for task_id in split_tasks(env_id, split, num_tasks, env_kwargs):
            for k in range(episodes_per_task):
                observation, info = env.reset(seed=seed + k, options={"split": split, "task_id": task_id})
                gave_up = False
                while True:
                    action = act(observation, info, env)
                    if action is None:
                        gave_up = True
                        info = {**info, "episode": env.episode_stats()}
                        break
                    reply = action_reply(action, action_format)
                    observation, _, terminated, truncated, info = env.step(reply)
                    if terminated or truncated:
                        break
                row = episode_row(task_id, info, messages=env.messages, sample=k, max_turns=env.max_turns)
                rows.append({**row, "end_reason": "gave_up"} if gave_up else row)
    finally:
        env.close()
    result = summarize_episodes(rows)
    result.meta = {"policy": name, "env_id": env_id, "split": split, "max_turns": env.max_turns}
    return result


def paired_difference(before: EvalResult, after: EvalResult, key: str = "success") -> Estimate:
    """After minus before on the same tasks, with a paired 95% interval."""
    a, b = task_means(before.episodes, key), task_means(after.episodes, key)
    common = sorted(set(a) & set(b))
    return estimate([b[t] - a[t] for t in common])
