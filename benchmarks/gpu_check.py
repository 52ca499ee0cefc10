"""The GPU check: every training path once on one GPU, in one command that fits 8 minutes.

On random weights of Qwen2.5-0.5B's transformer shape (the tiny tokenizer trained on BabyAI text;
`benchmarks/gpu_train.py` builds it), bf16 on a GPU, 64 BabyAI episodes a step, it runs in turn:

- `grpo_cached`: a multi-turn GRPO step with the cached sampler (the KV cache kept between turns);
- `trl`: TRL's single-turn `GRPOTrainer` on the first-turn prompts `grpo_cached` played, completions of
  `max_turns x turn_tokens` tokens (the baseline of the tokens/s ratios);
- `grpo_generate`: the multi-turn step with the `generate` sampler (transformers' `generate` on every
  turn's whole history);
- `lora`: the multi-turn GRPO step with a rank-16 LoRA adapter on every linear layer of the decoder;
- `ppo`: a `MultiTurnPPOTrainer` step with its full critic.

Each part runs in its own try/except, with a time budget (training stops after the step that passes
`--part-seconds`; `--part-hard-seconds` or what is left of `--budget` interrupts it), and with
`torch.cuda.max_memory_allocated` reset at its start. Its peak is set against what `agentgym plan`
(`agentgym_train.plan.predict_memory`, one GPU, DDP, no overhead allowance: the allocator's count excludes the
CUDA context) predicts for the part's settings: at the config's token budget, and at the longest
prompt and completion the part really had. The JSON (`benchmarks/results/gpu_check.json`) is written
after every part, so a run cut short keeps what it measured; a failed part keeps its error and traceback.

On the GPU machine (torch there; the rest travels as the wheels `benchmarks/gpu_wheels.sh` fetches
into `.whl/`, transformers, accelerate and peft at the tested versions among them), one command with
`.whl` carried and a timeout of 540 s (`wrappers/` is the package `agentgym_wrappers`, which an install
maps and a plain PYTHONPATH does not, hence the link):

    set -o pipefail; python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && ln -sfn $PWD/wrappers /tmp/site/agentgym_wrappers && export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 && python3 benchmarks/gpu_check.py --out $OUT/gpu_check.json 2>&1 | tee $OUT/gpu_check.log

    python benchmarks/gpu_check.py --smoke     # CPU: a tiny model, every part and code path, ~1 min
"""  # noqa: E501 (the device command stays one line, to be copied whole)

from __future__ import annotations

import argparse
import gc
import json
import platform
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import torch
from transformers import TrainerCallback

sys.path.insert(0, str(Path(__file__).resolve().parent))  # gpu_train beside this file, also when imported by path

import gpu_train as gt

from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model
from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

GIB = 1024**3
PARTS = ("grpo_cached", "trl", "grpo_generate", "lora", "ppo")
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]  # plan's lora_r
VERSIONS = ("torch", "transformers", "accelerate", "peft", "trl", "datasets", "pyarrow", "huggingface_hub")
VERSIONS += ("tokenizers", "gymnasium", "minigrid", "numpy")
#: Below this many seconds of the total budget a part is not started.
MIN_PART_SECONDS = 20.0


class TimedPPOTrainer(gt.TimedMultiTurnTrainer, MultiTurnPPOTrainer):
    """`MultiTurnPPOTrainer`, timed as the multi-turn GRPO arm (generation log, rollout's env share)."""


class PartTimeout(BaseException):
    """A part ran past its hard time limit.

    A BaseException, as KeyboardInterrupt is: the rollout's `except Exception` around env calls would
    otherwise take it for a failed env and train on.
    """


