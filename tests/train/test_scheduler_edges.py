"""The max-turn schedule's checks, counters, presets and checkpoint state that the mutation run (`tox -e mutants`,
docs/contributing.md) found untested."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from agentgym_train.scheduler import AdaptiveMaxTurnScheduler, MaxTurnScheduler


def test_schedule_checks_its_pairs() -> None:
    assert MaxTurnScheduler([(0, 1)]).max_turns == 1  # one turn is a horizon
    for bad in ([(0, 0)], [(0, 3), (0, 4)]):
        with pytest.raises(ValueError, match="schedule batches must be distinct and max_turns >= 1"):
            MaxTurnScheduler(bad)
    for bad in ([], [5, 3]):
        with pytest.raises(ValueError, match=re.escape(f"horizons must be a non-empty increasing list, got {bad}")):
            AdaptiveMaxTurnScheduler(bad)
    adaptive = AdaptiveMaxTurnScheduler([2, 4])
    assert (adaptive.min_steps, adaptive.truncation_threshold, adaptive.window) == (50, 0.3, 5)


def test_presets_read_any_spelling_and_their_spacing() -> None:
    babyai = MaxTurnScheduler.preset("babyai").schedule
    for name in ("Baby-AI", "baby_ai", "Baby AI"):
        assert MaxTurnScheduler.preset(name).schedule == babyai
    assert [batch for batch, _ in MaxTurnScheduler.preset("babyai", every=10).schedule] == [0, 10, 20]


def test_counter_and_checkpoint_state_round_trip() -> None:
    scheduler = MaxTurnScheduler([(0, 6), (100, 13)])
    assert scheduler.rollouts == 0
    assert scheduler.state() == {
        "args": {"schedule": [[0, 6], [100, 13]]},
        "attributes": {"max_turns": 6, "rollouts": 0},
    }
    scheduler.before_rollout(150)
    assert (scheduler.rollouts, scheduler.max_turns) == (150, 13)
    # a resumed run: a new callback from the checkpoint's state applies the saved count when training begins
    saved = scheduler.state()
    restored = MaxTurnScheduler(**saved["args"])
    for name, value in saved["attributes"].items():
        setattr(restored, name, value)
    restored.max_turns = 6  # as built from args; on_train_begin sets the saved count's horizon
    engine = SimpleNamespace(max_turns=None)
    restored.bind(engine)
    restored.on_train_begin(None, None, None)
    assert engine.max_turns == restored.max_turns == 13
    adaptive = AdaptiveMaxTurnScheduler([2, 4])
    assert adaptive.state()["attributes"]["max_turns"] == 2
