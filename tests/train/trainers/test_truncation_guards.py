"""Truncated replies and episodes (issue 25.1): left out of the loss by reply or by episode, DAPO's soft overlong
penalty on the episode reward, and the shares logged.

Scripted replies through the real BabyAI env: in each call, even-numbered contexts end ("Action: turn left" and the
end token), odd-numbered ones run past the reply budget (no end token), so every group mixes both.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import grpo_args

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import Episode, Task
from agentgym_train.trainers import truncation as trunc
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

BUDGET = 12  # max_turn_tokens


def _episode(spans: list[tuple[int, int]], stopped_by: list[str], length: int, **kwargs: Any) -> Episode:
    mask = [0] * length
    for start, end in spans:
        mask[start:end] = [1] * (end - start)
    return Episode(
        Task("x"),
        prompt_ids=[1],
        completion_ids=[7] * length,
        env_mask=mask,
        reply_spans=spans,
        stopped_by=stopped_by,
        max_turn_tokens=BUDGET,
        **kwargs,
    )


def test_dapo_penalty_is_the_papers_piecewise_formula() -> None:
    # DAPO Eq. 13 with L_max = 100, L_cache = 20: 0 up to 80 tokens, (80 - |y|) / 20 up to 100, -1 beyond
    assert trunc.dapo_penalty(50, 100, 20) == 0.0
    assert trunc.dapo_penalty(80, 100, 20) == 0.0
    assert trunc.dapo_penalty(81, 100, 20) == pytest.approx(-0.05)
    assert trunc.dapo_penalty(90, 100, 20) == pytest.approx(-0.5)
    assert trunc.dapo_penalty(100, 100, 20) == pytest.approx(-1.0)
    assert trunc.dapo_penalty(130, 100, 20) == -1.0
    assert trunc.dapo_penalty(100, 100, 0) == 0.0  # no buffer: no penalty
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        trunc.dapo_penalty(10, 100, 101)


def test_episode_penalty_per_reply_and_per_episode() -> None:
    # replies of 4, 12 (the budget) and 10 tokens; observations between them
    episode = _episode([(0, 4), (6, 18), (20, 30)], ["eos", "budget", "eos"], 30)
    # L_max = 12, L_cache = 4: lengths 4 -> 0, 12 -> -1, 10 -> (8 - 10) / 4 = -0.5; the mean over 3 replies
    assert trunc.episode_penalty(episode, 4, "reply") == pytest.approx((0.0 - 1.0 - 0.5) / 3)
    # the whole completion: 30 tokens of a 32-token budget, L_cache = 8: (24 - 30) / 8
    assert trunc.episode_penalty(episode, 8, "episode", max_completion_length=32) == pytest.approx(-0.75)
    assert trunc.episode_penalty(episode, 0, "reply") == 0.0


def test_a_budget_truncated_episode_counts_as_run_to_the_budget() -> None:
    """The episode budget ended it at 10 of 32 tokens (its next turn would not fit), before L_max - L_cache = 24:
    the `episode` penalty counts it as cut at L_max (-1), as DAPO does a response cut at L_max; the `reply` one
    measures its replies as before."""
    ended = _episode([(0, 4), (6, 10)], ["eos", "eos"], 10, budget_truncated=True)
    assert trunc.episode_penalty(ended, 8, "episode", max_completion_length=32) == -1.0
    assert trunc.episode_penalty(ended, 4, "reply") == 0.0  # replies of 4 tokens, L_max - L_cache = 8
    finished = _episode([(0, 4), (6, 10)], ["eos", "eos"], 10)
    assert trunc.episode_penalty(finished, 8, "episode", max_completion_length=32) == 0.0


def test_guard_masks_the_cut_reply_or_the_episode() -> None:
    episode = _episode([(0, 4), (6, 18), (20, 30)], ["eos", "budget", "eos"], 30)
    kept = trunc.guard(episode, "train")
    assert kept.env_mask == episode.env_mask and kept.masked_replies == 0 and kept.masked_for is None
    reply = trunc.guard(episode, "mask_reply")
    assert reply.env_mask == [1] * 4 + [0] * 16 + [1] * 10 and reply.masked_replies == 1
    whole = trunc.guard(episode, "mask_episode")
    assert whole.env_mask == [0] * 30 and whole.masked_for == "truncated_reply"
    ended = _episode([(0, 4)], ["eos"], 4, budget_truncated=True)
    assert trunc.guard(ended, "mask_reply", "train").env_mask == [1] * 4
    budget = trunc.guard(ended, "mask_reply", "mask_episode")
    assert budget.env_mask == [0] * 4 and budget.masked_for == "budget"
    with pytest.raises(ValueError, match="truncated_replies"):
        trunc.guard(episode, "mask")


def test_config_refuses_unknown_choices_and_a_buffer_past_the_budget(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="truncated_replies"):
        grpo_args(tmp_path, truncated_replies="drop")
    with pytest.raises(ValueError, match="budget_truncated_episodes"):
        grpo_args(tmp_path, budget_truncated_episodes="mask_reply")
    with pytest.raises(ValueError, match="overlong_buffer_len"):
        grpo_args(tmp_path, max_turn_tokens=BUDGET, overlong_buffer_len=BUDGET + 1)


def _scripted(tokenizer: Any) -> Any:
    ended = tokenizer("Action: turn left", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    rambling = tokenizer("I think that " * 10, add_special_tokens=False)["input_ids"]
    assert len(ended) < BUDGET < len(rambling)

    def generate(contexts: list[list[int]], max_new_tokens: int, stop=None) -> list[tuple[list[int], list[float]]]:
        replies = [ended if j % 2 == 0 else rambling for j in range(len(contexts))]
        return [(ids[:max_new_tokens], [-0.5] * min(len(ids), max_new_tokens)) for ids in replies]

    return generate


RECORDED: list[list[float]] = []  # what reply_length returned, call by call


def reply_length(completions: list[str], **kwargs: Any) -> list[float]:
    """A reward that differs inside groups, so that advantages are not 0."""
    RECORDED.append([len(c) / 100 for c in completions])
    return RECORDED[-1]


def _trainer(tiny_babyai: Path, tmp_path: Path, **overrides: Any) -> MultiTurnGRPOTrainer:
    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(tmp_path, **{"max_turn_tokens": BUDGET, "max_turns": 3, "beta": 0.0, "max_steps": 1, **overrides})
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[reply_length])
    trainer._sampler = lambda model: _scripted(tokenizer)
    trainer.model.train()  # a training rollout, as inside trainer.train()
    return trainer


def _rollout(trainer: MultiTurnGRPOTrainer) -> dict[str, Any]:
    batch = next(iter(trainer.get_train_dataloader()))
    return trainer._generate_and_score_completions(batch)


def _logprob_gradient(trainer: MultiTurnGRPOTrainer, out: dict[str, Any]) -> torch.Tensor:
    """d loss / d (per-token logprob of each completion token), through TRL's own loss."""
    leaves = []
    compute = trainer._get_per_token_logps_and_entropies

    def recorded(*args: Any, **kwargs: Any) -> Any:
        logps, *rest = compute(*args, **kwargs)
        leaf = logps.detach().requires_grad_(True)
        leaves.append(leaf)
        return (leaf, *rest)

    trainer._get_per_token_logps_and_entropies = recorded
    trainer.current_gradient_accumulation_steps = 1  # set by the training loop, which this step is outside of
    trainer.compute_loss(trainer.model, out).backward()
    (leaf,) = leaves
    return leaf.grad


