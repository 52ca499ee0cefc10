"""`agentgym train CONFIG.yaml`: tiny model → SFT on expert episodes → multi-turn GRPO → evaluation.

The default config (`configs/babyai_demo.yaml`) is the CPU demo: it builds a tiny model, warms it
up on a few expert BabyAI episodes, trains it with multi-turn GRPO under a max-turn schedule, and
evaluates it on held-out test tasks before and after RL, beside a uniformly random policy. It
prints the numbers with 95% intervals and writes `results.json` and `training.png` to `output_dir`.
With `model:` set to a path, the same pipeline trains a real model (SFT and evaluation optional).
"""

from __future__ import annotations

import contextlib
import json
import time
import warnings
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm
from transformers.trainer_callback import ProgressCallback

from agentgym_train.config_files import DEFAULT_CONFIG
from agentgym_train.pipeline.stages import save_trained_model
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer
from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

__all__ = ["ALGORITHMS", "DEFAULT_CONFIG", "PipelineConfig", "end_processes", "load_configs", "resume_target", "run"]

ALGORITHMS = {"grpo": MultiTurnGRPOTrainer, "ppo": MultiTurnPPOTrainer}
#: Methods that train without online RL after the SFT stage (`offline_stages`); `sft` stops after it.
OFFLINE = ("sft", "rft", "dpo")


@dataclass
class PipelineConfig:
    """What happens around RL: which model, how much SFT, the max-turn schedule, the evaluation."""

    model: str = field(default="tiny", metadata={"help": "'tiny' builds a tiny model; else a model path or hub id."})
    algorithm: str = field(
        default="grpo",
        metadata={
            "help": "'grpo' (MultiTurnGRPOTrainer), 'ppo' (MultiTurnPPOTrainer: a value model, GAE), 'rft' "
            "(rejection-sampling rounds), 'dpo' (pairs of the SFT model's episodes) or 'sft' (the SFT stage alone)."
        },
    )
    tiny_hidden_size: int = field(default=128, metadata={"help": "Tiny model width."})
    tiny_layers: int = field(default=3, metadata={"help": "Tiny model depth."})
    tiny_heads: int = field(default=4, metadata={"help": "Tiny model attention heads (KV heads: half)."})
    tiny_intermediate_size: int = field(default=384, metadata={"help": "Tiny model MLP width."})
    sft_episodes: int = field(default=300, metadata={"help": "Expert episodes for the SFT warm start."})
    sft_steps: int = field(default=60, metadata={"help": "SFT optimizer steps (0: no SFT)."})
    sft_batch_size: int = field(default=16, metadata={"help": "Episodes per SFT step."})
    sft_learning_rate: float = field(default=1e-3, metadata={"help": "SFT learning rate."})
    sft_data: str | None = field(
        default=None,
        metadata={"help": "A JSONL file of `agentgym collect` to fine-tune on (its successful episodes); None: "
                  "sft_episodes episodes of the scenario's expert."},
    )  # fmt: skip
    rft_rounds: int = field(default=3, metadata={"help": "RFT: rounds of sample -> keep -> fine-tune."})
    rft_tasks: int = field(default=64, metadata={"help": "RFT: training tasks sampled per round."})
    rft_samples_per_task: int = field(default=8, metadata={"help": "RFT: episodes per task per round (k)."})
    rft_keep: str = field(default="success", metadata={"help": "RFT: 'success' (all) or 'best' (per task)."})
    rft_steps: int = field(default=20, metadata={"help": "RFT: optimizer steps per round."})
    rft_batch_size: int = field(default=16, metadata={"help": "RFT: episodes per step."})
    rft_learning_rate: float = field(default=5e-4, metadata={"help": "RFT: learning rate."})
    dpo_tasks: int = field(default=128, metadata={"help": "DPO: training tasks whose episodes are paired."})
    dpo_samples_per_task: int = field(default=4, metadata={"help": "DPO: episodes per task to pair."})
    dpo_pairs_per_task: int = field(default=2, metadata={"help": "DPO: most pairs per task."})
    dpo_heldout_tasks: int = field(default=50, metadata={"help": "DPO: training tasks after dpo_tasks, not trained "
                                   "on, whose pairs measure the chosen-over-rejected log-ratio."})  # fmt: skip
    dpo_steps: int = field(default=40, metadata={"help": "DPO: optimizer steps."})
    dpo_batch_size: int = field(default=16, metadata={"help": "DPO: pairs per step."})
    dpo_learning_rate: float = field(default=1e-4, metadata={"help": "DPO: learning rate."})
    dpo_beta: float = field(default=0.1, metadata={"help": "DPO: beta (TRL's)."})
    dpo_sft_weight: float = field(
        default=1.0, metadata={"help": "DPO: weight of an NLL term on the chosen replies (TRL's 'sft' loss; 0: none)."}
    )
    lora_r: int = field(default=0, metadata={"help": "RFT/DPO: LoRA rank on every linear layer (0: full weights)."})
    max_turn_schedule: list[int] = field(
        default_factory=lambda: [6, 10], metadata={"help": "Horizons of the max-turn schedule, in order."}
    )
    max_turn_every: int = field(default=20, metadata={"help": "Rollout batches per horizon of the schedule."})
    eval_split: str = field(default="test", metadata={"help": "Held-out split to evaluate on."})
    eval_tasks: int = field(default=100, metadata={"help": "Tasks of the split to evaluate (0: none)."})
    eval_episodes_per_task: int = field(default=1, metadata={"help": "Episodes per evaluated task."})
    eval_temperature: float = field(default=1.0, metadata={"help": "Sampling temperature when evaluating."})
    random_actions: list[str] | None = field(
        default=None, metadata={"help": "Action set of the random baseline (default: the env's available actions)."}
    )
    torch_threads: int | None = field(default=None, metadata={"help": "torch.set_num_threads (None: torch's)."})

    def __post_init__(self) -> None:
        if self.algorithm not in (*ALGORITHMS, *OFFLINE):
            raise ValueError(f"algorithm must be one of {sorted((*ALGORITHMS, *OFFLINE))}, got {self.algorithm!r}")