class TimeBudget(TrainerCallback):
    """Stops training after the first optimizer step that ends past `seconds` from the start of training.

    Attributes:
        steps: Optimizer steps done.
        stopped: Whether the budget stopped training before `max_steps`.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.steps = 0
        self.stopped = False
        self._start = time.perf_counter()

    def on_train_begin(self, args, state, control, **kwargs) -> None:
        self._start = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs) -> None:
        self.steps += 1
        if time.perf_counter() - self._start > self.seconds and state.global_step < state.max_steps:
            control.should_training_stop = True
            self.stopped = True


@contextmanager
def hard_limit(seconds: float) -> Iterator[None]:
    """Raise `PartTimeout` in the main thread once `seconds` pass (SIGALRM; a no-op elsewhere).

    The signal is handled between Python bytecodes, so a long CUDA kernel or C call finishes first.
    """
    if seconds <= 0 or not hasattr(signal, "setitimer") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def expire(signum: int, frame: Any) -> None:
        raise PartTimeout(f"past its hard limit of {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


class MemoryProbe:
    """Peak CUDA memory of one part: the allocator's peak statistics reset at `start`.

    On a machine without CUDA it records nothing (the figures stay None).
    """

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.at_start = None

    def start(self) -> None:
        free(self.cuda)
        if self.cuda:
            torch.cuda.reset_peak_memory_stats()
            self.at_start = torch.cuda.memory_allocated()

    def read(self) -> dict[str, Any]:
        if not self.cuda:
            return {"peak_allocated_bytes": None, "peak_reserved_bytes": None, "allocated_at_start_bytes": None}
        torch.cuda.synchronize()
        return {
            "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
            "peak_reserved_bytes": torch.cuda.max_memory_reserved(),
            "allocated_at_start_bytes": self.at_start,
        }


def free(cuda: bool) -> None:
    gc.collect()
    if cuda:
        torch.cuda.empty_cache()


def predicted_memory(settings: dict[str, Any], prompt_tokens: int, gpu_gib: float) -> dict[str, Any]:
    """`agentgym plan`'s per-GPU bytes for `settings` on one GPU (DDP), with no overhead allowance (the
    allocator's peak leaves the CUDA context out): `predict_memory`'s phases, totals and peak."""
    from agentgym_train.plan import predict_memory

    prediction = predict_memory(settings, gpus=1, gpu_memory_gib=gpu_gib, prompt_tokens=prompt_tokens, overhead_gib=0)
    keep = ("peak_bytes", "peak_phase", "totals", "phases")
    return {key: prediction[key] for key in keep} | {
        "max_completion_length": settings["max_completion_length"],
        "prompt_tokens": prompt_tokens,
    }


def memory_check(
    settings: dict[str, Any], figures: dict[str, Any], measured: dict[str, Any], gpu_gib: float
) -> dict[str, Any]:
    """The measured peak beside the plan at the config's budget and at the lengths the part had."""
    prompt = figures["longest_prompt"]
    at_budget = predicted_memory(settings, prompt, gpu_gib)
    at_run = predicted_memory(settings | {"max_completion_length": figures["longest_completion"]}, prompt, gpu_gib)
    peak = measured["peak_allocated_bytes"]
    return {
        **measured,
        "planned_at_budget": at_budget,
        "planned_at_run_lengths": at_run,
        "measured_over_planned_at_budget": None if peak is None else peak / at_budget["peak_bytes"],
        "measured_over_planned_at_run_lengths": None if peak is None else peak / at_run["peak_bytes"],
    }


@dataclass
class Context:
    """What the parts share: settings, device, the model directory and the cached arm's prompts."""

    args: argparse.Namespace
    cuda: bool
    model_dir: Path
    workdir: Path
    gpu_gib: float
    prompts: list[str] = field(default_factory=list)

    def part_args(self, steps: int) -> argparse.Namespace:
        return argparse.Namespace(**(vars(self.args) | {"steps": steps}))

    def plan_settings(self, **overrides: Any) -> dict[str, Any]:
        """The settings `agentgym plan` reads, as the multi-turn arms train (`gpu_train._common_config`)."""
        args = self.args
        return {
            "model": str(self.model_dir),
            "algorithm": "grpo",
            "bf16": self.cuda,
            "fp16": False,
            "beta": 0.001,
            "per_device_train_batch_size": args.tasks_per_step * args.generations,
            "gradient_accumulation_steps": 1,
            "max_completion_length": args.episode_budget,
            "activation_checkpointing": self.cuda,
            "use_vllm": False,
            **overrides,
        }


