"""Async training on 2 processes (run by test_async_training.py): each rank starts its own CPU generation worker
and trains 3 GRPO steps on the parity toy task with max_staleness 1. Each rank writes to OUT/rank-<i>.json the
weight syncs it sent, the batches it consumed (index, trainer version, stale groups, tasks), how far its weights
moved, whether its worker is still alive, and a checksum of its final weights."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(model_dir: str, output_dir: str) -> None:
    import torch
    import toy_env
    from train_helpers import grpo_args

    from agentgym_train.models.tiny import load_model
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    torch.set_num_threads(1)
    model, tokenizer = load_model(model_dir)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    args = grpo_args(
        Path(output_dir),
        env_id=toy_env.ENV_ID,
        env_kwargs=None,
        max_turns=2,
        max_turn_tokens=4,
        max_completion_length=96,
        learning_rate=5e-3,
        max_steps=3,
        async_generation=True,
        max_staleness=1,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    generation = trainer.async_generation
    sent = []
    send = None

    def count(version, state_dict):
        sent.append(version)
        return send(version, state_dict)

    start = generation._start

    def start_and_count():
        nonlocal send
        start()
        send = generation.worker.send_weights
        generation.worker.send_weights = count
        report["process"] = generation.worker.process

    report: dict = {}
    generation._start = start_and_count
    trainer.train()
    after = trainer.accelerator.unwrap_model(trainer.model).state_dict()
    rank = trainer.accelerator.process_index
    history = generation.history
    out = {
        "syncs": len(sent),
        "indices": [h["index"] for h in history],
        "versions": [h["trainer_version"] for h in history],
        "stale": [h["stale_groups"] for h in history],
        "tasks": [h["tasks"] for h in history],
        "moved": max((after[k] - before[k]).abs().max().item() for k in before),
        "checksum": sum(v.double().sum().item() for v in after.values()),
        "worker_alive": report["process"].is_alive(),
        "success": [row.get("episode/success") for row in trainer.state.log_history],
        "reward_std": [row["reward_std"] for row in trainer.state.log_history if "reward_std" in row],
        "grad_norm": [row["grad_norm"] for row in trainer.state.log_history if "grad_norm" in row],
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(out))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(sys.argv[1], sys.argv[2])
    close_process_group()
