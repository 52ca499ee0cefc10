"""`agentgym experiment horizons` on a short configuration: a tiny model, three rules, one seed, three steps."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from agentgym_train.cli import main
from agentgym_train.experiments.horizons import DEFAULT_CONFIG, check_settings, load_experiment

GIGPO_CONFIG = DEFAULT_CONFIG.parent / "gigpo.yaml"

RULES = {
    "fixed": {"max_turns": [2]},
    "staged": {"max_turns": [2, 3], "every": 2, "settings": {"advantage_estimator": "gigpo"}},
    "adaptive": {"adaptive": [2, 3], "min_steps": 1, "window": 1, "truncation_threshold": 0.0, "plateau_tolerance": 1},
}
STEPS, EPISODES_PER_STEP = 3, 4
SHORT = {
    "task_mix": ["AgentGym/BabyAI-GoToObjS4-v0", "AgentGym/BabyAI-GoToObj-v0"],
    "seeds": 1,
    "rules": RULES,
    "compare": [["fixed", "staged"]],
    "parallel_runs": 1,
    "model": "tiny",
    "tiny_hidden_size": 32,
    "tiny_layers": 1,
    "tiny_heads": 2,
    "tiny_intermediate_size": 64,
    "sft_episodes": 8,
    "sft_steps": 2,
    "sft_batch_size": 4,
    "eval_tasks": 2,
    "eval_episodes_per_task": 1,
    "torch_threads": 1,
    "env_kwargs": {"show_actions": False},
    "max_turn_tokens": 4,
    "max_completion_length": 256,
    "num_generations": 2,
    "per_device_train_batch_size": EPISODES_PER_STEP,
    "max_steps": STEPS,
    "logging_steps": 1,
    "save_strategy": "steps",
    "save_steps": 2,
    "report_to": "none",
    "dataloader_pin_memory": False,
}


@pytest.fixture(scope="module")
def experiment(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    root = tmp_path_factory.mktemp("horizons")
    config = root / "horizons.yaml"
    config.write_text(yaml.safe_dump(SHORT, sort_keys=False))
    out = root / "out"
    from contextlib import redirect_stdout
    from io import StringIO

    log = StringIO()
    with redirect_stdout(log):
        assert main(["experiment", "horizons", str(config), "--output-dir", str(out)]) == 0
    return config, out, log.getvalue()


def test_one_row_per_rule_runs_and_figures(experiment: tuple[Path, Path, str]) -> None:
    _, out, _ = experiment
    summary = json.loads((out / "summary.json").read_text())
    assert [row["rule"] for row in summary["rules"]] == list(RULES)
    for rule in RULES:
        run = out / rule / "seed-0"
        for name in ("config.yaml", "log_history.json", "results.json", "done"):
            assert (run / name).is_file(), run / name
        assert yaml.safe_load((run / "config.yaml").read_text())["rule"] == RULES[rule]
        after = json.loads((run / "results.json").read_text())["after"]
        assert len(after["episodes"]) == 2 * SHORT["eval_tasks"]  # both levels, every rule the same tasks
        assert after["max_turns"] == 3  # the longest horizon, for every rule
    assert summary["before_rl"]["success"]["n"] == 1
    # a rule's own settings reach its runs alone: staged trained with GiGPO (its metric is logged), the others GRPO
    for rule in RULES:
        run = out / rule / "seed-0"
        estimator = yaml.safe_load((run / "config.yaml").read_text()).get("advantage_estimator", "grpo")
        assert estimator == ("gigpo" if rule == "staged" else "grpo")
        logged = any("gigpo/anchored_turn_share" in row for row in json.loads((run / "log_history.json").read_text()))
        assert logged == (rule == "staged")
    assert [row["label"] for row in summary["rules"]][1] == "2→3 every 2 steps, advantage_estimator=gigpo"
    for figure in ("reward.png", "turns.png"):
        assert (out / figure).stat().st_size > 1000
    table = (out / "summary.md").read_text()
    assert all(f"| {rule} |" in table for rule in RULES)


def test_paired_comparison_of_two_rules(experiment: tuple[Path, Path, str]) -> None:
    """staged - fixed, task by task, from the runs' own evaluation rows (by hand), in the JSON and the table."""
    _, out, _ = experiment
    (comparison,) = json.loads((out / "summary.json").read_text())["comparisons"]
    assert (comparison["a"], comparison["b"], comparison["seeds"]) == ("fixed", "staged", [0])

    def by_task(rule: str) -> dict[str, float]:
        rows = json.loads((out / rule / "seed-0" / "results.json").read_text())["after"]["episodes"]
        return {row["task_id"]: row["success"] for row in rows}  # one episode per task here

    fixed, staged = by_task("fixed"), by_task("staged")
    diffs = [staged[task] - fixed[task] for task in fixed]
    assert comparison["tasks"] == len(diffs) == 2 * SHORT["eval_tasks"]
    assert comparison["pooled"]["mean"] == pytest.approx(sum(diffs) / len(diffs))
    assert comparison["per_seed"] == [pytest.approx(sum(diffs) / len(diffs))]
    assert "| staged - fixed | 1 | 4 |" in (out / "summary.md").read_text()


