"""The pipeline (SFT, evaluation, GRPO, evaluation) under `accelerate launch` (run by test_sharded.py).

Every rank records which model directories it wrote (`save_pretrained` calls), the full weights its SFT
trainer ended with (gathered from the shards; the main process writes them to OUT/sft-trained.pt), the
dtype of the RL trainer's policy, and what each evaluation ran on. Every rank writes OUT/rank-<i>.json.

Usage: pipeline_job.py MODEL_DIR OUTPUT_DIR PRECISION  (PRECISION: bf16 or fp32)
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def main(model_dir: str, output_dir: str, precision: str) -> None:
    import torch
    from sharded_job import treat_cpu_processes_as_gpus
    from train_helpers import grpo_args
    from transformers import PreTrainedModel

    import agentgym_train.evaluation.evaluate as evaluation
    import agentgym_train.trainers.sft as sft
    from agentgym_train import pipeline
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    treat_cpu_processes_as_gpus()
    torch.set_num_threads(1)
    out = Path(output_dir)
    rank = int(os.environ["RANK"])
    report: dict[str, Any] = {"rank": rank, "saved": [], "evaluated": [], "policy_dtype": None}

    save_pretrained = PreTrainedModel.save_pretrained

    def recording_save(self: Any, save_directory: Any, *args: Any, **kwargs: Any) -> Any:
        report["saved"].append(Path(save_directory).name)
        return save_pretrained(self, save_directory, *args, **kwargs)

    run_sft = sft.run_sft

    def recording_sft(*args: Any, **kwargs: Any) -> Any:
        trainer = run_sft(*args, **kwargs)
        wrapped = trainer.model_wrapped if trainer.is_deepspeed_enabled else trainer.model  # DeepSpeed's engine
        state = trainer.accelerator.get_state_dict(wrapped)  # every rank gathers; the main one holds it
        if trainer.is_world_process_zero():
            torch.save({k: v.detach().cpu() for k, v in state.items()}, out / "sft-trained.pt")
        return trainer

    evaluate_model = evaluation.evaluate_model

    def recording_evaluate(model: Any, *args: Any, **kwargs: Any) -> Any:
        parameters = list(model.parameters())
        report["evaluated"].append(
            {
                "description": kwargs.get("description"),
                "devices": sorted({str(p.device) for p in parameters}),
                "dtypes": sorted({str(p.dtype) for p in parameters}),
                "parameter_types": sorted({type(p).__name__ for p in parameters}),
            }
        )
        return evaluate_model(model, *args, **kwargs)

    train = MultiTurnGRPOTrainer.train

    def recording_train(self: MultiTurnGRPOTrainer, *args: Any, **kwargs: Any) -> Any:
        report["policy_dtype"] = str(next(self.model.parameters()).dtype)
        report["device"] = str(self.accelerator.device)
        return train(self, *args, **kwargs)

    PreTrainedModel.save_pretrained = recording_save
    sft.run_sft = recording_sft
    evaluation.evaluate_model = recording_evaluate
    MultiTurnGRPOTrainer.train = recording_train

    config = pipeline.PipelineConfig(
        model=model_dir,
        sft_episodes=8,
        sft_steps=2,
        sft_batch_size=4,
        max_turn_schedule=[2],
        max_turn_every=1,
        eval_tasks=2,
    )
    if precision == "bf16":  # the CPU stand-ins for GPUs take bf16 as GPUs do (torch computes it on a CPU)
        import transformers.training_args

        transformers.training_args.is_torch_bf16_gpu_available = lambda: True
    args = grpo_args(out, per_device_train_batch_size=4, max_steps=1, temperature=1.5, bf16=precision == "bf16")
    pipeline.run(config, args)
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(*sys.argv[1:4])
    close_process_group()
