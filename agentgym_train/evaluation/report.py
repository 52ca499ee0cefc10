"""`agentgym report`: one static HTML page from evaluation results, to read policies side by side.

Input: JSON files written by `agentgym eval --json` (one policy each) or by `agentgym train` (its
`results.json`: the random policy, the model before and after RL, and the training log). Output: one
HTML file with everything inlined (CSS, a few lines of JS, the figures as base64 PNG), which opens
from disk with no server and no network:

- the per-category table (success, return, turns with 95% intervals) and how episodes ended;
- the curves the inputs allow: success within t turns, Pass@k over k (k > 1 episodes per task),
  the training return (a training log);
- the transcripts, two policies side by side on the same task and sample (aligned by task id and
  sample index), filterable by category and by each side's outcome.

Transcripts are untrusted text (model output, env observations): every text is HTML-escaped, and the
page's Content-Security-Policy runs only its own script (by hash), loads nothing, sends nothing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_train.evaluation.transcripts import END_REASONS, exchanges, generation_flags

_HERE = Path(__file__).parent
#: Nested results of `agentgym train`'s results.json, in the order they are shown (before vs after first).
PIPELINE_KEYS = {"before": "before RL", "after": "after RL", "random": "random"}
#: Transcript rows a page shows by default: a long evaluation's every episode would make a page browsers choke on.
DEFAULT_MAX_EPISODES = 300
#: What a table cell shows where there is no value.
NONE = "-"


@dataclass
class Policy:
    """One evaluated policy: a label, its results (`EvalResult.to_dict()`), and the file it came from."""

    label: str
    result: dict[str, Any]
    source: str

    @property
    def episodes(self) -> list[dict[str, Any]]:
        return self.result.get("episodes") or []


def _is_eval(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("success"), dict) and "episodes" in value


def load_results(paths: Sequence[str | Path]) -> tuple[list[Policy], list[tuple[str, list[dict[str, Any]]]]]:
    """The policies and training logs in result files.

    Returns:
        The policies in file order (a training results.json gives "before RL", "after RL", "random"),
        labels made unique with the file name where two would clash; and (file name, log_history) for
        each file with a training log.
    """
    policies: list[Policy] = []
    logs: list[tuple[str, list[dict[str, Any]]]] = []
    for path in map(Path, paths):
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: not a readable JSON file ({error})") from None
        found = []
        if _is_eval(data):
            found.append(Policy(str(data.get("policy") or path.stem), data, path.name))
        elif isinstance(data, dict):
            nested = [k for k in PIPELINE_KEYS if _is_eval(data.get(k))]
            nested += [k for k, v in data.items() if k not in PIPELINE_KEYS and _is_eval(v)]
            found += [Policy(PIPELINE_KEYS.get(k, k), data[k], path.name) for k in nested]
            history = [row for row in data.get("log_history") or [] if "episode/return" in row]
            if history:
                logs.append((path.name, history))
        if not found and not any(name == path.name for name, _ in logs):
            raise ValueError(
                f"{path}: no evaluation results in it (expected the JSON of `agentgym eval --json` or the "
                "results.json of `agentgym train`)"
            )
        policies += found
    counts = Counter(p.label for p in policies)
    for policy in policies:
        if counts[policy.label] > 1:
            policy.label = f"{policy.label} ({policy.source})"
    return policies, logs


# ---- figures --------------------------------------------------------------------------------------------
def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased Pass@k of a task with `c` successes in `n` episodes (Chen et al., 2021)."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def turn_curve(episodes: list[dict[str, Any]], horizon: int) -> list[float]:
    """Fraction of episodes solved within t turns, for t = 1..horizon."""
    solved = [int(e["turns"]) for e in episodes if float(e.get("success", 0)) > 0]
    n = max(1, len(episodes))
    return [sum(turns <= t for turns in solved) / n for t in range(1, horizon + 1)]


def pass_curve(episodes: list[dict[str, Any]]) -> list[float]:
    """Mean Pass@k for k = 1..(most episodes of a task), each k over the tasks with at least k episodes;
    empty with one episode per task."""
    by_task: dict[str, list[float]] = defaultdict(list)
    for episode in episodes:
        by_task[str(episode.get("task_id"))].append(float(episode.get("success", 0)))
    most = max((len(v) for v in by_task.values()), default=0)
    if most < 2:
        return []
    curve = []
    for k in range(1, most + 1):
        tasks = [v for v in by_task.values() if len(v) >= k]
        curve.append(sum(pass_at_k(len(v), sum(s > 0 for s in v), k) for v in tasks) / len(tasks))
    return curve


def _png(fig: Any) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def figures(policies: list[Policy], logs: list[tuple[str, list[dict[str, Any]]]]) -> list[tuple[str, str]]:
    """(caption, base64 PNG) of each curve the results allow; none where no input has the data."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    out = []
    with_episodes = [p for p in policies if p.episodes and all("turns" in e for e in p.episodes)]
    if with_episodes:
        fig, ax = plt.subplots(figsize=(5, 3.3))
        for policy in with_episodes:
            horizon = int(policy.result.get("max_turns") or max(int(e["turns"]) for e in policy.episodes))
            curve = turn_curve(policy.episodes, max(1, horizon))
            ax.plot(range(1, len(curve) + 1), curve, marker="o", markersize=3, label=policy.label)
        ax.set(xlabel="turns", ylabel="solved within t turns", ylim=(-0.02, 1.02))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append(("Success within t turns (fraction of all episodes)", _png(fig)))
        plt.close(fig)
    curves = [(p.label, pass_curve(p.episodes)) for p in policies]
    curves = [(label, curve) for label, curve in curves if curve]
    if curves:
        fig, ax = plt.subplots(figsize=(5, 3.3))
        for label, curve in curves:
            ax.plot(range(1, len(curve) + 1), curve, marker="o", markersize=3, label=label)
        ax.set(xlabel="k", ylabel="Pass@k", ylim=(-0.02, 1.02))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append(("Pass@k (unbiased estimate over tasks)", _png(fig)))
        plt.close(fig)
    for name, history in logs:
        fig, ax = plt.subplots(figsize=(5, 3.3))
        steps = [row.get("step", i) for i, row in enumerate(history)]
        for key, label in (("episode/return", "mean return"), ("episode/success", "success rate")):
            values = [row.get(key) for row in history]
            if all(isinstance(v, (int, float)) for v in values):
                ax.plot(steps, values, marker="o", markersize=2, linewidth=1, label=label)
        ax.set(xlabel="training step", ylabel="training episodes")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
        fig.tight_layout()
        out.append((f"Training return ({name})", _png(fig)))
        plt.close(fig)
    return out


