"""`agentgym eval --protocol paper`: the paper's settings with their sources, its metrics, its table layout.

The expert and random policies play small prefixes of the test splits (fast); an endpoint stand-in checks
that requests carry the protocol's sampling settings; the tiny model plays one BabyAI task under its limits.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from chat_server import ChatServer

from agentgym_train.cli import main
from agentgym_train.evaluation import protocol
from agentgym_train.evaluation.evaluate import evaluate_expert
from agentgym_train.evaluation.protocol import PAPER, paper_tables, run_protocol, scenarios_for, settings_table

SCRIPT_SETTINGS = ("max_turns", "samples", "temperature", "max_turn_tokens", "max_completion_length")


def test_every_setting_names_its_source_line() -> None:
    expected = {  # AgentGym-RL's examples/eval/<task>_eval.sh: max_rounds, rollout.max_tokens, data.max_response_length
        "BabyAI": ("babyai", 20, 512, 8192),
        "TextCraft": ("textcraft", 30, 512, 14098),
        "SciWorld": ("sciworld", 30, 200, 8192),
        "WebArena": ("webarena", 15, 512, 14098),
        "Deep Search": ("searchqa", 30, 512, 14098),
    }
    assert list(PAPER) == list(expected)  # the paper's table order
    for name, (task, turns, reply, budget) in expected.items():
        p = PAPER[name]
        assert p.task_name == task
        assert (p.value("max_turns"), p.value("max_turn_tokens"), p.value("max_completion_length")) == (
            turns,
            reply,
            budget,
        )
        assert (p.value("samples"), p.value("temperature"), p.value("top_p"), p.value("top_k")) == (1, 1.0, 1.0, -1)
        shift = 1 if task == "searchqa" else 0  # searchqa_eval.sh has a '# TODO' first line
        assert p.settings["max_turns"].source == f"examples/eval/{task}_eval.sh:{16 + shift} max_rounds={turns}"
        for key in SCRIPT_SETTINGS:  # each script setting cites its script, a line number, and the value it read
            source = p.settings[key].source
            assert re.match(rf"examples/eval/{task}_eval\.sh:\d+ ", source), source
            number = p.value(key)
            assert str(int(number) if isinstance(number, float) else number) in source.split(" ", 1)[1], source
        assert all(s.source for s in p.settings.values())
    assert [PAPER[n].value("paper_score") for n in PAPER] == [96.67, 91.00, 57.00, 26.00, 38.25]
    table = settings_table().splitlines()
    assert table[0] == "| scenario | setting | value | source |"
    assert len(table) == 2 + sum(len(p.settings) for p in PAPER.values())
    assert "| WebArena | max_turns | 15 | examples/eval/webarena_eval.sh:16 max_rounds=15 |" in table


def test_scenarios_by_id_or_name_and_a_clear_error() -> None:
    assert [p.name for p in scenarios_for(["AgentGym/SciWorld-v0", "babyai"])] == ["BabyAI", "SciWorld"]
    with pytest.raises(ValueError, match=r"not in the paper's protocol: \['AgentGym/TextWorld-v0'\]"):
        scenarios_for(["AgentGym/TextWorld-v0"])


def test_expert_and_random_play_the_protocol_on_a_prefix() -> None:
    names = ["BabyAI", "TextCraft", "Deep Search"]
    expert = run_protocol("expert", env_ids=names, num_tasks=3)
    random = run_protocol("random", env_ids=names, num_tasks={"BabyAI": 4, "TextCraft": 2, "Deep Search": 2})
    assert [s["scenario"] for s in expert["scenarios"]] == names
    assert [(s["tasks"], s["tasks_in_split"]) for s in random["scenarios"]] == [(4, 4000), (2, 100), (2, 1000)]
    # Avg@1 is the mean final score, by hand from the same episodes played outside the protocol
    direct = evaluate_expert("AgentGym/BabyAI-v0", num_tasks=3, max_turns=20)
    scores = [row["return"] for row in direct.episodes]
    babyai = expert["scenarios"][0]
    assert babyai["avg"] == pytest.approx(sum(scores) / 3) and babyai["pass"] == sum(s > 0 for s in scores) / 3
    assert babyai["categories"] == {"GoTo": {"avg": babyai["avg"], "pass": babyai["pass"], "n": 3}}
    textcraft, deepsearch = expert["scenarios"][1:]
    assert textcraft["avg"] == 1.0 and deepsearch["avg"] == 1.0 and deepsearch["success"] == 1.0
    assert sum(c["n"] for c in deepsearch["categories"].values()) == 3
    # the protocol's turn limit, not the scenario's: Deep Search's default is 10, the paper's 30
    assert random["scenarios"][2]["max_turns"] == 30 and random["scenarios"][2]["avg"] == 0.0
    assert random["scenarios"][1]["avg"] == 0.0 and random["scenarios"][1]["pass"] == 0.0


def test_random_episodes_run_to_the_papers_turn_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentgym_train.evaluation import evaluate as E

    seen = []
    original = E.evaluate_random

    def recording(env_id, **kwargs):
        seen.append(original(env_id, **kwargs))
        return seen[-1]

    monkeypatch.setattr(E, "evaluate_random", recording)
    run_protocol("random", env_ids=["Deep Search"], num_tasks=2)
    assert [row["turns"] for row in seen[0].episodes] == [30, 30]


def _document(policy: str, scores: dict[str, tuple[float, dict[str, float], int, int]]) -> dict:
    return {
        "policy": policy,
        "scenarios": [
            {
                "scenario": name,
                "avg": avg,
                "tasks": tasks,
                "tasks_in_split": total,
                "categories": {c: {"avg": v} for c, v in categories.items()},
            }
            for name, (avg, categories, tasks, total) in scores.items()
        ],
    }


def test_the_table_has_the_papers_layout() -> None:
    expert = _document(
        "expert",
        {
            "BabyAI": (0.9, {"GoTo": 0.8, "Pickup": 1.0}, 10, 4000),
            "TextCraft": (1.0, {"depth-1": 1.0}, 100, 100),
        },
    )
    random = _document("random", {"BabyAI": (0.125, {"GoTo": 0.25}, 10, 4000)})
    lines = paper_tables([expert, random]).splitlines()
    assert lines[:5] == [
        "| Model | BabyAI | TextCraft |",
        "|---|---:|---:|",
        "| Paper's 7B (reported) | 96.67 | 91.00 |",
        "| expert (ours) | 90.00 | 100.00 |",
        "| random (ours) | 12.50 | - |",
    ]
    assert "- expert: test tasks played: BabyAI 10 of 4000, TextCraft 100." in lines
    babyai = lines.index("#### BabyAI")
    assert lines[babyai + 2 : babyai + 7] == [
        "| Model | Overall | GoTo | Pickup |",
        "|---|---:|---:|---:|",
        "| Paper's 7B (reported) | 96.67 | - | - |",
        "| expert (ours) | 90.00 | 80.00 | 100.00 |",
        "| random (ours) | 12.50 | 25.00 | - |",
    ]
    assert "| Paper's 7B" not in paper_tables([expert], paper=False)


def test_eval_command_runs_the_protocol_and_refuses_what_it_sets(tmp_path: Path, capsys) -> None:
    out = tmp_path / "paper.json"
    assert (
        main(["eval", "expert", "AgentGym/TextCraft-v0", "--protocol", "paper", "--tasks", "2", "--json", str(out)])
        == 0
    )
    printed = capsys.readouterr().out
    assert "| TextCraft | max_turns | 30 | examples/eval/textcraft_eval.sh:16 max_rounds=30 |" in printed
    assert "| Paper's 7B (reported) | 91.00 |" in printed and "| expert (ours) | 100.00 |" in printed
    document = json.loads(out.read_text())
    assert document["protocol"] == "paper" and document["source"].endswith(protocol.SOURCE_COMMIT)
    assert [(s["scenario"], s["tasks"], s["max_turns"]) for s in document["scenarios"]] == [("TextCraft", 2, 30)]
    assert main(["eval", "expert", "--protocol", "paper", "-k", "4", "--max-turns", "5"]) == 2
    assert "drop --episodes-per-task, --max-turns" in capsys.readouterr().err
    assert main(["eval", "expert", "AgentGym/TextWorld-v0", "--protocol", "paper"]) == 2
    assert "not in the paper's protocol" in capsys.readouterr().err
    assert main(["eval", "expert"]) == 2
    assert "give an ENV_ID" in capsys.readouterr().err


def test_an_endpoint_gets_the_protocols_sampling_settings(server: ChatServer, capsys) -> None:
    server.reply = "I will look.\nAction: inventory"
    argv = ["eval", "stand-in", "AgentGym/SciWorld-v0", "--protocol", "paper", "--tasks", "1"]
    assert main([*argv, "--base-url", server.url, "--workers", "1"]) == 0
    assert "| stand-in (ours) | 0.00 |" in capsys.readouterr().out
    assert len(server.requests) == 30  # the paper's 30 turns, one request each
    assert {(r["temperature"], r["max_tokens"]) for r in server.requests} == {(1.0, 200)}  # SciWorld's replies: 200


@pytest.mark.slow
def test_a_local_model_plays_under_the_protocols_limits(tiny_babyai: Path) -> None:
    from agentgym_train.models.tiny import load_model

    model, tokenizer = load_model(tiny_babyai)
    document = run_protocol("tiny", env_ids=["BabyAI"], num_tasks=1, model=model, tokenizer=tokenizer)
    (summary,) = document["scenarios"]
    assert summary["tasks"] == 1 and summary["max_turns"] == 20 and 0.0 <= summary["avg"] <= 1.0
    with pytest.raises(ValueError, match="needs both model and tokenizer"):
        run_protocol("tiny", model=model)


ROOT = Path(__file__).resolve().parents[3]


def _between(page: str, name: str) -> str:
    return page.split(f"<!-- {name}: ", 1)[1].split("-->\n", 1)[1].split(f"<!-- end {name} -->", 1)[0].strip()


def test_the_docs_page_shows_the_committed_floor_and_ceiling() -> None:
    page = (ROOT / "docs" / "results" / "paper-protocol.md").read_text()
    documents = [
        json.loads((ROOT / "benchmarks" / "results" / "paper_protocol" / f"{policy}.json").read_text())
        for policy in ("expert", "random")
    ]
    assert [[s["scenario"] for s in d["scenarios"]] for d in documents] == [list(PAPER)] * 2  # every scenario
    assert all(d["source"].endswith(protocol.SOURCE_COMMIT) for d in documents)
    assert _between(page, "tables") == paper_tables(documents)  # the page is the JSON's table, as committed
    assert _between(page, "settings") == settings_table()
    expert, random = ({s["scenario"]: s for s in d["scenarios"]} for d in documents)
    assert all(expert[name]["avg"] >= random[name]["avg"] for name in PAPER)  # the ceiling above the floor
