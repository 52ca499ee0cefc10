"""Test-time scaling curves: success against max turns (the paper's Figure 8) and Pass@K against K (Figure 9).

`sweep_horizons` plays the same policy, tasks and seeds at several turn limits; `horizon_curve` turns
the results into success per horizon, overall and per category; `pass_at_k_curve` computes Pass@K for
each K <= n from the n episodes per task with the unbiased estimator (`report.pass_at_k`), then
averages over tasks. Every point is a mean over tasks with its 95% interval (`estimate`), the same
intervals as `agentgym eval`'s table. `plot` draws a curve as a PNG (matplotlib, Agg, imported lazily).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_train.evaluation.evaluate import Estimate, EvalResult, estimate
from agentgym_train.evaluation.report import pass_at_k

#: The series of the whole split, beside one series per category.
OVERALL = "all"


@dataclass
class Curve:
    """Estimates at each x, one series for the whole split ("all") and one per category."""

    x_label: str
    y_label: str
    xs: list[int]
    series: dict[str, list[Estimate]]

    def table(self) -> str:
        """One row per x, one column per series (mean ± 95% half-width)."""
        names = list(self.series)
        width = max(16, *(len(n) + 2 for n in names))
        lines = [f"{self.x_label:>10}" + "".join(f"{n:>{width}}" for n in names)]
        for i, x in enumerate(self.xs):
            cells = "".join(f"{_cell(self.series[n][i]):>{width}}" for n in names)
            lines.append(f"{x:>10}{cells}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {
            "x": self.x_label,
            "y": self.y_label,
            "xs": self.xs,
            "series": {name: [_as_dict(e) for e in values] for name, values in self.series.items()},
        }


def _cell(e: Estimate) -> str:
    if math.isnan(e.mean):
        return "-"
    return str(e) if math.isfinite(e.half_width) else f"{e.mean:.3f}"


def _as_dict(e: Estimate) -> dict[str, float]:
    return {"mean": e.mean, "low": e.low, "high": e.high, "n": e.n}


def default_pass_ks(n: int) -> list[int]:
    """The Ks of Pass@K by default for n episodes per task: the powers of two below n, then n."""
    return [2**i for i in range(n.bit_length()) if 2**i < n] + [n]


def sweep_horizons(
    evaluate: Callable[[int], EvalResult], horizons: Sequence[int], progress: bool = True
) -> list[EvalResult]:
    """`evaluate(max_turns)` at each horizon, in order, under a progress bar over horizons.

    `evaluate` must play the same tasks with the same seeds at every horizon (the `evaluate_*`
    functions do, given the same `seed`), so that the curve differs only by the turn limit.
    """
    from tqdm.auto import tqdm

    results = []
    with tqdm(horizons, desc="max turns", unit="horizon", disable=not progress) as bar:
        for horizon in bar:
            bar.set_postfix(max_turns=horizon)
            results.append(evaluate(horizon))
    return results


def horizon_curve(results: Sequence[EvalResult]) -> Curve:
    """Success (Avg@k over each task's episodes) against the results' max turns, overall and per category."""
    categories = sorted({c for r in results for c in r.categories})
    categories = categories if len(categories) > 1 else []  # one category: the same line as "all"
    missing = Estimate(math.nan, math.nan, math.nan, 0)
    series = {OVERALL: [r.success for r in results]}
    for category in categories:
        series[category] = [r.categories.get(category, {}).get("success", missing) for r in results]
    return Curve("max turns", "success", [int(r.meta["max_turns"]) for r in results], series)


def pass_at_k_curve(episodes: Sequence[dict[str, Any]], ks: Sequence[int]) -> Curve:
    """Mean unbiased Pass@K over tasks for each K, overall and per category (when there are several).

    Args:
        episodes: episode rows with `task_id`, `category` and `success` (n rows per task).
        ks: the Ks; each must be at most the episodes of every task.

    Raises:
        ValueError: a K exceeds some task's number of episodes.
    """
    successes: dict[str, list[bool]] = defaultdict(list)
    category_of: dict[str, str] = {}
    for row in episodes:
        task = str(row["task_id"])
        successes[task].append(float(row["success"]) > 0)
        category_of[task] = str(row["category"])
    fewest = min((len(v) for v in successes.values()), default=0)
    if any(k > fewest for k in ks):
        raise ValueError(f"Pass@K needs K <= the episodes per task; K={max(ks)} but a task has only {fewest}")

    def points(tasks: list[str]) -> list[Estimate]:
        return [estimate([pass_at_k(len(successes[t]), sum(successes[t]), k) for t in tasks]) for k in ks]

    series = {OVERALL: points(list(successes))}
    categories = sorted(set(category_of.values()))
    if len(categories) > 1:
        for category in categories:
            series[category] = points([t for t, c in category_of.items() if c == category])
    return Curve("K", "Pass@K", list(ks), series)


def plot(curve: Curve, path: str | Path, title: str = "") -> Path:
    """Draw the curve as a PNG: the overall series with its 95% band, one line per category."""
    return plot_series(curve.xs, curve.series, path, curve.x_label, curve.y_label, title)


def plot_series(
    xs: Sequence[int],
    series: dict[str, list[Estimate]],
    path: str | Path,
    x_label: str,
    y_label: str,
    title: str = "",
    *,
    band: Sequence[str] = (OVERALL,),
) -> Path:
    """Draw named series of estimates against xs into a PNG at `path`; series named in `band` get
    their 95% interval as a shaded band. Returns the path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for name, values in series.items():
        means = [e.mean for e in values]
        bold = name in band
        (line,) = ax.plot(xs, means, marker="o", markersize=3, linewidth=2 if bold else 1, label=name)
        if bold and all(math.isfinite(e.half_width) for e in values):
            lows = [max(0.0, e.low) for e in values]
            highs = [min(1.0, e.high) for e in values]
            ax.fill_between(xs, lows, highs, color=line.get_color(), alpha=0.15, linewidth=0)
    if x_label == "K" and len(xs) > 1 and xs[-1] / max(1, xs[0]) >= 8:
        ax.set_xscale("log", base=2)
    ax.set_xticks(list(xs), [str(x) for x in xs])
    ax.set(xlabel=x_label, ylabel=y_label, ylim=(-0.02, 1.02), title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
