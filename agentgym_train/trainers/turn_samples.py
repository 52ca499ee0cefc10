"""One training sample per turn (`sample_unit: turn`): step-wise training.

With `sample_unit: episode` an episode is one training sequence (its first prompt, then every reply and
observation: `agentgym_train.rollout.engine`). With `turn`, each reply is its own sample:

- prompt: the context the policy sampled the reply from: under a managed context (`context: window:k`,
  `summary:k`) the template's rendering of the policy's chat at that turn (`Episode.turn_prompts`), as
  deployment renders it; under the full context the episode's sequence up to the reply;
- completion: the reply's sampled ids (its span of the episode's sequence), with the sampler's logprobs.

Rewards and advantages are still computed per episode, on the episode's layout, by TRL's reward functions
and the registered estimator; each turn sample then takes its reply's slice of them. A scalar advantage
(GRPO, RLOO, REINFORCE++) is the episode's on every turn; a per-token one (GiGPO's turn level, returns to
go of turn rewards) is the reply's own. Masks come the same way, so the guards, failed-env groups and
dynamic sampling's dropped groups leave the loss as they do per episode.

Weighting (`turn_weighting`): `episode` (the default) scales each sample's advantage by R / (E * n_e) for
an episode e of n_e samples among E episodes and R samples: every episode weighs the same in all
whatever its number of turns, and the mean weight is 1. `turn` leaves every sample at 1, so an episode
of 30 turns counts 30 times one of a single turn; that is what verl-agent (each step a batch row, the
token mean over the batch) and SkyRL's step-wise training (the last step's advantage broadcast to every
step, each step a sample) do. The scale acts on the advantage, which is exact for the policy term of
TRL's PPO-clip losses (linear in a positive scale of the advantage); the KL term of each sample is not
scaled.

The forward passes TRL makes on a scored batch (the old policy's logprobs, the reference's, vLLM's
importance ratio) are deferred while it scores the episodes and made on the turn samples instead, and
written back into the episode layout where an estimator reads them (REINFORCE++'s KL in the reward).

Several processes: every process pads its samples to the largest count over processes and to a
multiple of `steps_per_generation` with samples that hold no model token, so that sharded forward passes
run in step and TRL's split of the batch into optimiser steps drops no sample.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

#: What one training sample is.
SAMPLE_UNITS = ("episode", "turn")
#: How turn samples weigh in the loss.
TURN_WEIGHTINGS = ("episode", "turn")


def check_settings(args: Any) -> None:
    """Refuse what `sample_unit`, `turn_weighting` and `context` cannot do together, naming what would work."""
    from agentgym_wrappers import get_context

    if args.sample_unit not in SAMPLE_UNITS:
        raise ValueError(f"sample_unit must be one of {SAMPLE_UNITS}, got {args.sample_unit!r}")
    if args.turn_weighting not in TURN_WEIGHTINGS:
        raise ValueError(f"turn_weighting must be one of {TURN_WEIGHTINGS}, got {args.turn_weighting!r}")
    context = get_context(args.context)  # a ValueError naming the policies
    if not context.full and args.sample_unit == "episode":
        raise ValueError(
            f"context {context.spec!r} samples each reply from its own managed context, which one sequence per "
            "episode cannot hold (it would train replies on contexts they were not sampled from): set "
            "sample_unit='turn', or context='full'"
        )
    if args.sample_unit != "turn":
        return
    refused = {
        "async_generation": (args.async_generation, "its worker plays the episode's one sequence"),
        "env_backend='ray'": (args.env_backend == "ray" and not context.full, "the Ray pool keeps a full chat"),
        "rollout_mode='async'": (args.rollout_mode == "async" and not context.full, "it plays the full context"),
    }
    for name, (on, why) in refused.items():
        if on:
            raise ValueError(f"sample_unit='turn' with context {context.spec!r} does not support {name}: {why}")


@dataclass(frozen=True)
class TurnRows:
    """The turn samples of a batch of episodes, in order: episode by episode, reply by reply."""

    episode: list[int]  # per sample: its episode's index in the batch
    span: list[tuple[int, int]]  # per sample: its reply's [start, end) in the episode's completion
    prompt: list[list[int]]  # per sample: the context the reply was sampled from

    def __len__(self) -> int:
        return len(self.episode)

    def weights(self, weighting: str) -> torch.Tensor:
        """(R,) each sample's loss weight (see the module): 1 / n_e scaled to a mean of 1, or all 1."""
        if weighting == "turn" or not self.episode:
            return torch.ones(len(self))
        index = torch.tensor(self.episode, dtype=torch.long)
        counts = torch.bincount(index).double()
        per_episode = len(self) / int((counts > 0).sum()) / counts.clamp(min=1)
        return per_episode[index].float()


