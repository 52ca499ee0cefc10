"""The pipeline's stages as functions: the policy, the SFT warm start, multi-turn RL (and saving what each
trained) and the evaluation, each driven by a `PipelineConfig` and the GRPO settings beside it. The pipeline
(`agentgym train`), the horizon experiment and the benchmarks call them, so each stage's settings are read
in one place. RFT and DPO, the pipeline's stages in place of online RL, are `offline_stages`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any


def build_policy(
    pipeline: Any,
    env_ids: Sequence[str],
    env_kwargs: dict[str, Any] | None,
    seed: int,
    work_dir: str | Path,
    dtype: Any = "float32",
) -> tuple[str, Any, Any]:
    """The policy a run starts from: a tiny model built for `env_ids` (`pipeline.model == "tiny"`, under
    `work_dir/tiny-model`), else `pipeline.model` (a path or hub id), loaded as `dtype`.

    Returns:
        The model's path, the model and its tokenizer.
    """
    from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model, load_model

    model_path = pipeline.model
    if model_path == "tiny":
        tiny = TinyModelConfig(
            env_ids=list(env_ids),
            env_kwargs=env_kwargs,
            hidden_size=pipeline.tiny_hidden_size,
            num_hidden_layers=pipeline.tiny_layers,
            num_attention_heads=pipeline.tiny_heads,
            num_key_value_heads=max(1, pipeline.tiny_heads // 2),
            intermediate_size=pipeline.tiny_intermediate_size,
            seed=seed,
        )
        model_path = str(build_tiny_model(Path(work_dir) / "tiny-model", tiny))
    model, tokenizer = load_model(model_path, dtype)
    return model_path, model, tokenizer


def sft_stage(
    model: Any,
    tokenizer: Any,
    chats: list[list[dict[str, str]]],
    pipeline: Any,
    output_dir: str | Path,
    seed: int,
    **options: Any,
) -> Any:
    """Fine-tune `model` on `chats` in place with the pipeline's SFT settings (`sft_steps`, `sft_batch_size`,
    `sft_learning_rate`); `options` go to `trainers.sft.run_sft` (callbacks, bf16, ...). Returns the trainer."""
    from agentgym_train.trainers.sft import run_sft

    return run_sft(
        model,
        tokenizer,
        chats,
        str(output_dir),
        max_steps=pipeline.sft_steps,
        batch_size=pipeline.sft_batch_size,
        learning_rate=pipeline.sft_learning_rate,
        seed=seed,
        **options,
    )


def rl_stage(
    trainer_class: type,
    model: Any,
    tokenizer: Any,
    args: Any,
    path: Path,
    *,
    callbacks: list[Any],
    resume_from_checkpoint: str | None = None,
    progress: Any = None,
    **trainer_options: Any,
) -> tuple[Any | None, Any]:
    """Multi-turn RL: train `model` with `trainer_class` (GRPO, PPO or a subclass) and `args`, under `callbacks`
    (the max-turn scheduler), then save the policy to `path` (`save_rl_model`); call it on every process.

    Args:
        trainer_class: The trainer, built as `trainer_class(model, args, processing_class=tokenizer, ...)`.
        model: The policy (the SFT stage's, or the start model).
        tokenizer: Its tokenizer.
        args: The trainer's config (`MultiTurnGRPOConfig` or `MultiTurnPPOConfig`).
        path: Where the trained policy goes.
        callbacks: The trainer's callbacks.
        resume_from_checkpoint: A checkpoint folder to continue from (None: from the start).
        progress: A callback shown in place of transformers' progress bar (None: keep that bar).
        **trainer_options: More keyword arguments of the trainer (a `train_dataset`).

    Returns:
        The trained model to evaluate (None on the processes other than the main one), and the trainer.
    """
    from transformers.trainer_callback import ProgressCallback

    trainer = trainer_class(model, args, processing_class=tokenizer, callbacks=callbacks, **trainer_options)
    if progress is not None:
        trainer.remove_callback(ProgressCallback)
        trainer.add_callback(progress)
    trainer.train(resume_from_checkpoint=resume_from_checkpoint)
    trainer.engine.close()
    return save_rl_model(trainer, tokenizer, path), trainer


def save_trained_model(trainer: Any, tokenizer: Any, path: Path, tiny_source: str | Path | None = None) -> None:
    """Save a trainer's model to `path` as one full checkpoint; call it on every process.

    `trainer.save_model` gathers the full weights under FSDP and DeepSpeed ZeRO-3 (a collective call)
    and the main process alone writes them, with the tokenizer and, when `tiny_source` is a tiny
    model's directory, its marker file. Every process returns after the files are complete.
    """
    from agentgym_train.models.tiny import TINY_MARKER

    trainer.save_model(str(path))
    if trainer.is_world_process_zero():
        tokenizer.save_pretrained(str(path))
        if tiny_source is not None and (Path(tiny_source) / TINY_MARKER).is_file():
            (path / TINY_MARKER).write_text((Path(tiny_source) / TINY_MARKER).read_text())
    trainer.accelerator.wait_for_everyone()  # no process reads `path` before the main one has written it


def save_rl_model(trainer: Any, tokenizer: Any, path: Path) -> Any | None:
    """Save the trained policy to `path`; call it on every process.

    Under FSDP and DeepSpeed ZeRO-3 saving gathers the full weights, a collective call (the main
    process writes them). Returns, on the main process, the model to evaluate on the training
    device in the training dtype (reloaded from `path` when the trainer sharded the model's own
    weights in place); None on the others.
    """
    from agentgym_train.models.tiny import load_model, training_dtype

    save_trained_model(trainer, tokenizer, path)
    if not trainer.is_world_process_zero():
        return None
    if trainer.is_deepspeed_enabled:
        from transformers.integrations.deepspeed import unset_hf_deepspeed_config

        unset_hf_deepspeed_config()  # a plain load here, not ZeRO-3's partitioned one (a collective call)
    if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
        return load_model(path, training_dtype(trainer.args))[0].to(trainer.accelerator.device)
    return trainer.model


def evaluate_stage(
    model: Any, tokenizer: Any, env_id: str, pipeline: Any, args: Any, max_turns: int | None, **options: Any
) -> Any:
    """`evaluate_model` on the pipeline's held-out episodes (`eval_split`, `eval_tasks`,
    `eval_episodes_per_task`, `eval_temperature`) with the run's reply budgets, env kwargs and seed (`args`);
    `options` go to `evaluate_model` (description, progress). Returns its `EvalResult`."""
    from agentgym_train.evaluation.evaluate import evaluate_model

    return evaluate_model(
        model,
        tokenizer,
        env_id,
        split=pipeline.eval_split,
        num_tasks=pipeline.eval_tasks,
        episodes_per_task=pipeline.eval_episodes_per_task,
        max_turns=max_turns,
        max_completion_length=args.max_completion_length,
        max_turn_tokens=args.max_turn_tokens,
        temperature=pipeline.eval_temperature,
        env_kwargs=args.env_kwargs or {},
        action_format=getattr(args, "action_format", None),
        context=getattr(args, "context", None),  # evaluated with the context it trains with
        seed=args.seed,
        **options,
    )
