"""Dynamic sampling (issues 25.2, 34.5, 39): a zero-variance group leaves the batch and a group of a new task takes
its slot; the filter's metric, the cap, the choice at the cap, the estimators it is refused for, the draw order
across a resume.

The tiny model's BabyAI episodes are played for real; their returns are then scripted per call of the engine:
in the groups listed as flat every episode returns 1 (and succeeds), elsewhere returns alternate 0, 1, 0, 1
within a group (success with them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import grpo_args, launch_two_processes, rank_reports

from agentgym_train.models.tiny import load_model
from agentgym_train.trainers import sampling
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer, episode_return


def _scripted(
    trainer: MultiTurnGRPOTrainer, flat: dict[int, set[int]], partial: dict[int, set[int]] | None = None
) -> list[list[str]]:
    """Scripts the engine's returns: in call c, the groups in flat[c] return 1 throughout, those in partial[c]
    return 0.5, 0.2, 0.5, 0.2 and never succeed (flat by success, not by reward). Returns the task ids of each
    call's groups."""
    calls: list[list[str]] = []
    run, group = trainer.engine.run, trainer.num_generations

    def scripted(tasks: list[Any], *args: Any, **kwargs: Any) -> list[Any]:
        episodes = run(tasks, *args, **kwargs)
        for i, episode in enumerate(episodes):
            episode.episode_return = 1.0 if i // group in flat.get(len(calls), set()) else float(i % 2)
            if i // group in (partial or {}).get(len(calls), set()):
                episode.episode_return = 0.5 if i % 2 == 0 else 0.2
            episode.success = episode.episode_return == 1.0
        calls.append([t.task_id for t in tasks[::group]])
        return episodes

    trainer.engine.run = scripted
    return calls


def _trainer(tiny_babyai: Path, tmp_path: Path, **overrides: Any) -> MultiTurnGRPOTrainer:
    model, tokenizer = load_model(tiny_babyai)
    funcs = overrides.pop("funcs", None)
    args = grpo_args(tmp_path, max_turns=2, dynamic_sampling=True, **overrides)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=funcs)
    trainer.model.train()  # as in training: dynamic sampling leaves evaluation alone
    return trainer


def test_zero_variance_group_leaves_the_loss_and_a_new_task_takes_its_slot(tiny_babyai: Path, tmp_path: Path) -> None:
    def tagged(completions: list[Any], task_id: list[str], log_extra: Any, **kwargs: Any) -> list[float]:
        log_extra("task", list(task_id))  # the completions table's column: must name the rows trained on
        return [0.0] * len(completions)

    trainer = _trainer(tiny_babyai, tmp_path, funcs=[episode_return, tagged])
    calls = _scripted(trainer, {0: {0}, 1: {0}})  # the batch's first group is flat, and so is the first refill
    batch = next(iter(trainer.get_train_dataloader()))
    original = [row["task_id"] for row in batch[::4]]
    out = trainer._generate_and_score_completions(batch)

    # three rounds: the batch (2 groups), a refill that was flat too, a refill with variance
    assert [len(c) for c in calls] == [2, 1, 1]
    assert calls[0] == original
    new_task = calls[2][0]
    assert len({original[0], original[1], calls[1][0], new_task}) == 4  # refills are tasks not in the batch
    trained = [e.task.task_id for e in trainer.last_episodes]
    assert trained == [new_task] * 4 + [original[1]] * 4
    assert [row["task_id"] for row in batch] == trained  # TRL's rows (the reward functions' inputs) follow
    assert original[0] not in trained and calls[1][0] not in trained
    # every episode of the batch now has a nonzero GRPO advantage: the flat group is out of the loss
    returns = torch.tensor([0.0, 1.0, 0.0, 1.0] * 2)
    expected = (returns.view(2, 4) - 0.5) / (returns.view(2, 4).std(dim=1, keepdim=True) + 1e-4)
    assert torch.allclose(out["advantages"], expected.flatten(), atol=1e-5)
    assert torch.equal(trainer.rewards, returns)
    assert list(trainer._logs["prompt"])[-8:] == [row["prompt"] for row in batch]
    assert list(trainer._logs["extra"]["task"]) == trained
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("sampling/")}
    assert metrics == {
        "sampling/zero_variance_share": 0.5,  # 1 of the batch's 2 groups
        "sampling/dropped_group_share": 0.5,  # 2 dropped (the batch's and the first refill) of 4 rolled out
        "sampling/dropped_groups": 2.0,
        "sampling/kept_zero_variance_groups": 0.0,
        "sampling/masked_zero_variance_groups": 0.0,
        "sampling/extra_episodes": 8.0,
        "sampling/extra_rounds": 2.0,
        "sampling/cap_groups": 2.0,  # 1.0 x the batch's 2 groups
    }
    trainer.engine.close()


