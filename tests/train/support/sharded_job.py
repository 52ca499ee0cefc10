"""One GRPO step under `accelerate launch` with sharded weights (run by test_sharded.py).

The two processes' episodes end after different numbers of turns (max_turns 1 on rank 0, 3 on
rank 1), so rank 0 runs out of live episodes first. Every rank counts the policy's forward passes,
saves a checkpoint and the final model as the pipeline does (both collective under FSDP); the main
process alone evaluates the saved model on two tasks. Every rank writes OUT/rank-<i>.json.

Usage: sharded_job.py MODEL_DIR OUTPUT_DIR SAMPLER [DS3_GATHER]  (DS3_GATHER: 1 (default) or 0, ZeRO-3's
ds3_gather_for_generation: 0 leaves the weights sharded during generation, so lockstep applies)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def treat_cpu_processes_as_gpus() -> None:
    """Stand-in for GPUs: accelerate applies its FSDP and DeepSpeed plugins only to GPU-like process groups
    (on CPU it silently falls back to DDP), so the CPU processes are reported as MULTI_GPU, over gloo, with
    the CPU as their device."""
    import torch
    from accelerate.state import PartialState
    from accelerate.utils import DistributedType

    prepare = PartialState._prepare_backend

    def prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        backend, kind = prepare(self, True, sagemaker_dp, backend)
        return (backend, DistributedType.MULTI_GPU) if kind == DistributedType.MULTI_CPU else (backend, kind)

    def set_device(self):
        self.device = self.device or torch.device("cpu")

    PartialState._prepare_backend = prepare_backend
    PartialState.set_device = set_device
    no_deepspeed_op_builds()


def no_deepspeed_op_builds() -> None:
    """DeepSpeed on CPU JIT-compiles its shared-memory collectives (deepspeed_shm_comm) with the C++
    compiler on first use: a minute on an idle machine, past the test's limit under load, and a build
    killed mid-way leaves torch's lock file behind, so every later DeepSpeed run waits on it forever
    (CI's three ZeRO tests hung so). Marking every op incompatible skips the build (and DeepSpeed's
    probe, which runs the compiler once per op); collectives then go over gloo, as the tests intend."""
    try:
        import deepspeed.ops
    except ImportError:
        return
    from deepspeed.ops.op_builder.all_ops import ALL_OPS

    deepspeed.ops.__compatible_ops__ = dict.fromkeys(ALL_OPS, False)


def main(model_dir: str, output_dir: str, sampler: str, ds3_gather: str = "1") -> None:
    import torch

    treat_cpu_processes_as_gpus()
    from train_helpers import grpo_args

    from agentgym_train.evaluation.evaluate import evaluate_model
    from agentgym_train.models.tiny import load_model
    from agentgym_train.pipeline.stages import save_rl_model
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    torch.set_num_threads(1)
    model, tokenizer = load_model(model_dir)
    forwards = [0]
    model.register_forward_pre_hook(lambda *_: forwards.__setitem__(0, forwards[0] + 1))
    args = grpo_args(
        Path(output_dir),
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=1,
        temperature=1.5,
        sampler=sampler,
        generation_chunk_size=3 if sampler == "generate" else None,
        save_strategy="steps",
        save_steps=1,
        ds3_gather_for_generation=ds3_gather == "1",
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
    rank = trainer.accelerator.process_index
    trainer.engine.max_turns = 1 + 2 * rank
    trainer.train()
    trainer.engine.close()
    trained = save_rl_model(trainer, tokenizer, Path(output_dir, "final"))
    evaluated = None
    if trained is not None:  # the main process: a plain model (no sharded tensors), evaluated alone
        kinds = sorted({type(p).__name__ for p in trained.parameters()})
        result = evaluate_model(
            trained, tokenizer, args.env_id, num_tasks=2, max_turns=2, max_turn_tokens=6, progress=False
        )
        evaluated = {"parameter_types": kinds, "episodes": len(result.episodes)}
    report = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "fsdp_version": trainer._dist.fsdp_version,
        "global_step": trainer.state.global_step,
        "turns": [e.turns for e in trainer.last_episodes],
        "forwards": forwards[0],
        "evaluated": evaluated,
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


def by_length(completions, **kwargs):
    """A reward that differs inside groups (a random model never succeeds), so gradients flow."""
    return [float(len(c)) for c in completions]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(*sys.argv[1:5])
    close_process_group()
