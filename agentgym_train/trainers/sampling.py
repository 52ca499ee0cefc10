"""What the rollout's sampling puts into the loss: dynamic sampling, and TRL's vLLM importance sampling's shares.

Dynamic sampling (DAPO, Yu et al. 2025): zero-variance groups leave the batch, new tasks refill it.

Under group normalisation a group whose episodes all score alike has advantage 0 everywhere: it adds
nothing to the gradient and dilutes the batch. With `dynamic_sampling`, the GRPO trainer scores each
rollout inside the rollout with its own reward functions, finds the groups that are flat by
`dynamic_sampling_metric` (`success`: every scorable episode succeeded, or none did, DAPO's
`std(acc) == 0`; `reward`: every scorable episode got the same weighted reward, the one the loss sees),
replaces each by a group of `num_generations` episodes of a new task of the train dataset, and repeats
until no flat group is left or the cap is spent: at most `floor(dynamic_sampling_max_extra x the batch's
groups)` new groups (None: no cap). The flat groups still there then follow `dynamic_sampling_at_cap`:
`keep` (they stay, advantage 0, still under the KL term), `drop` (their tokens leave the loss, as a failed
env's group does; TRL's batch keeps its rows) or `error` (a RuntimeError, as DAPO's
`max_num_gen_batches`). A new group takes over its slot's rows, so the batch keeps its size and its rows
on every process.

Every process takes the same decisions: they are made on the gathered rewards and successes, the new
tasks are drawn from one permutation seeded by `seed` and the rollout batch's index (saved with
checkpoints, so a resumed run continues the order), and each refill round splits its episodes evenly
over the processes (its group count a multiple of the groups whose episodes split evenly, so that on N
processes with groups that do not divide, up to that multiple minus one of the cap may stay unused),
then gathers them to the processes that hold the slots. The scores are handed to TRL's scoring step, so
each episode's reward functions run once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

#: What must vary inside a group for dynamic sampling to keep it (`dynamic_sampling_metric`).
METRICS = ("success", "reward")
#: What happens to the zero-variance groups left when the cap is spent (`dynamic_sampling_at_cap`).
AT_CAP = ("keep", "drop", "error")


@dataclass
class Refill:
    """What dynamic sampling did to one rollout batch (all processes)."""

    groups: int = 0  # the batch's groups
    zero_variance: int = 0  # of those, zero-variance before any refill
    dropped: int = 0  # zero-variance groups replaced by a refill (the batch's) or left at once (the refills')
    kept: int = 0  # zero-variance groups left in the batch at the cap and trained on (`keep`)
    masked: list[int] = field(default_factory=list)  # the slots of those left at the cap and masked (`drop`)
    cap: int | None = None  # most new groups (None: no cap)
    extra_groups: int = 0  # new groups rolled out
    extra_episodes: int = 0
    rounds: int = 0  # extra rollout rounds

    def metrics(self) -> dict[str, float]:
        rolled = self.groups + self.extra_groups
        out = {
            "sampling/zero_variance_share": self.zero_variance / max(self.groups, 1),
            "sampling/dropped_group_share": self.dropped / max(rolled, 1),
            "sampling/dropped_groups": float(self.dropped),
            "sampling/kept_zero_variance_groups": float(self.kept),
            "sampling/masked_zero_variance_groups": float(len(self.masked)),
            "sampling/extra_episodes": float(self.extra_episodes),
            "sampling/extra_rounds": float(self.rounds),
        }
        if self.cap is not None:  # no cap: nothing to log
            out["sampling/cap_groups"] = float(self.cap)
        return out


def zero_variance(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """(N / group_size,) bool: every scorable (non-NaN) reward of the group is equal, or fewer than two are
    scorable; such a group's GRPO advantages are all 0."""
    groups = rewards.float().view(-1, group_size)
    valid = ~torch.isnan(groups)
    high = torch.where(valid, groups, -math.inf).max(dim=1).values
    low = torch.where(valid, groups, math.inf).min(dim=1).values
    return (valid.sum(dim=1) < 2) | (high == low)


def flat_groups(metric: str, rewards: torch.Tensor, successes: list[float], group_size: int) -> torch.Tensor:
    """(N / group_size,) bool: the groups with no variance by `metric` (`success` or `reward`, see `METRICS`);
    episodes with a NaN reward (unscorable) are left out of either."""
    if metric not in METRICS:
        raise ValueError(f"dynamic_sampling_metric must be one of {METRICS}, got {metric!r}")
    if metric == "reward":
        return zero_variance(rewards, group_size)
    success = torch.tensor(successes, dtype=torch.float32, device=rewards.device)
    return zero_variance(torch.where(torch.isnan(rewards), torch.nan, success), group_size)


