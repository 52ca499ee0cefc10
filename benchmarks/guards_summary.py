"""The long-horizon guards compared: one table and one figure over several runs of the horizon experiment.

Each setting is one `agentgym experiment horizons` output folder, run with the same budget and seeds and
one guard setting (`truncated_replies`, `budget_truncated_episodes`, `overlong_buffer_len`,
`dynamic_sampling`; see `agentgym_train.trainers.truncation` and `agentgym_train.trainers.sampling`). Per setting
and rule the table gives the held-out success (every seed's episodes pooled, 95% interval over tasks x seeds), the
peak of the training success (a moving average over `--smooth` steps, mean over seeds) and where it was,
and over the last `--smooth` steps: training success, invalid replies, the share of replies the budget cut
and tokens per reply, which are what a collapse changes. Dynamic sampling's extra episodes are summed over the run.

    python benchmarks/guards_summary.py DIR [--settings none,mask,...] [--smooth 10]

DIR holds one folder per setting; writes DIR/summary.md, DIR/summary.json and DIR/train_success.png.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any


def moving_average(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, value in enumerate(values):
        total += value
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def run_row(folder: Path, rule: dict[str, Any], smooth: int, episodes_per_step: int) -> dict[str, Any]:
    """One rule of one setting: held-out success from the experiment's summary, the rest from the logs."""
    steps = []
    for seed in rule["seeds"]:
        history = json.loads((folder / rule["rule"] / f"seed-{seed}" / "log_history.json").read_text())
        steps.append([entry for entry in history if "episode/success" in entry])

    def tail(key: str) -> float:  # mean over the last `smooth` steps, then over seeds
        values = [sum(e.get(key, 0.0) for e in s[-smooth:]) / len(s[-smooth:]) for s in steps]
        return sum(values) / len(values)

    curves = [moving_average([e["episode/success"] for e in s], smooth) for s in steps]
    mean_curve = [sum(c[i] for c in curves) / len(curves) for i in range(min(map(len, curves)))]
    peak = max(range(len(mean_curve)), key=mean_curve.__getitem__)
    turns = tail("episode/turns")
    return {
        "rule": rule["rule"],
        "label": rule["label"],
        "seeds": rule["seeds"],
        "held_out_success": rule["pooled"]["success"],
        "held_out_invalid_reply_rate": rule["eval_invalid_reply_rate"]["mean"],
        "train_success_peak": mean_curve[peak],
        "train_success_peak_step": peak + 1,
        "train_success_last": tail("episode/success"),
        "invalid_reply_rate_last": tail("episode/invalid_reply_rate"),
        "cut_reply_share_last": tail("episode/truncated_replies"),
        "tokens_per_reply_last": tail("episode/generated_tokens") / max(episodes_per_step * turns, 1e-9),
        "extra_episodes": sum(sum(e.get("sampling/extra_episodes", 0.0) for e in s) for s in steps),
        "episodes": sum(len(s) for s in steps) * episodes_per_step,  # trained on, every seed
        "curve": mean_curve,
    }


def interval(stat: dict[str, float]) -> str:
    low, high = stat["low"], stat["high"]
    if math.isnan(low) or high - low < 1e-12:
        return f"{stat['mean']:.3f}"
    return f"{stat['mean']:.3f} [{max(low, 0.0):.3f}, {min(high, 1.0):.3f}]"


def table(rows: dict[str, list[dict[str, Any]]], smooth: int) -> str:
    head = (
        "| guards | rule | seeds | held-out success [95% CI] | invalid replies (held-out) | "
        f"train success peak (step) | train success, last {smooth} | invalid replies, last {smooth} | "
        f"cut replies, last {smooth} | tokens per reply, last {smooth} | extra episodes |"
    )
    lines = [head, "|" + "---|" * 11]
    for setting, setting_rows in rows.items():
        for r in setting_rows:
            lines.append(
                f"| {setting} | {r['label']} | {len(r['seeds'])} | {interval(r['held_out_success'])} | "
                f"{r['held_out_invalid_reply_rate']:.2f} | "
                f"{r['train_success_peak']:.2f} ({r['train_success_peak_step']}) | "
                f"{r['train_success_last']:.2f} | {r['invalid_reply_rate_last']:.2f} | "
                f"{r['cut_reply_share_last']:.2f} | {r['tokens_per_reply_last']:.1f} | "
                f"{r['extra_episodes']:.0f} of {r['episodes']} |"
            )
    return "\n".join(lines)


def figure(rows: dict[str, list[dict[str, Any]]], path: Path, smooth: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rules = [r["label"] for r in max(rows.values(), key=len)]  # a setting cut short has fewer rules
    fig, axes = plt.subplots(1, len(rules), figsize=(4 * len(rules), 3.2), sharey=True)
    for ax, label in zip(axes, rules, strict=True):
        for setting, setting_rows in rows.items():
            row = next((r for r in setting_rows if r["label"] == label), None)
            if row is None:
                continue
            ax.plot(range(1, len(row["curve"]) + 1), row["curve"], label=setting)
        ax.set_title(label)
        ax.set_xlabel("step")
    axes[0].set_ylabel(f"training success ({smooth}-step mean)")
    axes[0].legend(fontsize=8)  # the first rule has every setting
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--settings", default=None, help="comma-separated setting folders (default: all, sorted)")
    parser.add_argument("--smooth", type=int, default=10)
    args = parser.parse_args()
    names = (
        args.settings.split(",") if args.settings else sorted(p.parent.name for p in args.folder.glob("*/summary.json"))
    )
    rows: dict[str, list[dict[str, Any]]] = {}
    configs: dict[str, Any] = {}
    for name in names:
        summary = json.loads((args.folder / name / "summary.json").read_text())
        per_step = summary["episodes_per_step"]
        rows[name] = [run_row(args.folder / name, rule, args.smooth, per_step) for rule in summary["rules"]]
        configs[name] = summary.get("before_rl")
    out = {"settings": names, "smooth": args.smooth, "rows": rows, "before_rl": configs}
    (args.folder / "summary.json").write_text(json.dumps(out, indent=1))
    (args.folder / "summary.md").write_text(table(rows, args.smooth) + "\n")
    figure(rows, args.folder / "train_success.png", args.smooth)
    print(table(rows, args.smooth))


if __name__ == "__main__":
    main()
