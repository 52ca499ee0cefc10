"""GRPO steps with `bf16: true` at lr 1e-6 under plain DDP (run by test_dtype.py): the policy is loaded as the
pipeline loads it (`load_model(path, training_dtype(args))`). Every rank records the dtypes of the weights, of
AdamW's moments and of a decoder layer's output during training, and, per weight tensor, how many elements got a
gradient (a nonzero second moment) and how many of those moved; it writes OUT/rank-<i>.json.

With PIPELINE `pipeline` it runs the pipeline (SFT, evaluation, one GRPO step, evaluation) with `bf16: true`
instead, and records the dtypes of the RL trainer's policy and of every evaluated model.

Usage: dtype_job.py MODEL_DIR OUTPUT_DIR STEPS [pipeline]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def main(model_dir: str, output_dir: str, steps: str, mode: str = "steps") -> None:
    import torch
    import transformers.training_args
    from train_helpers import grpo_args

    from agentgym_train.models.tiny import load_model, training_dtype
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    torch.set_num_threads(1)
    # transformers takes bf16 only on a GPU; torch computes it on a CPU, as the GPU stand-in tests do
    transformers.training_args.is_torch_bf16_gpu_available = lambda: True
    args = grpo_args(
        Path(output_dir),
        bf16=True,
        learning_rate=1e-6,
        weight_decay=0.0,  # only the gradient moves a weight
        max_steps=int(steps),
        per_device_train_batch_size=4,
        num_generations=4,
        temperature=1.5,
    )
    if mode == "pipeline":
        return run_pipeline(model_dir, output_dir, args)
    model, tokenizer = load_model(model_dir, training_dtype(args))
    initial = {name: p.detach().clone() for name, p in model.named_parameters()}
    computed: set[str] = set()
    model.model.layers[0].mlp.register_forward_hook(lambda _m, _i, out: computed.add(str(out.dtype)))
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
    rank = trainer.accelerator.process_index
    trainer.train()
    trainer.engine.close()
    policy = trainer.accelerator.unwrap_model(trainer.model)
    moments: set[str] = set()
    weights: dict[str, Any] = {}
    for name, p in policy.named_parameters():
        state = trainer.optimizer.state.get(p, {})
        moments |= {str(state[k].dtype) for k in ("exp_avg", "exp_avg_sq") if k in state}
        got_gradient = state["exp_avg_sq"] > 0 if "exp_avg_sq" in state else torch.zeros_like(p, dtype=torch.bool)
        moved = p.detach() != initial[name]
        weights[name] = {
            "gradient": int(got_gradient.sum()),
            "moved_with_gradient": int((moved & got_gradient).sum()),
            "moved_without_gradient": int((moved & ~got_gradient).sum()),
            "checksum": float(p.detach().double().abs().sum()),
        }
    report = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "distributed_type": trainer.accelerator.distributed_type.value,
        "mixed_precision": trainer.accelerator.mixed_precision,
        "global_step": trainer.state.global_step,
        "load_dtype": str(training_dtype(args)),
        "weight_dtypes": sorted({str(p.dtype) for p in policy.parameters()}),
        "moment_dtypes": sorted(moments),
        "computed_in": sorted(computed),
        "weights": weights,
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


def run_pipeline(model_dir: str, output_dir: str, args: Any) -> None:
    """`agentgym train`'s pipeline with `args`, recording the dtypes the RL policy and every evaluated model had."""
    import os

    import agentgym_train.evaluation.evaluate as evaluation
    from agentgym_train import pipeline
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    report: dict[str, Any] = {"rank": int(os.environ["RANK"]), "evaluated": []}
    evaluate_model, train = evaluation.evaluate_model, MultiTurnGRPOTrainer.train

    def recording_evaluate(model: Any, *a: Any, **kw: Any) -> Any:
        report["evaluated"].append(sorted({str(p.dtype) for p in model.parameters()}))
        return evaluate_model(model, *a, **kw)

    def recording_train(self: MultiTurnGRPOTrainer, *a: Any, **kw: Any) -> Any:
        report["policy_dtypes"] = sorted({str(p.dtype) for p in self.model.parameters()})
        report["mixed_precision"] = self.accelerator.mixed_precision
        report["distributed_type"] = self.accelerator.distributed_type.value
        return train(self, *a, **kw)

    evaluation.evaluate_model, MultiTurnGRPOTrainer.train = recording_evaluate, recording_train
    config = pipeline.PipelineConfig(
        model=model_dir, sft_episodes=8, sft_steps=2, sft_batch_size=4, max_turn_schedule=[2], eval_tasks=2
    )
    pipeline.run(config, args)
    Path(output_dir, f"rank-{report['rank']}.json").write_text(json.dumps(report))


def by_length(completions: list[Any], **kwargs: Any) -> list[float]:
    """A reward that differs inside groups (a random model never succeeds), so gradients flow."""
    return [float(len(c)) for c in completions]


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(*sys.argv[1:5])
    close_process_group()
