"""`MultiTurnPPOTrainer`: PPO over multi-turn episodes, a value model and GAE over the model's tokens.

TRL no longer ships PPO. This trainer reuses the multi-turn GRPO machinery (rollout engine, TRL's
clipped policy loss, KL, PEFT, accelerate) and changes only the advantages: a separate value model
(a token-classification head on a copy of the policy's transformer, `num_labels=1`) estimates the
return before each model token; GAE runs over the model's own tokens (env tokens are skipped, the
value bootstraps across them, see `advantages.gae`) with the episode's reward (TRL's
`reward_weights`-weighted sum of the `reward_funcs`, as for every estimator) paid on the last model
token; the token-level advantages (B, T) go to TRL's loss, which accepts them. The value model is
fitted on the GAE returns after each rollout (its gradients averaged over processes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from agentgym_train.advantages import gae, masked_whiten, token_rewards
from agentgym_train.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer


@dataclass
class MultiTurnPPOConfig(MultiTurnGRPOConfig):
    """`MultiTurnGRPOConfig` plus the value model's settings."""

    value_learning_rate: float = field(default=1e-4, metadata={"help": "Learning rate of the value model."})
    value_epochs: int = field(default=2, metadata={"help": "Value-model passes over each rollout."})
    gae_gamma: float = field(default=1.0, metadata={"help": "Discount per model token."})
    gae_lambda: float = field(default=0.95, metadata={"help": "GAE lambda."})
    whiten_advantages: bool = field(default=True, metadata={"help": "Normalise advantages over model tokens."})


class MultiTurnPPOTrainer(MultiTurnGRPOTrainer):
    """PPO with a value model and token-level GAE (see the module docstring).

    Args:
        value_model: A model returning one value per token (`logits[..., 0]`); default: a
            `AutoModelForTokenClassification` (`num_labels=1`) loaded from the policy's path.
        Other arguments: as `MultiTurnGRPOTrainer`.
    """

    _tag_names = ["trl", "ppo", "agentgym", "multi-turn"]

    def __init__(self, model: Any, args: MultiTurnPPOConfig | None = None, value_model: Any = None, **kwargs: Any):
        args = args or MultiTurnPPOConfig(output_dir="agentgym-ppo")
        if not isinstance(args, MultiTurnPPOConfig):
            raise TypeError(f"args must be a MultiTurnPPOConfig, got {type(args).__name__}")
        super().__init__(model, args, **kwargs)
        if value_model is None:
            from transformers import AutoModelForTokenClassification

            source = self.accelerator.unwrap_model(self.model)
            source = source.get_base_model() if hasattr(source, "get_base_model") else source
            value_model = AutoModelForTokenClassification.from_pretrained(
                source.config._name_or_path, num_labels=1, dtype=torch.float32
            )
            value_model.config.pad_token_id = self._tokenizer.pad_token_id
        self.value_model = value_model.to(self.accelerator.device)
        self.value_optimizer = torch.optim.AdamW(self.value_model.parameters(), lr=args.value_learning_rate)

    def _values(self, ids: torch.Tensor, attention: torch.Tensor, completion_length: int) -> torch.Tensor:
        """V(state before each completion token): the value head's output one position earlier."""
        values = self.value_model(input_ids=ids, attention_mask=attention).logits[..., 0]
        return values[:, -completion_length - 1 : -1]

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        mask = output["completion_mask"] * output.get("tool_mask", torch.ones_like(output["completion_mask"]))
        length = output["completion_ids"].size(1)
        scores = self.local_rewards(len(inputs))  # TRL's reward_weights-weighted sum of the reward_funcs
        mask = mask * ~torch.isnan(scores).unsqueeze(1)  # an unscorable episode (every reward None) leaves the loss
        rewards = token_rewards(scores, mask)  # the reward on each episode's last model token
        with torch.no_grad():
            values = self._values(ids, attention, length) * mask
        advantages, targets = gae(rewards, values, mask, self.args.gae_gamma, self.args.gae_lambda)
        if self.args.whiten_advantages:  # over the model tokens of the global batch (all processes)
            advantages = masked_whiten(advantages, mask, self._reduce_sum)
        if self.model.training:
            self._fit_values(ids, attention, targets, mask)
        output["advantages"] = advantages.to(output["advantages"].dtype)
        return output

    def _fit_values(
        self, ids: torch.Tensor, attention: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor
    ) -> None:
        self.value_model.train()
        for _ in range(self.args.value_epochs):
            values = self._values(ids, attention, targets.size(1))
            loss = ((values - targets) ** 2 * mask).sum() / mask.sum().clamp(min=1)
            self.value_optimizer.zero_grad()
            loss.backward()
            if self.accelerator.num_processes > 1:  # one value model per process: keep them identical
                for p in self.value_model.parameters():
                    if p.grad is not None:
                        p.grad = self.accelerator.reduce(p.grad, reduction="mean")
            torch.nn.utils.clip_grad_norm_(self.value_model.parameters(), 1.0)
            self.value_optimizer.step()
        self._metrics["train"]["value/loss"].append(float(loss.detach()))