def cap_groups(max_extra: float | None, groups: int, unit: int = 1) -> int | None:
    """Most new groups for a batch of `groups` groups: `floor(max_extra x groups)` (None: no cap), rounded down to
    a multiple of `unit`, the groups whose episodes split evenly over the processes."""
    if max_extra is None:
        return None
    return math.floor(max_extra * groups + 1e-9) // unit * unit  # 1e-9: 0.29 x 100 is 28.999... in floats


def reward_fields(episodes: list[Any], penalty: list[float]) -> dict[str, list[Any]]:
    """The rollout's extra fields that TRL hands to the reward functions, per episode."""
    return {
        "overlong_penalty": penalty,
        "episode_return": [e.episode_return for e in episodes],
        "success": [float(e.success) for e in episodes],
        "turns": [e.turns for e in episodes],
        "truncated": [float(e.truncated or e.budget_truncated) for e in episodes],
        "budget_truncated": [float(e.budget_truncated) for e in episodes],
        "invalid_replies": [e.invalid_replies for e in episodes],
    }


def score(trainer: Any, rows: list[dict[str, Any]], episodes: list[Any]) -> tuple[torch.Tensor, list[dict[str, Any]]]:
    """(N, F) every process's rewards per reward function for these rows' episodes, as TRL's scoring step
    computes them (the trainer's `_calculate_rewards`, fed what TRL feeds it; sets `trainer.rewards`), and per
    row what the reward functions logged for it with `log_extra` (one value per row, as TRL expects)."""
    from trl.data_utils import is_conversational

    from agentgym_train.trainers import truncation

    _, penalty = truncation.guard_rollout(episodes, trainer.args)
    fields = reward_fields(episodes, penalty)
    inputs = [{**row, **{k: v[i] for k, v in fields.items()}} for i, row in enumerate(rows)]
    prompts = [row["prompt"] for row in rows]
    ids = [e.completion_ids for e in episodes]
    texts = trainer.processing_class.batch_decode(ids, skip_special_tokens=True)
    if prompts and is_conversational({"prompt": prompts[0]}):
        texts = [[{"role": "assistant", "content": text}] for text in texts]
    pending = trainer._pending_extra_logs
    before = {column: len(values) for column, values in pending.items()}
    scores = trainer._calculate_rewards(inputs, prompts, texts, ids)
    logged: list[dict[str, Any]] = [{} for _ in rows]
    for column, values in pending.items():
        added = values[before.get(column, 0) :]
        if len(added) == len(rows):
            for entry, value in zip(logged, added, strict=True):
                entry[column] = value
    return scores, logged


class TaskDraws:
    """New task rows for one rollout batch: the train dataset in one seeded order, tasks of the batch and
    tasks drawn already skipped while others are left (then repeats)."""

    def __init__(self, dataset: Any, seed: int, taken: set[tuple[Any, ...]]):
        self.dataset, self.taken, self.seed = dataset, taken, seed
        self.order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed)).tolist()
        names = getattr(dataset, "column_names", None) or []
        columns = [dataset[c] if c in names else [None] * len(dataset) for c in ("env_id", "task_id", "split")]
        self.keys = [(env_id, str(task), split) for env_id, task, split in zip(*columns, strict=True)]  # task_key

    def draw(self, count: int) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        while len(rows) < count:
            fresh = [i for i in self.order if self.keys[i] not in self.taken]
            if not fresh:  # every task is in the batch or drawn: draw again from the whole dataset
                self.taken = set()
                continue
            for index in fresh[: count - len(rows)]:
                self.taken.add(self.keys[index])
                rows.append(dict(self.dataset[index]))
        return rows


def task_key(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row.get("env_id"), str(row.get("task_id")), row.get("split"))


