"""Two GRPO steps of turn samples under `accelerate launch` (run by test_turn_samples.py): rank 0's episodes end
after one turn, rank 1's run to three, so the ranks hold different numbers of turn samples; steps_per_generation 2
over one optimiser step each makes TRL want the old policy's logprobs, and beta > 0 the reference's. Every rank
writes its turn counts, batch sizes and a weight checksum to OUT/rank-<i>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(model_dir: str, output_dir: str) -> None:
    import torch
    from train_helpers import grpo_args

    from agentgym_train.models.tiny import load_model
    from agentgym_train.trainers import turn_samples
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    torch.set_num_threads(1)
    model, tokenizer = load_model(model_dir)
    args = grpo_args(
        Path(output_dir),
        sample_unit="turn",
        context="window:1",
        per_device_train_batch_size=4,
        steps_per_generation=2,
        gradient_accumulation_steps=1,
        num_generations=4,
        temperature=1.5,
        beta=0.01,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
    rank = trainer.accelerator.process_index
    trainer.engine.max_turns = 1 + 2 * rank  # rank 0's episodes end after one turn
    initial = checksum(trainer.model)
    rows, replies = [], []
    build = turn_samples.TurnSamples.batch

    def batch(self, output):
        out = build(self, output)
        rows.append(out["prompt_ids"].size(0))
        replies.append(len(self.rows))
        assert "old_per_token_logps" in out and "ref_per_token_logps" in out
        return out

    turn_samples.TurnSamples.batch = batch
    trainer.train()
    trainer.engine.close()
    report = {
        "rank": rank,
        "global_step": trainer.state.global_step,
        "turns": [e.turns for e in trainer.last_episodes],
        "rows": rows,
        "replies": replies,
        "initial_weights": initial,
        "weights": checksum(trainer.model),
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


def checksum(model) -> float:
    return sum(float(p.detach().double().abs().sum()) for p in model.parameters())


def by_length(completions, **kwargs):
    """A reward that differs inside groups (a random model never succeeds), so gradients flow."""
    return [float(len(c)) for c in completions]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(sys.argv[1], sys.argv[2])
    close_process_group()
