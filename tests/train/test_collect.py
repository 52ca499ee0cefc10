"""`agentgym collect`: one JSON line per episode in TRL's chat format, resumable after a crash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.collect import ModelPolicy, collect, expert_actor, random_actor, read_records
from agentgym_train.models.tiny import load_model


def _check_record(record: dict, policy: str) -> None:
    assert record["env_id"] == BABYAI and record["split"] == "train" and record["policy"] == policy
    roles = [m["role"] for m in record["messages"]]
    assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
    assert roles[2:] == ["assistant", "user"] * ((len(roles) - 3) // 2) + ["assistant"]
    assert record["turns"] == roles.count("assistant")
    assert isinstance(record["final_observation"], str) and record["final_observation"]
    assert record["category"] == "GoTo"  # the level family
    assert set(record) >= {"task_id", "sample", "seed", "return", "success", "truncated", "invalid_replies"}


@pytest.fixture(scope="module")
def expert_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("collect") / "expert.jsonl"
    result = collect(expert_actor, BABYAI, path, num_tasks=3, episodes_per_task=2, max_turns=20,
                     env_kwargs=ENV_KWARGS, workers=2, policy_name="expert", progress=False)  # fmt: skip
    assert (result.written, result.skipped) == (6, 0)
    return path


def test_expert_episodes_are_chats_with_their_outcome(expert_file: Path) -> None:
    records = [json.loads(line) for line in expert_file.read_text().splitlines()]
    assert sorted((r["task_id"], r["sample"]) for r in records) == sorted(
        (t, k) for t in {r["task_id"] for r in records} for k in (0, 1)
    )
    assert len({r["task_id"] for r in records}) == 3
    for record in records:
        _check_record(record, "expert")
        assert record["success"] and record["return"] > 0 and not record["truncated"]
        assert all(m["content"].startswith("Action: ") for m in record["messages"] if m["role"] == "assistant")


def test_resume_skips_finished_episodes_and_cuts_a_torn_last_line(expert_file: Path, tmp_path: Path) -> None:
    path = tmp_path / "resumed.jsonl"
    lines = expert_file.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:4]) + lines[4][: len(lines[4]) // 2])  # a crash in the middle of line 5
    result = collect(expert_actor, BABYAI, path, num_tasks=3, episodes_per_task=2, max_turns=20,
                     env_kwargs=ENV_KWARGS, progress=False)  # fmt: skip
    assert (result.written, result.skipped) == (2, 4)
    records = [json.loads(line) for line in path.read_text().splitlines()]  # every line whole again
    assert sorted((r["task_id"], r["sample"]) for r in records) == sorted(
        (r["task_id"], r["sample"]) for r in read_records(expert_file)
    )
    # more samples per task later: only the new ones are played
    again = collect(expert_actor, BABYAI, path, num_tasks=3, episodes_per_task=3, max_turns=20,
                    env_kwargs=ENV_KWARGS, progress=False)  # fmt: skip
    assert (again.written, again.skipped) == (3, 6)


def test_resume_refuses_a_broken_middle_line_or_another_env(expert_file: Path, tmp_path: Path) -> None:
    lines = expert_file.read_text().splitlines(keepends=True)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(lines[0] + "{not json\n" + lines[1])
    with pytest.raises(ValueError, match="line 2 is not JSON"):
        collect(expert_actor, BABYAI, broken, num_tasks=1, env_kwargs=ENV_KWARGS, progress=False)
    with pytest.raises(ValueError, match="not 'AgentGym/BabyAI-GoToObj-v0'"):
        collect(expert_actor, "AgentGym/BabyAI-GoToObj-v0", expert_file, num_tasks=1, progress=False)


def test_random_policy_is_seeded_per_episode(tmp_path: Path) -> None:
    actions = ["turn left", "turn right", "move forward"]
    for name in ("a.jsonl", "b.jsonl"):
        collect(random_actor(actions), BABYAI, tmp_path / name, num_tasks=2, episodes_per_task=2, max_turns=4,
                env_kwargs=ENV_KWARGS, workers=2, policy_name="random", progress=False)  # fmt: skip

    def chats(name: str) -> dict:
        return {(r["task_id"], r["sample"]): r["messages"] for r in read_records(tmp_path / name)}

    assert chats("a.jsonl") == chats("b.jsonl")
    replies = {m["content"] for chat in chats("a.jsonl").values() for m in chat if m["role"] == "assistant"}
    assert replies <= {f"Action: {a}" for a in actions} and len(replies) > 1


def test_model_episodes_are_written_with_their_replies(tiny_babyai: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    policy = ModelPolicy(model, tokenizer, max_turn_tokens=6, max_completion_length=256, batch_size=3)
    path = tmp_path / "model.jsonl"
    result = collect(policy, BABYAI, path, num_tasks=2, episodes_per_task=2, max_turns=3, env_kwargs=ENV_KWARGS,
                     policy_name="tiny", progress=False)  # fmt: skip
    assert result.written == 4
    records = read_records(path)
    for record, episode in zip(records, policy.episodes, strict=True):
        _check_record(record, "tiny")
        assert record["turns"] == episode.turns <= 3
        assert [m["content"] for m in record["messages"] if m["role"] == "assistant"] == episode.replies


def test_cli_collect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from agentgym_train.cli import main

    out = tmp_path / "cli.jsonl"
    argv = ["collect", "expert", BABYAI, "--split", "train", "-k", "1", "--tasks", "2", "--out", str(out)]
    assert main([*argv, "--env-kwargs", json.dumps(ENV_KWARGS), "--max-turns", "20", "--no-progress"]) == 0
    assert len(read_records(out)) == 2
    assert "2 episodes written" in capsys.readouterr().out
    assert main([*argv, "--no-progress"]) == 0  # resumed: nothing left to play
    assert "0 episodes written" in capsys.readouterr().out
