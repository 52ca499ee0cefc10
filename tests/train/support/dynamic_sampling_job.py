"""Dynamic sampling on 2 processes (run by test_dynamic_sampling.py): 3 groups of 4 over 2 ranks of 6 rows, so the
middle group straddles the ranks (rank 0's rows 4-5, rank 1's rows 0-1). Its task returns 1 throughout (flat);
elsewhere returns alternate 0, 1 within a group. Each rank writes the tasks it trained on, their advantages and
the sampling metrics to OUT/rank-<i>.json."""

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
    args = grpo_args(Path(output_dir), per_device_train_batch_size=6, max_turns=2, dynamic_sampling=True)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    trainer.model.train()  # as in training: dynamic sampling leaves evaluation alone
    rank = trainer.accelerator.process_index
    batch = next(iter(trainer.get_train_dataloader()))
    flat = batch[4 if rank == 0 else 0]["task_id"]
    run, calls = trainer.engine.run, []

    def scripted(tasks, *a, **k):
        episodes = run(tasks, *a, **k)
        for i, episode in enumerate(episodes):  # every rank's share starts at an even global row
            episode.episode_return = 1.0 if episode.task.task_id == flat else float(i % 2)
            episode.success = episode.episode_return == 1.0  # flat by success (the default metric) as by reward
        calls.append(len(tasks))
        return episodes

    trainer.engine.run = scripted
    out = trainer._generate_and_score_completions(batch)
    trainer.engine.close()
    report = {
        "flat": flat,
        "calls": calls,
        "tasks": [e.task.task_id for e in trainer.last_episodes],
        "rows": [row["task_id"] for row in batch],
        "advantages": out["advantages"].tolist(),
        "metrics": {k: v[-1] for k, v in trainer._metrics["train"].items() if k.startswith("sampling/")},
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(sys.argv[1], sys.argv[2])
    close_process_group()
