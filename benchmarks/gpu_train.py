"""GRPO training speed: our multi-turn rollout against TRL's single-turn GRPOTrainer, the env's share, and
generation beside training (async) against the synchronous multi-turn arm.

Three arms train the same randomly initialised model (Qwen2.5-0.5B's transformer shape, the tiny
tokenizer trained on BabyAI text, Hugging Face backend, no vLLM) for a few steps each:

- `multi-turn`: `MultiTurnGRPOTrainer` on BabyAI, `N` parallel episodes a step (tasks x G), up to
  `T` turns of at most `K` tokens each, the cached sampler.
- `trl`: TRL's own `GRPOTrainer`, plain prompts (the first-turn prompts the multi-turn arm played,
  as text), its own `generate` path, `N` completions of `T x K` tokens a step: the same number of
  generated tokens when every episode plays all its turns (both totals are reported).
- `async`: the multi-turn arm with `async_generation` on (`max_staleness` 1): a generation worker
  process (its own copy of the policy, on the trainer's GPU when there is one) plays the next rollout
  batch while the trainer trains on this one; the weights go to it after every optimiser step. Its
  "generation" time is what the trainer waited for the worker; the comparison is the step time
  (sync over async, in this run), with the groups dropped as stale and the mean correction weight.

Measured (the first step is left out: it warms up kernels and caches):
- generation tokens/s: model-sampled tokens over the wall time of the trainer's generation phase
  (`_generate`: for the multi-turn arm the whole rollout, env steps included); target >= 0.8x TRL's;
- the env's share of rollout time (`rollout/env_time_share`: env time over env + generation); target <= 5%;
- the optimizer step time of every arm (the async arm's against the synchronous arm's: ratio > 1 when
  async is faster; the first step, which also starts the worker, is left out as for the others).

    python benchmarks/gpu_train.py --steps 3     # GPU: 0.5B-shaped model, 64 episodes a step, ~3-5 min
    python benchmarks/gpu_train.py --smoke       # CPU: tiny model, the same code path, ~1 min
    python benchmarks/gpu_train.py --model demo --device cpu --no-trl --steps 2   # env share, 64 CPU episodes
    python benchmarks/gpu_train.py --no-async                                      # without the async arm

Writes `benchmarks/results/gpu_train.json` (`--smoke`: `results/quick/gpu_train.json`) with a
`summary` list in `agentgym bench`'s format (agentgym_train/bench.py).
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model, count_parameters, load_model, training_dtype
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer

ENV_ID = "AgentGym/BabyAI-GoToLocal-v0"
ENV_KWARGS = {"show_actions": False}
SPEED_TARGET = 0.8  # multi-turn generation tokens/s at least 0.8x TRL's single-turn GRPO
ENV_SHARE_TARGET = 0.05  # the env at most 5% of rollout wall time
RESULTS = Path(__file__).parent / "results"
#: Transformer shapes; the vocabulary is always the tiny tokenizer's (trained on env text).
SHAPES = {
    "qwen2.5-0.5b": {  # Qwen2.5-0.5B's
        "hidden_size": 896,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "intermediate_size": 4864,
    },
    "demo": {  # the CPU demo's
        "hidden_size": 128,
        "num_hidden_layers": 3,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 384,
    },
    "tiny": {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 128,
    },
}


class StepClock(TrainerCallback):
    """Wall time of each optimizer step (generation included: it runs inside the step)."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.times: list[float] = []
        self._start = 0.0

    def on_step_begin(self, args, state, control, **kwargs) -> None:
        _sync(self.cuda)
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs) -> None:
        _sync(self.cuda)
        self.times.append(time.perf_counter() - self._start)


