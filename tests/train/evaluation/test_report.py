"""`agentgym report`: the page in the headless Chromium of the web env (loads cleanly, filters, aligned
columns), escaping of hostile transcripts, the curves each input allows, the command line."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_envs.webarena.browser.chromium import LAUNCH_ARGS, find_chromium
from agentgym_train.cli import main
from agentgym_train.evaluation.evaluate import evaluate_expert, evaluate_random
from agentgym_train.evaluation.report import Policy, build_report, load_results, pass_at_k, pass_curve

PRIMITIVES = ["turn left", "turn right", "move forward"]
#: Model and env text that would run script if it reached the page unescaped.
HOSTILE = '</pre><script>window.__pwned = "{}"</script><img src=x onerror="window.__pwned = 1">'


def hostile_record(end_reason: str) -> dict[str, Any]:
    return {
        "task_id": "<b>task</b>",
        "sample": 0,
        "category": '"><script>window.__pwned = "category"</script>',
        "success": float(end_reason == "success"),
        "return": 0.0,
        "turns": 1,
        "truncated": False,
        "invalid_replies": 0,
        "end_reason": end_reason,
        "messages": [
            {"role": "system", "content": HOSTILE.format("system")},
            {"role": "user", "content": HOSTILE.format("observation")},
            {"role": "assistant", "content": HOSTILE.format("reply")},
            {"role": "user", "content": HOSTILE.format("answer")},
        ],
        "steps": [
            {
                "action": HOSTILE.format("action"),
                "format_error": False,
                "valid_action": True,
                "reward": 0.0,
                "stopped_by": HOSTILE.format("flag"),
            }
        ],
    }


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two real evaluations of the same BabyAI tasks (random over primitives, the expert), a hostile
    episode added to each, and the second file's episodes in reverse order (alignment must not rely on order)."""
    folder = tmp_path_factory.mktemp("report")
    common = {"num_tasks": 4, "episodes_per_task": 2, "max_turns": 4, "env_kwargs": ENV_KWARGS}
    random = evaluate_random(BABYAI, actions=PRIMITIVES, **common).to_dict()
    expert = evaluate_expert(BABYAI, **common).to_dict()
    random["episodes"].append(hostile_record("success"))
    expert["episodes"].append(hostile_record('"><script>window.__pwned = "reason"</script>'))
    expert["episodes"].reverse()
    paths = {"random": folder / "random.json", "expert": folder / "expert.json"}
    for name, data in (("random", random), ("expert", expert)):
        paths[name].write_text(json.dumps(data))
    out = folder / "report.html"
    assert main(["report", str(paths["random"]), str(paths["expert"]), "--out", str(out)]) == 0
    return {"paths": paths, "out": out, "random": random, "expert": expert, "html": out.read_text()}


