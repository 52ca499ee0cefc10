"""`agentgym experiment horizons`: the same RL budget under several max-turn rules, on several seeds.

The paper's Figure 7 in miniature: fixed short, fixed long, ScalingInter stages and the adaptive
scheduler train from the same start with the same steps, episodes per step, learning rate and KL; only
the rule that sets the max turns of training episodes differs. The task mix puts levels that need few
turns beside levels that need many. Per seed, one shared stage builds the model, warms it up on expert
episodes (SFT) and evaluates it; every rule then starts from that model. Every run (rule x seed) ends
with a held-out evaluation under the same max turns for all rules (the longest horizon).

Layout under the output directory (no model weights there: those and checkpoints go to `work_dir`):

    seed-0/              the shared start: config.yaml, results.json (before-RL evaluation), done
    <rule>/seed-0/       one run: config.yaml, train.log, log_history.json, results.json, done
    summary.json, summary.md, reward.png, turns.png

Rerunning skips finished runs (a `done` file) and resumes unfinished ones from their last checkpoint
in `work_dir`; `--summary-only` re-reads finished runs and writes the table and figures.
"""

from __future__ import annotations

import contextlib
import json
import math
import statistics
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path
from typing import Any

#: The experiment's default config (packaged): the CPU miniature.
DEFAULT_CONFIG = Path(__file__).parent.parent / "configs" / "experiments" / "horizons.yaml"
#: Keys of the config that describe the experiment; every other key is a `PipelineConfig` or GRPO setting.
EXPERIMENT_KEYS = (
    "task_mix",
    "train_tasks_per_level",
    "seeds",
    "rules",
    "eval_max_turns",
    "parallel_runs",
    "work_dir",
    "smooth",
)
DONE = "done"
#: Two-sided 95% Student t quantiles by degrees of freedom (intervals over a few seeds); beyond: normal.
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}
Z95 = 1.959964


# ---- configuration ---------------------------------------------------------------------------------


@dataclass
class Rule:
    """A max-turn rule: fixed (`max_turns: [12]`), staged (`max_turns: [4, 8, 12], every: 50`) or adaptive
    (`adaptive: [4, 8, 12]` plus `AdaptiveMaxTurnScheduler` keyword arguments)."""

    name: str
    spec: dict[str, Any]

    def __post_init__(self) -> None:
        if ("max_turns" in self.spec) == ("adaptive" in self.spec):
            raise ValueError(
                f"rule {self.name!r}: give either max_turns: [..] (with every: N for stages) or adaptive: [..]; "
                f"got {self.spec}"
            )
        horizons = self.spec.get("max_turns") or self.spec.get("adaptive")
        if not isinstance(horizons, list) or not horizons or sorted(horizons) != horizons:
            raise ValueError(f"rule {self.name!r}: horizons must be a non-empty increasing list, got {horizons!r}")
        if "max_turns" in self.spec and len(horizons) > 1 and int(self.spec.get("every", 0)) < 1:
            raise ValueError(f"rule {self.name!r}: staged horizons {horizons} need every: N >= 1 (steps per stage)")

    @property
    def horizons(self) -> list[int]:
        return [int(h) for h in self.spec.get("max_turns") or self.spec["adaptive"]]

    def scheduler(self) -> Any:
        """The rule's `MaxTurnScheduler` (a fresh one per run)."""
        from agentgym_train.scheduler import AdaptiveMaxTurnScheduler, MaxTurnScheduler

        if "adaptive" in self.spec:
            options = {k: v for k, v in self.spec.items() if k != "adaptive"}
            return AdaptiveMaxTurnScheduler(self.horizons, **options)
        return MaxTurnScheduler.stages(self.horizons, int(self.spec.get("every", 1)))

    def label(self) -> str:
        if "adaptive" in self.spec:
            return "adaptive " + "/".join(map(str, self.horizons))
        if len(self.horizons) == 1:
            return f"fixed {self.horizons[0]}"
        return "→".join(map(str, self.horizons)) + f" every {self.spec['every']} steps"


