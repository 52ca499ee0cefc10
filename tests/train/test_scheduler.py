"""MaxTurnScheduler: horizons switch after the scheduled number of rollout batches (however many optimiser
steps each batch feeds) and survive a checkpoint and resume."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from train_helpers import grpo_args

from agentgym_train.models.tiny import load_model
from agentgym_train.scheduler import PRESETS, AdaptiveMaxTurnScheduler, MaxTurnScheduler


def test_presets_are_the_papers_schedules() -> None:
    assert MaxTurnScheduler.preset("babyai").schedule == [(0, 6), (100, 13), (200, 20)]
    assert MaxTurnScheduler.preset("SciWorld").schedule == [(0, 10), (100, 20), (200, 30)]
    assert MaxTurnScheduler.preset("deep_search").schedule == [(0, 5), (100, 8), (200, 10)]
    assert MaxTurnScheduler.preset("textcraft").schedule == [(0, 10), (100, 20), (200, 30)]
    assert MaxTurnScheduler.preset("webarena").schedule == [(0, 8), (80, 12), (160, 15)]
    assert set(PRESETS) == {"babyai", "sciworld", "deepsearch", "textcraft", "webarena"}
    with pytest.raises(ValueError, match="preset"):
        MaxTurnScheduler.preset("minecraft")
    with pytest.raises(ValueError, match="rollout batch 0"):
        MaxTurnScheduler([(10, 5)])


def test_callback_sets_the_engine_horizon_before_each_rollout_batch() -> None:
    scheduler = MaxTurnScheduler.stages([6, 13, 20], every=100)
    engine = SimpleNamespace(max_turns=None)
    scheduler.bind(engine)
    seen = []
    for done in (0, 99, 100, 150, 199, 200, 5000):
        scheduler.before_rollout(done)
        seen.append(engine.max_turns)
    assert seen == [6, 6, 13, 13, 13, 20, 20]
    scheduler.after_rollout(5001)
    assert scheduler.state()["attributes"] == {"max_turns": 20, "rollouts": 5001}


def _horizons(log_history: list[dict]) -> dict[int, int]:
    return {row["step"]: int(row["rollout/max_turns"]) for row in log_history if "rollout/max_turns" in row}


def test_horizon_changes_after_n_rollout_batches_not_n_optimiser_steps(tiny_babyai: Path, tmp_path: Path) -> None:
    """num_iterations=2: each rollout batch feeds two optimiser steps; the schedule counts batches."""
    import json

    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    schedule = [(0, 2), (1, 3), (2, 4)]
    args = grpo_args(tmp_path, max_steps=6, num_iterations=2, save_strategy="steps", save_steps=2, max_turns=None)
    model, tokenizer = load_model(tiny_babyai)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, callbacks=[MaxTurnScheduler(schedule)])
    trainer.train()
    trainer.engine.close()
    # rollouts at steps 1, 3 and 5 (batches 0, 1, 2); a step-counting schedule would give step 3 four turns
    assert _horizons(trainer.state.log_history) == {1: 2, 3: 3, 5: 4}
    assert trainer.rollout_batches == 3
    assert max(e.turns for e in trainer.last_episodes) <= 4
    saved = json.loads((tmp_path / "checkpoint-4" / "trainer_state.json").read_text())
    assert saved["stateful_callbacks"]["MaxTurnScheduler"]["attributes"]["rollouts"] == 2

    # Resume after batch 0 (step 2) with a scheduler built differently: the checkpoint's state wins.
    model, tokenizer = load_model(tiny_babyai)
    wrong = MaxTurnScheduler([(0, 9)])
    resumed = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, callbacks=[wrong])
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    resumed.engine.close()
    assert _horizons(resumed.state.log_history) == {1: 2, 3: 3, 5: 4}  # step 1's row comes from the checkpoint
    assert resumed.rollout_batches == 3
    restored = [cb for cb in resumed.callback_handler.callbacks if isinstance(cb, MaxTurnScheduler)]
    assert len(restored) == 1 and restored[0].schedule == schedule and restored[0].engine is resumed.engine


def test_evaluation_during_training_runs_at_eval_max_turns_at_every_stage(tiny_babyai: Path, tmp_path: Path) -> None:
    """The schedule's stages (1 then 2 turns) bound the training rollouts; every evaluation runs 4 turns,
    and the stage's horizon is back on the engine afterwards."""
    from train_helpers import BABYAI, ENV_KWARGS

    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer, task_dataset

    args = grpo_args(
        tmp_path,
        max_turns=None,
        eval_max_turns=4,
        eval_strategy="steps",
        eval_steps=1,
        per_device_eval_batch_size=4,
        max_completion_length=512,
    )
    model, tokenizer = load_model(tiny_babyai)
    trainer = MultiTurnGRPOTrainer(
        model,
        args,
        eval_dataset=task_dataset(BABYAI, "test", num_tasks=1, env_kwargs=ENV_KWARGS),
        processing_class=tokenizer,
        callbacks=[MaxTurnScheduler.stages([1, 2], every=1)],
    )
    trainer.train()
    trainer.engine.close()
    history = trainer.state.log_history
    assert _horizons(history) == {1: 1, 2: 2}
    evals = {row["step"]: row for row in history if "eval_rollout/max_turns" in row}
    assert {step: row["eval_rollout/max_turns"] for step, row in evals.items()} == {1: 4, 2: 4}
    # a random tiny model rarely finishes a task: its eval episodes run past either stage's limit
    assert all(row["eval_episode/turns"] > 2 for row in evals.values())
    assert max(e.turns for e in trainer.last_episodes) == 4  # the last evaluation's episodes
    assert trainer.engine.max_turns == 2


