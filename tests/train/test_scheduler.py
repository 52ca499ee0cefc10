"""MaxTurnScheduler: horizons switch at the scheduled steps and survive a checkpoint and resume."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from train_helpers import grpo_args

from agentgym_train.scheduler import PRESETS, AdaptiveMaxTurnScheduler, MaxTurnScheduler
from agentgym_train.tiny import load_model


def test_presets_are_the_papers_schedules() -> None:
    assert MaxTurnScheduler.preset("babyai").schedule == [(0, 6), (100, 13), (200, 20)]
    assert MaxTurnScheduler.preset("SciWorld").schedule == [(0, 10), (100, 20), (200, 30)]
    assert MaxTurnScheduler.preset("deep_search").schedule == [(0, 5), (100, 8), (200, 10)]
    assert MaxTurnScheduler.preset("textcraft").schedule == [(0, 10), (100, 20), (200, 30)]
    assert MaxTurnScheduler.preset("webarena").schedule == [(0, 8), (80, 12), (160, 15)]
    assert set(PRESETS) == {"babyai", "sciworld", "deepsearch", "textcraft", "webarena"}
    with pytest.raises(ValueError, match="preset"):
        MaxTurnScheduler.preset("minecraft")
    with pytest.raises(ValueError, match="step 0"):
        MaxTurnScheduler([(10, 5)])


def test_callback_sets_the_engine_horizon_before_each_step() -> None:
    scheduler = MaxTurnScheduler.stages([6, 13, 20], every=100)
    engine = SimpleNamespace(max_turns=None)
    scheduler.bind(engine)
    seen = []
    for step in (0, 99, 100, 150, 199, 200, 5000):
        scheduler.on_step_begin(None, SimpleNamespace(global_step=step), None)
        seen.append(engine.max_turns)
    assert seen == [6, 6, 13, 13, 13, 20, 20]


def _horizons(log_history: list[dict]) -> dict[int, int]:
    return {row["step"]: int(row["rollout/max_turns"]) for row in log_history if "rollout/max_turns" in row}


def test_training_switches_horizons_and_resumes_with_the_right_one(tiny_babyai: Path, tmp_path: Path) -> None:
    from agentgym_train.grpo import MultiTurnGRPOTrainer

    schedule = [(0, 2), (2, 3), (3, 4)]
    args = grpo_args(tmp_path, max_steps=4, save_strategy="steps", save_steps=2, max_turns=None)
    model, tokenizer = load_model(tiny_babyai)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, callbacks=[MaxTurnScheduler(schedule)])
    trainer.train()
    trainer.engine.close()
    # the rollout of step s runs at global_step s - 1
    assert _horizons(trainer.state.log_history) == {1: 2, 2: 2, 3: 3, 4: 4}
    assert max(e.turns for e in trainer.last_episodes) <= 4

    # Resume at step 2 with a scheduler built differently: the checkpoint's state wins.
    model, tokenizer = load_model(tiny_babyai)
    wrong = MaxTurnScheduler([(0, 9)])
    resumed = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, callbacks=[wrong])
    resumed.train(resume_from_checkpoint=str(tmp_path / "checkpoint-2"))
    resumed.engine.close()
    horizons = _horizons(resumed.state.log_history)
    assert horizons[3] == 3 and horizons[4] == 4
    restored = [cb for cb in resumed.callback_handler.callbacks if isinstance(cb, MaxTurnScheduler)]
    assert len(restored) == 1 and restored[0].schedule == schedule and restored[0].engine is resumed.engine


def test_adaptive_scheduler_raises_the_horizon_and_its_state_round_trips() -> None:
    scheduler = AdaptiveMaxTurnScheduler([4, 8, 12], min_steps=3, window=2, truncation_threshold=0.5)
    engine = SimpleNamespace(max_turns=None)
    scheduler.bind(engine)
    # improving success: stays at 4 turns even though many episodes are truncated
    for step, success in enumerate([0.1, 0.2, 0.3, 0.4], start=1):
        scheduler.on_log(
            None, SimpleNamespace(global_step=step), None, {"episode/success": success, "episode/truncated": 0.8}
        )
    assert engine.max_turns == 4
    # a plateau while truncated: moves to 8
    for step, success in enumerate([0.4, 0.4, 0.4], start=5):
        scheduler.on_log(
            None, SimpleNamespace(global_step=step), None, {"episode/success": success, "episode/truncated": 0.8}
        )
    assert engine.max_turns == 8 and scheduler.schedule == [(0, 4), (7, 8)]
    # a plateau without truncation: the horizon is long enough, it stays
    for step in range(8, 16):
        scheduler.on_log(
            None, SimpleNamespace(global_step=step), None, {"episode/success": 0.4, "episode/truncated": 0.1}
        )
    assert engine.max_turns == 8

    state = scheduler.state()  # what the Trainer writes to the checkpoint, and how it rebuilds the callback
    restored = AdaptiveMaxTurnScheduler(**state["args"])
    for key, value in state["attributes"].items():
        setattr(restored, key, value)
    assert restored.schedule == [(0, 4), (7, 8)]
    restored.on_step_begin(None, SimpleNamespace(global_step=20), None)
    assert restored.max_turns == 8 and restored.success_history == scheduler.success_history
