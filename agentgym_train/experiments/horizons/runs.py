"""The horizon experiment's runs: the shared start per seed (tiny model, SFT, before-RL evaluation), one
RL run per rule and seed, resumable, in processes of their own when `parallel_runs` > 1."""

from __future__ import annotations

import contextlib
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from agentgym_train.experiments.horizons.config import DONE, Experiment, Rule, parse_settings, seed_settings

# ---- the runs (each in its own process when parallel_runs > 1) --------------------------------------


@contextlib.contextmanager
def _logged(path: Path) -> Any:
    """Everything a run prints goes to its own log file (runs in parallel would interleave)."""
    from agentgym_train.pipeline import quiet_console

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as log, contextlib.redirect_stdout(log), contextlib.redirect_stderr(log), quiet_console():
        yield


def _compact(rows: list[dict[str, Any]], env_id: str) -> list[dict[str, Any]]:
    """Evaluation rows without transcripts, task ids and categories naming their level."""
    level = env_id.split("/")[-1]
    keep = ("sample", "success", "return", "turns", "truncated", "invalid_replies", "end_reason")
    return [{"task_id": f"{level}/{r['task_id']}", "category": level, **{k: r[k] for k in keep}} for r in rows]


def evaluate_mix(model: Any, tokenizer: Any, experiment: Experiment, pipeline: Any, args: Any) -> dict[str, Any]:
    """The held-out evaluation: `pipeline.eval_tasks` tasks of every level of the mix, max `eval_max_turns`."""
    from agentgym_train.evaluation.evaluate import summarize_episodes
    from agentgym_train.pipeline.stages import evaluate_stage

    rows: list[dict[str, Any]] = []
    for env_id in experiment.task_mix:
        result = evaluate_stage(model, tokenizer, env_id, pipeline, args, experiment.eval_max_turns, progress=False)
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
    settings = seed_settings(experiment, seed, output_dir=str(work))
    (out / "config.yaml").write_text(yaml.safe_dump({"task_mix": experiment.task_mix, **settings}, sort_keys=False))
    with _logged(out / "prepare.log"):
        import torch

        from agentgym_train.models.tiny import TINY_MARKER
        from agentgym_train.pipeline.stages import build_policy, sft_stage
        from agentgym_train.trainers.sft import expert_chats

        started = time.perf_counter()
        pipeline, args = parse_settings(settings)
        if pipeline.torch_threads:
            torch.set_num_threads(pipeline.torch_threads)
        env_kwargs = args.env_kwargs or {}
        model_path, model, tokenizer = build_policy(pipeline, experiment.task_mix, env_kwargs, seed, work)
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
            sft_stage(model, tokenizer, chats, pipeline, work / "sft", seed)
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
    settings = seed_settings(experiment, seed, output_dir=str(work), **rule.settings)
    (out / "config.yaml").write_text(
        yaml.safe_dump({"rule": rule.spec, "task_mix": experiment.task_mix, **settings}, sort_keys=False)
    )
    with _logged(out / "train.log"):
        import torch
        from transformers.trainer_utils import get_last_checkpoint

        from agentgym_train.models.tiny import load_model
        from agentgym_train.pipeline.stages import rl_stage

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
            model, trainer = rl_stage(
                _counting_trainer(),
                model,
                tokenizer,
                args,
                work / "rl-model",
                callbacks=[rule.scheduler()],
                resume_from_checkpoint=resume,
                train_dataset=mix_dataset(experiment, args),
            )
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


def rollout_rows(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [row for row in history if "episode/return" in row]


def _budget(history: list[dict[str, Any]]) -> dict[str, Any]:
    """What a run spent: steps, episodes, generated tokens, and its training means."""
    rows = rollout_rows(history)

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