@dataclass
class Part:
    """One part: how it trains (returns its figures) and the plan settings of its config."""

    name: str
    run: Callable[[Context, TimeBudget], dict[str, Any]]
    settings: Callable[[Context], dict[str, Any]]
    steps: Callable[[argparse.Namespace], int] = lambda args: args.steps


def _grpo(sampler: str) -> Callable[[Context, TimeBudget], dict[str, Any]]:
    def run(ctx: Context, budget: TimeBudget) -> dict[str, Any]:
        args = ctx.part_args(ctx.args.steps)
        config = gt.multi_turn_config(args, ctx.cuda, ctx.workdir / sampler, sampler=sampler)
        figures, prompts = gt.run_multi_turn(
            ctx.model_dir, args, ctx.cuda, ctx.workdir, config=config, callbacks=[budget]
        )
        if sampler == "cached" or not ctx.prompts:
            ctx.prompts = prompts
        return figures

    return run


def _trl(ctx: Context, budget: TimeBudget) -> dict[str, Any]:
    prompts = ctx.prompts or first_turn_prompts(ctx.model_dir, ctx.args.tasks_per_step, ctx.args.seed)
    return gt.run_trl(ctx.model_dir, prompts, ctx.part_args(ctx.args.steps), ctx.cuda, ctx.workdir, callbacks=[budget])


def _lora(ctx: Context, budget: TimeBudget) -> dict[str, Any]:
    from peft import LoraConfig

    args = ctx.part_args(ctx.args.extra_steps)
    lora = LoraConfig(r=args.lora_rank, lora_alpha=2 * args.lora_rank, target_modules=LORA_TARGETS, lora_dropout=0.0)
    config = gt.multi_turn_config(args, ctx.cuda, ctx.workdir / "lora")
    figures, _ = gt.run_multi_turn(
        ctx.model_dir, args, ctx.cuda, ctx.workdir, config=config, callbacks=[budget], peft_config=lora
    )
    return figures


def _ppo(ctx: Context, budget: TimeBudget) -> dict[str, Any]:
    args = ctx.part_args(ctx.args.extra_steps)
    config = gt.multi_turn_config(args, ctx.cuda, ctx.workdir / "ppo", MultiTurnPPOConfig, critic="full")
    figures, _ = gt.run_multi_turn(
        ctx.model_dir, args, ctx.cuda, ctx.workdir, config=config, trainer_class=TimedPPOTrainer, callbacks=[budget]
    )
    return figures


def _trl_settings(ctx: Context) -> dict[str, Any]:
    return ctx.plan_settings(max_completion_length=ctx.args.max_turns * ctx.args.turn_tokens)


PART_SPECS = {
    "grpo_cached": Part("grpo_cached", _grpo("cached"), lambda ctx: ctx.plan_settings()),
    "trl": Part("trl", _trl, _trl_settings),
    "grpo_generate": Part("grpo_generate", _grpo("generate"), lambda ctx: ctx.plan_settings()),
    "lora": Part(
        "lora", _lora, lambda ctx: ctx.plan_settings(lora_r=ctx.args.lora_rank), lambda args: args.extra_steps
    ),
    "ppo": Part("ppo", _ppo, lambda ctx: ctx.plan_settings(algorithm="ppo", critic="full"), lambda a: a.extra_steps),
}