def test_max_turn_limit_follows_each_rule(experiment: tuple[Path, Path, str]) -> None:
    _, out, _ = experiment
    limits = {
        row["rule"]: row["max_turns_over_steps"][0] for row in json.loads((out / "summary.json").read_text())["rules"]
    }
    assert limits["fixed"] == [2, 2, 2]
    assert limits["staged"] == [2, 2, 3]  # the second stage starts at step 2 (every: 2)
    # truncation_threshold 0, any plateau: the adaptive rule rises once it has logged 2 x window steps
    assert limits["adaptive"] == [2, 2, 3]


def test_every_rule_saw_the_same_episodes(experiment: tuple[Path, Path, str]) -> None:
    _, out, _ = experiment
    rows = json.loads((out / "summary.json").read_text())["rules"]
    assert {tuple(row["episodes"]) for row in rows} == {(STEPS * EPISODES_PER_STEP,)}
    assert all(row["generated_tokens"]["mean"] > 0 for row in rows)


def test_rerun_skips_finished_runs_and_summary_only_rereads(
    experiment: tuple[Path, Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    config, out, _ = experiment
    results = {rule: (out / rule / "seed-0" / "results.json") for rule in RULES}
    stamps = {rule: path.stat().st_mtime_ns for rule, path in results.items()}
    capsys.readouterr()
    assert main(["experiment", "horizons", str(config), "--output-dir", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "seed 0: shared start done, skipped" in printed
    assert all(f"{rule} seed 0: done, skipped" in printed for rule in RULES)
    assert {rule: path.stat().st_mtime_ns for rule, path in results.items()} == stamps

    (out / "summary.md").unlink()
    (out / "reward.png").unlink()
    assert main(["experiment", "horizons", str(config), "--output-dir", str(out), "--summary-only"]) == 0
    assert (out / "summary.md").is_file() and (out / "reward.png").is_file()
    assert {rule: path.stat().st_mtime_ns for rule, path in results.items()} == stamps


def test_unfinished_runs_resume_from_their_checkpoints(experiment: tuple[Path, Path, str]) -> None:
    import shutil

    config, out, _ = experiment
    for rule in ("fixed", "staged"):  # as if stopped before the evaluation
        (out / rule / "seed-0" / "done").unlink()
        (out / rule / "seed-0" / "results.json").unlink()
    shutil.rmtree(out / "work" / "fixed" / "seed-0" / f"checkpoint-{STEPS}")  # fixed: stopped after step 2
    assert main(["experiment", "horizons", str(config), "--output-dir", str(out), "--summary-only"]) == 0
    assert [row["rule"] for row in json.loads((out / "summary.json").read_text())["rules"]] == ["adaptive"]
    assert main(["experiment", "horizons", str(config), "--output-dir", str(out)]) == 0
    for rule, checkpoint, limits in (("fixed", 2, [2, 2, 2]), ("staged", STEPS, [2, 2, 3])):
        result = json.loads((out / rule / "seed-0" / "results.json").read_text())
        assert result["resumed_from"].endswith(f"checkpoint-{checkpoint}")
        # the checkpoint's history and the schedule's count continue: the same steps, the rule's limits
        assert result["steps"] == STEPS and result["max_turns_over_steps"] == limits
        assert (out / rule / "seed-0" / "done").is_file()


def test_packaged_config_and_bad_rules() -> None:
    experiment = load_experiment(DEFAULT_CONFIG)
    assert [rule.name for rule in experiment.rules] == ["fixed-short", "fixed-long", "scalinginter", "adaptive"]
    assert experiment.seeds == [0, 1, 2] and experiment.eval_max_turns == 12
    with pytest.raises(ValueError, match="every: N"):
        load_experiment(DEFAULT_CONFIG, ["--rules", "{staged: {max_turns: [4, 8]}}"])
    with pytest.raises(ValueError, match="either max_turns"):
        load_experiment(DEFAULT_CONFIG, ["--rules", "{odd: {max_turns: [4], adaptive: [4, 8]}}"])
    with pytest.raises(ValueError, match="compare must list pairs of rule names"):
        load_experiment(DEFAULT_CONFIG, ["--compare", "[[fixed-long, nowhere]]"])
    with pytest.raises(ValueError, match="settings must map"):
        load_experiment(DEFAULT_CONFIG, ["--rules", "{odd: {max_turns: [4], settings: [gigpo]}}"])
    # a rule's own settings: trainer settings only, never the shared start, evaluation or budget
    for shared in ("sft_steps", "eval_tasks", "max_steps"):
        rules = f"{{odd: {{max_turns: [4], settings: {{{shared}: 3}}}}}}"
        with pytest.raises(ValueError, match=rf"rule 'odd': \['{shared}'\] are shared by every rule"):
            check_settings(load_experiment(DEFAULT_CONFIG, ["--rules", rules]))
    # a value of the wrong type, shared or a rule's own: a ValueError naming it before anything runs (not argparse's
    # usage and exit)
    for overrides in (["--gigpo_omega", "many"], ["--rules", "{odd: {max_turns: [4], settings: {gigpo_omega: many}}}"]):
        with pytest.raises(ValueError, match=r"gigpo_omega.*invalid float value: 'many'"):
            check_settings(load_experiment(DEFAULT_CONFIG, overrides))


def test_packaged_gigpo_experiment() -> None:
    """The packaged GiGPO-against-GRPO experiment: one level, two horizon rules per estimator, the rest shared."""
    experiment = load_experiment(GIGPO_CONFIG)
    check_settings(experiment)
    assert experiment.task_mix == ["AgentGym/BabyAI-GoToLocal-v0"] and experiment.seeds == [0, 1, 2]
    by_name = {rule.name: rule for rule in experiment.rules}
    assert sorted(by_name) == ["gigpo-fixed12", "gigpo-scalinginter", "grpo-fixed12", "grpo-scalinginter"]
    for name, rule in by_name.items():
        assert rule.settings == {"advantage_estimator": name.split("-")[0]}
    assert by_name["grpo-scalinginter"].spec["max_turns"] == by_name["gigpo-scalinginter"].spec["max_turns"]
    assert ("grpo-scalinginter", "gigpo-scalinginter") in experiment.compare


def test_paired_comparison_by_hand() -> None:
    """Two seeds, two tasks of two episodes each; seed 2 finished under b only and is left out."""
    from agentgym_train.experiments.horizons.summary import paired_comparison

    def result(seed: int, successes: dict[str, list[float]]) -> dict:
        rows = [{"task_id": task, "success": s} for task, values in successes.items() for s in values]
        return {"seed": seed, "after": {"episodes": rows}}

    a = [result(0, {"t1": [1, 0], "t2": [0, 0]}), result(1, {"t1": [1, 1], "t2": [0, 1]})]
    b = [result(1, {"t1": [1, 1], "t2": [1, 1]}), result(0, {"t1": [1, 1], "t2": [1, 0]}), result(2, {"t1": [0, 0]})]
    comparison = paired_comparison(a, b)
    # seed 0: t1 1 - 0.5, t2 0.5 - 0; seed 1: t1 1 - 1, t2 1 - 0.5
    assert comparison["seeds"] == [0, 1] and comparison["tasks"] == 4
    assert comparison["per_seed"] == [pytest.approx(0.5), pytest.approx(0.25)]
    assert comparison["pooled"]["mean"] == pytest.approx(0.375)
    half = 1.959964 * 0.25 / 2  # the sample sd of (0.5, 0.5, 0, 0.5) is 0.25, over sqrt(4) units
    assert comparison["pooled"]["high"] - comparison["pooled"]["mean"] == pytest.approx(half)
    assert comparison["over_seeds"]["mean"] == pytest.approx(0.375)
