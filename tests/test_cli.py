"""The `agentgym` command line: list and play."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

from agentgym_train.cli import main


def test_list_prints_ids_splits_and_sizes(capsys) -> None:
    assert main(["list", "AgentGym/BabyAI-v0"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["id", "splits"]
    assert out[1].startswith("AgentGym/BabyAI-v0") and "train 400,000, test 4,000" in out[1]
    assert main(["list", "nothing*"]) == 1


def test_play_expert_runs_an_episode_to_success(capsys) -> None:
    assert main(["play", "AgentGym/BabyAI-GoToLocal-v0", "--expert", "--split", "test", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("--- GoToLocal/")
    assert "expert> " in out and "--- episode over: success" in out


def test_play_expert_several_episodes_prints_a_summary(capsys) -> None:
    assert main(["play", "AgentGym/BabyAI-GoToRedBall-v0", "--expert", "--episodes", "3", "--seed", "1"]) == 0
    assert "3 episodes: success 100.0%" in capsys.readouterr().out


def test_play_expert_that_cannot_solve_a_task_ends_the_episode(capsys) -> None:
    """minigrid's bot cannot solve KeyInBox (its docstring says so): the episode ends with the reason."""
    assert main(["play", "AgentGym/BabyAI-KeyInBox-v0", "--expert", "--episodes", "2", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert out.count("--- episode over: the expert cannot go on (BabyAIBot") == 2 and "2 episodes: success 0.0%" in out


def test_play_by_a_person(monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("turn left\nfly away\nquit\n"))
    assert main(["play", "AgentGym/BabyAI-GoToLocal-v0", "--seed", "0"]) == 0
    out = capsys.readouterr().out
    assert "You turned left." in out and "[invalid action]" in out and "Available actions:" in out


def test_play_unknown_id(capsys) -> None:
    assert main(["play", "AgentGym/Nope-v0"]) == 2
    assert "unknown env id" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    script = Path(sys.executable).parent / "agentgym"
    out = subprocess.run([str(script), "list", "AgentGym/BabyAI-GoToLocal-v0"], capture_output=True, text=True)
    assert out.returncode == 0 and "AgentGym/BabyAI-GoToLocal-v0" in out.stdout


def test_tasks_webarena_prints_the_table_and_the_held_out_templates(capsys) -> None:
    assert main(["tasks", "webarena"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("| site | templates (held out) |") and any(r.startswith("| shopping |") for r in table)
    assert main(["tasks", "webarena", "--held-out"]) == 0
    held = capsys.readouterr().out.splitlines()
    assert len(held) == 25 and all(" (" in line and "): " in line for line in held)


def test_prepare_textworld_refuses_the_whole_train_split(capsys) -> None:
    assert main(["prepare", "textworld", "--split", "train"]) == 2
    assert "give --limit N" in capsys.readouterr().err
