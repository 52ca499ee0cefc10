"""`agentgym eval` test-time scaling curves: success against max turns, and unbiased Pass@K against K."""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import Any

import pytest
from chat_server import ChatServer
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.cli import main
from agentgym_train.evaluation.curves import default_pass_ks, pass_at_k_curve

TEXTCRAFT = "AgentGym/TextCraft-v0"  # categories depth-1..4: deeper recipes need more turns
GOTOOBJ = "AgentGym/BabyAI-GoToObj-v0"
KWARGS = json.dumps(ENV_KWARGS)


def rows(pattern: dict[str, tuple[str, list[int]]]) -> list[dict[str, Any]]:
    """Episode rows from {task: (category, successes of its samples in order)}."""
    return [
        {"task_id": task, "category": category, "success": float(s), "sample": i}
        for task, (category, successes) in pattern.items()
        for i, s in enumerate(successes)
    ]


def test_pass_at_k_is_the_unbiased_estimator_worked_by_hand() -> None:
    # successes come last, so "any success among the first K samples" would give 0 for K < 4
    pattern = {"a": ("x", [0, 0, 0, 1]), "b": ("x", [0, 0, 1, 1]), "c": ("y", [0, 0, 0, 0])}
    curve = pass_at_k_curve(rows(pattern), [1, 2, 4])
    a = [0.25, 0.5, 1.0]  # c=1 of n=4: 1 - C(3,K)/C(4,K)
    b = [0.5, 1 - 1 / 6, 1.0]  # c=2: pass@2 = 1 - C(2,2)/C(4,2)
    assert curve.xs == [1, 2, 4] and list(curve.series) == ["all", "x", "y"]
    assert [e.mean for e in curve.series["x"]] == pytest.approx([(p + q) / 2 for p, q in zip(a, b, strict=True)])
    assert [e.mean for e in curve.series["y"]] == [0.0, 0.0, 0.0]
    overall = [e.mean for e in curve.series["all"]]
    assert overall == pytest.approx([(p + q) / 3 for p, q in zip(a, b, strict=True)])
    assert overall[1] != pytest.approx(3 / 12)  # c/n, the naive estimate, is Pass@1 only
    assert all(e.n == 3 for e in curve.series["all"]) and curve.series["x"][0].n == 2
    with pytest.raises(ValueError, match="K <= the episodes per task"):
        pass_at_k_curve(rows(pattern), [8])


def test_default_ks_are_powers_of_two_then_k() -> None:
    assert default_pass_ks(64) == [1, 2, 4, 8, 16, 32, 64]
    assert default_pass_ks(12) == [1, 2, 4, 8, 12] and default_pass_ks(2) == [1, 2]