def _cut_replies(trainer: MultiTurnGRPOTrainer) -> list[list[tuple[int, int]]]:
    return [
        [span for span, how in zip(e.reply_spans, e.stopped_by, strict=True) if how == "budget"]
        for e in trainer.last_episodes
    ]


@pytest.mark.parametrize("mode", ["train", "mask_reply"])
def test_a_masked_truncated_reply_has_no_weight_in_the_loss(tiny_babyai: Path, tmp_path: Path, mode: str) -> None:
    trainer = _trainer(tiny_babyai, tmp_path, truncated_replies=mode)
    out = _rollout(trainer)
    trainer.engine.close()
    episodes, cut = trainer.last_episodes, _cut_replies(trainer)
    assert any(cut) and any(not c for c in cut)  # odd contexts ran to the budget, even ones ended
    assert all(end - start == BUDGET for spans in cut for start, end in spans)
    grad = _logprob_gradient(trainer, out)
    for i, e in enumerate(episodes):
        for span, how in zip(e.reply_spans, e.stopped_by, strict=True):
            start, end = span
            weight, reply_grad = out["tool_mask"][i, start:end], grad[i, start:end]
            if how == "budget" and mode == "mask_reply":
                assert not weight.any() and torch.equal(reply_grad, torch.zeros_like(reply_grad))
            else:
                assert weight.all() and out["completion_mask"][i, start:end].all()
    ended = [(i, s) for i, e in enumerate(episodes) for s, h in zip(e.reply_spans, e.stopped_by, strict=True)]
    assert any(grad[i, a:b].abs().sum() > 0 for i, (a, b) in ended)  # the loss does train on replies
    if mode == "train":  # without the guard the cut replies are trained on
        assert any(grad[i, a:b].abs().sum() > 0 for i, spans in enumerate(cut) for a, b in spans)
    replies = sum(len(e.stopped_by) for e in episodes)
    cut_count = sum(len(c) for c in cut)
    metrics = trainer._metrics["train"]
    assert metrics["episode/truncated_replies"][-1] == pytest.approx(cut_count / replies)
    want = cut_count / replies if mode == "mask_reply" else 0.0
    assert metrics["episode/masked_truncated_replies"][-1] == pytest.approx(want)