def load_configs(path: str | Path, overrides: list[str] | None = None) -> tuple[PipelineConfig, MultiTurnGRPOConfig]:
    """Parse a YAML config (TRL-style: `TrlParser`) with `--key value` overrides.

    The trainer settings parse as `MultiTurnPPOConfig`, whose value-model keys only `algorithm: ppo` reads.
    """
    from trl import TrlParser

    parser = TrlParser((PipelineConfig, MultiTurnPPOConfig))
    pipeline, trainer_args = parser.parse_args_and_config(args=["--config", str(path), *(overrides or [])])
    return pipeline, trainer_args


def resume_target(value: str | None, output_dir: str) -> str | None:
    """The checkpoint folder to resume from: None (no resume), a checkpoint-N folder, or for `true` the
    last checkpoint in `output_dir`."""
    if value is None or value.lower() in ("", "false", "none"):
        return None
    if value.lower() == "true":
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None
        if last is None:
            raise ValueError(f"resume_from_checkpoint: no checkpoint-N folder in output_dir {output_dir!r} to resume")
        return last
    if not (Path(value) / "trainer_state.json").is_file():
        raise ValueError(
            f"resume_from_checkpoint: {value!r} is no checkpoint (no trainer_state.json); give a checkpoint-N "
            "folder, or true for the last one in output_dir"
        )
    return value