def first_turn_prompts(model_dir: Path, count: int, seed: int) -> list[str]:
    """First-turn prompts of `count` BabyAI train tasks, rendered by the model's chat template: the TRL
    arm's prompts when the cached arm, whose prompts it normally takes, did not run."""
    import gymnasium as gym

    import agentgym_envs  # noqa: F401  (registers the ids)
    from agentgym_train.models.tiny import load_tokenizer
    from agentgym_train.rollout.templates import ChatRenderer
    from agentgym_wrappers.multiturn import MultiTurnWrapper

    renderer = ChatRenderer(load_tokenizer(model_dir))
    prompts = []
    for i in range(count):
        env = MultiTurnWrapper(gym.make(gt.ENV_ID, **gt.ENV_KWARGS))
        env.reset(seed=seed + i)
        prompts.append(renderer.render(env.messages, add_generation_prompt=True))
        env.close()
    return prompts


def run_part(part: Part, ctx: Context, deadline: float) -> dict[str, Any]:
    """Run one part within its budgets and return its record (status ok, error, timeout or skipped).

    Nothing a part raises escapes: the record keeps the error and the tail of its traceback.
    """
    left = deadline - time.perf_counter()
    record: dict[str, Any] = {"status": "skipped", "steps_asked": part.steps(ctx.args)}
    if left < MIN_PART_SECONDS:
        record["error"] = f"{left:.0f} s left of the {ctx.args.budget:.0f} s budget (a part needs {MIN_PART_SECONDS})"
        return record
    probe = MemoryProbe(ctx.cuda)
    budget = TimeBudget(min(ctx.args.part_seconds, left))
    probe.start()
    start = time.perf_counter()
    try:
        with hard_limit(min(ctx.args.part_hard_seconds, left)):
            figures = part.run(ctx, budget)
        record.update(status="ok", figures=figures)
    except (Exception, PartTimeout) as error:  # one part's failure must not lose the others' figures
        record.update(
            status="timeout" if isinstance(error, PartTimeout) else "error",
            error=f"{type(error).__name__}: {error}",
            traceback=traceback.format_exc()[-4000:],
        )
        print(f"[{part.name}] {record['error']}", file=sys.stderr)
    record.update(seconds=round(time.perf_counter() - start, 2), steps_done=budget.steps)
    record["stopped_by_time_budget"] = budget.stopped
    measured = probe.read()
    record["memory"] = measured
    if record["status"] == "ok":
        try:
            record["memory"] = memory_check(part.settings(ctx), record["figures"], measured, ctx.gpu_gib)
        except Exception as error:  # a plan that cannot be made keeps the measurement
            record["memory"]["plan_error"] = f"{type(error).__name__}: {error}"
    free(ctx.cuda)
    return record


def _ratio(parts: dict[str, Any], ours: str, base: str, key: str = "generation_tokens_per_s") -> float | None:
    a, b = parts.get(ours, {}), parts.get(base, {})
    if a.get("status") != "ok" or b.get("status") != "ok":
        return None
    return a["figures"][key] / max(b["figures"][key], 1e-9)


def ratios(parts: dict[str, Any]) -> dict[str, float | None]:
    """Generation tokens/s of each multi-turn sampler over TRL's, and of the cached sampler over `generate`."""
    return {
        "cached_over_trl": _ratio(parts, "grpo_cached", "trl"),
        "generate_over_trl": _ratio(parts, "grpo_generate", "trl"),
        "cached_over_generate": _ratio(parts, "grpo_cached", "grpo_generate"),
        "cached_over_generate_sampler_only": _ratio(parts, "grpo_cached", "grpo_generate", "sampler_tokens_per_s"),
    }


def summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Headlines in `agentgym bench`'s format: speed ratios, then each part's memory against the plan."""
    parts, r, episodes = result["parts"], result["ratios"], result["episodes_per_step"]
    rows = []
    trl = "TRL GRPOTrainer, single-turn HF generate"
    for key, what, baseline, target in (
        ("cached_over_trl", "multi-turn cached sampler", trl, gt.SPEED_TARGET),
        ("generate_over_trl", "multi-turn generate sampler", trl, None),
        ("cached_over_generate", "cached sampler over generate", "the generate sampler, multi-turn", 1.0),
    ):
        if r[key] is not None:
            rows.append(
                {
                    "measure": f"generation tokens/s, {what}, {episodes} episodes/step",
                    "ratio": r[key],
                    "baseline": baseline,
                    "target": None if target is None else f">= {target}x",
                    "met": None if target is None else r[key] >= target,
                }
            )
    for name in PARTS:
        record = parts.get(name, {})
        memory = record.get("memory", {})
        if record.get("status") != "ok":
            what = f"{name}: {record.get('status')} ({record.get('error', '')[:80]})"
            rows.append({"measure": what, "ratio": None, "baseline": "-", "target": None, "met": False})
        elif memory.get("peak_allocated_bytes") is not None and "planned_at_budget" in memory:
            peak, planned = memory["peak_allocated_bytes"], memory["planned_at_budget"]["peak_bytes"]
            at_run = memory["planned_at_run_lengths"]["peak_bytes"]
            rows.append(
                {
                    "measure": f"{name} peak CUDA memory {peak / GIB:.2f} GiB; plan {planned / GIB:.2f} GiB at the "
                    f"budget, {at_run / GIB:.2f} GiB at the run's lengths",
                    "ratio": memory["measured_over_planned_at_budget"],
                    "baseline": "agentgym plan (1 GPU, DDP)",
                    "target": "<= 1x (the plan bounds the run)",
                    "met": peak <= planned,
                }
            )
    return rows


def print_table(result: dict[str, Any]) -> None:
    print(f"device {result['device']}; {result['model']} shape, {result['episodes_per_step']} episodes/step")
    print(f"{'part':<15}{'status':<9}{'steps':>6}{'s':>8}{'gen tok/s':>11}{'peak GiB':>10}{'plan GiB':>10}")
    for name in PARTS:
        record = result["parts"].get(name, {"status": "-"})
        figures, memory = record.get("figures", {}), record.get("memory", {})
        speed = figures.get("generation_tokens_per_s")
        peak = memory.get("peak_allocated_bytes")
        planned = memory.get("planned_at_budget", {}).get("peak_bytes")
        print(
            f"{name:<15}{record['status']:<9}{record.get('steps_done', 0):>6}{record.get('seconds', 0):>8.1f}"
            + (f"{speed:>11.0f}" if speed is not None else f"{'-':>11}")
            + (f"{peak / GIB:>10.2f}" if peak is not None else f"{'-':>10}")
            + (f"{planned / GIB:>10.2f}" if planned is not None else f"{'-':>10}")
        )
    for row in result["summary"]:
        ratio = "" if row["ratio"] is None else f" {row['ratio']:.2f}x"
        print(f"  {row['measure']}:{ratio} against {row['baseline']} (target {row['target'] or '-'})")


def versions() -> dict[str, str | None]:
    """Installed versions of what the check runs on (the GPU machine's own, not this project's pins)."""
    found: dict[str, str | None] = {"python": platform.python_version()}
    for name in VERSIONS:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    return found


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny model on CPU, every part at its smallest")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    parser.add_argument("--model", choices=sorted(gt.SHAPES), default=None, help="default qwen2.5-0.5b (smoke: tiny)")
    parser.add_argument("--device", choices=("auto", "cpu"), default="auto")
    parser.add_argument("--steps", type=int, default=None, help="steps of the speed parts (default 3, smoke 2)")
    parser.add_argument("--extra-steps", type=int, default=None, help="steps of lora and ppo (default 2, smoke 1)")
    parser.add_argument("--tasks-per-step", type=int, default=None, help="GRPO groups a step (default 8, smoke 2)")
    parser.add_argument("--generations", type=int, default=None, help="episodes per task (default 8, smoke 2)")
    parser.add_argument("--max-turns", type=int, default=None, help="default 8 (smoke 2)")
    parser.add_argument("--turn-tokens", type=int, default=None, help="default 32 (smoke 8)")
    parser.add_argument("--episode-budget", type=int, default=None, help="episode tokens (default 1024, smoke 256)")
    parser.add_argument("--lora-rank", type=int, default=16)
    parser.add_argument("--env-workers", type=int, default=8)
    parser.add_argument("--threads", type=int, default=2, help="torch threads on CPU")
    parser.add_argument("--budget", type=float, default=None, help="seconds for everything (default 400)")
    parser.add_argument("--part-seconds", type=float, default=None, help="a part's training stops after (default 75)")
    parser.add_argument("--part-hard-seconds", type=float, default=None, help="a part is cut at (default 150)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=None, help="default: benchmarks/results[/quick]/gpu_check.json")
    args = parser.parse_args(argv)
    small = {"model": "tiny", "steps": 2, "extra_steps": 1, "tasks_per_step": 2, "generations": 2, "max_turns": 2}
    # a shared CPU is slow and uneven: the smoke run's limits only catch a hang
    small |= {"turn_tokens": 8, "episode_budget": 256, "budget": 900.0, "part_seconds": 300.0}
    small |= {"part_hard_seconds": 600.0}
    full = {"model": "qwen2.5-0.5b", "steps": 3, "extra_steps": 2, "tasks_per_step": 8, "generations": 8}
    full |= {"max_turns": 8, "turn_tokens": 32, "episode_budget": 1024, "budget": 400.0, "part_seconds": 75.0}
    full |= {"part_hard_seconds": 150.0}
    for name, value in (small if args.smoke else full).items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    unknown = sorted(set(args.parts.split(",")) - set(PARTS))
    if unknown:
        parser.error(f"unknown parts {unknown}; choose from {', '.join(PARTS)}")
    if args.smoke:
        args.device = "cpu"
    if args.out is None:
        args.out = str((gt.RESULTS / "quick" if args.smoke else gt.RESULTS) / "gpu_check.json")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    started = time.perf_counter()
    args = parse_args(argv)
    deadline = started + args.budget
    cuda = args.device == "auto" and torch.cuda.is_available()
    if not cuda:
        torch.set_num_threads(args.threads)
    gpu_gib = torch.cuda.get_device_properties(0).total_memory / GIB if cuda else 141.0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if cuda else f"cpu ({platform.processor() or platform.machine()})",
        "gpu_memory_gib": round(gpu_gib, 2),
        "model": args.model,
        "episodes_per_step": args.tasks_per_step * args.generations,
        "quick": args.smoke,
        "settings": vars(args),
        "versions": versions(),
        "parts": {},
    }

    def write() -> None:
        result["ratios"] = ratios(result["parts"])
        result["summary"] = summary(result)
        result["seconds"] = round(time.perf_counter() - started, 1)
        out.write_text(json.dumps(result, indent=2) + "\n")

    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        shape = gt.SHAPES[args.model]
        model_dir = build_tiny_model(
            workdir / "model", TinyModelConfig(env_ids=[gt.ENV_ID], env_kwargs=gt.ENV_KWARGS, **shape)
        )
        ctx = Context(args, cuda, model_dir, workdir, gpu_gib)
        for name in [p for p in PARTS if p in args.parts.split(",")]:
            print(f"[{name}] starting, {deadline - time.perf_counter():.0f} s left", flush=True)
            result["parts"][name] = run_part(PART_SPECS[name], ctx, deadline)
            write()  # after every part: a run cut short keeps what it measured
    print_table(result)
    print(f"wrote {out}")
    return result


def exit_status(result: dict[str, Any]) -> int:
    """0 when every part ran to the end, else 1 (the JSON says which did not, and why)."""
    return 0 if all(part["status"] == "ok" for part in result["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(exit_status(main()))