def test_spent_cap_keeps_the_zero_variance_group_with_advantage_zero(tiny_babyai: Path, tmp_path: Path) -> None:
    # cap: 0.5 x 2 groups = 1 extra group, and that one is flat too
    trainer = _trainer(tiny_babyai, tmp_path, dynamic_sampling_max_extra=0.5)
    calls = _scripted(trainer, {0: {0}, 1: {0}})
    batch = next(iter(trainer.get_train_dataloader()))
    original = [row["task_id"] for row in batch[::4]]
    out = trainer._generate_and_score_completions(batch)
    assert [len(c) for c in calls] == [2, 1]
    assert [e.task.task_id for e in trainer.last_episodes] == [original[0]] * 4 + [original[1]] * 4
    assert torch.count_nonzero(out["advantages"][:4]) == 0
    assert torch.count_nonzero(out["advantages"][4:]) == 4
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("sampling/")}
    assert metrics["sampling/kept_zero_variance_groups"] == 1.0
    assert metrics["sampling/dropped_groups"] == 1.0  # the flat refill
    assert metrics["sampling/dropped_group_share"] == pytest.approx(1 / 3)
    assert (metrics["sampling/extra_episodes"], metrics["sampling/extra_rounds"]) == (4.0, 1.0)
    trainer.engine.close()


@pytest.mark.parametrize(("weights", "refilled"), [([1.0, 1.0], False), ([1.0, 0.0], True)])
def test_variance_is_the_trained_reward(
    tiny_babyai: Path, tmp_path: Path, weights: list[float], refilled: bool
) -> None:
    """A second reward function that varies inside every group: the flat group has variance under the weighted
    sum, and none when its weight is 0."""

    def position(completions: list[Any], **kwargs: Any) -> list[float]:
        return [float(i % 2) for i in range(len(completions))]

    trainer = _trainer(
        tiny_babyai,
        tmp_path,
        reward_weights=weights,
        funcs=[episode_return, position],
        dynamic_sampling_metric="reward",
    )
    calls = _scripted(trainer, {0: {0, 1}})
    trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    assert (len(calls) > 1) == refilled
    trainer.engine.close()


@pytest.mark.parametrize(("metric", "refilled"), [("success", True), ("reward", False)])
def test_the_filter_metric(tiny_babyai: Path, tmp_path: Path, metric: str, refilled: bool) -> None:
    """A group whose episodes all fail with returns 0.5, 0.2, 0.5, 0.2: flat by success (DAPO's filter, the
    default), varied by reward."""
    trainer = _trainer(tiny_babyai, tmp_path, **({"dynamic_sampling_metric": metric} if metric == "reward" else {}))
    assert trainer.args.dynamic_sampling_metric == metric
    calls = _scripted(trainer, {}, partial={0: {0}})
    trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    assert [len(c) for c in calls] == ([2, 1] if refilled else [2])
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("sampling/")}
    assert metrics["sampling/zero_variance_share"] == (0.5 if refilled else 0.0)
    trainer.engine.close()


def test_the_cap_is_exact_and_none_is_no_cap(tiny_babyai: Path, tmp_path: Path) -> None:
    """The first group stays flat in the batch and in every refill but the fourth. A cap of 0.75 x 2 groups is 1
    new group (it was rounded up to 2); None refills until the group has variance."""
    trainer = _trainer(tiny_babyai, tmp_path, dynamic_sampling_max_extra=0.75)
    calls = _scripted(trainer, {0: {0}, 1: {0}, 2: {0}})
    trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    assert [len(c) for c in calls] == [2, 1]
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("sampling/")}
    assert (metrics["sampling/cap_groups"], metrics["sampling/kept_zero_variance_groups"]) == (1.0, 1.0)
    trainer.engine.close()

    trainer = _trainer(tiny_babyai, tmp_path, dynamic_sampling_max_extra=None)
    calls = _scripted(trainer, {0: {0}, 1: {0}, 2: {0}})
    trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    assert [len(c) for c in calls] == [2, 1, 1, 1]
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("sampling/")}
    assert "sampling/cap_groups" not in metrics and metrics["sampling/kept_zero_variance_groups"] == 0.0
    assert metrics["sampling/extra_rounds"] == 3.0
    trainer.engine.close()


def test_at_the_cap_drop_masks_the_flat_group_and_error_raises(tiny_babyai: Path, tmp_path: Path) -> None:
    """Cap 0 (no refill): the flat first group is left at the cap; `drop` takes every token of it out of the loss
    (no policy gradient, no KL), `error` stops with what to change."""
    trainer = _trainer(tiny_babyai, tmp_path, dynamic_sampling_max_extra=0.0, dynamic_sampling_at_cap="drop")
    calls = _scripted(trainer, {0: {0}})
    out = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    assert [len(c) for c in calls] == [2]
    mask = out["completion_mask"] * out["tool_mask"]
    assert mask[:4].sum() == 0 and (mask[4:].sum(dim=1) > 0).all()
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("sampling/")}
    assert metrics["sampling/masked_zero_variance_groups"] == 1.0
    assert (metrics["sampling/kept_zero_variance_groups"], metrics["sampling/cap_groups"]) == (0.0, 0.0)
    trainer.engine.close()

    trainer = _trainer(tiny_babyai, tmp_path, dynamic_sampling_max_extra=0.5, dynamic_sampling_at_cap="error")
    _scripted(trainer, {0: {0}, 1: {0}})
    with pytest.raises(RuntimeError, match=r"1 of 2 groups still have no variance by success after 1 new groups"):
        trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    trainer.engine.close()