def _plot(log_history: list[dict[str, Any]], path: Path, algorithm: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in log_history if "episode/return" in r]
    steps = [r["step"] for r in rows]
    fig, axes = plt.subplots(3, 1, figsize=(7, 7), sharex=True)
    for ax, key, label in zip(
        axes,
        ("episode/return", "episode/success", "rollout/max_turns"),
        ("mean return", "success rate", "max turns"),
        strict=True,
    ):
        values = [r[key] for r in rows]
        ax.plot(steps, values, marker="o", markersize=2, linewidth=0.8, alpha=0.5)
        if key != "rollout/max_turns" and len(values) >= 5:  # a 5-step moving average through the noise
            smooth = [
                sum(values[max(0, i - 4) : i + 1]) / len(values[max(0, i - 4) : i + 1]) for i in range(len(values))
            ]
            ax.plot(steps, smooth, linewidth=2)
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel(f"{algorithm.upper()} step")
    axes[0].set_title(f"Multi-turn {algorithm.upper()} (training episodes)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


class PhaseProgress(ProgressCallback):
    """transformers' training bar, named after the phase, with a few figures as its postfix in place of
    the full metrics dict it would write under the bar at every logging step.

    Args:
        description: The bar's name (`SFT`, `GRPO`).
        postfix: Log key -> (postfix name, format); a log line without the first key leaves the bar as it is.
    """

    def __init__(self, description: str, postfix: dict[str, tuple[str, str]]) -> None:
        super().__init__()
        self.description = description
        self.postfix = postfix

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        if state.is_world_process_zero:  # the parent's bar, named from its first line on
            self.training_bar = tqdm(total=state.max_steps, desc=self.description, dynamic_ncols=True)
        self.current_step = 0

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        if not (state.is_world_process_zero and self.training_bar is not None and logs):
            return
        if next(iter(self.postfix)) in logs:
            figures = {name: format(logs[key], spec) for key, (name, spec) in self.postfix.items() if key in logs}
            self.training_bar.set_postfix(figures, refresh=False)


#: The RL bar's figures: the episodes' success, return and turns, and the scheduler's max turns.
RL_POSTFIX = {
    "episode/success": ("success", ".2f"),
    "episode/return": ("ret", ".2f"),
    "episode/turns": ("turns", ".1f"),
    "rollout/max_turns": ("max_turns", ".0f"),
}
SFT_POSTFIX = {"loss": ("loss", ".3f")}
#: FutureWarning from TRL's own generation helpers (`is_gradient_checkpointing` is deprecated in transformers
#: 5): TRL calls the alias, so a user can do nothing about it.
_TRL_DEPRECATION = r"`is_gradient_checkpointing` is deprecated"


@contextlib.contextmanager
def quiet_console() -> Iterator[None]:
    """One progress display per phase: no weight-loading, shard-writing or dataset-map bars from the
    libraries underneath, and no warnings that the user cannot act on; restored on exit."""
    import datasets
    from transformers.utils import logging as hf_logging

    transformers_bars = hf_logging.is_progress_bar_enabled()
    datasets_bars = datasets.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_TRL_DEPRECATION, category=FutureWarning)
            yield
    finally:
        if transformers_bars:
            hf_logging.enable_progress_bar()
        if datasets_bars:
            datasets.enable_progress_bars()


def _row(name: str, result: Any) -> str:
    return (
        f"{name:<16} success {result.success.mean:.3f} ± {result.success.half_width:.3f}   "
        f"return {result.episode_return.mean:.3f} ± {result.episode_return.half_width:.3f}   "
        f"turns {result.turns.mean:5.2f} ± {result.turns.half_width:.2f}"
    )


@contextlib.contextmanager
def on_training_device(model: Any) -> Iterator[None]:
    """The model on the device this process trains on (where the trainer will keep it), for an evaluation
    that every process runs. Weights that DeepSpeed ZeRO-3 loaded partitioned (a model loaded under its
    `zero.Init`, as after the SFT stage) are gathered whole on every process meanwhile (a collective call)."""
    from accelerate import PartialState

    partitioned = [p for p in model.parameters() if hasattr(p, "ds_id")]
    if not partitioned:
        model.to(PartialState().device)
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(partitioned):
        yield


def run(pipeline: PipelineConfig, args: MultiTurnGRPOConfig) -> dict[str, Any]:
    """Run the whole pipeline; return (and write) the results. Under several processes (`accelerate
    launch`) every process trains and saves; the main one alone evaluates after RL and writes the
    results (the others return theirs without evaluation)."""
    with quiet_console():
        return _run(pipeline, args)


