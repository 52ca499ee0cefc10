"""The horizon experiment's summary: per-rule means and 95% intervals over seeds, the markdown table,
the reward and turn figures."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

from agentgym_train.experiments.horizons.config import DONE, Experiment, Rule, parse_settings, seed_settings
from agentgym_train.experiments.horizons.runs import rollout_rows

#: Two-sided 95% Student t quantiles by degrees of freedom (intervals over a few seeds); beyond: normal.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
Z95 = 1.959964


# ---- the summary: table and figures -----------------------------------------------------------------


def over_seeds(values: list[float]) -> dict[str, float]:
    """Mean and 95% Student-t interval over per-seed values."""
    n = len(values)
    mean = sum(values) / n if n else math.nan
    half = T975.get(n - 1, Z95) * statistics.stdev(values) / math.sqrt(n) if n > 1 else math.nan
    return {"mean": mean, "low": mean - half, "high": mean + half, "n": n}


def _pooled(results: list[dict[str, Any]], when: str) -> dict[str, Any]:
    """The evaluation rows of every seed together: intervals over tasks x seeds (episodes)."""
    from agentgym_train.evaluation.evaluate import summarize_episodes

    rows = [{**r, "task_id": f"seed-{res['seed']}/{r['task_id']}"} for res in results for r in res[when]["episodes"]]
    pooled = summarize_episodes(rows).to_dict()
    pooled.pop("episodes")
    return pooled


def _rule_summary(rule: Rule, results: list[dict[str, Any]]) -> dict[str, Any]:
    evals = [r["after"] for r in results]
    return {
        "rule": rule.name,
        "label": rule.label(),
        "seeds": [r["seed"] for r in results],
        "success": over_seeds([e["success"]["mean"] for e in evals]),
        "return": over_seeds([e["return"]["mean"] for e in evals]),
        "pooled": _pooled(results, "after"),
        "levels": {
            level: over_seeds([e["categories"][level]["success"]["mean"] for e in evals])
            for level in evals[0]["categories"]
        },
        "eval_turns": over_seeds([e["turns"]["mean"] for e in evals]),
        "eval_invalid_reply_rate": over_seeds([e["invalid_reply_rate"] for e in evals]),
        "train_turns": over_seeds([r["train_turns"] for r in results]),
        "steps": sorted({r["steps"] for r in results}),
        "episodes": sorted({r["episodes"] for r in results}),
        "generated_tokens": over_seeds([r["generated_tokens"] for r in results]),
        "wall_time_s": over_seeds([r["wall_time_s"] for r in results]),
        "max_turns_over_steps": [r["max_turns_over_steps"] for r in results],
    }


def paired_comparison(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> dict[str, Any]:
    """Held-out success of rule b minus rule a (their runs' results), on the seeds both finished: each seed's
    runs started from the same model and played the same tasks, so the difference is taken task by task
    (a task's success: the mean over its episodes). Over tasks x seeds with a normal 95% interval, and per
    seed with a t interval over seeds."""
    from agentgym_train.evaluation.evaluate import estimate, task_means

    def by_task(result: dict[str, Any]) -> dict[str, float]:
        return task_means(result["after"]["episodes"])

    first = {r["seed"]: by_task(r) for r in a}
    units, per_seed, seeds = [], [], []
    for result in sorted(b, key=lambda r: r["seed"]):
        if result["seed"] not in first:
            continue
        before, after = first[result["seed"]], by_task(result)
        diffs = [after[task] - before[task] for task in sorted(set(before) & set(after))]
        units += diffs
        per_seed.append(sum(diffs) / len(diffs))
        seeds.append(result["seed"])
    pooled = estimate(units)
    return {
        "seeds": seeds,
        "tasks": len(units),
        "pooled": {"mean": pooled.mean, "low": pooled.low, "high": pooled.high, "n": pooled.n},
        "per_seed": per_seed,
        "over_seeds": over_seeds(per_seed),
    }


def _fmt(block: dict[str, float], digits: int = 3) -> str:
    half = (block["high"] - block["low"]) / 2
    return f"{block['mean']:.{digits}f}" + ("" if math.isnan(half) else f" ± {half:.{digits}f}")


def summarize(experiment: Experiment) -> dict[str, Any]:
    """Re-read finished runs; write summary.json, summary.md, reward.png and turns.png; return the summary."""
    settings = parse_settings(seed_settings(experiment, experiment.seeds[0]))[1]
    episodes_per_step = settings.per_device_train_batch_size * settings.gradient_accumulation_steps
    finished: dict[str, list[dict[str, Any]]] = {}
    histories: dict[str, list[list[dict[str, Any]]]] = {}
    for rule in experiment.rules:
        for seed in experiment.seeds:
            run = experiment.run_dir(rule, seed)
            if (run / DONE).is_file():
                result = json.loads((run / "results.json").read_text())
                result["episodes"] = result["steps"] * episodes_per_step
                finished.setdefault(rule.name, []).append(result)
                histories.setdefault(rule.name, []).append(json.loads((run / "log_history.json").read_text()))
    starts = [
        json.loads((experiment.seed_dir(s) / "results.json").read_text())
        for s in experiment.seeds
        if (experiment.seed_dir(s) / DONE).is_file()
    ]
    rows = [
        _rule_summary(r, finished[r.name])
        for r in experiment.rules
        if r.name in finished and finished[r.name][0]["after"]
    ]
    before = None
    if starts and starts[0]["before"]:
        evals = [s["before"] for s in starts]
        before = {
            "success": over_seeds([e["success"]["mean"] for e in evals]),
            "return": over_seeds([e["return"]["mean"] for e in evals]),
            "pooled": _pooled(starts, "before"),
            "levels": {
                lvl: over_seeds([e["categories"][lvl]["success"]["mean"] for e in evals])
                for lvl in evals[0]["categories"]
            },
            "eval_turns": over_seeds([e["turns"]["mean"] for e in evals]),
            "eval_invalid_reply_rate": over_seeds([e["invalid_reply_rate"] for e in evals]),
        }
    comparisons = [
        {"a": a, "b": b, **paired_comparison(finished[a], finished[b])}
        for a, b in experiment.compare
        if a in finished and b in finished
    ]
    summary = {
        "task_mix": experiment.task_mix,
        "eval_max_turns": experiment.eval_max_turns,
        "episodes_per_step": episodes_per_step,
        "before_rl": before,
        "rules": rows,
        "comparisons": [c for c in comparisons if c["seeds"]],
    }
    out = experiment.output_dir
    out.mkdir(parents=True, exist_ok=True)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "summary.md").write_text(markdown_table(summary) + "\n")
    _figures(experiment, histories, out)
    print(markdown_table(summary))
    print(f"wrote {out / 'summary.md'}, {out / 'summary.json'}, {out / 'reward.png'}, {out / 'turns.png'}")
    return summary


def markdown_table(summary: dict[str, Any]) -> str:
    """The results table: one row per rule (and the shared start before RL)."""
    levels = [e.split("/")[-1] for e in summary["task_mix"]]
    head = (
        ["rule", "horizon", "seeds", "success (seeds)", "success (episodes)", "return (seeds)"]
        + [f"success {lvl}" for lvl in levels]
        + ["eval turns", "invalid replies", "train turns", "last limit", "episodes", "generated tokens", "wall s"]
    )
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    if summary["before_rl"]:
        b = summary["before_rl"]
        cells = [
            "before RL (shared start)",
            "-",
            str(b["success"]["n"]),
            _fmt(b["success"]),
            _fmt(b["pooled"]["success"]),
            _fmt(b["return"]),
        ]
        cells += [_fmt(b["levels"][lvl], 2) for lvl in levels]
        cells += [_fmt(b["eval_turns"], 1), f"{b['eval_invalid_reply_rate']['mean']:.3f}"] + ["-"] * 5
        lines.append("| " + " | ".join(cells) + " |")
    for r in summary["rules"]:
        cells = [
            r["rule"],
            r["label"],
            str(len(r["seeds"])),
            _fmt(r["success"]),
            _fmt(r["pooled"]["success"]),
            _fmt(r["return"]),
        ]
        cells += [_fmt(r["levels"][lvl], 2) for lvl in levels]
        cells += [
            _fmt(r["eval_turns"], 1),
            f"{r['eval_invalid_reply_rate']['mean']:.3f}",
            f"{r['train_turns']['mean']:.2f}",
            "/".join(str(limits[-1]) for limits in r["max_turns_over_steps"]),  # per seed
            "/".join(map(str, r["episodes"])),
            f"{r['generated_tokens']['mean']:,.0f}",
            f"{r['wall_time_s']['mean']:.0f}",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append(
        f"\nHeld-out test tasks of {', '.join(levels)} under max {summary['eval_max_turns']} turns for every rule. "
        "success (seeds): mean of the per-seed success with a 95% t interval over seeds; success (episodes): all "
        "seeds' episodes pooled, 95% interval over tasks; success per level: mean ± t interval over seeds; "
        "train turns: turns per training episode, mean over steps and seeds; last limit: the max turns of the last "
        "training step, per seed; wall s: per run, training and evaluation."
    )
    if summary.get("comparisons"):
        lines += [
            "",
            "| comparison | seeds | tasks x seeds | success b - a (tasks x seeds) | success b - a (seeds) | per seed |",
            "|---|---|---|---|---|---|",
        ]
        for c in summary["comparisons"]:
            pooled = c["pooled"]
            cells = [
                f"{c['b']} - {c['a']}",
                str(len(c["seeds"])),
                str(c["tasks"]),
                f"{pooled['mean']:+.3f} [{pooled['low']:+.3f}, {pooled['high']:+.3f}]",
                _fmt(c["over_seeds"]),
                ", ".join(f"{d:+.3f}" for d in c["per_seed"]),
            ]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append(
            "\nPaired comparisons: held-out success of b minus a, task by task on the seeds both finished (a "
            "seed's runs share their start and their tasks); 95% normal interval over tasks x seeds, and 95% t "
            "interval over the per-seed differences."
        )
    return "\n".join(lines)


def _smoothed(values: list[float], window: int) -> list[float]:
    return [
        sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
        for i in range(len(values))
    ]


def _figures(experiment: Experiment, histories: dict[str, list[list[dict[str, Any]]]], out: Path) -> None:
    """reward.png: training reward per rule (mean of smoothed seeds, band min..max over seeds);
    turns.png: turns used per rule (solid) and the max-turn limit (dashed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    def curves(runs: list[list[dict[str, Any]]], key: str, window: int) -> tuple[list[int], list[list[float]]]:
        rows = [rollout_rows(h) for h in runs]
        n = min(len(r) for r in rows)
        return [r["step"] for r in rows[0][:n]], [_smoothed([x[key] for x in r[:n]], window) for r in rows]

    for name, keys in (("reward", ["episode/return"]), ("turns", ["episode/turns", "rollout/max_turns"])):
        fig, ax = plt.subplots(figsize=(7, 4))
        for i, rule in enumerate(r for r in experiment.rules if r.name in histories):
            color = f"C{i}"
            for key in keys:
                limit = key == "rollout/max_turns"
                steps, seeds = curves(histories[rule.name], key, 1 if limit else experiment.smooth)
                mean = [sum(v) / len(v) for v in zip(*seeds, strict=True)]
                ax.plot(
                    steps,
                    mean,
                    color=color,
                    linestyle="--" if limit else "-",
                    linewidth=1 if limit else 2,
                    label=None if limit else rule.name,
                )
                if not limit and len(seeds) > 1:
                    ax.fill_between(
                        steps,
                        [min(v) for v in zip(*seeds, strict=True)],
                        [max(v) for v in zip(*seeds, strict=True)],
                        color=color,
                        alpha=0.15,
                    )
        ax.set_xlabel("GRPO step")
        ax.set_ylabel(
            "training reward (episode return)" if name == "reward" else "turns used (solid), max turns (dashed)"
        )
        ax.grid(alpha=0.3)
        ax.legend()
        levels = " + ".join(e.split("/")[-1] for e in experiment.task_mix)
        ax.set_title(f"{levels}: {experiment.smooth}-step moving average, band: seeds' range", fontsize=9)
        fig.tight_layout()
        fig.savefig(out / f"{name}.png", dpi=80)
        plt.close(fig)