def turn_rows(episodes: Sequence[Any]) -> TurnRows:
    """One sample per reply of each episode (an episode whose env failed before any reply has none)."""
    index, spans, prompts = [], [], []
    for i, episode in enumerate(episodes):
        managed = bool(episode.turn_prompts)
        if managed and len(episode.turn_prompts) < len(episode.reply_spans):
            raise RuntimeError(
                f"episode {i} has {len(episode.reply_spans)} replies but {len(episode.turn_prompts)} turn prompts"
            )
        for j, (start, end) in enumerate(episode.reply_spans):
            if end <= start:  # nothing sampled: no sample
                continue
            prompt = episode.turn_prompts[j] if managed else episode.prompt_ids + episode.completion_ids[:start]
            index.append(i)
            spans.append((start, end))
            prompts.append(list(prompt))
    return TurnRows(index, spans, prompts)


def _pad(rows: list[list[Any]], value: Any, left: bool, dtype: torch.dtype) -> torch.Tensor:
    width = max((len(r) for r in rows), default=1) or 1
    out = torch.full((len(rows), width), value, dtype=dtype)
    for k, row in enumerate(rows):
        if row:
            if left:
                out[k, width - len(row) :] = torch.tensor(row, dtype=dtype)
            else:
                out[k, : len(row)] = torch.tensor(row, dtype=dtype)
    return out


def slice_rows(tensor: torch.Tensor, rows: TurnRows, fill: float) -> torch.Tensor:
    """(R, L) each sample's reply span of a (B, T) episode-layout tensor, right-padded with `fill`."""
    pieces = [tensor[i, start:end].tolist() for i, (start, end) in zip(rows.episode, rows.span, strict=True)]
    return _pad(pieces, fill, left=False, dtype=tensor.dtype).to(tensor.device)


def scatter_rows(values: torch.Tensor, rows: TurnRows, like: torch.Tensor) -> torch.Tensor:
    """The inverse of `slice_rows`: (R, L) per-sample values written into a (B, T) episode layout of
    zeros shaped `like` (positions no sample covers, the env's tokens, stay 0)."""
    out = torch.zeros_like(like)
    for k, (i, (start, end)) in enumerate(zip(rows.episode, rows.span, strict=True)):
        out[i, start:end] = values[k, : end - start].to(out.dtype)
    return out


def build_batch(output: dict[str, Any], rows: TurnRows, pad_id: int, pad_to: int) -> dict[str, Any]:
    """The turn samples of a scored episode batch (TRL's `_generate_and_score_completions` output): ids,
    masks (`tool_mask` holds the episode's loss mask on the reply) and the sampler's logprobs, with samples
    holding no model token added up to `pad_to`. Advantages (`advantages`) and logprob forward passes are
    the caller's (they need the estimator and the model)."""
    device = output["completion_ids"].device
    loss_mask = output["completion_mask"]
    if output.get("tool_mask") is not None:
        loss_mask = loss_mask * output["tool_mask"]
    extra = pad_to - len(rows)
    if extra < 0:
        raise ValueError(f"pad_to={pad_to} is less than the {len(rows)} turn samples")
    prompts = rows.prompt + [[pad_id]] * extra
    ids = output["completion_ids"]
    completions = [ids[i, s:e].tolist() for i, (s, e) in zip(rows.episode, rows.span, strict=True)]
    completions += [[pad_id]] * extra
    completion_mask = _pad([[1] * len(c) for c in completions], 0, left=False, dtype=torch.long).to(device)
    batch = {
        "prompt_ids": _pad(prompts, pad_id, left=True, dtype=torch.long).to(device),
        "prompt_mask": _pad([[1] * len(p) for p in prompts], 0, left=True, dtype=torch.long).to(device),
        "completion_ids": _pad(completions, pad_id, left=False, dtype=torch.long).to(device),
        "completion_mask": completion_mask,
        "tool_mask": to_rows(loss_mask.long(), rows, 0, completion_mask.size(1), pad_to) * completion_mask,
    }
    if output.get("sampling_per_token_logps") is not None:
        batch["sampling_per_token_logps"] = to_rows(
            output["sampling_per_token_logps"], rows, 0.0, completion_mask.size(1), pad_to
        )
    return batch