def _log(scheduler: AdaptiveMaxTurnScheduler, done: int, success: float, truncated: float, budget: float = 0.0) -> None:
    """The trainer's order: a rollout batch ends, then its metrics are logged."""
    scheduler.after_rollout(done)
    logs = {"episode/success": success, "episode/truncated": truncated, "episode/budget_truncated": budget}
    scheduler.on_log(None, None, None, logs)


def test_adaptive_scheduler_raises_the_horizon_and_its_state_round_trips() -> None:
    scheduler = AdaptiveMaxTurnScheduler([4, 8, 12], min_steps=3, window=2, truncation_threshold=0.5)
    engine = SimpleNamespace(max_turns=None)
    scheduler.bind(engine)
    # improving success: stays at 4 turns even though many episodes are truncated
    for done, success in enumerate([0.1, 0.2, 0.3, 0.4], start=1):
        _log(scheduler, done, success, 0.8)
    assert engine.max_turns == 4
    # a plateau while truncated: moves to 8 from rollout batch 7 on
    for done, success in enumerate([0.4, 0.4, 0.4], start=5):
        _log(scheduler, done, success, 0.8)
    assert engine.max_turns == 8 and scheduler.schedule == [(0, 4), (7, 8)]
    # a plateau without truncation: the horizon is long enough, it stays
    for done in range(8, 16):
        _log(scheduler, done, 0.4, 0.1)
    assert engine.max_turns == 8

    state = scheduler.state()  # what the Trainer writes to the checkpoint, and how it rebuilds the callback
    restored = AdaptiveMaxTurnScheduler(**state["args"])
    for key, value in state["attributes"].items():
        setattr(restored, key, value)
    assert restored.schedule == [(0, 4), (7, 8)] and restored.rollouts == 15
    restored.before_rollout(20)
    assert restored.max_turns == 8 and restored.success_history == scheduler.success_history


def test_adaptive_scheduler_does_not_read_a_token_budget_cut_as_a_short_horizon() -> None:
    """Episodes cut by max_completion_length count in episode/truncated but a longer horizon would not help them."""
    budget_bound = AdaptiveMaxTurnScheduler([4, 8], min_steps=2, window=2, truncation_threshold=0.5)
    turn_bound = AdaptiveMaxTurnScheduler([4, 8], min_steps=2, window=2, truncation_threshold=0.5)
    for done in range(1, 9):
        _log(budget_bound, done, 0.3, truncated=0.9, budget=0.8)  # turn-limit rate 0.1
        _log(turn_bound, done, 0.3, truncated=0.9, budget=0.1)  # turn-limit rate 0.8
    assert budget_bound.max_turns == 4 and budget_bound.schedule == [(0, 4)]
    assert turn_bound.max_turns == 8 and turn_bound.schedule == [(0, 4), (4, 8)]