def _sync(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


class GenerationClock:
    """Mixin for a GRPO trainer: wall time and model-sampled tokens of every `_generate` call."""

    def _generate(self, prompts: list) -> Any:
        cuda = self.accelerator.device.type == "cuda"
        _sync(cuda)
        start = time.perf_counter()
        output = super()._generate(prompts)
        _sync(cuda)
        seconds = time.perf_counter() - start
        prompt_ids, completion_ids, model_mask = output[0], output[1], output[2]  # model_mask: env_mask, or None
        if model_mask is None:
            tokens = sum(len(ids) for ids in completion_ids)
        else:
            tokens = sum(sum(mask) for mask in model_mask)
        lengths = {  # the longest sequences of the step: what the memory plan is checked at
            "longest_prompt": max((len(ids) for ids in prompt_ids), default=0),
            "longest_completion": max((len(ids) for ids in completion_ids), default=0),
        }
        self.generation_log.append({"seconds": seconds, "tokens": tokens, **lengths, **self._rollout_extras()})
        return output

    def _rollout_extras(self) -> dict[str, Any]:
        return {}


class TimedTRLTrainer(GenerationClock, GRPOTrainer):
    """TRL's GRPOTrainer, timed."""

    generation_log: list[dict[str, Any]]


class TimedMultiTurnTrainer(GenerationClock, MultiTurnGRPOTrainer):
    """Our multi-turn trainer, timed; also keeps the engine's generation/env split of each rollout."""

    generation_log: list[dict[str, Any]]

    def _rollout_extras(self) -> dict[str, Any]:
        episodes = self.last_episodes
        return {
            "generation_seconds": self.engine.timing["generation"],
            "env_seconds": self.engine.timing["env"],
            "episodes": len(episodes),
            "mean_turns": sum(e.turns for e in episodes) / max(len(episodes), 1),
        }


def _zero_reward(completions: list[Any], **kwargs: Any) -> list[float]:
    """TRL arm's reward: the compute is the same whatever the reward; all-zero like most BabyAI episodes."""
    return [0.0] * len(completions)


def _common_config(args: argparse.Namespace, cuda: bool, output_dir: Path) -> dict[str, Any]:
    return {
        "output_dir": str(output_dir),
        "num_generations": args.generations,
        "per_device_train_batch_size": args.tasks_per_step * args.generations,
        "max_steps": args.steps,
        "learning_rate": 1e-6,
        "beta": 0.001,  # the paper's KL coefficient: both arms run a reference model
        "temperature": 1.0,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "activation_checkpointing": cuda,
        "bf16": cuda,
        "use_cpu": not cuda,
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
        "seed": args.seed,
    }


def _arm_figures(log: list[dict[str, Any]], steps: list[float]) -> dict[str, Any]:
    """Per-step figures and their means over the steady steps (all but the first, when there are two+)."""
    steady = slice(1, None) if len(log) > 1 else slice(None)
    tokens = sum(r["tokens"] for r in log[steady])
    seconds = sum(r["seconds"] for r in log[steady])
    step_times = steps[steady] or steps
    figures = {
        "per_step": log,
        "step_seconds": [round(s, 4) for s in steps],
        "generated_tokens_per_step": tokens / max(len(log[steady]), 1),
        "generation_tokens_per_s": tokens / max(seconds, 1e-9),
        "step_time_s": sum(step_times) / max(len(step_times), 1),
        "longest_prompt": max((r["longest_prompt"] for r in log), default=0),
        "longest_completion": max((r["longest_completion"] for r in log), default=0),
    }
    if log and "env_seconds" in log[0]:
        gen = sum(r["generation_seconds"] for r in log[steady])
        env = sum(r["env_seconds"] for r in log[steady])
        figures["sampler_tokens_per_s"] = tokens / max(gen, 1e-9)  # generation calls only, env excluded
        figures["env_time_share"] = env / max(gen + env, 1e-9)
        figures["mean_turns"] = sum(r["mean_turns"] for r in log[steady]) / max(len(log[steady]), 1)
    return figures


def _free(cuda: bool) -> None:
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def multi_turn_config(
    args: argparse.Namespace, cuda: bool, output_dir: Path, config_class: type = MultiTurnGRPOConfig, **overrides: Any
) -> MultiTurnGRPOConfig:
    """The multi-turn arm's config (BabyAI, the turn and token limits of `args`), with `overrides` on top
    (e.g. `sampler="generate"`, or a `MultiTurnPPOConfig`'s critic settings)."""
    settings = {
        "env_id": ENV_ID,
        "env_kwargs": ENV_KWARGS,
        "max_turns": args.max_turns,
        "max_turn_tokens": args.turn_tokens,
        "max_completion_length": args.episode_budget,
        "num_env_workers": args.env_workers,
        **_common_config(args, cuda, output_dir),
    }
    return config_class(**(settings | overrides))


def run_multi_turn(
    model_dir: Path,
    args: argparse.Namespace,
    cuda: bool,
    workdir: Path,
    *,
    config: MultiTurnGRPOConfig | None = None,
    trainer_class: type | None = None,
    callbacks: Sequence[TrainerCallback] = (),
    **trainer_kwargs: Any,
) -> tuple[dict, list[str]]:
    """Train a multi-turn arm; return its figures and the first-turn prompts it played (one per task).

    Args:
        config: The arm's config (default: `multi_turn_config` with the cached sampler).
        trainer_class: A timed trainer (default `TimedMultiTurnTrainer`; `benchmarks/gpu_check.py` passes
            a timed PPO trainer).
        callbacks: More trainer callbacks (e.g. a time budget).
        **trainer_kwargs: Passed to the trainer (e.g. `peft_config`).
    """
    model, tokenizer = load_model(model_dir, dtype=training_dtype({"bf16": cuda}))  # float32 masters, bf16 autocast
    config = config or multi_turn_config(args, cuda, workdir / "multi-turn")
    clock = StepClock(cuda)
    trainer_class = trainer_class or TimedMultiTurnTrainer
    trainer = trainer_class(model, config, processing_class=tokenizer, callbacks=[clock, *callbacks], **trainer_kwargs)
    trainer.generation_log = []
    try:
        trainer.train()
    finally:
        trainer.engine.close()
    generation = getattr(trainer, "async_generation", None)
    # One prompt per GRPO group (the TRL arm repeats each G times itself), as text without re-rendering.
    prompts = [
        tokenizer.decode(e.prompt_ids, skip_special_tokens=False) for e in trainer.last_episodes[:: args.generations]
    ]
    figures = _arm_figures(trainer.generation_log, clock.times)
    figures["parameters"] = count_parameters(model)
    if generation is not None:
        figures["async"] = _async_figures(generation, trainer.state.log_history)
    del trainer, model, generation
    _free(cuda)
    return figures, prompts


def _async_figures(generation: Any, log_history: list[dict[str, Any]]) -> dict[str, Any]:
    """What async generation did: batches, staleness drops, syncs, the correction (from the trainer's logs)."""
    history = generation.history
    correction = [row["async/correction_mean"] for row in log_history if "async/correction_mean" in row]
    clipped = [row["async/correction_clipped"] for row in log_history if "async/correction_clipped" in row]
    return {
        "max_staleness": generation.max_staleness,
        "lookahead": generation.lookahead,
        "batches": len(history),
        "stale_groups": sum(h.get("stale_groups", 0) for h in history),
        "trainer_versions": [h["trainer_version"] for h in history],
        "sampled_versions": [h.get("version") for h in history],
        "mid_reply_updates": sum(h.get("mid_reply_updates", 0) for h in history),
        "correction_mean": sum(correction) / len(correction) if correction else None,
        "correction_clipped": sum(clipped) / len(clipped) if clipped else None,
    }


def run_async(model_dir: Path, args: argparse.Namespace, cuda: bool, workdir: Path) -> dict:
    """The multi-turn arm with generation beside training (`async_generation`, `max_staleness` 1)."""
    config = multi_turn_config(args, cuda, workdir / "async", async_generation=True, max_staleness=1)
    figures, _ = run_multi_turn(model_dir, args, cuda, workdir, config=config)
    figures.pop("parameters")
    return figures


def run_trl(
    model_dir: Path,
    prompts: list[str],
    args: argparse.Namespace,
    cuda: bool,
    workdir: Path,
    callbacks: Sequence[TrainerCallback] = (),
) -> dict:
    """Train TRL's single-turn arm on `prompts`, completions as long as a whole multi-turn episode's replies."""
    model, tokenizer = load_model(model_dir, dtype=training_dtype({"bf16": cuda}))  # float32 masters, bf16 autocast
    config = GRPOConfig(
        max_completion_length=args.max_turns * args.turn_tokens,
        **_common_config(args, cuda, workdir / "trl"),
    )
    clock = StepClock(cuda)
    trainer = TimedTRLTrainer(
        model,
        reward_funcs=[_zero_reward],
        args=config,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
        callbacks=[clock, *callbacks],
    )
    trainer.generation_log = []
    trainer.train()
    figures = _arm_figures(trainer.generation_log, clock.times)
    del trainer, model
    _free(cuda)
    return figures


def summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The headlines for `agentgym bench` (ratio > 1: ours better than the baseline)."""
    ours, trl = result["multi_turn"], result.get("trl")
    episodes = result["episodes_per_step"]
    share = ours["env_time_share"]
    rows = []
    if trl is not None:
        speed = ours["generation_tokens_per_s"] / max(trl["generation_tokens_per_s"], 1e-9)
        rows.append(
            {
                "measure": f"generation tokens/s, {episodes} episodes/step "
                f"({ours['generated_tokens_per_step']:.0f} vs {trl['generated_tokens_per_step']:.0f} tokens/step)",
                "ratio": speed,
                "baseline": "TRL GRPOTrainer, single-turn HF generate",
                "target": f">= {SPEED_TARGET}x",
                "met": speed >= SPEED_TARGET,
            }
        )
    rows.append(
        {
            "measure": f"env share of rollout time, {episodes} parallel episodes: {share:.1%}",
            "ratio": None,
            "baseline": "-",
            "target": f"<= {ENV_SHARE_TARGET:.0%}",
            "met": share <= ENV_SHARE_TARGET,
        }
    )
    late = result.get("async")
    if late is not None:
        rows.append(
            {
                "measure": f"async step time {late['step_time_s']:.2f} s (sync {ours['step_time_s']:.2f} s), "
                f"max_staleness 1: {late['async']['stale_groups']} stale groups",
                "ratio": ours["step_time_s"] / max(late["step_time_s"], 1e-9),
                "baseline": "the multi-turn arm, synchronous",
                "target": None,
                "met": None,
            }
        )
    if trl is not None:
        rows.append(
            {
                "measure": f"step time {ours['step_time_s']:.2f} s (TRL {trl['step_time_s']:.2f} s)",
                "ratio": trl["step_time_s"] / max(ours["step_time_s"], 1e-9),
                "baseline": "TRL GRPOTrainer step",
                "target": None,
                "met": None,
            }
        )
    return rows


def print_table(result: dict[str, Any]) -> None:
    ours, trl = result["multi_turn"], result.get("trl")
    print(f"device {result['device']}, {result['parameters'] / 1e6:.1f}M parameters ({result['model']})")
    print(
        f"{result['episodes_per_step']} episodes/step, max {result['max_turns']} turns x {result['turn_tokens']} "
        f"tokens; {result['steps']} steps (the first left out); mean turns {ours['mean_turns']:.1f}"
    )
    print(f"{'arm':<12}{'tokens/step':>12}{'gen tok/s':>11}{'sampler tok/s':>15}{'env share':>11}{'step s':>9}")
    print(
        f"{'multi-turn':<12}{ours['generated_tokens_per_step']:>12.0f}{ours['generation_tokens_per_s']:>11.0f}"
        f"{ours['sampler_tokens_per_s']:>15.0f}{ours['env_time_share']:>11.1%}{ours['step_time_s']:>9.2f}"
    )
    late = result.get("async")
    if late is not None:
        print(
            f"{'async':<12}{late['generated_tokens_per_step']:>12.0f}{late['generation_tokens_per_s']:>11.0f}"
            f"{late['sampler_tokens_per_s']:>15.0f}{late['env_time_share']:>11.1%}{late['step_time_s']:>9.2f}"
        )
    if trl is not None:
        print(
            f"{'trl':<12}{trl['generated_tokens_per_step']:>12.0f}{trl['generation_tokens_per_s']:>11.0f}"
            f"{'-':>15}{'-':>11}{trl['step_time_s']:>9.2f}"
        )
    for row in result["summary"]:
        ratio = "" if row["ratio"] is None else f" {row['ratio']:.2f}x"
        met = {True: "met", False: "NOT met", None: "no target"}[row["met"]]
        print(f"  {row['measure']}:{ratio} (target {row['target'] or '-'}: {met})")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", "--quick", action="store_true", help="tiny model on CPU, short settings")
    parser.add_argument("--model", choices=sorted(SHAPES), default=None, help="default: qwen2.5-0.5b (smoke: tiny)")
    parser.add_argument("--device", choices=("auto", "cpu"), default="auto", help="auto: CUDA when there is one")
    parser.add_argument("--no-trl", action="store_true", help="without TRL's single-turn arm")
    parser.add_argument("--no-async", action="store_true", help="without the async arm (async_generation)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per arm (default 3, smoke 2)")
    parser.add_argument("--tasks-per-step", type=int, default=None, help="GRPO groups a step (default 8, smoke 2)")
    parser.add_argument("--generations", type=int, default=None, help="episodes per task, G (default 8, smoke 4)")
    parser.add_argument("--max-turns", type=int, default=None, help="default 8 (smoke 3)")
    parser.add_argument("--turn-tokens", type=int, default=None, help="most tokens a reply (default 32, smoke 8)")
    parser.add_argument("--episode-budget", type=int, default=4096, help="token budget of an episode")
    parser.add_argument("--env-workers", type=int, default=8, help="threads stepping the envs")
    parser.add_argument("--threads", type=int, default=2, help="torch threads on CPU")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="default: benchmarks/results[/quick]/gpu_train.json")
    args = parser.parse_args(argv)
    defaults = (
        {"model": "tiny", "steps": 2, "tasks_per_step": 2, "generations": 4, "max_turns": 3, "turn_tokens": 8}
        if args.smoke
        else {"model": "qwen2.5-0.5b", "steps": 3, "tasks_per_step": 8, "generations": 8, "max_turns": 8}
        | {"turn_tokens": 32}
    )
    for name, value in defaults.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    if args.smoke:
        args.device = "cpu"
    if args.out is None:
        args.out = str((RESULTS / "quick" if args.smoke else RESULTS) / "gpu_train.json")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    cuda = args.device == "auto" and torch.cuda.is_available()
    if not cuda:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        model_dir = build_tiny_model(
            workdir / "model", TinyModelConfig(env_ids=[ENV_ID], env_kwargs=ENV_KWARGS, **SHAPES[args.model])
        )
        ours, prompts = run_multi_turn(model_dir, args, cuda, workdir)
        late, async_error = None, None
        if not args.no_async:
            try:  # as the TRL arm: the other figures survive a failure, reported in the JSON
                late = run_async(model_dir, args, cuda, workdir)
            except Exception as error:
                traceback.print_exc()
                async_error = f"{type(error).__name__}: {error}"
        trl, trl_error = None, None
        if not args.no_trl:
            try:  # a one-shot GPU run keeps the multi-turn figures even if the baseline fails
                trl = run_trl(model_dir, prompts, args, cuda, workdir)
            except Exception as error:  # reported in the JSON; the run exits 1
                traceback.print_exc()
                trl_error = f"{type(error).__name__}: {error}"
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or platform.machine()})",
        "model": args.model,
        "parameters": ours.pop("parameters"),
        "episodes_per_step": args.tasks_per_step * args.generations,
        "max_turns": args.max_turns,
        "turn_tokens": args.turn_tokens,
        "steps": args.steps,
        "quick": args.smoke,
        "settings": vars(args),
        "multi_turn": ours,
        "trl": trl,
        "trl_error": trl_error,
        "async": late,
        "async_error": async_error,
    }
    result["summary"] = summary(result)
    print_table(result)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")
    if trl_error:
        print(f"the TRL arm failed: {trl_error}", file=sys.stderr)
    if async_error:
        print(f"the async arm failed: {async_error}", file=sys.stderr)
    return result


if __name__ == "__main__":
    outcome = main()
    sys.exit(1 if outcome["trl_error"] or outcome["async_error"] else 0)