def test_mask_episode_leaves_out_every_token_of_an_episode_with_a_cut_reply(tiny_babyai: Path, tmp_path: Path) -> None:
    trainer = _trainer(tiny_babyai, tmp_path, truncated_replies="mask_episode")
    out = _rollout(trainer)
    trainer.engine.close()
    cut = _cut_replies(trainer)
    grad = _logprob_gradient(trainer, out)
    for i, spans in enumerate(cut):
        rows = out["tool_mask"][i] * out["completion_mask"][i]
        if spans:
            assert not rows.any() and not grad[i].any()
        else:
            assert rows.sum() == sum(trainer.last_episodes[i].env_mask)
    share = trainer._metrics["train"]["episode/masked_truncated_episodes"][-1]
    assert share == pytest.approx(sum(bool(c) for c in cut) / len(cut))


def test_budget_truncated_episodes_leave_the_loss(tiny_babyai: Path, tmp_path: Path) -> None:
    # the ended replies' episodes get longer observations and reach the episode budget before the turn limit
    trainer = _trainer(tiny_babyai, tmp_path, max_completion_length=100, budget_truncated_episodes="mask_episode")
    out = _rollout(trainer)
    trainer.engine.close()
    episodes = trainer.last_episodes
    budget = [e.budget_truncated for e in episodes]
    assert any(budget) and not all(budget), budget
    for i, e in enumerate(episodes):
        kept = (out["tool_mask"][i] * out["completion_mask"][i]).sum()
        assert kept == (0 if e.budget_truncated else sum(e.env_mask))
    share = trainer._metrics["train"]["episode/masked_budget_truncated"][-1]
    assert share == pytest.approx(sum(budget) / len(budget))


def test_the_overlong_penalty_enters_the_episode_reward(tiny_babyai: Path, tmp_path: Path) -> None:
    buffer, factor = 4, 0.5
    trainer = _trainer(tiny_babyai, tmp_path, overlong_buffer_len=buffer, overlong_penalty_factor=factor)
    out = _rollout(trainer)
    trainer.engine.close()
    base = RECORDED[-1]
    assert "overlong_penalty" in trainer.reward_func_names and out["advantages"].abs().sum() > 0
    for i, e in enumerate(trainer.last_episodes):
        # by hand: DAPO's penalty of each reply against the budget, averaged over the episode's replies
        per_reply = []
        for start, end in e.reply_spans:
            length = end - start
            per_reply.append(0.0 if length <= BUDGET - buffer else (BUDGET - buffer - length) / buffer)
        penalty = sum(per_reply) / len(per_reply)
        assert trainer.rewards[i].item() == pytest.approx(base[i] + factor * penalty, abs=1e-6)
    penalties = trainer._metrics["train"]["episode/overlong_penalty"]
    assert penalties and penalties[-1] < 0  # the rambling replies ran to the budget
