"""Shared settings of the trainer tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

BABYAI = "AgentGym/BabyAI-GoToLocal-v0"
ENV_KWARGS = {"show_actions": False}


def grpo_args(output_dir: Path, **overrides: Any) -> Any:
    """A small CPU `MultiTurnGRPOConfig` for BabyAI (overridable)."""
    from agentgym_train.trainers.grpo import MultiTurnGRPOConfig

    options = {
        "env_id": BABYAI,
        "env_kwargs": ENV_KWARGS,
        "max_turns": 3,
        "max_turn_tokens": 6,
        "max_completion_length": 256,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "learning_rate": 1e-3,
        "max_steps": 2,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "activation_checkpointing": False,
        "disable_tqdm": True,
        "seed": 0,
        **overrides,
    }
    return MultiTurnGRPOConfig(output_dir=str(output_dir), **options)


def close_process_group() -> None:
    """The end of a multi-process job (`tests/train/*_job.py`): waits for every process, then ends the process
    group. A gloo group left to the interpreter's exit aborts a process now and then (`terminate called without
    an active exception`: its threads are still joinable when the C++ statics go), and a process that leaves
    first tears down the connections of one still in a collective."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
