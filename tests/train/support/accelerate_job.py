"""Two GRPO steps under `accelerate launch` (run by test_accelerate.py): each process runs its own
envs, rank 0's episodes to 1 turn and rank 1's to 3, so the ranks' rollouts differ in length; every rank
writes what it played and a checksum of its weights to OUT/rank-<i>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(model_dir: str, output_dir: str) -> None:
    import torch
    from train_helpers import grpo_args

    from agentgym_train.models.tiny import load_model
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    torch.set_num_threads(1)
    model, tokenizer = load_model(model_dir)
    args = grpo_args(Path(output_dir), per_device_train_batch_size=4, num_generations=4, temperature=1.5)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
    rank = trainer.accelerator.process_index
    trainer.engine.max_turns = 1 + 2 * rank  # episodes of uneven length: rank 0's end after one turn
    trainer.train()
    trainer.engine.close()
    weights = sum(float(p.detach().double().abs().sum()) for p in trainer.model.parameters())
    report = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "global_step": trainer.state.global_step,
        "tasks": [e.task.task_id for e in trainer.last_episodes],
        "turns": [e.turns for e in trainer.last_episodes],
        "weights": weights,
        "log_history": trainer.state.log_history,
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


def by_length(completions, **kwargs):
    """A reward that differs inside groups (a random model never succeeds), so gradients flow."""
    return [float(len(c)) for c in completions]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(sys.argv[1], sys.argv[2])
    close_process_group()