@pytest.fixture(scope="module")
def page(results: dict[str, Any]) -> Iterator[Any]:
    """The report opened from disk in the headless Chromium, with every console message and page error kept."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=find_chromium(), headless=True, args=list(LAUNCH_ARGS))
        try:
            page = browser.new_page()
            page.messages = []
            page.on("console", lambda message: page.messages.append(f"{message.type}: {message.text}"))
            page.on("pageerror", lambda error: page.messages.append(f"pageerror: {error}"))
            page.goto(results["out"].as_uri())
            yield page
        finally:
            browser.close()


def visible(page: Any) -> list[dict[str, str]]:
    return page.eval_on_selector_all(
        "section.episode:not([hidden])",
        "els => els.map(e => ({category: e.dataset.category, a: e.dataset.outcomeA, b: e.dataset.outcomeB}))",
    )


def test_page_loads_with_no_console_error_and_no_injected_script(page: Any) -> None:
    assert page.messages == []
    assert page.evaluate("window.__pwned") is None
    assert page.evaluate("document.scripts.length") == 1
    sizes = page.eval_on_selector_all(".figures img", "els => els.map(e => e.naturalWidth)")
    assert len(sizes) == 2 and all(width > 0 for width in sizes)  # the turn curve and Pass@k (k = 2)


def test_untrusted_text_is_escaped(results: dict[str, Any]) -> None:
    page = results["html"]
    assert page.count("<script") == 1 and "<img src=x" not in page
    for where in ("system", "observation", "reply", "answer", "action", "flag"):
        assert f"&lt;script&gt;window.__pwned = &quot;{where}&quot;&lt;/script&gt;" in page


def test_filters_hide_and_show_the_right_episodes(page: Any, results: dict[str, Any]) -> None:
    total = len(results["random"]["episodes"])
    assert len(visible(page)) == total and page.text_content("#shown") == str(total)
    hostile = hostile_record("success")["category"]
    page.select_option("#filter-category", hostile)
    assert [row["category"] for row in visible(page)] == [hostile] and page.text_content("#shown") == "1"
    page.select_option("#filter-category", "")
    solved = sum(e["end_reason"] == "success" for e in results["random"]["episodes"])
    page.select_option("#filter-outcome-a", "success")
    shown = visible(page)
    assert len(shown) == solved and {row["a"] for row in shown} == {"success"}
    page.select_option("#filter-outcome-a", "!success")
    assert len(visible(page)) == total - solved and all(row["a"] != "success" for row in visible(page))
    page.select_option("#filter-outcome-b", "success")  # both filters at once
    assert all(row["a"] != "success" and row["b"] == "success" for row in visible(page))
    page.select_option("#filter-outcome-a", "")
    page.select_option("#filter-outcome-b", "")
    assert len(visible(page)) == total


def test_the_two_columns_show_the_same_task_and_sample(page: Any, results: dict[str, Any]) -> None:
    pairs = page.eval_on_selector_all(
        "section.episode",
        "els => els.map(e => [...e.querySelectorAll('.column')].map(c => [c.dataset.task, c.dataset.sample]))",
    )
    assert len(pairs) == len(results["random"]["episodes"])
    assert all(len(columns) == 2 and columns[0] == columns[1] for columns in pairs)
    expected = [[str(e["task_id"]), str(e["sample"])] for e in results["random"]["episodes"]]
    assert [columns[0] for columns in pairs] == expected  # in the first file's order, though the second is reversed


def test_training_results_give_before_and_after_and_the_training_curve(results: dict[str, Any], tmp_path: Path) -> None:
    train = {
        "env_id": BABYAI,
        "random": results["random"],
        "before": results["random"],
        "after": results["expert"],
        "log_history": [{"step": s, "episode/return": s / 10, "episode/success": s / 20} for s in range(1, 6)],
    }
    path = tmp_path / "results.json"
    path.write_text(json.dumps(train))
    policies, logs = load_results([path])
    assert [p.label for p in policies] == ["before RL", "after RL", "random"] and logs[0][0] == "results.json"
    page = build_report(policies, logs)
    assert "Transcripts: before RL vs after RL" in page and page.count("<figure>") == 3
    assert "Training return (results.json)" in page
    one = build_report(*load_results([results["paths"]["random"]]), pair=["random"])
    assert 'style="--columns: 1"' in one and "filter-outcome-b" not in one


def test_command_line_errors_name_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "other.json"
    bad.write_text(json.dumps({"loss": 1.0}))
    assert main(["report", str(bad), "--out", str(tmp_path / "r.html")]) == 2
    assert "no evaluation results in it" in capsys.readouterr().err
    good = tmp_path / "e.json"
    good.write_text(json.dumps({"policy": "p", "success": {"mean": 1, "low": 1, "high": 1, "n": 1}, "episodes": []}))
    assert main(["report", str(good), "--pair", "nobody", "--out", str(tmp_path / "r.html")]) == 2
    assert "not among the policies ['p']" in capsys.readouterr().err


def test_pass_at_k_is_the_unbiased_estimate() -> None:
    assert pass_at_k(3, 1, 2) == pytest.approx(2 / 3) and pass_at_k(3, 0, 3) == 0.0 and pass_at_k(4, 3, 2) == 1.0
    rows = [{"task_id": t, "success": s} for t, s in [("a", 1), ("a", 0), ("b", 0), ("b", 0)]]
    assert pass_curve(rows) == pytest.approx([0.25, 0.5])
    assert pass_curve(rows[::2]) == [] and not math.isnan(pass_at_k(1, 1, 1))


def test_without_matplotlib_the_page_has_everything_but_the_curves(
    results: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # what the core install (no [train] extra) lacks
    page = build_report(*load_results([results["paths"]["random"]]))
    assert "<figure>" not in page and "matplotlib is not installed" in page and 'class="episode"' in page


def test_a_shared_system_prompt_shows_once_and_long_lists_are_cut(results: dict[str, Any]) -> None:
    babyai = {**results["random"], "episodes": results["random"]["episodes"][:-1]}  # without the hostile episode
    policy = Policy("random", babyai, "random.json")
    page = build_report([policy], max_episodes=2)
    assert page.count("system prompt") == 1 and "(the same in every episode)" in page
    assert page.count('class="episode"') == 2 and f"{len(babyai['episodes']) - 2} more episodes left out" in page
    assert build_report([policy], max_episodes=0).count('class="episode"') == len(babyai["episodes"])
