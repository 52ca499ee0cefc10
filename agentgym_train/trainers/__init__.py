"""The trainers, each beside its config: multi-turn GRPO (`grpo`), PPO with a critic (`ppo`, `critic`), SFT (`sft`),
rejection-sampling fine-tuning (`rft`), DPO on episode pairs (`dpo`)."""
