"""The trainers, each beside its config: multi-turn GRPO (`grpo`, its config in `grpo_config`), PPO with a
critic (`ppo`, `critic`), SFT (`sft`), rejection-sampling fine-tuning (`rft`), DPO on episode pairs (`dpo`)."""
