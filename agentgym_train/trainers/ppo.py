"""`MultiTurnPPOTrainer`: PPO over multi-turn episodes, a value model and GAE over the model's tokens.

TRL no longer ships PPO. This trainer reuses the multi-turn GRPO machinery (rollout engine, TRL's
clipped policy loss, KL, PEFT, accelerate) and changes only the advantages: a critic
(`agentgym_train.trainers.critic`; `critic="full"`: a token-classification copy of the policy or of
`critic_model_name_or_path`; `critic="lora"`: a LoRA adapter and value head on the policy's frozen
base) estimates the return before each model token; GAE runs over the model's own tokens (env tokens are skipped, the
value bootstraps across them, see `advantages.gae`) with the episode's reward (TRL's
`reward_weights`-weighted sum of the `reward_funcs`, as for every estimator) paid on the last model
token; the token-level advantages (B, T) go to TRL's loss, which accepts them. The critic is
fitted on the GAE returns after each rollout (its gradients averaged over processes). Value passes
run in micro-batches of `per_device_train_batch_size` rows.

A full critic is loaded in the policy's dtype and prepared by the accelerator as the policy is
(`ModelCritic.prepare`): sharded by the FSDP2 plugin, wrapped in DDP (one bucketed all-reduce per
optimiser step), `bf16`/`fp16` as for the policy, activation checkpointing when
`activation_checkpointing` is set; its AdamW holds the prepared (sharded) parameters. DeepSpeed would
need a second engine, so a full critic is refused there, as under FSDP1 (use FSDP2, or
`critic="lora"`). A LoRA critic is replicated; its gradients are averaged in one flattened all-reduce.

Checkpoints hold the critic's full trainable weights and its optimiser's full state in
`checkpoint-N/critic/` (gathered from the shards; the main process writes them);
`train(resume_from_checkpoint=...)` restores them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR

from agentgym_train.estimators import gae, masked_whiten, token_rewards
from agentgym_train.models.tiny import keep_master_weights
from agentgym_train.trainers.critic import (
    CRITIC_KINDS,
    ModelCritic,
    all_reduce_gradients,
    load_critic,
    lora_critic,
    save_critic,
)
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer

#: The critic's folder inside a checkpoint: its trainable weights and its optimiser's state.
CRITIC_DIR = "critic"


@dataclass
class MultiTurnPPOConfig(MultiTurnGRPOConfig):
    """`MultiTurnGRPOConfig` plus the value model's settings."""

    critic: str = field(
        default="full",
        metadata={
            "help": "'full': a trainable token-classification model in the policy's dtype (a copy of the policy, "
            "or critic_model_name_or_path), sharded, wrapped and cast as the policy; 'lora': a LoRA adapter and a "
            "value head on a frozen base (the policy's own base when the policy is a PEFT model, else a frozen copy "
            "in the policy's dtype)."
        },
    )
    critic_model_name_or_path: str | None = field(
        default=None, metadata={"help": "The critic's model (e.g. a smaller one); default: the policy's."}
    )
    critic_lora_rank: int = field(default=16, metadata={"help": "LoRA rank of a critic='lora'."})
    value_learning_rate: float = field(default=1e-4, metadata={"help": "Learning rate of the value model."})
    value_epochs: int = field(default=2, metadata={"help": "Value-model passes over each rollout."})
    gae_gamma: float = field(default=1.0, metadata={"help": "Discount per model token."})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE lambda."})
    whiten_advantages: bool = field(default=True, metadata={"help": "Normalise advantages over model tokens."})

    def __post_init__(self) -> None:
        if self.critic not in CRITIC_KINDS:
            raise ValueError(f"critic must be one of {CRITIC_KINDS}, got {self.critic!r}")
        super().__post_init__()