def to_rows(tensor: torch.Tensor, rows: TurnRows, fill: float, width: int, pad_to: int) -> torch.Tensor:
    """(pad_to, width) each sample's reply span of a (B, T) episode-layout tensor, padded with `fill`."""
    body = slice_rows(tensor, rows, fill)
    body = torch.nn.functional.pad(body, (0, width - body.size(1)), value=fill)
    padding = torch.full((pad_to - len(rows), width), fill, dtype=body.dtype, device=body.device)
    return torch.cat([body, padding])


def advantages(episode: torch.Tensor, rows: TurnRows, weights: torch.Tensor, width: int, pad_to: int) -> torch.Tensor:
    """Each sample's advantage times its weight: the episode's scalar (B,) -> (pad_to,), or the reply's
    slice of per-token advantages (B, T) -> (pad_to, width); 0 on the padding samples."""
    scale = torch.cat([weights, weights.new_zeros(pad_to - len(rows))]).to(episode)
    if episode.dim() == 1:
        picked = episode[torch.tensor(rows.episode, dtype=torch.long, device=episode.device)]
        return torch.cat([picked, picked.new_zeros(pad_to - len(rows))]) * scale
    return to_rows(episode, rows, 0.0, width, pad_to) * scale.unsqueeze(1)


def importance_ratio(
    old: torch.Tensor, sampling: torch.Tensor, mask: torch.Tensor, mode: str, clip: tuple[float | None, float | None]
) -> torch.Tensor:
    """TRL's vLLM importance-sampling ratio (`vllm_importance_sampling_mode`) of the trainer's logprobs `old`
    against the sampler's, on `mask`'s tokens: (B, T) for the token modes, (B, 1) for the sequence modes."""
    diff = torch.nan_to_num((old - sampling) * mask, nan=0.0)
    if mode.startswith("sequence"):
        diff = diff.sum(dim=-1, keepdim=True)
    ratio = torch.exp(diff)
    low, high = clip
    if mode.endswith("truncate"):
        return torch.clamp(ratio, min=low, max=high)
    low = -float("inf") if low is None else low
    high = float("inf") if high is None else high
    return ratio.masked_fill((ratio < low) | (ratio > high), 0.0)


