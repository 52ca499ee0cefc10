"""The pipeline's stages as functions: the policy, the SFT warm start and the evaluation, each driven by a
`PipelineConfig` and the GRPO settings beside it. The pipeline (`agentgym train`), the horizon experiment
and the benchmarks call them, so each stage's settings are read in one place.

RL itself is the trainers' (`trainers/`), RFT and DPO are `offline_stages`. Importing this module is light:
torch, transformers and TRL are imported when a stage runs.
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
    from agentgym_train.tiny import TinyModelConfig, build_tiny_model, load_model

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
        seed=args.seed,
        **options,
    )