# ---- HTML -------------------------------------------------------------------------------------------------
def _e(value: Any) -> str:
    """Any value as HTML-escaped text (quotes too, so it is safe in attributes)."""
    return html.escape(str(value), quote=True)


def _estimate(block: dict[str, Any] | None) -> str:
    if not block or block.get("mean") is None or not math.isfinite(float(block["mean"])):
        return NONE
    mean, low, high = float(block["mean"]), float(block["low"]), float(block["high"])
    half = (high - low) / 2
    return f"{mean:.3f} ± {half:.3f}" if math.isfinite(half) else f"{mean:.3f}"


def _summary_table(policies: list[Policy]) -> str:
    categories = sorted({c for p in policies for c in (p.result.get("categories") or {})})
    rows = ["all", *categories] if len(categories) > 1 else ["all"]
    head = "".join(f'<th colspan="4">{_e(p.label)}</th>' for p in policies)
    sub = "<th>tasks</th><th>success</th><th>return</th><th>turns</th>" * len(policies)
    body = []
    for row in rows:
        cells = []
        for policy in policies:
            block = policy.result if row == "all" else (policy.result.get("categories") or {}).get(row)
            block = block or {}
            n = (block.get("success") or {}).get("n", NONE)
            cells.append(f"<td>{_e(n)}</td>")
            cells += [f"<td>{_e(_estimate(block.get(key)))}</td>" for key in ("success", "return", "turns")]
        body.append(f"<tr><td>{_e(row)}</td>{''.join(cells)}</tr>")
    return (
        '<table class="summary" id="summary"><thead>'
        f'<tr><th rowspan="2">category</th>{head}</tr><tr>{sub}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _episodes_table(policies: list[Policy]) -> str:
    body = []
    for policy in policies:
        episodes = policy.episodes
        turns = sum(int(e.get("turns", 0)) for e in episodes)
        invalid = sum(int(e.get("invalid_replies", 0)) for e in episodes)
        reasons = Counter(str(e.get("end_reason", "?")) for e in episodes if "end_reason" in e)
        flags = Counter(
            f"{key}: {value}"
            for e in episodes
            for step in e.get("steps") or []
            for key, value in generation_flags(step).items()
        )
        pass_k = _estimate(policy.result.get("pass_at_k"))
        invalid_rate = f"{invalid / turns:.1%}" if turns else NONE
        ended = ", ".join(f"{END_REASONS.get(k, k)}: {n}" for k, n in reasons.most_common()) or NONE
        flagged = ", ".join(f"{k} x{n}" for k, n in flags.most_common()) or NONE
        cells = (policy.label, len(episodes), pass_k, invalid_rate, ended, flagged)
        body.append("<tr>" + "".join(f"<td>{_e(cell)}</td>" for cell in cells) + "</tr>")
    return (
        '<table class="summary"><thead><tr><th>policy</th><th>episodes</th><th>pass@k</th>'
        "<th>invalid replies / turn</th><th>how episodes ended</th><th>generation flags (turns)</th></tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table>"
    )


def _column(policy: Policy, record: dict[str, Any] | None, shared_system: str) -> str:
    if record is None:
        return f'<div class="column missing">{_e(policy.label)}: no episode of this task and sample</div>'
    system, first, turns = exchanges(record)
    reason = str(record.get("end_reason", "?"))
    kind = "success" if reason == "success" else "other"
    parts = [
        f'<div class="column" data-task="{_e(record.get("task_id"))}" data-sample="{_e(record.get("sample", 0))}">',
        f"<h3>{_e(policy.label)}: "
        f'<span class="outcome {kind}">{_e(END_REASONS.get(reason, reason))}</span>, '
        f"return {float(record.get('return', 0.0)):.3f} in {_e(record.get('turns'))} turns</h3>",
    ]
    if system and system != shared_system:
        parts.append(f'<details><summary>system prompt</summary><pre class="observation">{_e(system)}</pre></details>')
    parts.append(f'<div class="meta">task</div><pre class="observation">{_e(first)}</pre>')
    for number, turn in enumerate(turns, 1):
        badges = []
        if turn.get("format_error"):
            badges.append('<span class="badge bad">no action found</span>')
        elif turn.get("valid_action") is False:
            badges.append('<span class="badge bad">invalid action</span>')
        if float(turn.get("reward") or 0.0):
            badges.append(f'<span class="badge reward">reward {float(turn["reward"]):+.3f}</span>')
        flags = generation_flags(turn, unusual=True)
        badges += [f'<span class="badge flag">{_e(k)}: {_e(v)}</span>' for k, v in flags.items()]
        action = f" · action <code>{_e(turn['action'])}</code>" if turn.get("action") is not None else ""
        parts.append(
            f'<div class="turn"><div class="meta">turn {number}{action}{"".join(badges)}</div>'
            f'<pre class="reply">{_e(turn["reply"])}</pre>'
            f'<pre class="observation">{_e(turn["observation"])}</pre></div>'
        )
    if record.get("env_error"):
        parts.append(f'<div class="meta">env error: {_e(record["env_error"])}</div>')
    parts.append("</div>")
    return "".join(parts)


def _outcome_select(name: str, label: str, reasons: list[str]) -> str:
    options = ['<option value="">any</option>', '<option value="!success">not solved</option>']
    options += [f'<option value="{_e(r)}">{_e(END_REASONS.get(r, r))}</option>' for r in reasons]
    return f'<label>{_e(label)} <select data-filter="{name}" id="filter-{name}">{"".join(options)}</select></label>'


def _shared_system_prompt(episodes: list[dict[str, Any]]) -> str:
    """The system prompt of every episode where they all have the same one (shown once), else ""."""
    prompts = {exchanges({"messages": e.get("messages", [])[:1]})[0] for e in episodes}
    return prompts.pop() if len(prompts) == 1 else ""


def _transcripts(pair: list[Policy], max_episodes: int | None) -> str:
    keyed = [{(str(e.get("task_id")), int(e.get("sample", 0))): e for e in p.episodes} for p in pair]
    keys = list(keyed[0])
    for other in keyed[1:]:
        keys += [k for k in other if k not in keyed[0]]
    total = len(keys)
    if max_episodes:
        keys = keys[:max_episodes]
    shared = [_shared_system_prompt(p.episodes) for p in pair]
    prompts = "".join(
        f"<details><summary>system prompt of {_e(p.label)} (the same in every episode)</summary>"
        f'<pre class="observation">{_e(system)}</pre></details>'
        for p, system in zip(pair, shared, strict=True)
        if system
    )
    names = ["outcome-a", "outcome-b"][: len(pair)]
    categories = sorted({str(m[k].get("category")) for m in keyed for k in keys if k in m})
    filters = [
        '<label>category <select data-filter="category" id="filter-category"><option value="">any</option>'
        + "".join(f'<option value="{_e(c)}">{_e(c)}</option>' for c in categories)
        + "</select></label>"
    ]
    for name, policy, episodes in zip(names, pair, keyed, strict=True):
        reasons = sorted({str(e.get("end_reason")) for e in episodes.values() if "end_reason" in e})
        filters.append(_outcome_select(name, f"outcome of {policy.label}", reasons))
    filters.append(f'<span><span id="shown">{len(keys)}</span> of {len(keys)} episodes shown</span>')
    if total > len(keys):
        filters.append(
            f'<span class="missing">{total - len(keys)} more episodes left out of this page '
            "(agentgym report --max-episodes 0 shows all)</span>"
        )
    rows = []
    for task_id, sample in keys:
        records = [m.get((task_id, sample)) for m in keyed]
        present = next(r for r in records if r is not None)
        attributes = f' data-category="{_e(present.get("category"))}"' + "".join(
            f' data-{name}="{_e(r.get("end_reason", "?") if r else "missing")}"'
            for name, r in zip(names, records, strict=True)
        )
        rows.append(
            f'<section class="episode"{attributes}><header><span class="task">{_e(task_id)}</span>'
            f"<span>sample {sample}</span><span>{_e(present.get('category'))}</span></header>"
            f'<div class="columns" style="--columns: {len(pair)}">'
            + "".join(_column(p, r, system) for p, r, system in zip(pair, records, shared, strict=True))
            + "</div></section>"
        )
    return prompts + f'<div class="filters">{"".join(filters)}</div>' + "".join(rows)


def build_report(
    policies: list[Policy],
    logs: list[tuple[str, list[dict[str, Any]]]] | None = None,
    *,
    pair: Sequence[str] | None = None,
    title: str | None = None,
    max_episodes: int | None = None,
) -> str:
    """The report page as one HTML string.

    Args:
        policies: What `load_results` found.
        logs: Training logs, drawn as the training-return curve.
        pair: The labels of the one or two policies whose transcripts are shown side by side
            (default: the first two).
        title: The page title (default: the env ids).
        max_episodes: Show at most this many transcript rows (None or 0: all).
    """
    if not policies and not logs:
        raise ValueError("nothing to report: no policies and no training log")
    by_label = {p.label: p for p in policies}
    if pair:
        unknown = [label for label in pair if label not in by_label]
        if unknown:
            raise ValueError(f"--pair names {unknown}, which are not among the policies {list(by_label)}")
        shown = [by_label[label] for label in pair]
    else:
        shown = policies[:2]
    env_ids = sorted({str(p.result.get("env_id")) for p in policies if p.result.get("env_id")})
    title = title or ("AgentGym report: " + ", ".join(env_ids) if env_ids else "AgentGym report")
    sources = sorted({p.source for p in policies} | {name for name, _ in logs or []})
    script = (_HERE / "report.js").read_text()
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    csp = f"default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'sha256-{digest}'"
    body = [
        f"<h1>{_e(title)}</h1>",
        f'<p class="sub">from {_e(", ".join(sources))}; success is Avg@k; 95% intervals over tasks</p>',
    ]
    if policies:
        body += [
            "<h2>Results per category</h2>",
            _summary_table(policies),
            "<h2>Episodes</h2>",
            _episodes_table(policies),
        ]
    try:
        pictures = figures(policies, logs or [])
    except ImportError:  # matplotlib comes with the [train] extra; the rest of the page needs nothing
        pictures = []
        body.append('<p class="sub">curves left out: matplotlib is not installed (pip install matplotlib)</p>')
    if pictures:
        body.append('<h2>Curves</h2><div class="figures">')
        body += [
            f'<figure><img alt="{_e(caption)}" src="data:image/png;base64,{data}">'
            f"<figcaption>{_e(caption)}</figcaption></figure>"
            for caption, data in pictures
        ]
        body.append("</div>")
    if shown and any(p.episodes for p in shown):
        names = " vs ".join(p.label for p in shown)
        body += [f"<h2>Transcripts: {_e(names)}</h2>", _transcripts(shown, max_episodes)]
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{_e(csp)}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{_e(title)}</title><style>{(_HERE / 'report.css').read_text()}</style></head>"
        f"<body>{''.join(body)}<script>{script}</script></body></html>\n"
    )


def write_report(
    paths: Sequence[str | Path],
    out: str | Path,
    *,
    pair: Sequence[str] | None = None,
    title: str | None = None,
    max_episodes: int | None = None,
) -> Path:
    """Read result files, write the report page to `out`; return its path."""
    policies, logs = load_results(paths)
    page = build_report(policies, logs, pair=pair, title=title, max_episodes=max_episodes)
    out = Path(out)
    out.write_text(page, encoding="utf-8")
    return out
