"""TRL's vLLM importance-sampling correction over whole multi-turn episodes.

STAND-INS: vLLM cannot run here, so the server is `vllm_standin.StandInVLLM` (TRL's real `VLLMClient` and
`VLLMGeneration` talk to it over HTTP) and its weight transfer is replaced as in `test_vllm_backend`. The
stand-in below reports each sampled token's logprob `OFFSET` lower than the one it sampled with, as a
vLLM whose numbers differ slightly from the trainer's on every token would; the trainer's own forward
pass, TRL's ratio, its clipping or masking and the loss are the real ones.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import grpo_args
from vllm_standin import StandInVLLM

from agentgym_train.models.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer

OFFSET = 0.01  # per token: ratio exp(0.01), far inside any cap, but over 110+ tokens past TRL's cap of 3
SHORT_REPLY = 8  # tokens per reply in every other task's episodes: 4 turns stay far below 110 tokens
SPIKE = 2.0  # on every SPIKE_EVERY-th token of a reply in the spiked runs: ratio exp(2.01) > 3
SPIKE_EVERY = 25


class OffsetStandIn(StandInVLLM):
    """Reports every sampled logprob `OFFSET` low (and `SPIKE` lower on every `SPIKE_EVERY`-th reply token
    when `spikes` is set), so TRL's ratio trainer/sampler is exp(OFFSET) on every model token. Episodes
    of every other task (told apart by their first prompt) get replies of `SHORT_REPLY` tokens at most,
    so that one rollout holds long episodes and short ones."""

    def __init__(self, *args: Any, spikes: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.spikes = spikes
        self.first_prompts: list[list[int]] = []  # one per task, in order of arrival

    def _sample(self, prompt: list[int], max_tokens: int, *args: Any) -> tuple[list, list]:
        task = next((i for i, p in enumerate(self.first_prompts) if prompt[: len(p)] == p), None)
        if task is None:
            self.first_prompts.append(list(prompt))
            task = len(self.first_prompts) - 1
        ids, logps = super()._sample(prompt, SHORT_REPLY if task % 2 else max_tokens, *args)
        spiked = [self.spikes and (k + 1) % SPIKE_EVERY == 0 for k in range(len(logps))]
        return ids, [lp - OFFSET - SPIKE * s for lp, s in zip(logps, spiked, strict=True)]


def run_step(model_dir: Path, tmp_path: Path, attach: Any, spikes: bool = False, **overrides: Any) -> dict[str, Any]:
    """One GRPO step through the stand-in: long episodes (replies of up to 48 tokens, 4 turns)."""
    model, tokenizer = load_model(model_dir)
    with OffsetStandIn(model, tokenizer=tokenizer, spikes=spikes) as server:
        attach(server)
        args = grpo_args(
            tmp_path,
            use_vllm=True,
            vllm_mode="server",
            vllm_server_base_url=server.url,
            max_turns=4,
            max_turn_tokens=48,
            max_completion_length=1024,
            max_steps=1,
            **overrides,
        )
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
        outputs: list[dict[str, Any]] = []
        generate = trainer._generate_and_score_completions

        def keep(inputs: Any) -> dict[str, Any]:
            outputs.append(generate(inputs))
            return outputs[-1]

        trainer._generate_and_score_completions = keep
        try:
            trainer.train()
        finally:
            trainer.engine.close()
    logs = next(r for r in trainer.state.log_history if "sampling/is_masked_token_share" in r)
    spans = [model_token_spans(e.env_mask) for e in trainer.last_episodes]
    return {"trainer": trainer, "output": outputs[0], "logs": logs, "spans": spans}


def model_token_spans(env_mask: list[int]) -> list[int]:
    """Lengths of the runs of model tokens (mask 1): one per turn's reply."""
    runs, length = [], 0
    for bit in [*env_mask, 0]:
        if bit:
            length += 1
        elif length:
            runs.append(length)
            length = 0
    return runs


def test_multi_turn_default_is_per_token() -> None:
    assert MultiTurnGRPOConfig.__dataclass_fields__["vllm_importance_sampling_mode"].default == "token_truncate"


def test_long_episode_stays_in_the_loss_under_the_default(tiny_babyai: Path, tmp_path: Path, trl_sees_vllm) -> None:
    run = run_step(tiny_babyai, tmp_path, trl_sees_vllm)
    assert run["trainer"].args.vllm_importance_sampling_mode == "token_truncate"  # not passed: the default
    lengths = [sum(s) for s in run["spans"]]
    # a sequence-level mask would drop these: their summed log-ratio passes log(3)
    assert any(OFFSET * n > math.log(3.0) for n in lengths), lengths
    output = run["output"]
    mask = (output["completion_mask"] * output["tool_mask"]).bool()
    ratio = output["importance_sampling_ratio"]
    assert ratio.shape == mask.shape  # one ratio per token
    # every model token keeps the ratio exp(OFFSET) (the stand-in's numbers match the trainer's to ~1e-6)
    assert torch.allclose(ratio[mask], torch.full_like(ratio[mask], math.exp(OFFSET)), atol=1e-4)
    logs = run["logs"]
    assert logs["sampling/is_masked_token_share"] == 0.0
    assert logs["sampling/is_masked_episode_share"] == 0.0
    assert logs["sampling/is_clipped_token_share"] == 0.0


def test_sequence_mask_drops_the_long_episodes_and_says_so(tiny_babyai: Path, tmp_path: Path, trl_sees_vllm) -> None:
    """TRL's default mode, for contrast: the shares logged are those computed here from the lengths."""
    run = run_step(tiny_babyai, tmp_path, trl_sees_vllm, vllm_importance_sampling_mode="sequence_mask")
    lengths = [sum(s) for s in run["spans"]]
    dropped = [OFFSET * n > math.log(3.0) for n in lengths]
    assert all(abs(OFFSET * n - math.log(3.0)) > 1e-3 for n in lengths)  # no episode on the edge
    assert any(dropped) and not all(dropped), lengths
    ratio = run["output"]["importance_sampling_ratio"].squeeze(1)
    assert [bool(r == 0) for r in ratio] == dropped
    logs = run["logs"]
    assert logs["sampling/is_masked_episode_share"] == pytest.approx(sum(dropped) / len(lengths))
    masked_tokens = sum(n for n, d in zip(lengths, dropped, strict=True) if d)
    assert logs["sampling/is_masked_token_share"] == pytest.approx(masked_tokens / sum(lengths))
    assert logs["sampling/is_clipped_token_share"] == 0.0  # a mask mode clips nothing


@pytest.mark.parametrize("mode", ["token_mask", "token_truncate"])
def test_token_modes_touch_only_the_spiked_tokens(mode: str, tiny_babyai: Path, tmp_path: Path, trl_sees_vllm) -> None:
    """Every SPIKE_EVERY-th token of each reply differs by exp(2.01) > 3: token_mask zeroes exactly those,
    token_truncate caps exactly those at 3; no episode leaves the loss."""
    run = run_step(tiny_babyai, tmp_path, trl_sees_vllm, spikes=True, vllm_importance_sampling_mode=mode)
    spikes = sum(r // SPIKE_EVERY for spans in run["spans"] for r in spans)
    tokens = sum(sum(spans) for spans in run["spans"])
    assert spikes > 0
    logs = run["logs"]
    share = spikes / tokens
    expected = (share, 0.0) if mode == "token_mask" else (0.0, share)
    got = (logs["sampling/is_masked_token_share"], logs["sampling/is_clipped_token_share"])
    assert got == pytest.approx(expected)
    assert logs["sampling/is_masked_episode_share"] == 0.0
