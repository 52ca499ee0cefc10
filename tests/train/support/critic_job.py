"""One PPO step with a full critic under `accelerate launch` on 2 CPU processes (run by test_critic_sharded.py).

The ranks' episodes end after different numbers of turns (max_turns 1 on rank 0, 3 on rank 1). Each rank
reports how its critic was prepared (wrapper, per-parameter global shapes and local numels, dtypes, its
AdamW moments' local numels); the step saves checkpoint-1. Then each rank fits the critic once more on
its own synthetic batch (a different width per rank), and writes the full critic before that fit, the
gradient the fit used (gathered), and its batch, so that the test can recompute the gradient on one
process. Last, the critic and its optimiser are restored from checkpoint-1 and compared with its files.

Usage: critic_job.py MODEL_DIR OUTPUT_DIR  (writes OUTPUT_DIR/rank-<i>.json and rank-<i>.pt)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def main(model_dir: str, output_dir: str) -> None:
    import torch

    fsdp = os.environ.get("ACCELERATE_USE_FSDP", "false") == "true"
    if fsdp:
        from sharded_job import treat_cpu_processes_as_gpus

        treat_cpu_processes_as_gpus()  # else accelerate falls back to DDP on CPU processes
    from safetensors.torch import load_file
    from sharded_job import by_length
    from torch.distributed.tensor import DTensor
    from train_helpers import BABYAI, ENV_KWARGS

    from agentgym_train.models.tiny import load_model
    from agentgym_train.trainers.critic import load_critic
    from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

    torch.set_num_threads(1)
    out = Path(output_dir)
    model, tokenizer = load_model(model_dir)
    args = MultiTurnPPOConfig(
        output_dir=output_dir,
        env_id=BABYAI,
        env_kwargs=ENV_KWARGS,
        max_turns=3,
        max_turn_tokens=6,
        max_completion_length=256,
        num_generations=4,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        value_learning_rate=1e-2,
        max_steps=1,
        temperature=1.5,
        logging_steps=1,
        report_to="none",
        save_strategy="steps",
        save_steps=1,
        activation_checkpointing=False,
        disable_tqdm=True,
        seed=0,
        critic="full",
        use_cpu=not fsdp,  # DDP over CPU processes (transformers' process group is one process without it)
    )
    trainer = MultiTurnPPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
    rank = trainer.accelerator.process_index
    trainer.engine.max_turns = 1 + 2 * rank
    critic = trainer.critic
    compute_dtypes = set()  # what the critic's decoder layers compute in (FSDP2's mixed precision casts)
    critic.module.model.layers[0].register_forward_pre_hook(lambda _, a: compute_dtypes.add(str(a[0].dtype)))
    initial = critic.state()  # a snapshot (a collective under FSDP2)

    trainer.train()
    trainer.engine.close()
    names = [n for n, p in critic.module.named_parameters() if p.requires_grad]
    parameters = critic.trainable_parameters()
    moments = [trainer.value_optimizer.state[p]["exp_avg"] for p in parameters]
    after_step = critic.state()

    # one more fit on this rank's own batch (8 rows: two micro-batches of 4; width 12 on rank 0, 17 on rank 1)
    generator = torch.Generator().manual_seed(100 + rank)
    rows, width = 8, 12 + 5 * rank
    length = width - 4
    ids = torch.randint(0, tokenizer.vocab_size, (rows, width), generator=generator)
    attention = torch.ones(rows, width, dtype=torch.long)
    attention[::2, :2] = 0  # left padding on every other row
    mask = (torch.rand(rows, length, generator=generator) < 0.7).float()
    targets = torch.randn(rows, length, generator=generator)
    trainer.args.value_epochs = 1
    trainer._fit_values(ids, attention, targets, mask)
    gradients = {
        n: p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
        for n, p in zip(names, parameters, strict=True)
    }
    after_fit = critic.state()

    checkpoint = out / "checkpoint-1" / "critic"
    load_critic(critic, trainer.value_optimizer, checkpoint)
    saved = load_file(str(checkpoint / "critic.safetensors"))
    saved_optimizer = torch.load(checkpoint / "optimizer.pt", weights_only=True)
    restored, restored_optimizer = critic.state(), critic.optimizer_state(trainer.value_optimizer)
    torch.save(
        {
            "initial": initial,
            "after_step": after_step,
            "batch": {"ids": ids, "attention": attention, "mask": mask, "targets": targets},
            "gradients": {n: g.detach().cpu() for n, g in gradients.items()},
        },
        out / f"rank-{rank}.pt",
    )
    report = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "global_step": trainer.state.global_step,
        "turns": [e.turns for e in trainer.last_episodes],
        "value_losses": trainer._metrics["train"]["value/loss"][:1],
        "wrapper": type(critic.model).__name__,
        "synchronised": critic.synchronised,
        "compute_dtypes": sorted(compute_dtypes),
        "parameters": {
            n: {
                "shape": list(p.shape),
                "local_numel": p.to_local().numel() if isinstance(p, DTensor) else p.numel(),
                "dtensor": isinstance(p, DTensor),
                "dtype": str(p.dtype),
            }
            for n, p in zip(names, parameters, strict=True)
        },
        "moment_local_numels": [m.to_local().numel() if isinstance(m, DTensor) else m.numel() for m in moments],
        "fit_changed_weights": any(not torch.equal(v, saved[k]) for k, v in after_fit.items()),
        "restored_weights": restored.keys() == saved.keys()
        and all(torch.equal(v, saved[k]) for k, v in restored.items()),
        "restored_moments": len(restored_optimizer["state"]) == len(parameters)
        and all(
            torch.equal(s["exp_avg"], saved_optimizer["state"][i]["exp_avg"])
            for i, s in restored_optimizer["state"].items()
        ),
    }
    (out / f"rank-{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(*sys.argv[1:3])
    close_process_group()
