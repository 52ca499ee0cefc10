"""GiGPO against GRPO where GRPO learns (issue 37, part 1): held-out success, paired differences, curves.

    python benchmarks/gigpo_vs_grpo.py --setting demo180 [--arms grpo,gigpo-mean] [--seeds 0,1,2]
    python benchmarks/gigpo_vs_grpo.py --setting demo180 --summary   # the summary of what finished

A benchmark, not a test (minutes per run on a CPU). A *setting* (the presets in `SETTINGS`, each a set of
overrides of the demo config `agentgym_train/configs/babyai_demo.yaml`: level, SFT warm start, steps, lr,
max-turn schedule) is first calibrated with GRPO alone (does GRPO learn beyond its interval? do anchor
states repeat within groups?), then GRPO and GiGPO run from the same start with the same budget:

- per seed, one *start*: the tiny model built with the seed, its SFT warm start on expert episodes, and its
  held-out evaluation (`eval_tasks` test tasks x `eval_episodes_per_task`), kept in `seed-S/start.json`
  (the SFT model under `runs/gigpo_vs_grpo/`, not committed);
- per seed and arm, one *run* from that start: multi-turn GRPO with the arm's advantage estimator, the
  same held-out episodes after RL, in `seed-S/<arm>.json` (the training curve: reward, success, turns,
  anchor share per step).

Arms (`ARMS`): `grpo` is TRL's group-normalised GRPO, the advantages unchanged, but with the rollout
recording each turn's state so that the share of turns whose anchor state occurs more than once in its
group is logged (`gigpo/anchored_turn_share`, as GiGPO logs it); `gigpo-mean` is GiGPO with
`gigpo_norm: mean_norm` (verl-agent's default), `gigpo-meanstd` with `mean_std_norm`.

Each run is a process of its own; the runner skips runs whose JSON exists, so that the work spans sessions.
The summary (`summary.json`, `summary.md` in the setting's folder) gives per arm the held-out success
after RL (mean over seeds with a 95% t interval; pooled over tasks x seeds with a normal interval), the
paired after-minus-start difference, and the paired differences between arms: task by task on the
seeds both finished, over tasks x seeds (normal 95% interval) and over seeds (t interval).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "agentgym_train" / "configs" / "babyai_demo.yaml"
RESULTS = ROOT / "benchmarks" / "results" / "gigpo_vs_grpo"
WORK = ROOT / "runs" / "gigpo_vs_grpo"

#: Settings tried: overrides of the demo config (`--key value`), with a line on why.
SETTINGS: dict[str, dict[str, Any]] = {
    "demo180": {
        "why": "the demo as it is (GoToObj, one object; SFT 80 steps; 180 GRPO steps at lr 3e-4; max turns 4/6/8)",
        "overrides": {},
    },
    "s6n2-180": {
        "why": "GoToLocalS6N2: a 6x6 room (the demo's GoToObj: 8x8, one object) with two objects, "
        "the mission names one",
        "overrides": {"env_id": "AgentGym/BabyAI-GoToLocalS6N2-v0"},
    },
    "redballgrey-180": {
        "why": "GoToRedBallGrey: 8x8 room, the red ball among 7 grey distractors, max turns 8/10/12",
        "overrides": {
            "env_id": "AgentGym/BabyAI-GoToRedBallGrey-v0",
            "max_turn_schedule": [8, 10, 12],
            "max_completion_length": "1024",
        },
    },
}

#: Arms: overrides of the GRPO settings.
ARMS: dict[str, dict[str, str]] = {
    "grpo": {"advantage_estimator": "grpo_anchor_share"},
    "gigpo-mean": {"advantage_estimator": "gigpo", "gigpo_norm": "mean_norm"},
    "gigpo-meanstd": {"advantage_estimator": "gigpo", "gigpo_norm": "mean_std_norm"},
    # issue 36's comparison on a second level: one sample per turn, each reply prompted with the system prompt,
    # the task and the last 2 turns (its held-out episodes use the same window)
    "grpo-turn-window": {"advantage_estimator": "grpo_anchor_share", "sample_unit": "turn", "context": "window:2"},
}

#: The training log's columns kept as the curve (one row per step).
CURVE = (
    "step",
    "reward",
    "episode/success",
    "episode/turns",
    "episode/invalid_reply_rate",
    "rollout/max_turns",
    "gigpo/anchored_turn_share",
    "frac_reward_zero_std",
    "kl",
    "entropy",
    "loss",
    "grad_norm",
)


def register_anchor_share_grpo() -> None:
    """`advantage_estimator: grpo_anchor_share`: TRL's GRPO advantages unchanged (as `grpo`), with the rollout
    recording each turn's state key, so that the share of turns whose state occurs more than once in their
    group is logged as GiGPO logs it."""
    from agentgym_train import estimators as adv

    if "grpo_anchor_share" in adv.ESTIMATORS:
        return

    @adv.register_estimator("grpo_anchor_share", record_states=True, any_aggregation=True, group_relative=True)
    def _grpo_anchor_share(batch: adv.EstimatorInput) -> Any:
        group = batch.group_size
        states = [e.state_keys for e in batch.episodes]
        if batch.gather is not None:
            states = batch.gather(states)
        visits = Counter((i // group, key) for i, keys in enumerate(states) for key in keys)
        shared = sum(count for count in visits.values() if count > 1)
        batch.log("gigpo/anchored_turn_share", shared / max(1, sum(visits.values())))
        return batch.grpo


def overrides(setting: str, seed: int, output_dir: Path, arm: str | None, threads: int) -> list[str]:
    pairs = {
        **SETTINGS[setting]["overrides"],
        **(ARMS[arm] if arm else {}),
        "output_dir": str(output_dir),
        "seed": str(seed),
        "torch_threads": str(threads),
        "disable_tqdm": "true",
        "save_strategy": "no",
    }
    out: list[str] = []
    for key, value in pairs.items():
        out += [f"--{key}", *(str(v) for v in value)] if isinstance(value, list) else [f"--{key}", str(value)]
    return out


def _eval_dict(result: Any) -> dict[str, Any]:
    out = result.to_dict()
    out["episodes"] = [
        {k: r[k] for k in ("task_id", "sample", "success", "return", "turns") if k in r} for r in out["episodes"]
    ]
    return out


def prepare_start(setting: str, seed: int, threads: int, rebuild: bool = False) -> None:
    """The seed's start: tiny model, SFT warm start, held-out evaluation (and the random policy's).

    `rebuild`: the start's JSON is committed but its SFT model (under `runs/`, not committed) is gone, as on a
    fresh clone: build it again and check that its held-out episodes are the committed ones, so that a new arm
    starts where the committed arms started.
    """
    import torch

    from agentgym_train.evaluation.evaluate import evaluate_random
    from agentgym_train.models.tiny import load_model
    from agentgym_train.pipeline import load_configs, quiet_console
    from agentgym_train.pipeline.stages import build_policy, evaluate_stage, save_trained_model, sft_stage
    from agentgym_train.trainers.sft import expert_chats

    work = WORK / setting / f"seed-{seed}"
    pipeline, args = load_configs(CONFIG, overrides(setting, seed, work / "sft", None, threads))
    torch.set_num_threads(threads)
    horizon = max(pipeline.max_turn_schedule)
    started = time.perf_counter()
    with quiet_console():
        model_path, model, tokenizer = build_policy(pipeline, [args.env_id], args.env_kwargs, seed, work)
        chats = expert_chats(
            args.env_id, pipeline.sft_episodes, max_turns=horizon, env_kwargs=args.env_kwargs, seed=seed
        )
        sft = sft_stage(model, tokenizer, chats, pipeline, work / "sft", seed)
        save_trained_model(sft, tokenizer, work / "sft-model", tiny_source=model_path)
        sft_s = time.perf_counter() - started
        model, tokenizer = load_model(work / "sft-model")
        t0 = time.perf_counter()
        before = evaluate_stage(model, tokenizer, args.env_id, pipeline, args, horizon, progress=False)
        eval_s = time.perf_counter() - t0
        random = evaluate_random(
            args.env_id,
            actions=pipeline.random_actions,
            split=pipeline.eval_split,
            num_tasks=pipeline.eval_tasks,
            episodes_per_task=pipeline.eval_episodes_per_task,
            max_turns=horizon,
            env_kwargs=args.env_kwargs,
            seed=seed,
        )
    start = {
        "setting": setting,
        "seed": seed,
        "env_id": args.env_id,
        "max_turns": horizon,
        "before": _eval_dict(before),
        "random": {k: v for k, v in _eval_dict(random).items() if k != "episodes"},
        "sft_s": round(sft_s, 1),
        "eval_s": round(eval_s, 1),
    }
    out = RESULTS / setting / f"seed-{seed}" / "start.json"
    if rebuild:
        committed = json.loads(out.read_text())["before"]["episodes"]
        if start["before"]["episodes"] != committed:
            raise SystemExit(f"{setting} seed {seed}: the rebuilt SFT model plays other held-out episodes than {out}")
        print(f"start {setting} seed {seed}: SFT model rebuilt, the same held-out episodes ({sft_s:.0f} s)")
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(start, indent=1) + "\n")
    print(f"start {setting} seed {seed}: success {before.success} ({sft_s:.0f} s SFT, {eval_s:.0f} s eval)")


def train_arm(setting: str, seed: int, arm: str, threads: int) -> None:
    """One run: the arm's RL from the seed's SFT model, then the same held-out episodes."""
    import torch

    from agentgym_train.evaluation.evaluate import EvalResult, estimate, summarize_episodes, task_means
    from agentgym_train.models.tiny import load_model
    from agentgym_train.pipeline import ALGORITHMS, load_configs, quiet_console
    from agentgym_train.pipeline.stages import evaluate_stage, rl_stage
    from agentgym_train.scheduler import MaxTurnScheduler

    changes = _library_changes()  # as imported, before a later edit by someone else
    work = WORK / setting / f"seed-{seed}"
    start = json.loads((RESULTS / setting / f"seed-{seed}" / "start.json").read_text())
    pipeline, args = load_configs(CONFIG, overrides(setting, seed, work / arm, arm, threads))
    torch.set_num_threads(threads)
    horizon = max(pipeline.max_turn_schedule)
    started = time.perf_counter()
    with quiet_console():
        model, tokenizer = load_model(work / "sft-model")  # names the SFT checkpoint: TRL's KL reference
        scheduler = MaxTurnScheduler.stages(pipeline.max_turn_schedule, pipeline.max_turn_every)
        trained, trainer = rl_stage(
            ALGORITHMS["grpo"], model, tokenizer, args, work / arm / "rl-model", callbacks=[scheduler]
        )
        rl_s = time.perf_counter() - started
        t0 = time.perf_counter()
        after = evaluate_stage(trained, tokenizer, args.env_id, pipeline, args, horizon, progress=False)
        eval_s = time.perf_counter() - t0
    history = trainer.state.log_history
    before = summarize_episodes(start["before"]["episodes"])
    a, b = task_means(before.episodes), task_means(after.episodes)
    diff = estimate([b[t] - a[t] for t in sorted(set(a) & set(b))])
    curve = [{k: row[k] for k in CURVE if k in row} for row in history if "reward" in row]
    shares = [row["gigpo/anchored_turn_share"] for row in curve if "gigpo/anchored_turn_share" in row]
    result = {
        "setting": setting,
        "seed": seed,
        "arm": arm,
        "arm_settings": ARMS[arm],
        "settings": SETTINGS[setting],
        "env_id": args.env_id,
        "max_turns": horizon,
        "steps": max([int(r.get("step", 0)) for r in history] + [0]),
        "after": _eval_dict(after),
        "after_minus_start": {"mean": diff.mean, "low": diff.low, "high": diff.high, "n": diff.n},
        "anchored_turn_share": sum(shares) / len(shares) if shares else None,
        "train_success": sum(r.get("episode/success", 0.0) for r in curve) / max(1, len(curve)),
        "rl_s": round(rl_s, 1),
        "eval_s": round(eval_s, 1),
        "curve": curve,
        "commit": _commit(),
        "library_changes": changes,
    }
    assert isinstance(after, EvalResult)
    out = RESULTS / setting / f"seed-{seed}" / f"{arm}.json"
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"{setting} seed {seed} {arm}: after {after.success}, after - start {diff.mean:+.3f} "
        f"[{diff.low:+.3f}, {diff.high:+.3f}], anchored share {result['anchored_turn_share']}, RL {rl_s:.0f} s"
    )


def _commit() -> str:
    done = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip()


def _library_changes() -> dict[str, Any]:
    """Uncommitted changes to the library in the working tree the run imported (a shared checkout): the files
    and a hash of their diff, so that runs made under different trees can be told apart."""
    import hashlib

    diff = subprocess.run(["git", "diff", "--", "agentgym_train"], cwd=ROOT, capture_output=True, text=True).stdout
    names = subprocess.run(
        ["git", "diff", "--name-only", "--", "agentgym_train"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split()
    return {"files": names, "diff_sha1": hashlib.sha1(diff.encode()).hexdigest() if diff else None}


# ---- the summary ------------------------------------------------------------------------------------


def _block(e: Any) -> dict[str, float]:
    return {"mean": e.mean, "low": e.low, "high": e.high, "n": e.n}


def _fmt(block: dict[str, float] | None) -> str:
    if not block or block.get("mean") is None or (isinstance(block["mean"], float) and math.isnan(block["mean"])):
        return "-"
    if block.get("low") is None or math.isnan(block["low"]):
        return f"{block['mean']:+.3f}"
    return f"{block['mean']:+.3f} [{block['low']:+.3f}, {block['high']:+.3f}]"


def summarize(setting: str) -> dict[str, Any]:
    from agentgym_train.evaluation.evaluate import estimate, summarize_episodes, task_means
    from agentgym_train.experiments.horizons.summary import over_seeds

    folder = RESULTS / setting
    starts = {
        int(p.parent.name.removeprefix("seed-")): json.loads(p.read_text()) for p in folder.glob("seed-*/start.json")
    }
    runs: dict[str, dict[int, dict[str, Any]]] = {}
    for path in sorted(folder.glob("seed-*/*.json")):
        if path.name != "start.json":
            run = json.loads(path.read_text())
            runs.setdefault(run["arm"], {})[run["seed"]] = run
    runs = {arm: runs[arm] for arm in sorted(runs, key=lambda a: list(ARMS).index(a) if a in ARMS else len(ARMS))}

    def pooled(evals: dict[int, dict[str, Any]]) -> dict[str, float]:
        rows = [{**r, "task_id": f"seed-{s}/{r['task_id']}"} for s, e in evals.items() for r in e["episodes"]]
        return _block(summarize_episodes(rows).success)

    def paired(a: dict[int, dict[str, Any]], b: dict[int, dict[str, Any]]) -> dict[str, Any]:
        units, per_seed, seeds = [], [], []
        for seed in sorted(set(a) & set(b)):
            ta, tb = task_means(a[seed]["episodes"]), task_means(b[seed]["episodes"])
            diffs = [tb[t] - ta[t] for t in sorted(set(ta) & set(tb))]
            units += diffs
            per_seed.append(sum(diffs) / len(diffs))
            seeds.append(seed)
        return {
            "seeds": seeds,
            "tasks_x_seeds": len(units),
            "pooled": _block(estimate(units)),
            "over_seeds": over_seeds(per_seed) if per_seed else None,
            "per_seed": per_seed,
        }

    summary: dict[str, Any] = {"setting": setting, "settings": SETTINGS.get(setting), "arms": {}, "comparisons": {}}
    if starts:
        before = {s: st["before"] for s, st in starts.items()}
        summary["start"] = {
            "seeds": sorted(starts),
            "success_over_seeds": over_seeds([b["success"]["mean"] for b in before.values()]),
            "success_pooled": pooled(before),
            "random_over_seeds": over_seeds([st["random"]["success"]["mean"] for st in starts.values()]),
            "sft_s": [st["sft_s"] for st in starts.values()],
        }
    for arm, by_seed in runs.items():
        after = {s: r["after"] for s, r in by_seed.items()}
        curves = [r["curve"] for r in by_seed.values()]
        steps = min(len(c) for c in curves)
        summary["arms"][arm] = {
            "seeds": sorted(by_seed),
            "success_over_seeds": over_seeds([e["success"]["mean"] for e in after.values()]),
            "success_pooled": pooled(after),
            "after_minus_start": paired({s: starts[s]["before"] for s in by_seed if s in starts}, after),
            "anchored_turn_share": over_seeds([r["anchored_turn_share"] for r in by_seed.values()])
            if all(r["anchored_turn_share"] is not None for r in by_seed.values())
            else None,
            "rl_minutes": [round(r["rl_s"] / 60, 1) for r in by_seed.values()],
            "run_minutes": [round((r["rl_s"] + r["eval_s"]) / 60, 1) for r in by_seed.values()],
            "mean_curve": [
                {
                    k: sum(c[i].get(k, math.nan) for c in curves) / len(curves)
                    for k in ("step", "reward", "episode/success", "episode/turns", "gigpo/anchored_turn_share")
                }
                for i in range(steps)
            ],
        }
    for b in runs:
        if b != "grpo" and "grpo" in runs:
            summary["comparisons"][f"{b} - grpo"] = paired(
                {s: r["after"] for s, r in runs["grpo"].items()}, {s: r["after"] for s, r in runs[b].items()}
            )
    (folder / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    _figure(runs, folder / "curves.png")
    (folder / "summary.md").write_text(markdown(summary))
    print(markdown(summary))
    return summary


def _figure(runs: dict[str, dict[int, dict[str, Any]]], path: Path, window: int = 9) -> None:
    """Training success and anchored turn share per step, each run (thin) and the arm's mean over seeds,
    a centred moving average of `window` steps."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def smooth(values: list[float]) -> list[float]:
        half = window // 2
        return [sum(values[max(0, i - half) : i + half + 1]) / len(values[max(0, i - half) : i + half + 1])
                for i in range(len(values))]  # fmt: skip

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for colour, (arm, by_seed) in zip(("C0", "C1", "C2"), runs.items(), strict=False):
        for n, (key, ax) in enumerate(zip(("episode/success", "gigpo/anchored_turn_share"), axes, strict=True)):
            curves = [[row.get(key, math.nan) for row in r["curve"]] for r in by_seed.values()]
            for curve in curves:
                ax.plot(smooth(curve), color=colour, alpha=0.25, linewidth=0.8)
            steps = min(len(c) for c in curves)
            mean = [sum(c[i] for c in curves) / len(curves) for i in range(steps)]
            ax.plot(smooth(mean), color=colour, linewidth=2, label=f"{arm} ({len(curves)} seeds)" if n == 0 else None)
    axes[0].set(xlabel="step", ylabel="training success", title=f"training success ({window}-step average)")
    axes[1].set(xlabel="step", ylabel="share", title="turns whose anchor state repeats in the group")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def markdown(summary: dict[str, Any]) -> str:
    def plain(block: dict[str, float] | None) -> str:
        text = _fmt(block)
        return text.replace("+", "") if text != "-" else text

    lines = [f"# {summary['setting']}: {(summary.get('settings') or {}).get('why', '')}", ""]
    start = summary.get("start")
    if start:
        lines += [
            f"Start (SFT) held-out success, seeds {start['seeds']}: {plain(start['success_over_seeds'])} over seeds, "
            f"{plain(start['success_pooled'])} pooled over tasks x seeds; random policy "
            f"{plain(start['random_over_seeds'])}.",
            "",
        ]
    lines += [
        "| arm | seeds | success after (seeds, t) | success after (tasks x seeds) | after - start (tasks x seeds) "
        "| after - start (seeds, t) | anchored turn share | RL min per run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, s in summary["arms"].items():
        share = "-" if s["anchored_turn_share"] is None else f"{s['anchored_turn_share']['mean']:.3f}"
        lines.append(
            f"| {arm} | {s['seeds']} | {plain(s['success_over_seeds'])} | {plain(s['success_pooled'])} "
            f"| {_fmt(s['after_minus_start']['pooled'])} | {_fmt(s['after_minus_start']['over_seeds'])} "
            f"| {share} | {s['rl_minutes']} |"
        )
    if summary["comparisons"]:
        lines += [
            "",
            "| comparison | seeds | tasks x seeds | b - a (tasks x seeds) | b - a (seeds, t) | per seed |",
            "|---|---|---|---|---|---|",
        ]
        for name, c in summary["comparisons"].items():
            per_seed = ", ".join(f"{d:+.3f}" for d in c["per_seed"])
            lines.append(
                f"| {name} | {c['seeds']} | {c['tasks_x_seeds']} | {_fmt(c['pooled'])} | {_fmt(c['over_seeds'])} "
                f"| {per_seed} |"
            )
    lines += [
        "",
        "Held-out test tasks, the same episodes (tasks, env seeds) before and after RL within a seed. Intervals: "
        "95%, normal over tasks (x seeds), Student t over seeds. Anchored turn share: the share of training "
        "turns whose start state occurs more than once in their group (8 episodes of one task), mean over steps.",
        "",
    ]
    return "\n".join(lines)


# ---- the runner ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--setting", required=True, choices=sorted(SETTINGS))
    parser.add_argument("--arms", default="grpo,gigpo-mean", help=f"comma-separated, of {sorted(ARMS)}")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--summary", action="store_true", help="only write the summary of what finished")
    parser.add_argument("--one", nargs=2, default=None, help=argparse.SUPPRESS)  # internal: SEED ARM|start
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    register_anchor_share_grpo()
    if args.one is not None:
        seed, what = int(args.one[0]), args.one[1]
        if what in ("start", "rebuild-start"):
            prepare_start(args.setting, seed, args.threads, rebuild=what == "rebuild-start")
        else:
            train_arm(args.setting, seed, what, args.threads)
        return
    if not args.summary:
        arms = [a.strip() for a in args.arms.split(",") if a.strip()]
        for seed in [int(s) for s in args.seeds.split(",") if s.strip()]:
            folder = RESULTS / args.setting / f"seed-{seed}"
            for what in ["start", *arms]:
                if (folder / f"{what}.json").is_file():
                    continue
                if what != "start" and not (WORK / args.setting / f"seed-{seed}" / "sft-model").is_dir():
                    command = [sys.executable, __file__, "--setting", args.setting, "--threads", str(args.threads)]
                    if subprocess.run([*command, "--one", str(seed), "rebuild-start"]).returncode != 0:
                        raise SystemExit(f"{args.setting} seed {seed}: the SFT start could not be rebuilt")
                t0 = time.perf_counter()
                command = [sys.executable, __file__, "--setting", args.setting, "--threads", str(args.threads)]
                done = subprocess.run([*command, "--one", str(seed), what])
                if done.returncode != 0:
                    raise SystemExit(f"{args.setting} seed {seed} {what} failed (exit {done.returncode})")
                print(f"[{args.setting} seed {seed} {what}: {(time.perf_counter() - t0) / 60:.1f} min]", flush=True)
    summarize(args.setting)


if __name__ == "__main__":
    main()