def refill(trainer: Any, rows: list[dict[str, Any]], episodes: list[Any], run: Any) -> tuple[list[Any], Refill]:
    """Dynamic sampling over this process's `rows` and their `episodes` (the rollout batch as run).

    Replaces, in place, the rows of each refilled slot (the trainer's rollout rows: TRL's inputs), and
    returns the episodes of the batch now, with what happened. `run(rows)` plays rows' episodes on this
    process. Leaves the final batch's rewards per function (all processes) in `trainer._scored` for
    TRL's scoring step.
    """
    from accelerate.utils import gather_object

    args, accelerator = trainer.args, trainer.accelerator
    group, processes, rank = trainer.num_generations, accelerator.num_processes, accelerator.process_index
    start, episodes = rank * len(rows), list(episodes)
    everyone = (lambda items: gather_object(items)) if processes > 1 else (lambda items: items)
    metric = args.dynamic_sampling_metric
    trainer._scored = None
    base = {column: list(values) for column, values in trainer._pending_extra_logs.items()}
    scores, logged = score(trainer, rows, episodes)
    timing = dict(trainer.engine.timing)
    successes = everyone([float(e.success) for e in episodes])
    open_slots = torch.nonzero(flat_groups(metric, trainer.rewards, successes, group)).flatten().tolist()
    unit = processes // math.gcd(group, processes)  # groups whose episodes split evenly over the processes
    report = Refill(groups=scores.size(0) // group, zero_variance=len(open_slots))
    report.cap = cap_groups(args.dynamic_sampling_max_extra, report.groups, unit)
    taken = [task_key(row) for row in rows]
    draws = TaskDraws(trainer.train_dataset, args.seed * 1_000_003 + trainer.rollout_batches, set(everyone(taken)))
    while open_slots:
        count = math.ceil(len(open_slots) / unit) * unit
        if report.cap is not None:
            count = min(count, report.cap - report.extra_groups)  # both multiples of unit
        if count <= 0:
            break
        new = draws.draw(count)
        batch = [row for row in new for _ in range(group)]
        share = len(batch) // processes
        mine = [dict(row) for row in batch[rank * share : (rank + 1) * share]]
        played = run(mine)
        for key, seconds in trainer.engine.timing.items():
            timing[key] = timing.get(key, 0.0) + seconds
        new_scores, new_logged = score(trainer, mine, played)
        played, new_logged = everyone(played), everyone(new_logged)  # the round's order, every process's share
        flat = flat_groups(metric, trainer.rewards, [float(e.success) for e in played], group).tolist()
        report.dropped += sum(flat)  # zero-variance new groups leave at once
        report.rounds, report.extra_groups, report.extra_episodes = (
            report.rounds + 1,
            report.extra_groups + count,
            report.extra_episodes + len(batch),
        )
        for j in [j for j, flat_group in enumerate(flat) if not flat_group]:
            if not open_slots:
                break
            slot = open_slots.pop(0)
            report.dropped += 1  # the slot's zero-variance group leaves
            for k in range(group):
                row, source = slot * group + k, j * group + k
                scores[row] = new_scores[source]
                if start <= row < start + len(rows):
                    rows[row - start] = dict(batch[source])
                    episodes[row - start], logged[row - start] = played[source], new_logged[source]
    if open_slots and args.dynamic_sampling_at_cap == "error":
        raise RuntimeError(
            f"dynamic sampling: {len(open_slots)} of {report.groups} groups still have no variance by "
            f"{metric} after {report.extra_groups} new groups, the cap (dynamic_sampling_max_extra="
            f"{args.dynamic_sampling_max_extra} x {report.groups} groups = {report.cap}); raise the cap (None: no "
            "cap), or set dynamic_sampling_at_cap to 'keep' or 'drop'"
        )
    if args.dynamic_sampling_at_cap == "drop":
        report.masked = list(open_slots)
    else:
        report.kept = len(open_slots)
    trainer.engine.timing = timing
    trainer._scored = scores
    trainer._pending_extra_logs.clear()  # what reward functions logged (`log_extra`), for the batch's rows only
    trainer._pending_extra_logs.update(base)
    for column in sorted({column for entry in logged for column in entry}):
        trainer._pending_extra_logs[column].extend(entry.get(column) for entry in logged)
    return episodes, report


# ---- what TRL's vLLM importance sampling leaves in the loss ------------------------------------------------


def importance_sampling_counts(
    output: dict[str, Any], mode: str, bounds: tuple[float | None, float | None]
) -> torch.Tensor | None:
    """This process's counts for `importance_sampling_shares`: model tokens that TRL's vLLM importance sampling
    takes out of the loss (ratio 0, the `*_mask` modes), tokens whose ratio it capped at one of `bounds` (the
    `*_truncate` modes), model tokens, episodes left without a model token, episodes. None without a ratio."""
    ratio = output.get("importance_sampling_ratio")
    if ratio is None:
        return None
    mask = output["completion_mask"].bool()
    if output.get("tool_mask") is not None:
        mask = mask & output["tool_mask"].bool()
    ratio = ratio.expand_as(mask)  # the sequence modes give one ratio per episode
    masked = (ratio == 0) & mask
    clipped = torch.zeros_like(mask)
    if mode.endswith("_truncate"):
        for bound in bounds:
            if bound is not None:
                clipped |= (ratio == bound) & mask  # clamp returns the bound itself
    episodes = mask.any(dim=1)
    left_out = episodes & ~(mask & ~masked).any(dim=1)
    counts = [masked.sum(), clipped.sum(), mask.sum(), left_out.sum(), episodes.sum()]
    return torch.stack(counts).to(torch.float64)


def importance_sampling_shares(totals: list[float]) -> dict[str, float]:
    """The logged shares from `importance_sampling_counts` summed over processes: of the model tokens masked and
    capped, of the episodes masked (an episode counts as masked when none of its model tokens is left)."""
    masked_tokens, clipped_tokens, tokens, masked_episodes, n = totals
    return {
        "sampling/is_masked_token_share": masked_tokens / max(tokens, 1),
        "sampling/is_clipped_token_share": clipped_tokens / max(tokens, 1),
        "sampling/is_masked_episode_share": masked_episodes / max(n, 1),
    }