@dataclass
class Experiment:
    """The experiment's settings (the config's experiment keys) and the settings every run shares."""

    task_mix: list[str]
    seeds: list[int]
    rules: list[Rule]
    settings: dict[str, Any]
    output_dir: Path
    work_dir: Path
    eval_max_turns: int
    parallel_runs: int = 1
    smooth: int = 10
    train_tasks_per_level: int | None = None

    def seed_dir(self, seed: int) -> Path:
        return self.output_dir / f"seed-{seed}"

    def run_dir(self, rule: Rule, seed: int) -> Path:
        return self.output_dir / rule.name / f"seed-{seed}"


def load_experiment(path: str | Path, overrides: list[str] | None = None, output_dir: str | None = None) -> Experiment:
    """Read the experiment's YAML with `--key value` overrides (values parse as YAML: `--seeds [0]`)."""
    import yaml  # the [train] extra's, as everything an experiment runs

    config = yaml.safe_load(Path(path).read_text())
    if not isinstance(config, dict):
        raise ValueError(f"{path}: the config must be a YAML mapping")
    items = list(overrides or [])
    if len(items) % 2 or any(not key.startswith("--") for key in items[::2]):
        raise ValueError(f"overrides must be --key value pairs, got {items}")
    for key, value in zip(items[::2], items[1::2], strict=True):
        config[key[2:].replace("-", "_")] = yaml.safe_load(value)
    missing = [key for key in ("task_mix", "rules") if key not in config]
    if missing:
        raise ValueError(f"{path}: the experiment needs {missing} (see configs/experiments/horizons.yaml)")
    settings = {k: v for k, v in config.items() if k not in EXPERIMENT_KEYS}
    rules_spec = config["rules"]
    if not isinstance(rules_spec, dict) or not rules_spec:
        raise ValueError(f"rules must map rule names to specs, got {rules_spec!r}")
    rules = [Rule(str(name), dict(spec)) for name, spec in rules_spec.items()]
    seeds = config.get("seeds", 3)
    seeds = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    out = Path(output_dir or settings.get("output_dir") or "runs/horizons")
    return Experiment(
        task_mix=list(config["task_mix"]),
        seeds=seeds,
        rules=rules,
        settings=settings,
        output_dir=out,
        work_dir=Path(config.get("work_dir") or out / "work"),
        eval_max_turns=int(config.get("eval_max_turns") or max(max(r.horizons) for r in rules)),
        parallel_runs=int(config.get("parallel_runs", 1)),
        smooth=int(config.get("smooth", 10)),
        train_tasks_per_level=config.get("train_tasks_per_level"),
    )


def parse_settings(settings: dict[str, Any]) -> tuple[Any, Any]:
    """`PipelineConfig` and `MultiTurnGRPOConfig` from a flat dict of settings (unknown keys: ValueError)."""
    from trl import TrlParser

    from agentgym_train.pipeline import PipelineConfig
    from agentgym_train.trainers.grpo import MultiTurnGRPOConfig

    parser = TrlParser((PipelineConfig, MultiTurnGRPOConfig))
    unknown = parser.set_defaults_with_config(**settings)
    if unknown:
        raise ValueError(f"unknown settings {unknown}: not PipelineConfig or MultiTurnGRPOConfig fields")
    return parser.parse_args_into_dataclasses(args=[])


# ---- the runs (each in its own process when parallel_runs > 1) --------------------------------------


@contextlib.contextmanager
def _logged(path: Path) -> Any:
    """Everything a run prints goes to its own log file (runs in parallel would interleave)."""
    from agentgym_train.pipeline import quiet_console

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log), quiet_console():
        yield


def _seed_settings(experiment: Experiment, seed: int, **extra: Any) -> dict[str, Any]:
    return {**experiment.settings, "env_id": experiment.task_mix[0], "seed": seed, "disable_tqdm": True, **extra}


def check_settings(experiment: Experiment) -> None:
    """Parse every seed's run settings, so that a bad value raises ValueError before anything runs."""
    for seed in experiment.seeds:
        parse_settings(_seed_settings(experiment, seed))


