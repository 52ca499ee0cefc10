"""The pipeline's RFT and DPO stages (`agentgym train --algorithm rft|dpo`), in place of online RL.

Both start from the model the pipeline holds after its SFT stage and return the trained model and
figures for `results.json`:

- `rft_stage`: `RejectionSamplingTrainer` rounds (sample k episodes per task from the current model,
  keep the successful ones, fine-tune); the kept fraction per round.
- `dpo_stage`: episodes of the current model on training tasks (`agentgym collect`'s format, written to
  `dpo-train.jsonl` and resumable), pairs of a successful and a failed episode of one task, DPO with
  the env's turns masked (plus an NLL term on the chosen replies, `dpo_sft_weight`); the chosen-over-rejected
  log-ratio on held-out pairs (training tasks after those trained on) before and after, with a paired
  95% interval.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch


def _lora(pipeline: Any) -> Any:
    if not pipeline.lora_r:
        return None
    from peft import LoraConfig

    return LoraConfig(r=pipeline.lora_r, lora_alpha=2 * pipeline.lora_r, target_modules="all-linear", lora_dropout=0.0)


def _trainer_options(args: Any, steps: int) -> dict[str, Any]:
    """The fine-tuning settings both stages share with the pipeline's SFT stage."""
    cuda = torch.cuda.is_available()
    return {
        "max_steps": steps,
        "lr_scheduler_type": "constant",
        "weight_decay": 0.0,
        "logging_steps": max(1, steps // 10),
        "save_strategy": "no",
        "report_to": "none",
        "max_length": None,
        "disable_tqdm": True,
        "bf16": cuda,
        "activation_checkpointing": False,
        "dataloader_pin_memory": cuda,
        "seed": args.seed,
    }


def _merged(model: Any) -> Any:
    """The plain model to evaluate and save (a LoRA adapter merged into its weights)."""
    return model.merge_and_unload() if hasattr(model, "merge_and_unload") else model


def rft_stage(
    pipeline: Any, args: Any, model: Any, tokenizer: Any, out: Path, horizon: int, callbacks: list[Any]
) -> tuple[Any, dict[str, Any]]:
    """Rejection-sampling rounds from `model`; returns the trained model and `{"rft_rounds": [...]}`."""
    from agentgym_train.trainers.rft import RejectionSamplingTrainer, RFTConfig

    config = RFTConfig(
        output_dir=str(out / "rft"),
        env_id=args.env_id,
        env_kwargs=args.env_kwargs,
        rounds=pipeline.rft_rounds,
        tasks_per_round=pipeline.rft_tasks,
        samples_per_task=pipeline.rft_samples_per_task,
        keep=pipeline.rft_keep,
        max_turns=horizon,
        max_turn_tokens=args.max_turn_tokens,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        per_device_train_batch_size=pipeline.rft_batch_size,
        learning_rate=pipeline.rft_learning_rate,
        **_trainer_options(args, pipeline.rft_steps),
    )
    trainer = RejectionSamplingTrainer(
        model, config, processing_class=tokenizer, callbacks=callbacks, peft_config=_lora(pipeline)
    )
    rounds = trainer.train()
    return _merged(trainer.model), {"rft_rounds": rounds}


def dpo_stage(
    pipeline: Any, args: Any, model: Any, tokenizer: Any, out: Path, horizon: int, callbacks: list[Any]
) -> tuple[Any, dict[str, Any]]:
    """DPO on pairs of the model's own episodes; returns the trained model and the pair figures."""
    from transformers.trainer_callback import PrinterCallback
    from trl import DPOConfig

    from agentgym_train.collect import ModelPolicy, collect, read_records
    from agentgym_train.evaluation.evaluate import estimate, split_tasks
    from agentgym_train.trainers.dpo import MultiTurnDPOTrainer, episode_pairs, pair_dataset, pair_logps

    policy = ModelPolicy(
        model,
        tokenizer,
        max_turn_tokens=args.max_turn_tokens,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
    )
    common = {
        "episodes_per_task": pipeline.dpo_samples_per_task,
        "max_turns": horizon,
        "env_kwargs": args.env_kwargs,
        "seed": args.seed,
        "policy_name": "model",
        "progress": not args.disable_tqdm,
    }
    torch.manual_seed(args.seed)
    collect(policy, args.env_id, out / "dpo-train.jsonl", split="train", num_tasks=pipeline.dpo_tasks, **common)
    # held-out pairs: the training tasks after those trained on (the evaluation split's tasks stay unseen)
    held_out = split_tasks(args.env_id, "train", pipeline.dpo_tasks + pipeline.dpo_heldout_tasks, args.env_kwargs)
    held_out = held_out[pipeline.dpo_tasks :]
    collect(policy, args.env_id, out / "dpo-heldout.jsonl", split="train", task_ids=held_out, **common)
    train_pairs = episode_pairs(read_records(out / "dpo-train.jsonl"), pipeline.dpo_pairs_per_task)
    heldout_pairs = episode_pairs(read_records(out / "dpo-heldout.jsonl"), pipeline.dpo_pairs_per_task)
    print(f"DPO on {len(train_pairs)} pairs ({len(heldout_pairs)} held-out pairs)", flush=True)
    figures: dict[str, Any] = {"dpo_pairs": len(train_pairs), "dpo_heldout_pairs": len(heldout_pairs)}
    if not train_pairs:
        print("no task had both a successful and a failed episode: nothing to train DPO on", flush=True)
        return model, figures
    heldout = pair_dataset(tokenizer, heldout_pairs) if heldout_pairs else None

    def margins(m: Any) -> list[float]:
        if heldout is None:
            return []
        chosen, rejected = pair_logps(m, heldout)
        return [c - r for c, r in zip(chosen, rejected, strict=True)]

    before = margins(model)
    config = DPOConfig(
        output_dir=str(out / "dpo"),
        per_device_train_batch_size=pipeline.dpo_batch_size,
        learning_rate=pipeline.dpo_learning_rate,
        beta=pipeline.dpo_beta,
        # DPO alone lowers the chosen episodes' likelihood too (both sides fall, the rejected faster); an NLL term
        # on the chosen replies (RPO) keeps them likely
        loss_type=["sigmoid", "sft"] if pipeline.dpo_sft_weight > 0 else ["sigmoid"],
        loss_weights=[1.0, pipeline.dpo_sft_weight] if pipeline.dpo_sft_weight > 0 else [1.0],
        precompute_ref_log_probs=True,
        **_trainer_options(args, pipeline.dpo_steps),
    )
    trainer = MultiTurnDPOTrainer(
        model,
        args=config,
        train_dataset=pair_dataset(tokenizer, train_pairs),
        processing_class=tokenizer,
        callbacks=callbacks,
        peft_config=_lora(pipeline),
    )
    if callbacks:
        trainer.remove_callback(PrinterCallback)  # the pipeline's progress bar, not printed log dicts
    trainer.train()
    trained = _merged(trainer.model)
    after = margins(trained)
    if before:
        change = estimate([b - a for a, b in zip(before, after, strict=True)])
        figures["heldout_logratio"] = {
            "before": sum(before) / len(before),
            "after": sum(after) / len(after),
            "change": {"mean": change.mean, "low": change.low, "high": change.high, "n": change.n},
        }
        print(
            f"held-out log pi(chosen)/pi(rejected): {figures['heldout_logratio']['before']:+.2f} -> "
            f"{figures['heldout_logratio']['after']:+.2f} (change {change.mean:+.2f}, 95% CI "
            f"{change.low:+.2f} .. {change.high:+.2f}, {change.n} pairs)",
            flush=True,
        )
    return trained, figures


STAGES = {"rft": rft_stage, "dpo": dpo_stage}
