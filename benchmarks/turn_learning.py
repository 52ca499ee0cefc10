"""Episode samples with the full context against turn samples with a window, on the CPU demo (issue 36).

    python benchmarks/turn_learning.py [--arms episode-full,turn-window] [--seeds 0,1,2] [--window 2]
        [--max-steps 180] [--eval-tasks 100] [--threads 1] [--out-dir benchmarks/results/turn_learning] [--quick]

A benchmark, not a test (several minutes per run on a 2-core CPU). Each run is the whole demo pipeline
(`agentgym_train/configs/babyai_demo.yaml`: tiny model, SFT warm start, GRPO under the max-turn schedule,
held-out evaluation before and after RL) in a process of its own; the arms differ only in what a training
sample is and what each reply is sampled from:

- `episode-full`: the demo as it is (one sequence per episode, every turn in the context);
- `turn-window`: `sample_unit: turn`, `context: window:K` (each reply a sample, prompted with the system prompt,
  the task and the last K turns; each episode weighs the same in the loss). Its evaluations use the same window.

Equal optimiser steps, seeds and threads in both arms. Per run: held-out success after RL with its 95% interval,
the paired after-minus-before difference, the RL stage's wall time and the longest training sequence
(`rollout` tokens: prompt + completion of the longest sample of the last rollout). Each run's JSON goes to
`--out-dir/<arm>-seed<S>.json` and is skipped when it exists, so the runs can span sessions; `summary.json`
holds per arm the mean over seeds with a t interval and the paired differences between arms per seed.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "agentgym_train" / "configs" / "babyai_demo.yaml"
ARMS = ("episode-full", "turn-window")
#: Two-sided 95% t quantiles by degrees of freedom (a handful of seeds).
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571}


def overrides(arm: str, seed: int, args: argparse.Namespace, output_dir: Path) -> list[str]:
    common = ["--output_dir", str(output_dir), "--max_steps", str(args.max_steps), "--eval_tasks", str(args.eval_tasks)]
    common += ["--sft_steps", str(args.sft_steps), "--disable_tqdm", "true", "--seed", str(seed)]
    common += ["--torch_threads", str(args.threads)]
    if arm == "episode-full":
        return common
    if arm == "turn-window":
        return [*common, "--sample_unit", "turn", "--context", f"window:{args.window}"]
    raise ValueError(f"an arm is one of {ARMS}, got {arm!r}")


def run(arm: str, seed: int, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One run in this process: the demo pipeline with the arm's overrides; its figures."""
    from agentgym_train.pipeline import load_configs
    from agentgym_train.pipeline import run as run_pipeline
    from agentgym_train.trainers import grpo

    longest: list[int] = []
    play = grpo.MultiTurnGRPOTrainer._generate_and_score_completions

    def measured(self: Any, inputs: Any) -> Any:
        out = play(self, inputs)
        if self.model.training:
            lengths = out["prompt_mask"].sum(dim=1) + out["completion_mask"].sum(dim=1)
            longest.append(int(lengths.max()))
        return out

    grpo.MultiTurnGRPOTrainer._generate_and_score_completions = measured
    pipeline, trainer_args = load_configs(CONFIG, overrides(arm, seed, args, folder / f"{arm}-{seed}"))
    started = time.perf_counter()
    results = run_pipeline(pipeline, trainer_args)
    after, before = results.get("after", {}), results.get("before", {})
    log = results.get("log_history", [])
    return {
        "arm": arm,
        "seed": seed,
        "steps": max([int(row.get("step", 0)) for row in log] + [0]),
        "rl_wall_s": results["stages"].get("grpo"),
        "pipeline_wall_s": round(time.perf_counter() - started, 1),
        "before_success": before.get("success"),
        "after_success": after.get("success"),
        "after_minus_before": results.get("difference", {}),
        "longest_sample_tokens": max(longest, default=0),
        "train_success": [row["episode/success"] for row in log if "episode/success" in row],
    }


def interval(values: list[float]) -> dict[str, float | int | None]:
    """Mean over seeds with a two-sided 95% t interval (None with one value)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return {"mean": mean, "low": None, "high": None, "n": len(values)}
    half = T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": len(values)}


def summarize(runs: list[dict[str, Any]], arms: list[str], seeds: list[int]) -> dict[str, Any]:
    by = {(r["arm"], r["seed"]): r for r in runs}
    summary: dict[str, Any] = {"arms": {}, "paired": {}}
    for arm in arms:
        done = [by[(arm, s)] for s in seeds if (arm, s) in by]
        if done:
            summary["arms"][arm] = {
                "after_success": interval([r["after_success"]["mean"] for r in done]),
                "after_minus_before": interval([r["after_minus_before"]["mean"] for r in done]),
                "rl_wall_s": interval([r["rl_wall_s"] for r in done]),
                "longest_sample_tokens": max(r["longest_sample_tokens"] for r in done),
            }
    for arm in arms[1:]:
        pairs = [s for s in seeds if (arm, s) in by and (arms[0], s) in by]
        if pairs:
            diffs = [by[(arm, s)]["after_success"]["mean"] - by[(arms[0], s)]["after_success"]["mean"] for s in pairs]
            summary["paired"][f"{arm} - {arms[0]}"] = {
                "per_seed": dict(zip(pairs, diffs, strict=True)),
                **interval(diffs),
            }
    return summary


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated: " + ", ".join(ARMS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--window", type=int, default=2, help="turns the window keeps")
    parser.add_argument("--max-steps", type=int, default=180, help="optimiser steps of every run (the demo's 180)")
    parser.add_argument("--eval-tasks", type=int, default=100, help="held-out test tasks (the demo's 100)")
    parser.add_argument("--sft-steps", type=int, default=80, help="SFT warm-start steps (the demo's 80)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "benchmarks" / "results" / "turn_learning")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 4 steps, 10 tasks, one seed, no files")
    parser.add_argument("--run", default=None, help=argparse.SUPPRESS)  # internal: ARM:SEED in this process
    parser.add_argument("--folder", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.max_steps, args.eval_tasks, args.sft_steps, args.seeds = 4, 10, 10, "0"
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.run is not None:  # a child: one run, its figures as the last line of stdout
        arm, seed = args.run.split(":")
        print(json.dumps(run(arm, int(seed), args, args.folder)), flush=True)
        return
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = []
    with tempfile.TemporaryDirectory(prefix="agentgym-turn-bench-") as folder:
        for seed in seeds:
            for arm in arms:
                path = args.out_dir / f"{arm}-seed{seed}.json"
                if path.exists() and not args.quick:
                    runs.append(json.loads(path.read_text()))
                    continue
                command = [sys.executable, __file__, "--run", f"{arm}:{seed}", "--folder", folder]
                command += argv if argv is not None else sys.argv[1:]
                done = subprocess.run(command, capture_output=True, text=True)
                if done.returncode != 0:
                    raise RuntimeError(f"{arm} seed {seed} failed:\n{done.stderr[-4000:]}")
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
                print(f"{arm} seed {seed}: {runs[-1]['after_success']['mean']:.3f} in {runs[-1]['rl_wall_s']:.0f} s")
                if not args.quick:
                    args.out_dir.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(runs[-1], indent=2))
    summary = summarize(runs, arms, seeds)
    print(json.dumps(summary, indent=2))
    if not args.quick:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        settings = {k: v for k, v in vars(args).items() if k not in ("run", "folder", "out_dir", "quick")}
        (args.out_dir / "summary.json").write_text(
            json.dumps({"commit": commit.stdout.strip(), "settings": settings, **summary}, indent=2, default=str)
        )


if __name__ == "__main__":
    main()