def _compact(rows: list[dict[str, Any]], env_id: str) -> list[dict[str, Any]]:
    """Evaluation rows without transcripts, task ids and categories naming their level."""
    level = env_id.split("/")[-1]
    keep = ("sample", "success", "return", "turns", "truncated", "invalid_replies", "end_reason")
    return [{"task_id": f"{level}/{r['task_id']}", "category": level, **{k: r[k] for k in keep}} for r in rows]


def evaluate_mix(model: Any, tokenizer: Any, experiment: Experiment, pipeline: Any, args: Any) -> dict[str, Any]:
    """The held-out evaluation: `pipeline.eval_tasks` tasks of every level of the mix, max `eval_max_turns`."""
    from agentgym_train.evaluation.evaluate import evaluate_model, summarize_episodes

    rows: list[dict[str, Any]] = []
    for env_id in experiment.task_mix:
        result = evaluate_model(
            model,
            tokenizer,
            env_id,
            split=pipeline.eval_split,
            num_tasks=pipeline.eval_tasks,
            episodes_per_task=pipeline.eval_episodes_per_task,
            max_turns=experiment.eval_max_turns,
            max_completion_length=args.max_completion_length,
            max_turn_tokens=args.max_turn_tokens,
            temperature=pipeline.eval_temperature,
            env_kwargs=args.env_kwargs or {},
            seed=args.seed,
            progress=False,
        )
        rows += _compact(result.episodes, env_id)
    summary = summarize_episodes(rows).to_dict()
    turns = sum(r["turns"] for r in rows)
    summary["invalid_reply_rate"] = sum(r["invalid_replies"] for r in rows) / max(turns, 1)
    summary["max_turns"] = experiment.eval_max_turns
    return summary


