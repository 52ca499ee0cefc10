"""The trainers, each beside its config: multi-turn GRPO (`grpo`, its config in `grpo_config`), PPO with a
critic (`ppo`, `critic`), SFT (`sft`), rejection-sampling fine-tuning (`rft`), DPO on episode pairs (`dpo`); and what
the GRPO trainer keeps out of its loss: truncated replies and episodes (`truncation`), zero-variance groups and vLLM's
importance-sampling masks (`sampling`)."""