def test_settings_are_refused_with_what_would_be_right(tmp_path: Path) -> None:
    with pytest.raises(
        ValueError, match=r"reinforce\+\+' is not one .*'grpo', 'rloo', 'reinforce\+\+_baseline', 'gigpo'"
    ):
        grpo_args(tmp_path, dynamic_sampling=True, advantage_estimator="reinforce++")
    grpo_args(tmp_path, dynamic_sampling=True, advantage_estimator="reinforce++_baseline")
    grpo_args(tmp_path, advantage_estimator="reinforce++")  # without dynamic sampling: fine
    with pytest.raises(ValueError, match=r"dynamic_sampling_metric must be one of \('success', 'reward'\)"):
        grpo_args(tmp_path, dynamic_sampling_metric="return")
    with pytest.raises(ValueError, match=r"dynamic_sampling_at_cap must be one of \('keep', 'drop', 'error'\)"):
        grpo_args(tmp_path, dynamic_sampling_at_cap="raise")
    with pytest.raises(ValueError, match="or None for no cap"):
        grpo_args(tmp_path, dynamic_sampling_max_extra=-1.0)
    assert sampling.cap_groups(0.29, 100) == 29 and sampling.cap_groups(1.0, 3, unit=2) == 2
    assert sampling.cap_groups(None, 4) is None


def test_a_resumed_run_continues_the_draw_order(tiny_babyai: Path, tmp_path: Path, monkeypatch: Any) -> None:
    """Without a scheduler: the draws of the resumed run's batch are the uninterrupted run's for that batch (each
    batch's order is seeded by its index, which the checkpoint keeps), not batch 0's again."""
    draws: list[tuple[int, list[str]]] = []
    real = sampling.TaskDraws.draw

    def draw(self: sampling.TaskDraws, count: int) -> list[dict[str, Any]]:
        rows = real(self, count)
        draws.append((self.seed, [row["task_id"] for row in rows]))
        return rows

    monkeypatch.setattr(sampling.TaskDraws, "draw", draw)

    def run(resume: str | None) -> list[tuple[int, list[str]]]:
        draws.clear()
        args = grpo_args(tmp_path, max_turns=2, dynamic_sampling=True, save_strategy="steps", save_steps=1)
        model, tokenizer = load_model(tiny_babyai)
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
        engine, group = trainer.engine.run, trainer.num_generations

        def scripted(tasks: list[Any], *a: Any, **k: Any) -> list[Any]:  # each batch's first group is flat
            episodes = engine(tasks, *a, **k)
            for i, episode in enumerate(episodes):
                flat = len(tasks) == 8 and i < group
                episode.episode_return = 1.0 if flat else float(i % 2)
                episode.success = episode.episode_return == 1.0
            return episodes

        trainer.engine.run = scripted
        trainer.train(resume_from_checkpoint=resume)
        trainer.engine.close()
        return list(draws)

    whole = run(None)
    assert [seed for seed, _ in whole] == [0, 1]  # seed 0 x 1_000_003 + the batch's index
    assert whole[0][1] != whole[1][1]
    resumed = run(str(tmp_path / "checkpoint-1"))
    assert resumed == whole[1:]


def test_zero_variance_leaves_unscorable_episodes_out() -> None:
    nan = float("nan")
    rewards = torch.tensor([1.0, 1.0, nan, 1.0, 0.0, 1.0, nan, nan, nan, 2.0, nan, nan])
    assert sampling.zero_variance(rewards, 3).tolist() == [True, False, True, True]


def test_two_processes_refill_a_group_that_straddles_them(tiny_babyai: Path, tmp_path: Path) -> None:
    launch_two_processes("dynamic_sampling_job.py", tiny_babyai, tmp_path, timeout=600)
    ranks = rank_reports(tmp_path)
    assert ranks[0]["flat"] == ranks[1]["flat"]
    # one refill round: 1 group of 4 episodes, 2 on each rank, then moved to the ranks that hold its slot
    assert [r["calls"] for r in ranks] == [[6, 2], [6, 2]]
    tasks = ranks[0]["tasks"] + ranks[1]["tasks"]
    new = tasks[4]
    assert ranks[0]["flat"] not in tasks and tasks[4:8] == [new] * 4
    assert len(set(tasks[0:4])) == len(set(tasks[8:12])) == 1 and len({tasks[0], new, tasks[8]}) == 3
    assert [r["rows"] for r in ranks] == [r["tasks"] for r in ranks]
    assert all(a != 0 for r in ranks for a in r["advantages"])
    assert ranks[0]["metrics"] == ranks[1]["metrics"]
    assert ranks[0]["metrics"]["sampling/zero_variance_share"] == pytest.approx(1 / 3)
    assert ranks[0]["metrics"]["sampling/dropped_groups"] == 1.0
    assert (ranks[0]["metrics"]["sampling/extra_episodes"], ranks[0]["metrics"]["sampling/extra_rounds"]) == (4.0, 1.0)
