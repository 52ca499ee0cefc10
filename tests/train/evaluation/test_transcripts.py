"""Transcripts: per-turn steps from the wrapper, end reasons, records of every eval path, console text."""

from __future__ import annotations

import json
from pathlib import Path

import gymnasium as gym
import pytest
from train_helpers import BABYAI, ENV_KWARGS

import agentgym_envs  # noqa: F401
from agentgym_train.cli import main
from agentgym_train.evaluation.evaluate import _row, episode_row, evaluate_expert, evaluate_model
from agentgym_train.evaluation.transcripts import (
    END_REASONS,
    end_reason,
    episode_record,
    exchanges,
    format_record,
    generation_flags,
)
from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import Episode, Task
from agentgym_wrappers import MultiTurnWrapper


def test_wrapper_steps_become_a_record_aligned_with_the_messages() -> None:
    env = MultiTurnWrapper(gym.make(BABYAI, **ENV_KWARGS), max_turns=40)
    observation, info = env.reset(seed=0, options={"task_id": "GoToLocal/0"})
    expert = env.unwrapped.make_expert()
    env.step("I think I should look around")  # no action line
    env.step("Action: fly away")  # parsed, but not an action of the env
    done = False
    while not done:
        observation, _, terminated, truncated, info = env.step("Action: " + expert.act(observation, info))
        done = terminated or truncated
    record = episode_row("GoToLocal/0", info, messages=env.messages, sample=1, max_turns=env.max_turns)
    steps = record["steps"]
    assert len(steps) == record["turns"] == env.turns
    assert steps[0] == {"action": None, "format_error": True, "valid_action": False, "reward": 0.0}
    assert steps[1]["action"] == "fly away" and not steps[1]["format_error"] and steps[1]["valid_action"] is False
    assert all(s["valid_action"] for s in steps[2:]) and steps[-1]["reward"] == pytest.approx(record["return"])
    assert record["end_reason"] == "success" and record["sample"] == 1 and record["invalid_replies"] == 1
    system, first, turns = exchanges(record)
    assert system == env.unwrapped.system_prompt and first.startswith("Mission:")
    assert turns[0]["reply"] == "I think I should look around" and turns[1]["reply"] == "Action: fly away"
    assert turns[-1]["observation"] == env.messages[-1]["content"]
    json.dumps(record)  # JSON-ready as is


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ({"success": True, "terminated": True, "truncated": False, "turns": 3}, "success"),
        ({"success": False, "terminated": True, "truncated": False, "turns": 3}, "failure"),
        ({"success": False, "terminated": False, "truncated": True, "turns": 5}, "max_turns"),
        ({"success": False, "terminated": False, "truncated": True, "turns": 2}, "env_limit"),
        (
            {"success": False, "terminated": False, "truncated": False, "turns": 2, "budget_truncated": True},
            "token_budget",
        ),
        ({"success": False, "terminated": False, "truncated": False, "turns": 1, "env_error": "Boom"}, "env_error"),
    ],
)
def test_end_reason(flags: dict, expected: str) -> None:
    assert end_reason(max_turns=5, **flags) == expected
    assert expected in END_REASONS


def test_generation_flags_merge_into_steps_and_show_in_the_console_text() -> None:
    stats = {
        "turns": 2,
        "return": 0.0,
        "success": False,
        "truncated": True,
        "steps": [
            {"action": None, "format_error": True, "valid_action": False, "reward": 0.0},
            {"action": "go", "format_error": False, "valid_action": True, "reward": 0.0},
        ],
    }
    messages = [
        {"role": "system", "content": "play"},
        {"role": "user", "content": "start"},
        {"role": "assistant", "content": "Thinking " * 200},
        {"role": "user", "content": "Your reply must end with an Action: line"},
        {"role": "assistant", "content": "Action: go"},
        {"role": "user", "content": "gone"},
    ]
    flags = [{"stopped_by": "budget"}, {"stopped_by": "stop_string"}]
    record = episode_record(
        task_id="t", sample=0, category="c", stats=stats, messages=messages, max_turns=2, turn_flags=flags
    )
    assert [s["stopped_by"] for s in record["steps"]] == ["budget", "stop_string"]
    assert generation_flags(record["steps"][0]) == {"stopped_by": "budget"}
    assert generation_flags({"stopped_by": "eos"}, unusual=True) == {}  # the normal end is not flagged per turn
    text = format_record(record, max_chars=100)
    assert "turn 1 (no action found, reward +0.000, stopped_by budget)" in text
    assert "more chars]" in text and "turn limit reached" in text and "action  go" in text


def test_rollout_flags_go_into_the_steps() -> None:
    episode = Episode(task=Task(BABYAI, "GoToLocal/0"), prompt_ids=[1], turns=1, stopped_by=["stop_string"])
    episode.stats = {"turns": 1, "steps": [{"action": "go", "format_error": False, "valid_action": True, "reward": 0}]}
    assert _row(episode, 0, 3)["steps"][0]["stopped_by"] == "stop_string"


def test_model_eval_keeps_every_transcript(tiny_babyai: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    result = evaluate_model(
        model,
        tokenizer,
        BABYAI,
        num_tasks=2,
        episodes_per_task=2,
        max_turns=2,
        max_turn_tokens=8,
        max_completion_length=512,
        env_kwargs=ENV_KWARGS,
        progress=False,
    )
    rows = result.to_dict()["episodes"]
    assert [(r["task_id"], r["sample"]) for r in rows] == [
        ("GoToLocal/0", 0),
        ("GoToLocal/0", 1),
        ("GoToLocal/1", 0),
        ("GoToLocal/1", 1),
    ]
    for row in rows:
        roles = [m["role"] for m in row["messages"]]
        assert roles[:2] == ["system", "user"] and roles[2:] == ["assistant", "user"] * row["turns"]
        assert len(row["steps"]) == row["turns"] and row["end_reason"] in END_REASONS
        assert all(step["stopped_by"] in {"eos", "stop_string", "budget"} for step in row["steps"])
    assert result.meta["max_turns"] == 2 and result.meta["env_id"] == BABYAI
    json.dumps(result.to_dict())


def test_expert_eval_and_transcripts_on_the_console(capsys: pytest.CaptureFixture[str]) -> None:
    result = evaluate_expert(BABYAI, num_tasks=3, env_kwargs=ENV_KWARGS)
    assert result.success.mean == 1.0 and {r["end_reason"] for r in result.episodes} == {"success"}
    assert result.to_dict()["policy"] == "expert"
    kwargs = json.dumps(ENV_KWARGS)
    assert main(["eval", "expert", BABYAI, "--tasks", "2", "--transcripts", "1", "--env-kwargs", kwargs]) == 0
    out = capsys.readouterr().out
    assert out.count("=== GoToLocal/") == 1 and "reply   Action: " in out and "episodes ended: solved 2" in out