def prepare_seed(experiment: Experiment, seed: int) -> None:
    """The shared start of a seed: tiny model (or `model`), SFT on expert episodes of every level, and
    the before-RL evaluation. The model goes to `work_dir/seed-N/start-model`."""
    import yaml

    out, work = experiment.seed_dir(seed), experiment.work_dir / f"seed-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    settings = _seed_settings(experiment, seed, output_dir=str(work))
    (out / "config.yaml").write_text(yaml.safe_dump({"task_mix": experiment.task_mix, **settings}, sort_keys=False))
    with _logged(out / "prepare.log"):
        import torch

        from agentgym_train.tiny import TINY_MARKER, TinyModelConfig, build_tiny_model, load_model
        from agentgym_train.trainers.sft import expert_chats, run_sft

        started = time.perf_counter()
        pipeline, args = parse_settings(settings)
        if pipeline.torch_threads:
            torch.set_num_threads(pipeline.torch_threads)
        env_kwargs = args.env_kwargs or {}
        model_path = pipeline.model
        if model_path == "tiny":
            tiny = TinyModelConfig(
                env_ids=experiment.task_mix,
                env_kwargs=env_kwargs,
                hidden_size=pipeline.tiny_hidden_size,
                num_hidden_layers=pipeline.tiny_layers,
                num_attention_heads=pipeline.tiny_heads,
                num_key_value_heads=max(1, pipeline.tiny_heads // 2),
                intermediate_size=pipeline.tiny_intermediate_size,
                seed=seed,
            )
            model_path = str(build_tiny_model(work / "tiny-model", tiny))
        model, tokenizer = load_model(model_path)
        if pipeline.sft_steps > 0:  # the same number of expert episodes from every level, shuffled together
            per_level = max(1, pipeline.sft_episodes // len(experiment.task_mix))
            chats = [
                chat
                for env_id in experiment.task_mix
                for chat in expert_chats(
                    env_id, per_level, max_turns=experiment.eval_max_turns, env_kwargs=env_kwargs, seed=seed
                )
            ]
            import random

            random.Random(seed).shuffle(chats)
            run_sft(
                model,
                tokenizer,
                chats,
                str(work / "sft"),
                max_steps=pipeline.sft_steps,
                batch_size=pipeline.sft_batch_size,
                learning_rate=pipeline.sft_learning_rate,
                seed=seed,
            )
        start = work / "start-model"
        model.save_pretrained(start)
        tokenizer.save_pretrained(start)
        if (Path(model_path) / TINY_MARKER).is_file():
            (start / TINY_MARKER).write_text((Path(model_path) / TINY_MARKER).read_text())
        before = evaluate_mix(model, tokenizer, experiment, pipeline, args) if pipeline.eval_tasks else None
        results = {"seed": seed, "start_model": str(start), "before": before}
        results["wall_time_s"] = round(time.perf_counter() - started, 1)
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / DONE).write_text("")


def _counting_trainer() -> type:
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    class CountingTrainer(MultiTurnGRPOTrainer):
        """Logs `episode/generated_tokens`: the policy's own tokens in each rollout batch (this process's)."""

        def _log_rollout(self, episodes: list[Any]) -> None:
            super()._log_rollout(episodes)
            mode = "train" if self.model.training else "eval"
            self._metrics[mode]["episode/generated_tokens"].append(float(sum(sum(e.env_mask) for e in episodes)))

    return CountingTrainer


def mix_dataset(experiment: Experiment, args: Any) -> Any:
    """Training rows of every level of the mix, in equal numbers (TRL's sampler shuffles them)."""
    from datasets import concatenate_datasets

    from agentgym_train.trainers.grpo import task_dataset

    per_level = experiment.train_tasks_per_level
    return concatenate_datasets(
        [
            task_dataset(e, args.train_split, per_level, seed=args.seed, env_kwargs=args.env_kwargs)
            for e in experiment.task_mix
        ]
    )


def train_run(experiment: Experiment, rule: Rule, seed: int) -> None:
    """One run: GRPO from the seed's start model under `rule`, then the held-out evaluation."""
    import yaml

    out, work = experiment.run_dir(rule, seed), experiment.work_dir / rule.name / f"seed-{seed}"
    out.mkdir(parents=True, exist_ok=True)
    settings = _seed_settings(experiment, seed, output_dir=str(work))
    (out / "config.yaml").write_text(
        yaml.safe_dump({"rule": rule.spec, "task_mix": experiment.task_mix, **settings}, sort_keys=False)
    )
    with _logged(out / "train.log"):
        import torch
        from transformers.trainer_utils import get_last_checkpoint

        from agentgym_train.pipeline import save_rl_model
        from agentgym_train.tiny import load_model

        started = time.perf_counter()
        pipeline, args = parse_settings(settings)
        if pipeline.algorithm != "grpo":
            raise ValueError(f"the horizons experiment trains with grpo, got algorithm {pipeline.algorithm!r}")
        if pipeline.torch_threads:
            torch.set_num_threads(pipeline.torch_threads)
        model, tokenizer = load_model(experiment.work_dir / f"seed-{seed}" / "start-model")
        resume = get_last_checkpoint(str(work)) if work.is_dir() else None
        print(f"run {rule.name} seed {seed}: {rule.label()}; resuming from {resume}", flush=True)
        state = json.loads((Path(resume) / "trainer_state.json").read_text()) if resume else {}
        if state.get("global_step", 0) >= args.max_steps:
            # Trained to the end, stopped before the evaluation: resuming would train one step more.
            model, history = type(model).from_pretrained(resume), state["log_history"]
        else:
            trainer = _counting_trainer()(
                model,
                args,
                train_dataset=mix_dataset(experiment, args),
                processing_class=tokenizer,
                callbacks=[rule.scheduler()],
            )
            trainer.train(resume_from_checkpoint=resume)
            trainer.engine.close()
            model = save_rl_model(trainer, tokenizer, work / "rl-model")
            history = trainer.state.log_history
        train_time = time.perf_counter() - started
        after = evaluate_mix(model, tokenizer, experiment, pipeline, args) if pipeline.eval_tasks else None
        results = {
            "rule": rule.name,
            "spec": rule.spec,
            "seed": seed,
            "after": after,
            "resumed_from": resume,
            "train_time_s": round(train_time, 1),
            "wall_time_s": round(time.perf_counter() - started, 1),
            **_budget(history),
        }
    (out / "log_history.json").write_text(json.dumps(history) + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / DONE).write_text("")


def _rollout_rows(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in history if "episode/return" in row]


def _budget(history: list[dict[str, Any]]) -> dict[str, Any]:
    """What a run spent: steps, episodes, generated tokens, and its training means."""
    rows = _rollout_rows(history)

    def mean(key: str) -> float:
        values = [r[key] for r in rows if key in r]
        return sum(values) / len(values) if values else math.nan

    return {
        "steps": len(rows),
        "generated_tokens": int(sum(r.get("episode/generated_tokens", 0) for r in rows)),
        "train_turns": mean("episode/turns"),
        "train_invalid_reply_rate": mean("episode/invalid_reply_rate"),
        "max_turns_over_steps": [int(r["rollout/max_turns"]) for r in rows],
    }


def _task(job: tuple[str, Experiment, Rule | None, int]) -> tuple[str, Rule | None, int, float]:
    kind, experiment, rule, seed = job
    t0 = time.perf_counter()
    if kind == "prepare":
        prepare_seed(experiment, seed)
    else:
        assert rule is not None
        train_run(experiment, rule, seed)
    return kind, rule, seed, time.perf_counter() - t0


def run_experiment(experiment: Experiment) -> None:
    """Every unfinished seed start, then every unfinished run; `parallel_runs` processes at a time."""
    phases = [
        [("prepare", experiment, None, s) for s in experiment.seeds if not _start_ready(experiment, s)],
        [
            ("train", experiment, rule, s)
            for s in experiment.seeds
            for rule in experiment.rules
            if not (experiment.run_dir(rule, s) / DONE).is_file()
        ],
    ]
    for s in experiment.seeds:
        if _start_ready(experiment, s):
            print(f"seed {s}: shared start done, skipped", flush=True)
        for rule in experiment.rules:
            if (experiment.run_dir(rule, s) / DONE).is_file():
                print(f"{rule.name} seed {s}: done, skipped", flush=True)
    for jobs in phases:
        if experiment.parallel_runs > 1 and len(jobs) > 1:
            with ProcessPoolExecutor(experiment.parallel_runs, mp_context=get_context("spawn")) as pool:
                for kind, rule, seed, seconds in pool.map(_task, jobs):
                    _announce(kind, rule, seed, seconds)
        else:
            for job in jobs:
                print(f"{job[0]} {job[2].name + ' ' if job[2] else ''}seed {job[3]} ...", flush=True)
                _announce(*_task(job))


def _start_ready(experiment: Experiment, seed: int) -> bool:
    start = experiment.work_dir / f"seed-{seed}" / "start-model"
    return (experiment.seed_dir(seed) / DONE).is_file() and start.is_dir()


def _announce(kind: str, rule: Rule | None, seed: int, seconds: float) -> None:
    what = f"seed {seed}: shared start (SFT, before-RL eval)" if rule is None else f"{rule.name} seed {seed}"
    print(f"{what}: finished in {seconds:.0f} s", flush=True)


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


def _fmt(block: dict[str, float], digits: int = 3) -> str:
    half = (block["high"] - block["low"]) / 2
    return f"{block['mean']:.{digits}f}" + ("" if math.isnan(half) else f" ± {half:.{digits}f}")


def summarize(experiment: Experiment) -> dict[str, Any]:
    """Re-read finished runs; write summary.json, summary.md, reward.png and turns.png; return the summary."""
    settings = parse_settings(_seed_settings(experiment, experiment.seeds[0]))[1]
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
    summary = {
        "task_mix": experiment.task_mix,
        "eval_max_turns": experiment.eval_max_turns,
        "episodes_per_step": episodes_per_step,
        "before_rl": before,
        "rules": rows,
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
        rows = [_rollout_rows(h) for h in runs]
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


__all__ = ["Experiment", "Rule", "check_settings", "load_experiment", "run_experiment", "summarize"]