def check_settings(args: MultiTurnPPOConfig) -> None:
    """Refuse what PPO cannot do, naming what would. Checked by the trainer, not the config: the pipeline parses
    every run's settings as a `MultiTurnPPOConfig`, GRPO runs included."""
    if args.advantage_estimator != "grpo":  # GAE replaces the advantages; another estimator would run for nothing
        raise ValueError(
            "MultiTurnPPOTrainer computes its advantages with GAE: leave advantage_estimator at 'grpo' "
            f"(the default), got {args.advantage_estimator!r}"
        )
    if args.dynamic_sampling:  # a flat group still moves GAE's advantages (the critic's values differ)
        raise ValueError(
            "dynamic_sampling drops groups whose episodes all score alike, which carry no signal only under a "
            "group-relative estimator; PPO's GAE advantages are not group-relative: use MultiTurnGRPOTrainer "
            "for dynamic sampling, or dynamic_sampling=False"
        )
    if args.sample_unit != "episode":  # the critic values the episode's sequence, token by token
        raise ValueError(
            f"sample_unit={args.sample_unit!r}: PPO's critic fits and values each episode's one sequence; use "
            "MultiTurnGRPOTrainer for turn samples, or sample_unit='episode'"
        )


class MultiTurnPPOTrainer(MultiTurnGRPOTrainer):
    """PPO with a value model and token-level GAE (see the module docstring).

    Args:
        value_model: A model returning one value per token (`logits[..., 0]`), prepared as a full critic;
            default: a `AutoModelForTokenClassification` (`num_labels=1`) loaded from the policy's path
            in the policy's dtype.
        **kwargs: The arguments of `MultiTurnGRPOTrainer`.
    """

    _tag_names = ["trl", "ppo", "agentgym", "multi-turn"]

    def __init__(self, model: Any, args: MultiTurnPPOConfig | None = None, value_model: Any = None, **kwargs: Any):
        args = args or MultiTurnPPOConfig(output_dir="agentgym-ppo")
        if not isinstance(args, MultiTurnPPOConfig):
            raise TypeError(f"args must be a MultiTurnPPOConfig, got {type(args).__name__}")
        check_settings(args)
        super().__init__(model, args, **kwargs)
        policy = self.accelerator.unwrap_model(self.model)
        dtype = next(policy.parameters()).dtype  # the training dtype the policy was loaded in
        if value_model is not None:  # trained by AdamW as the policy: float32 masters under bf16 on DDP
            keep_master_weights(value_model, args, self.is_fsdp_enabled or self.is_deepspeed_enabled)
            self.critic = ModelCritic(value_model)
        elif args.critic == "lora":
            source = args.critic_model_name_or_path
            if source is None and not hasattr(policy, "get_base_model"):
                source = policy.config._name_or_path
            self.critic = lora_critic(policy, source, args.critic_lora_rank, dtype)
        else:
            from transformers import AutoModelForTokenClassification

            base = policy.get_base_model() if hasattr(policy, "get_base_model") else policy
            source = args.critic_model_name_or_path or base.config._name_or_path
            full = AutoModelForTokenClassification.from_pretrained(source, num_labels=1, dtype=dtype)
            full.config.pad_token_id = self._tokenizer.pad_token_id
            self.critic = ModelCritic(full)
        if isinstance(self.critic, ModelCritic):
            checkpointing = (args.activation_checkpointing_kwargs or {}) if args.activation_checkpointing else None
            self.value_optimizer = self.critic.prepare(self.accelerator, args.value_learning_rate, checkpointing)
        else:
            self.critic.to(self.accelerator.device)
            self.value_optimizer = torch.optim.AdamW(self.critic.trainable_parameters(), lr=args.value_learning_rate)
        # fp16: the critic's own loss scaler, of the kind the accelerator made for the policy
        scaler = self.accelerator.scaler
        self.value_scaler = type(scaler)(self.accelerator.device.type) if scaler is not None else None

    @property
    def value_model(self) -> torch.nn.Module:
        """The critic (a `ModelCritic` or `LoRACritic`)."""
        return self.critic

    def _micro_batches(self, n: int) -> list[slice]:
        size = self.args.per_device_train_batch_size
        return [slice(start, start + size) for start in range(0, n, size)]

    def _values(self, ids: torch.Tensor, attention: torch.Tensor, completion_length: int) -> torch.Tensor:
        """V(state before each completion token): the critic's output one position earlier, computed
        in micro-batches of `per_device_train_batch_size` rows."""
        chunks = [self.critic(ids[rows], attention[rows]) for rows in self._micro_batches(ids.size(0))]
        return torch.cat(chunks)[:, -completion_length - 1 : -1]

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        length = output["completion_ids"].size(1)
        scores = self.local_rewards(len(inputs))  # TRL's reward_weights-weighted sum of the reward_funcs
        mask = mask * ~torch.isnan(scores).unsqueeze(1)  # an unscorable episode (every reward None) leaves the loss
        paid, ends = self.turn_payments(mask)  # the env's payments during the episode, on their turns' last tokens
        rewards = token_rewards(scores, mask, paid=paid)  # the rest of the reward on each episode's last model token
        with torch.no_grad():
            values = self._values(ids, attention, length) * mask
        args = self.args
        advantages, targets = gae(rewards, values, mask, args.gae_gamma, args.gae_lambda, args.turn_gamma, ends)
        if self.args.whiten_advantages:  # over the model tokens of the global batch (all processes)
            advantages = masked_whiten(advantages, mask, self._reduce_sum)
        if self.model.training:
            self._fit_values(ids, attention, targets, mask)
        output["advantages"] = advantages.to(output["advantages"].dtype)
        return output

    def _fit_values(
        self, ids: torch.Tensor, attention: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> None:
        """`value_epochs` optimiser steps on the squared error to the GAE returns, each accumulated over
        micro-batches (the same gradient as one pass over the whole batch, at a micro-batch's memory) and
        averaged over processes: by DDP (one bucketed all-reduce, after the last micro-batch), by FSDP2
        (a reduce-scatter per micro-batch), else in one flattened all-reduce. Every process runs the
        same number of micro-batches (its rollout has as many rows), as the collectives need."""
        tokens = mask.sum().clamp(min=1)
        parameters = self.critic.trainable_parameters()
        micro_batches = self._micro_batches(ids.size(0))
        scaler = self.value_scaler
        for _ in range(self.args.value_epochs):
            self.value_optimizer.zero_grad()
            total = 0.0
            for i, rows in enumerate(micro_batches):
                with self.critic.active(), self.critic.no_sync(last=i == len(micro_batches) - 1):
                    values = self._values(ids[rows], attention[rows], targets.size(1))
                    loss = ((values - targets[rows]) ** 2 * mask[rows]).sum() / tokens
                    (loss if scaler is None else scaler.scale(loss)).backward()
                total += float(loss.detach())
            if self.accelerator.num_processes > 1 and not self.critic.synchronised:
                all_reduce_gradients(parameters, self.accelerator)
            if scaler is not None:
                scaler.unscale_(self.value_optimizer)
            torch.nn.utils.clip_grad_norm_(parameters, 1.0)
            if scaler is None:
                self.value_optimizer.step()
            else:
                scaler.step(self.value_optimizer)
                scaler.update()
        self._metrics["train"]["value/loss"].append(total)

    # ---- checkpoints: the critic and its optimiser in `checkpoint-N/critic/` --------------------------
    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        with self.critic.hidden_from_saves():  # the policy's files hold the policy only
            super()._save(output_dir, state_dict)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        super()._save_checkpoint(model, trial)
        folder = Path(self._get_output_dir(trial)) / f"{PREFIX_CHECKPOINT_DIR}-{self.state.global_step}"
        # every process gathers (sharded weights), the main one writes
        save_critic(self.critic, self.value_optimizer, folder / CRITIC_DIR, write=self.args.should_save)

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        super()._load_optimizer_and_scheduler(checkpoint)
        if checkpoint is not None:
            load_critic(self.critic, self.value_optimizer, Path(checkpoint) / CRITIC_DIR)