def test_the_expert_succeeds_more_with_more_turns(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "expert.json"
    horizons = [1, 2, 4, 8, 30]  # 30: TextCraft's own horizon
    assert main(["eval", "expert", TEXTCRAFT, "--tasks", "0", "--max-turns", "30,8,4,2,1", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "success against max turns" in printed and "depth-3" in printed
    document = json.loads(out.read_text())
    curve = document["max_turns_curve"]
    assert document["max_turns"] == horizons and curve["xs"] == horizons
    assert set(curve["series"]) == {"all", "depth-1", "depth-2", "depth-3", "depth-4"}
    for name, points in curve["series"].items():
        means = [p["mean"] for p in points]
        assert len(means) == len(horizons) and means == sorted(means), name  # non-decreasing in max turns
        assert means[-1] == 1.0 and means[0] < 1.0, name
    overall = [p["mean"] for p in curve["series"]["all"]]
    assert overall[0] == 0.0 and overall[1] < 1.0 and overall[2] < 1.0
    # the same tasks and seeds at every horizon, each a whole `agentgym eval` result
    per_horizon = [document[f"max_turns={h}"] for h in horizons]
    assert all(r["max_turns"] == h and r["success"]["n"] == 100 for r, h in zip(per_horizon, horizons, strict=True))
    assert len({tuple((e["task_id"], e["sample"]) for e in r["episodes"]) for r in per_horizon}) == 1
    assert all(e["turns"] <= r["max_turns"] for r in per_horizon for e in r["episodes"])
    assert (tmp_path / "expert-max-turns.png").read_bytes()[:4] == b"\x89PNG"


def test_pass_at_k_of_a_random_policy_from_its_episodes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out, figures = tmp_path / "random.json", tmp_path / "figures"
    args = ["eval", "random", GOTOOBJ, "--env-kwargs", KWARGS, "--actions", "turn left,move forward"]
    args += ["--tasks", "20", "--max-turns", "6", "-k", "8", "--pass-at", "1,2,8", "--seed", "1"]
    assert main([*args, "--json", str(out), "--figures", str(figures)]) == 0
    assert "Pass@K from 8 episodes per task" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["max_turns"] == 6 and len(document["episodes"]) == 160  # one horizon: today's JSON, plus the curve
    curve = document["pass_at_k_curve"]
    assert curve["xs"] == [1, 2, 8] and list(curve["series"]) == ["all"]
    by_task: dict[str, list[float]] = {}
    for episode in document["episodes"]:
        by_task.setdefault(episode["task_id"], []).append(episode["success"])

    def by_hand(k: int) -> float:
        values = [1 - math.comb(8 - int(sum(s)), k) / math.comb(8, k) for s in by_task.values()]
        return sum(values) / len(values)

    means = [p["mean"] for p in curve["series"]["all"]]
    assert means == pytest.approx([by_hand(1), by_hand(2), by_hand(8)])
    assert means[0] == pytest.approx(document["success"]["mean"])  # Pass@1 = Avg@k
    assert means[2] == pytest.approx(document["pass_at_k"]["mean"])  # Pass@n = any success
    assert 0 < means[0] < means[1] < means[2] < 1  # the test can tell the Ks apart
    assert (figures / "pass-at-k.png").read_bytes()[:4] == b"\x89PNG"


def test_a_model_and_an_endpoint_are_swept_like_the_scripted_policies(
    tiny_babyai: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    model_out = tmp_path / "model.json"
    args = ["eval", str(tiny_babyai), BABYAI, "--env-kwargs", KWARGS, "--tasks", "3", "-k", "2", "--max-turns", "1,3"]
    assert main([*args, "--max-turn-tokens", "6", "--json", str(model_out)]) == 0
    document = json.loads(model_out.read_text())
    assert document["max_turns_curve"]["xs"] == [1, 3] and document["episodes_per_task"] == 2
    assert [len(document[f"max_turns={h}"]["episodes"]) for h in (1, 3)] == [6, 6]
    assert document["max_turns=3"]["pass_at_k_curve"]["xs"] == [1, 2]
    assert (tmp_path / "model-pass-at-k-turns3.png").is_file()

    # an endpoint that always moves forward plays exactly as the random policy restricted to that action
    chat = ChatServer()
    threading.Thread(target=chat.serve_forever, daemon=True).start()
    try:
        common = ["--env-kwargs", KWARGS, "--tasks", "12", "--max-turns", "2,5,9", "--seed", "3"]
        endpoint_out, random_out = tmp_path / "endpoint.json", tmp_path / "random.json"
        assert main(["eval", "chat", BABYAI, "--base-url", chat.url, *common, "--json", str(endpoint_out)]) == 0
    finally:
        chat.shutdown()
        chat.server_close()
    assert main(["eval", "random", BABYAI, "--actions", "move forward", *common, "--json", str(random_out)]) == 0
    capsys.readouterr()
    endpoint, random = (json.loads(p.read_text())["max_turns_curve"] for p in (endpoint_out, random_out))
    assert endpoint == random and endpoint["xs"] == [2, 5, 9]


def test_refuses_more_ks_than_episodes_and_a_malformed_horizon_list(capsys: pytest.CaptureFixture) -> None:
    assert main(["eval", "random", GOTOOBJ, "-k", "8", "--pass-at", "1,16"]) == 2
    assert "Pass@K needs K <= the episodes per task (-k 8)" in capsys.readouterr().err
    for bad in ("2,x", "0,4", ""):
        with pytest.raises(SystemExit) as exit_:
            main(["eval", "expert", GOTOOBJ, "--max-turns", bad])
        assert exit_.value.code == 2
        assert f"--max-turns: {bad!r} is not a comma list of positive integers" in capsys.readouterr().err
