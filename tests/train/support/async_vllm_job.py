"""Async training through a vLLM server on 2 processes (run by test_async_vllm.py): the server is the test's
STAND-IN (`vllm_standin.StandInVLLM`, in the test's process), the weight transfer gloo instead of NCCL
(`vllm_standin.use_gloo_transfer`). Each rank trains 3 GRPO steps on BabyAI with max_staleness 1 and its own
generation thread, and writes to OUT/rank-<i>.json the pushes it took part in, the batches it consumed (index,
trainer version, stale groups, tasks), the versions its last batch's tokens recorded, and a checksum of its
final weights.

Usage: async_vllm_job.py MODEL_DIR OUT SERVER_URL GROUP_PORT
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(model_dir: str, output_dir: str, url: str, group_port: str) -> None:
    import pytest
    import torch
    from train_helpers import grpo_args
    from vllm_standin import use_gloo_transfer

    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout.versioned import ENV_VERSION
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    torch.set_num_threads(1)
    patch = pytest.MonkeyPatch()
    use_gloo_transfer(patch)
    model, tokenizer = load_model(model_dir)
    args = grpo_args(
        Path(output_dir),
        use_vllm=True,
        vllm_mode="server",
        vllm_server_base_url=url,
        vllm_group_port=int(group_port),
        async_generation=True,
        max_staleness=1,
        partial_rollout_tokens=3,
        max_steps=3,
        temperature=1.5,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    generation = trainer.async_generation
    pushes = []
    push = generation._push_to_server

    def count() -> None:
        push()
        pushes.append(generation.version)

    generation._push_to_server = count
    trainer.train()
    after = trainer.accelerator.unwrap_model(trainer.model).state_dict()
    rank = trainer.accelerator.process_index
    history = generation.history
    out = {
        "pushes": pushes,
        "indices": [h["index"] for h in history],
        "versions": [h["trainer_version"] for h in history],
        "stale": [h["stale_groups"] for h in history],
        "tasks": [h["tasks"] for h in history],
        "last_batch_versions": sorted({v for e in trainer.last_episodes for v in e.versions if v != ENV_VERSION}),
        "checksum": sum(v.double().sum().item() for v in after.values()),
        "thread_stopped": generation.worker is None,
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(out))
    patch.undo()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(*sys.argv[1:5])
    close_process_group()