class TurnSamples:
    """The turn samples of one scored batch, made in two steps around the estimator: the constructor builds
    them and makes the deferred forward passes on them (writing the logprobs back into `output`'s episode
    layout, where an estimator reads them); `batch` then takes the estimator's advantages.

    Args:
        trainer: The `MultiTurnGRPOTrainer` whose last rollout `output` scored.
        output: TRL's scored batch of episodes, made with the forward passes deferred.
    """

    def __init__(self, trainer: Any, output: dict[str, Any]):
        from trl.models.utils import disable_gradient_checkpointing

        from agentgym_train import estimators as adv

        self.trainer = trainer
        args = trainer.args
        training = trainer.model.training
        self.rows = turn_rows(trainer.last_episodes)
        device = output["completion_ids"].device
        counts = trainer.accelerator.gather(torch.tensor([len(self.rows)], device=device))
        chunks = args.steps_per_generation if training else 1
        self.pad_to = -(-max(int(counts.max()), 1) // chunks) * chunks
        batch = build_batch(output, self.rows, trainer._tokenizer.pad_token_id, self.pad_to)
        ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
        attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
        width = batch["completion_ids"].size(1)
        size = args.per_device_train_batch_size if training else args.per_device_eval_batch_size
        kl_in_reward = trainer.beta != 0.0 and adv.get_estimator(args.advantage_estimator).kl_in_reward
        layout = output["completion_mask"].float()

        def logps(model: Any) -> torch.Tensor:
            return trainer._get_per_token_logps_and_entropies(model, ids, attention, width, batch_size=size)[0]

        with torch.no_grad(), disable_gradient_checkpointing(trainer.model, args.gradient_checkpointing_kwargs):
            if "old_per_token_logps" in output or kl_in_reward:
                batch["old_per_token_logps"] = logps(trainer.model)
                output["old_per_token_logps"] = scatter_rows(batch["old_per_token_logps"], self.rows, layout)
            if "ref_per_token_logps" in output:
                self.ref = self._reference(logps)
                output["ref_per_token_logps"] = scatter_rows(self.ref, self.rows, layout)
        if "importance_sampling_ratio" in output:
            mask = batch["completion_mask"] * batch["tool_mask"]
            batch["importance_sampling_ratio"] = importance_ratio(
                batch["old_per_token_logps"],
                batch["sampling_per_token_logps"],
                mask,
                trainer.vllm_importance_sampling_mode,
                (trainer.vllm_importance_sampling_clip_min, trainer.vllm_importance_sampling_clip_max),
            )
            self._log_importance_sampling(batch, mask.bool(), "train" if training else "eval")
        self.samples = batch

    def _log_importance_sampling(self, batch: dict[str, Any], mask: torch.Tensor, mode: str) -> None:
        """TRL's vLLM divergence and ratio metrics, which it logged from the deferred passes, from the turns."""
        gather = self.trainer.accelerator.gather
        delta = (batch["old_per_token_logps"] - batch["sampling_per_token_logps"]).abs()
        delta = delta[mask & ~torch.isnan(delta)]
        ratio = batch["importance_sampling_ratio"]
        ratio = ratio[mask] if ratio.size(1) == mask.size(1) else ratio[mask.any(dim=1)].flatten()
        zero = delta.new_zeros(())
        local = {
            "sampling/sampling_logp_difference/mean": (delta.mean() if delta.numel() else zero, torch.mean),
            "sampling/sampling_logp_difference/max": (delta.max() if delta.numel() else zero, torch.max),
            "sampling/importance_sampling_ratio/min": (ratio.min() if ratio.numel() else zero, torch.min),
            "sampling/importance_sampling_ratio/mean": (ratio.mean() if ratio.numel() else zero, torch.mean),
            "sampling/importance_sampling_ratio/max": (ratio.max() if ratio.numel() else zero, torch.max),
        }
        metrics = self.trainer._metrics[mode]
        for name, (value, reduce) in local.items():
            if metrics[name]:
                metrics[name].pop()
            metrics[name].append(reduce(gather(value.float())).item())

    def _reference(self, logps: Any) -> torch.Tensor:
        """The reference's logprobs: the reference model, or the PEFT model with its adapter off (or its "ref"
        adapter), as TRL takes them."""
        from trl.trainer.utils import use_adapter

        trainer = self.trainer
        if trainer.ref_model is not None:
            return logps(trainer.ref_model)
        model = trainer.accelerator.unwrap_model(trainer.model)
        with use_adapter(model, adapter_name="ref" if "ref" in model.peft_config else None):
            return logps(trainer.model)

    def batch(self, output: dict[str, Any]) -> dict[str, Any]:
        """The training batch of turn samples, with `output`'s advantages (the estimator's, episode layout)."""
        batch = dict(self.samples)
        width = batch["completion_ids"].size(1)
        weights = self.rows.weights(self.trainer.args.turn_weighting)
        batch["advantages"] = advantages(output["advantages"], self.rows, weights, width, self.pad_to)
        if "ref_per_token_logps" in output:  # a KL-in-reward estimator took it out of the loss
            batch["ref_per_token_logps"] = self.ref
        tokens = (batch["completion_mask"] * batch["tool_mask"]).sum()
        batch["num_items_in_batch"] = self.trainer.accelerator.gather(tokens).sum()
        return batch
