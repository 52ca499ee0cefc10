"""Test-time scaling curves of the CPU demo's model before and after RL, beside the expert and random.

Usage (after `agentgym train babyai_demo --output_dir RUN`, which saves RUN/sft-model and RUN/rl-model):

    python benchmarks/eval_curves.py RUN [--out benchmarks/results/eval_curves] [--scratch /tmp/eval-curves]

Runs `agentgym eval` for each policy twice, with the demo's env settings: success against max turns
(2,4,6,8,10 on 100 test tasks, one episode each) and Pass@K (16 episodes on 50 test tasks, max turns 8,
the demo's last horizon). The full JSONs (every transcript) stay in --scratch, where a rerun finds
and reuses them; --out gets a small summary (the curves, and per episode
only task, sample, category, success, turns) and two figures with one line per policy.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

from agentgym_train.cli import main
from agentgym_train.evaluation.curves import plot_series
from agentgym_train.evaluation.evaluate import Estimate

ENV = "AgentGym/BabyAI-GoToObj-v0"
SETTINGS = ["--env-kwargs", '{"show_actions": false}', "--max-turn-tokens", "8", "--max-completion-length", "512"]
RANDOM_ACTIONS = "turn left,turn right,move forward,pick up,drop,toggle"
EPISODE_KEYS = ("task_id", "sample", "category", "success", "turns")


def evaluate(label: str, model: str, scratch: Path) -> dict[str, Any]:
    """Both curves of one policy; returns the summary of the two runs."""
    extra = ["--actions", RANDOM_ACTIONS] if model == "random" else []
    runs = {
        "max_turns": ["--tasks", "100", "--max-turns", "2,4,6,8,10"],
        "pass_at_k": ["--tasks", "50", "-k", "16", "--max-turns", "8"],
    }
    summary: dict[str, Any] = {"model": model}
    for name, args in runs.items():
        path = scratch / f"{label.replace(' ', '-')}-{name}.json"
        if not path.is_file():  # a finished run is reused: the script can be stopped and rerun
            t0 = time.perf_counter()
            assert main(["eval", model, ENV, *SETTINGS, *extra, *args, "--json", str(path)]) == 0
            summary[f"{name}_seconds"] = round(time.perf_counter() - t0, 1)
        document = json.loads(path.read_text())
        if name == "max_turns":
            summary["max_turns_curve"] = document["max_turns_curve"]
            summary["max_turns_episodes"] = {
                key: [{k: e[k] for k in EPISODE_KEYS} for e in value["episodes"]]
                for key, value in document.items()
                if key.startswith("max_turns=")
            }
        else:
            summary["pass_at_k_curve"] = document["pass_at_k_curve"]
            summary["pass_at_k_episodes"] = [{k: e[k] for k in EPISODE_KEYS} for e in document["episodes"]]
    return summary


def estimates(points: list[dict[str, float]]) -> list[Estimate]:
    return [Estimate(p["mean"], p["low"], p["high"], int(p["n"])) for p in points]


def main_(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="output_dir of `agentgym train babyai_demo`")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/eval_curves"))
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/eval-curves"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    args.scratch.mkdir(parents=True, exist_ok=True)
    policies = {
        "random": "random",
        "before RL": str(args.run / "sft-model"),
        "after RL": str(args.run / "rl-model"),
        "expert": "expert",
    }
    missing = [model for model in policies.values() if model not in ("random", "expert") and not Path(model).is_dir()]
    results = {label: evaluate(label, model, args.scratch) for label, model in policies.items() if model not in missing}
    if missing:
        print(f"not evaluated (no such model): {missing}; rerun when they exist")
    summary = {"env_id": ENV, "settings": SETTINGS, "not_evaluated": missing, **results}
    (args.out / "summary.json").write_text(json.dumps(summary, indent=1))
    for name, file, x_label, y_label in (
        ("max_turns_curve", "max-turns.png", "max turns", "success"),
        ("pass_at_k_curve", "pass-at-k.png", "K", "Pass@K"),
    ):
        first = next(iter(results.values()))[name]
        series = {label: estimates(r[name]["series"]["all"]) for label, r in results.items()}
        title = f"BabyAI-GoToObj, {'100 tasks' if x_label != 'K' else '50 tasks x 16 episodes, max turns 8'}"
        plot_series(first["xs"], series, args.out / file, x_label, y_label, title, band=list(series))
    for label, r in results.items():
        for name in ("max_turns_curve", "pass_at_k_curve"):
            cells = " | ".join(f"{p['mean']:.2f} ± {(p['high'] - p['low']) / 2:.2f}" for p in r[name]["series"]["all"])
            print(f"| {label} | {name} | {cells} |")


if __name__ == "__main__":
    main_()