def end_processes() -> None:
    """The end of a multi-process run (`accelerate launch`): wait for every process, then end the process group.
    A group left to the interpreter's exit tears down the connections of a process still in a collective, and
    gloo's threads, still joinable when the C++ statics go, abort a process now and then (`terminate called
    without an active exception`) after its work is done. Nothing to do in a single process."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def _run(pipeline: PipelineConfig, args: MultiTurnGRPOConfig) -> dict[str, Any]:
    import torch

    from agentgym_train.evaluation.evaluate import evaluate_random, paired_difference
    from agentgym_train.models.tiny import count_parameters, load_model, training_dtype
    from agentgym_train.pipeline.stages import build_policy, evaluate_stage, rl_stage, sft_stage
    from agentgym_train.scheduler import MaxTurnScheduler
    from agentgym_train.trainers.sft import collected_chats, demo_format, env_tools, expert_chats

    started = time.perf_counter()
    if pipeline.torch_threads:
        torch.set_num_threads(pipeline.torch_threads)
    out = Path(args.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    horizon = max(pipeline.max_turn_schedule)
    env_kwargs = args.env_kwargs or {}
    results: dict[str, Any] = {"env_id": args.env_id, "max_turns": horizon, "stages": {}}

    def stage(name: str, t0: float) -> None:
        results["stages"][name] = round(time.perf_counter() - t0, 1)
        print(f"[{name}: {results['stages'][name]:.0f} s]", flush=True)

    # 1. the model
    t0 = time.perf_counter()
    # float32 masters under plain DDP (bf16 autocast computes); bf16 weights where FSDP / DeepSpeed keep float32 masters
    dtype = training_dtype(args)
    model_path, model, tokenizer = build_policy(pipeline, [args.env_id], env_kwargs, args.seed, out, dtype)
    results["parameters"] = count_parameters(model)
    print(f"model: {model_path} ({results['parameters'] / 1e6:.2f}M parameters)", flush=True)
    stage("model", t0)

    # 2. SFT warm start on expert episodes (tool calls under action_format: tools)
    action_format = getattr(args, "action_format", None)
    if pipeline.sft_steps > 0:
        t0 = time.perf_counter()
        if pipeline.sft_data:
            chats = collected_chats(pipeline.sft_data)
            source = f"collected episodes ({pipeline.sft_data})"
        else:
            chats = expert_chats(
                args.env_id,
                pipeline.sft_episodes,
                max_turns=horizon,
                env_kwargs=env_kwargs,
                seed=args.seed,
                action_format=action_format,  # tool calls where RL acts through tools
            )
            source = "expert episodes"
        if chats and demo_format(chats) != action_format:
            raise ValueError(
                f"the SFT demonstrations ({source}) are {demo_format(chats) or 'text'} episodes but the run "
                f"acts with action_format {action_format or 'text'}; collect them with the run's format "
                "(agentgym collect ... --action-format tools)"
            )
        print(f"SFT on {len(chats)} {source}, {pipeline.sft_steps} steps", flush=True)
        sft = sft_stage(
            model,
            tokenizer,
            chats,
            pipeline,
            out / "sft",
            args.seed,
            callbacks=[] if args.disable_tqdm else [PhaseProgress("SFT", SFT_POSTFIX)],
            tools=env_tools(args.env_id, env_kwargs) if action_format == "tools" else None,
            # RL's precision: the process has one accelerator state, which refuses a second mixed precision
            bf16=bool(args.bf16),
            fp16=bool(args.fp16),
        )
        sft_path = out / "sft-model"
        # Through the trainer: the full weights under FSDP / ZeRO-3 (not the main process's shard), written once.
        save_trained_model(sft, tokenizer, sft_path, tiny_source=model_path)
        if sft.is_deepspeed_enabled:  # accelerate takes one DeepSpeed plugin per process state: RL's starts afresh
            from accelerate.state import AcceleratorState

            AcceleratorState._reset_state()
        del sft  # its wrapped model and optimiser state
        # Reload, so that the model names the SFT checkpoint: TRL builds the KL reference from that path.
        model_path = str(sft_path)
        model, tokenizer = load_model(model_path, dtype)
        stage("sft", t0)

    # the same held-out episodes for the random policy, before RL and after RL
    episodes = {
        "split": pipeline.eval_split,
        "num_tasks": pipeline.eval_tasks,
        "episodes_per_task": pipeline.eval_episodes_per_task,
        "max_turns": horizon,
        "env_kwargs": env_kwargs,
        "seed": args.seed,
    }

    def evaluate(description: str) -> Any:
        return evaluate_stage(model, tokenizer, args.env_id, pipeline, args, horizon, description=description)

    # 3. before RL, and the random policy under the same max turns
    before = random = None
    if pipeline.eval_tasks:
        t0 = time.perf_counter()
        random = evaluate_random(args.env_id, actions=pipeline.random_actions, **episodes)
        with on_training_device(model):
            before = evaluate("eval before RL")
        print(_row("random policy", random), flush=True)
        print(_row("before RL", before), flush=True)
        stage("eval before", t0)

    # 4. multi-turn RL (GRPO or PPO) with the max-turn scheduler, or RFT / DPO (`offline_stages`)
    t0 = time.perf_counter()
    if pipeline.algorithm in OFFLINE:
        from agentgym_train.pipeline.offline_stages import STAGES

        if pipeline.algorithm in STAGES:
            progress = [] if args.disable_tqdm else [PhaseProgress(pipeline.algorithm.upper(), SFT_POSTFIX)]
            model, figures = STAGES[pipeline.algorithm](pipeline, args, model, tokenizer, out, horizon, progress)
            results.update(figures)
            model.save_pretrained(out / f"{pipeline.algorithm}-model")
            tokenizer.save_pretrained(out / f"{pipeline.algorithm}-model")
            stage(pipeline.algorithm, t0)
    else:
        scheduler = MaxTurnScheduler.stages(pipeline.max_turn_schedule, pipeline.max_turn_every)
        trained, trainer = rl_stage(
            ALGORITHMS[pipeline.algorithm],
            model,
            tokenizer,
            args,
            out / "rl-model",
            callbacks=[scheduler],
            resume_from_checkpoint=resume_target(args.resume_from_checkpoint, args.output_dir),
            progress=None if args.disable_tqdm else PhaseProgress(pipeline.algorithm.upper(), RL_POSTFIX),
        )
        if trained is None:
            # What follows (plot, evaluation, results.json) is the main process's alone and makes no collective
            # call: the others end here instead of waiting in a barrier that a long evaluation would time out.
            return results
        model = trained
        log_history = trainer.state.log_history
        _plot(log_history, out / "training.png", pipeline.algorithm)
        results["log_history"] = log_history
        stage(pipeline.algorithm, t0)

    # 5. after RL (the SFT stage alone: its evaluation is the one above)
    if pipeline.eval_tasks and before is not None and random is not None and pipeline.algorithm != "sft":
        t0 = time.perf_counter()
        after = evaluate("eval after RL")
        diff = paired_difference(before, after)
        results.update(random=random.to_dict(), before=before.to_dict(), after=after.to_dict(), difference=asdict(diff))
        stage("eval after", t0)
        print()
        print(f"held-out {pipeline.eval_split} tasks of {args.env_id}, max {horizon} turns, 95% intervals:")
        print(_row("random policy", random))
        print(_row("before RL", before))
        print(_row("after RL", after))
        verdict = (
            "RL raised success beyond the interval"
            if diff.low > 0
            else "RL lowered success"
            if diff.high < 0
            else "no significant change"
        )
        print(f"after - before: success {diff.mean:+.3f} (95% CI {diff.low:+.3f} .. {diff.high:+.3f}): {verdict}")
    elif pipeline.eval_tasks and before is not None and random is not None:  # sft: the model after SFT
        results.update(random=random.to_dict(), before=before.to_dict())

    results["wall_time_s"] = round(time.perf_counter() - started, 1)
    results["config"] = {"pipeline": asdict(pipeline), "grpo": {k: str(v) for k, v in args.to_dict().items()}}
    (out / "results.json").write_text(json.dumps(results, indent=2, default=str) + "\n")
    plot = "" if pipeline.algorithm in OFFLINE else f" and {out / 'training.png'}"
    print(f"wrote {out / 'results.json'}{plot} ({results['wall_time_s']:.0f} s in all)")
    return results
