"""Evaluation: intervals over tasks, per category, the random baseline, paired differences."""

from __future__ import annotations

import math

import pytest
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.evaluation.evaluate import (
    episode_row,
    estimate,
    evaluate_random,
    paired_difference,
    summarize_episodes,
)

PRIMITIVES = ["turn left", "turn right", "move forward", "pick up", "drop", "toggle"]


def test_estimate_is_a_normal_interval() -> None:
    e = estimate([0.0, 1.0] * 50)
    assert e.mean == 0.5 and e.n == 100
    assert e.half_width == pytest.approx(1.96 * math.sqrt(0.25 * 100 / 99) / 10, rel=1e-3)


def test_episodes_of_a_task_count_once() -> None:
    rows = [
        {"task_id": t, "category": c, "success": s, "return": float(s), "turns": 3}
        for t, c, s in [("a", "x", 1.0), ("a", "x", 0.0), ("b", "y", 1.0), ("b", "y", 1.0)]
    ]
    result = summarize_episodes(rows)
    assert result.success.n == 2 and result.success.mean == 0.75
    assert result.pass_at_k is not None and result.pass_at_k.mean == 1.0
    assert result.categories["x"]["success"].mean == 0.5 and result.categories["y"]["success"].mean == 1.0
    assert "pass@k" in result.table()


def test_results_group_by_the_task_kind_as_well_as_the_category() -> None:
    info = {"category": "reddit", "kind": "state", "episode": {"success": True, "return": 1.0, "turns": 4}}
    record = episode_row("reddit.vote/3", info)
    assert record["kind"] == "state" and "kind" not in episode_row("t", {**info, "kind": None})
    rows = [
        {**record, "task_id": t, "category": c, "kind": k, "success": s}
        for t, c, k, s in [("a", "shop", "info", 1.0), ("b", "shop", "state", 0.0), ("c", "forum", "state", 1.0)]
    ]
    by_site = summarize_episodes(rows)
    by_kind = by_site.grouped_by("kind")
    assert {g: b["success"].mean for g, b in by_site.categories.items()} == {"forum": 1.0, "shop": 0.5}
    assert {g: b["success"].mean for g, b in by_kind.categories.items()} == {"info": 1.0, "state": 0.5}
    assert by_kind.success.mean == by_site.success.mean == pytest.approx(2 / 3)


def test_random_policy_baseline_under_a_turn_limit() -> None:
    short = evaluate_random(BABYAI, num_tasks=30, max_turns=3, actions=PRIMITIVES, env_kwargs=ENV_KWARGS)
    long = evaluate_random(BABYAI, num_tasks=30, max_turns=40, actions=PRIMITIVES, env_kwargs=ENV_KWARGS)
    assert short.turns.mean <= 3 and short.success.n == 30
    assert long.success.mean > short.success.mean  # a random walk finds the goal more often with more time
    assert set(short.categories) == {"GoTo"}
    assert short.to_dict()["policy"] == "random" and short.to_dict()["max_turns"] == 3
    assert all(len(r["steps"]) == r["turns"] for r in short.episodes)  # every episode keeps its transcript
    reasons = {r["end_reason"] for r in short.episodes}
    assert reasons <= {"success", "max_turns"} and "max_turns" in reasons and "episodes ended:" in short.table()
    same = paired_difference(short, short)
    assert same.mean == 0.0
