"""GiGPO (Feng et al., 2025): step-level advantages over anchor states, checked against the paper's
formulas computed here by hand, the env contract's `state_key`, and the trainer's (B, T) advantages.

Eq. 3: A^E = r - mean over the group (`mean_norm`), over its std + 1e-6 as well (`mean_std_norm`); the group's
statistics count each episode once (`per_episode`, the paper's) or once per turn (`step_rows`, verl-agent's rows).
Eq. 5: R_t = sum_{k>=t} gamma^(k-t) r_k. Eq. 7: A^S = R_t - mean over the step group (the turns of one task's
group that start from the same state), over its std + 1e-6 with `mean_std_norm`. Eq. 8: A = A^E + omega A^S.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from train_helpers import BABYAI, ENV_KWARGS, grpo_args

import agentgym_envs  # noqa: F401
from agentgym_train import gigpo
from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import RolloutEngine, Task
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer


def test_turn_returns_by_hand() -> None:
    # the env paid 0, 0.5, 0 and the trainer's reward is 1.0: the remaining 0.5 is paid on the last turn
    assert gigpo.turn_returns([0.0, 0.5, 0.0], 1.0, gamma=0.5) == [0.375, 0.75, 0.5]
    assert gigpo.turn_returns([0.0, 0.0, 1.0], 1.0, gamma=1.0) == [1.0, 1.0, 1.0]
    assert gigpo.turn_returns([], 1.0) == []
    assert gigpo.turn_returns([1.0], 1.00001) == [1.00001]  # a rest past float32's rounding is paid


def test_equal_tails_get_exact_zeros_under_both_norms() -> None:
    """A pays 0.3 then 0.6, B pays 0.6, and B's turn starts where A's second did: equal tails. TRL hands the
    rewards over as float32 (0.9 -> 0.89999998, 0.6 -> 0.60000002); that rounding is no payment."""
    a_reward, b_reward = torch.tensor([0.9, 0.6]).tolist()
    a, b = gigpo.turn_returns([0.3, 0.6], a_reward, gamma=0.95), gigpo.turn_returns([0.6], b_reward, gamma=0.95)
    assert (a, b) == ([0.3 + 0.95 * 0.6, 0.6], [0.6])
    for norm in gigpo.GIGPO_NORMS:  # the residuals 2e-8 apart gave +-0.023 under mean_std_norm
        assert gigpo.gigpo_step_advantages([a, b], [["r", "s"], ["s"]], 2, norm=norm) == [[0.0, 0.0], [0.0]]
        assert gigpo.gigpo_episode_advantages(torch.tensor([0.1, 0.1, 0.1]), 3, norm).tolist() == [0.0] * 3


def test_episode_level_by_hand_in_both_norms_and_both_statistics() -> None:
    # group 0: rewards 1, 0, 0.5, 0 over 2, 4, 1, 3 turns; group 1: one unscorable episode, the rest equal
    rewards = torch.tensor([1.0, 0.0, 0.5, 0.0, float("nan"), 0.4, 0.4, 0.4])
    turns = [2, 4, 1, 3, 0, 5, 1, 2]
    # per episode: mean 1.5 / 4 = 0.375; unbiased std sqrt((0.625^2 + 0.375^2 + 0.125^2 + 0.375^2) / 3)
    centred = [0.625, -0.375, 0.125, -0.375]
    std = math.sqrt(0.6875 / 3)
    want = {
        ("mean_norm", None): centred,
        ("mean_std_norm", None): [c / (std + 1e-6) for c in centred],
    }
    # step rows: 1.0 twice, 0.0 four times, 0.5 once, 0.0 three times: mean 2.5 / 10 = 0.25,
    # unbiased std sqrt((2 * 0.75^2 + 7 * 0.25^2 + 0.25^2) / 9)
    rows_centred = [0.75, -0.25, 0.25, -0.25]
    rows_std = math.sqrt((2 * 0.5625 + 7 * 0.0625 + 0.0625) / 9)
    want[("mean_norm", "rows")] = rows_centred
    want[("mean_std_norm", "rows")] = [c / (rows_std + 1e-6) for c in rows_centred]
    for (norm, stats), first in want.items():
        got = gigpo.gigpo_episode_advantages(rewards, 4, norm, turns if stats else None).tolist()
        assert got[:4] == pytest.approx(first, abs=1e-12), (norm, stats)
        assert got[4:] == [0.0] * 4  # NaN left out; the others equal: exact zeros


def test_step_rows_count_each_episode_once_per_turn_as_a_repeated_row() -> None:
    """verl-agent's rows: an episode of k turns is k rows carrying its reward. Repeating each reward k times and
    taking per-episode statistics over the rows must give the same advantage."""
    rewards, turns = [0.9, 0.1, 0.4], [3, 1, 2]
    rows = torch.tensor([r for r, k in zip(rewards, turns, strict=True) for _ in range(k)])
    for norm in gigpo.GIGPO_NORMS:
        per_row = gigpo.gigpo_episode_advantages(rows, len(rows), norm).tolist()
        got = gigpo.gigpo_episode_advantages(torch.tensor(rewards), 3, norm, turns).tolist()
        assert got == pytest.approx([per_row[0], per_row[3], per_row[4]], abs=1e-12)


def test_no_repeated_state_gives_zero_step_advantages() -> None:
    returns = [[0.5, 1.0], [0.2], [0.0, 0.0, 0.0], [1.0]]
    states = [["a", "b"], ["c"], ["d", "e", "f"], ["g"]]  # two groups of 2, every state once
    assert gigpo.gigpo_step_advantages(returns, states, group_size=2) == [[0.0, 0.0], [0.0], [0.0, 0.0, 0.0], [0.0]]


def test_repeated_states_by_hand() -> None:
    # group 0: episodes 0 and 1 start in "s"; episode 0 comes back to "s" on its third turn; "t" is shared too
    returns = [[0.9, 0.8, 0.7], [0.1, 0.3], [1.0], [1.0]]
    states = [["s", "t", "s"], ["s", "t"], ["s"], ["u"]]  # group 1: episodes 2 and 3 share nothing
    got = gigpo.gigpo_step_advantages(returns, states, group_size=2)
    mean_s, mean_t = (0.9 + 0.7 + 0.1) / 3, (0.8 + 0.3) / 2
    want = [[0.9 - mean_s, 0.8 - mean_t, 0.7 - mean_s], [0.1 - mean_s, 0.3 - mean_t], [0.0], [0.0]]
    flat = [(g, w) for gs, ws in zip(got, want, strict=True) for g, w in zip(gs, ws, strict=True)]
    assert all(math.isclose(g, w, abs_tol=1e-9) for g, w in flat)
    scaled = gigpo.gigpo_step_advantages(returns, states, group_size=2, norm="mean_std_norm", eps=0.0)
    std_s = math.sqrt(sum((x - mean_s) ** 2 for x in (0.9, 0.7, 0.1)) / 2)  # unbiased, as torch.std
    assert math.isclose(scaled[0][0], (0.9 - mean_s) / std_s, rel_tol=1e-9)
    assert math.isclose(scaled[1][1], (0.3 - mean_t) / math.sqrt((0.8 - mean_t) ** 2 + (0.3 - mean_t) ** 2))


def test_per_turn_values_land_on_their_reply_tokens() -> None:
    tokens = gigpo.per_turn_to_tokens([[1.0, -2.0], [3.0]], [[(0, 2), (4, 5)], [(1, 3)]], width=6)
    assert tokens.tolist() == [[1.0, 1.0, 0.0, 0.0, -2.0, 0.0], [0.0, 3.0, 3.0, 0.0, 0.0, 0.0]]


def test_babyai_state_key_matches_states_not_texts() -> None:
    env = gym.make(BABYAI)
    env.reset(seed=3)
    base = env.unwrapped
    start = base.state_key()
    env.step("turn left")
    turned = base.state_key()
    env.step("turn right")
    assert base.state_key() == start != turned  # back where it began, by another path
    env.close()


def test_textcraft_state_key_is_the_inventory() -> None:
    env = gym.make("AgentGym/TextCraft-v0")
    env.reset(seed=0)
    base = env.unwrapped
    assert base.state_key() == tuple(sorted((k, v) for k, v in base.inventory.items() if v))
    env.close()


def test_engine_records_each_turns_start_state_and_reward(tiny_babyai: Path) -> None:
    """Scripted replies: turn left, turn right, turn left; the third turn starts where the first did."""
    _, tokenizer = load_model(tiny_babyai)
    replies = iter(["Action: turn left", "Action: turn right", "Action: turn left"])

    def generate(contexts: list[list[int]], max_new_tokens: int, stop=None) -> list[tuple[list[int], list[float]]]:
        ids = tokenizer(next(replies), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        return [(ids, [-0.1] * len(ids)) for _ in contexts]

    options = {"max_turns": 3, "max_turn_tokens": 32, "max_completion_length": 512, "env_kwargs": ENV_KWARGS}
    engine = RolloutEngine(tokenizer, record_states=True, **options)
    (episode,) = engine.run([Task(BABYAI, split="train", seed=3)], generate)
    engine.close()
    assert episode.turns == 3 and len(episode.state_keys) == 3 and len(episode.turn_rewards) == 3
    assert episode.state_keys[0] == episode.state_keys[2] != episode.state_keys[1]
    assert sum(episode.turn_rewards) == pytest.approx(episode.episode_return)
    replies = iter(["Action: turn left"])
    plain = RolloutEngine(tokenizer, **{**options, "max_turns": 1})  # no state digests unless asked
    assert plain.run([Task(BABYAI, split="train", seed=3)], generate)[0].state_keys == []
    plain.close()
    for (start, end), reply in zip(episode.reply_spans, episode.replies, strict=True):
        assert all(episode.env_mask[start:end])
        assert tokenizer.decode(episode.completion_ids[start:end], skip_special_tokens=True) == reply


def reply_length(completions: list[str], **kwargs) -> list[float]:
    """A reward that differs inside groups, so that returns differ between turns of one anchor state."""
    return [len(c) / 100 for c in completions]


@pytest.mark.parametrize(("norm", "stats"), [("mean_norm", "per_episode"), ("mean_std_norm", "step_rows")])
def test_trainer_advantages_are_episode_plus_omega_step_advantages(
    tiny_babyai: Path, tmp_path: Path, norm: str, stats: str
) -> None:
    model, tokenizer = load_model(tiny_babyai)
    omega, gamma = 0.5, 0.9
    args = grpo_args(
        tmp_path,
        advantage_estimator="gigpo",
        gigpo_omega=omega,
        gigpo_gamma=gamma,
        gigpo_norm=norm,
        gigpo_episode_stats=stats,
        max_turns=4,
        max_steps=1,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[reply_length])
    trainer.model.train()  # a training rollout, as inside trainer.train()
    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    episodes, group = trainer.last_episodes, args.num_generations
    rewards = trainer.rewards.tolist()
    scaled = norm == "mean_std_norm"

    def normalised(value: float, members: list[float]) -> float:  # members: one entry per counted row
        mean = sum(members) / len(members)
        if len(set(members)) < 2:
            return 0.0
        std = math.sqrt(sum((m - mean) ** 2 for m in members) / (len(members) - 1))
        return (value - mean) / (std + 1e-6) if scaled else value - mean

    # the episode part: each episode once (per_episode), or once per turn (step_rows), by hand
    episode_part = []
    for i, r in enumerate(rewards):
        first = (i // group) * group
        members = [rewards[j] for j in range(first, first + group) for _ in range(episodes[j].turns)]
        if stats == "per_episode":
            members = rewards[first : first + group]
        episode_part.append(normalised(r, members))
    # the step part: naive loops over every turn of every episode
    returns = {}
    for i, e in enumerate(episodes):
        for t in range(e.turns):
            paid = list(e.turn_rewards)
            paid[-1] += rewards[i] - sum(paid)
            returns[(i, t)] = sum(gamma ** (k - t) * paid[k] for k in range(t, e.turns))
    step_groups = defaultdict(list)
    for i, e in enumerate(episodes):
        for t in range(e.turns):
            step_groups[(i // group, e.state_keys[t])].append((i, t))
    assert all(len({e.state_keys[0] for e in episodes[g : g + group]}) == 1 for g in range(0, len(episodes), group))
    mask = out["completion_mask"] * out["tool_mask"]
    nonzero = 0
    for members in step_groups.values():
        values = [returns[m] for m in members]
        for i, t in members:
            start, end = episodes[i].reply_spans[t]
            want = episode_part[i] + omega * normalised(returns[(i, t)], values)
            got = out["advantages"][i, start:end]
            assert mask[i, start:end].all() and torch.allclose(got, torch.full_like(got, want), atol=1e-5)
            nonzero += abs(want - episode_part[i]) > 1e-6
    assert nonzero  # some turns got a step advantage of their own
    logs = trainer._metrics["train"]["gigpo/anchored_turn_share"]
    assert logs and 0 < logs[-1] <= 1  # every group's first turns share the reset state
    trainer.engine.close()


def test_config_refuses_unknown_norms_and_grpos_scaling(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"gigpo_norm must be one of \('mean_norm', 'mean_std_norm'\), got 'std'"):
        grpo_args(tmp_path, advantage_estimator="gigpo", gigpo_norm="std")
    with pytest.raises(ValueError, match=r"gigpo_episode_stats must be one of \('per_episode', 'step_rows'\)"):
        grpo_args(tmp_path, advantage_estimator="gigpo", gigpo_episode_stats="rows")
    with pytest.raises(ValueError, match="scale_rewards='none' is GRPO's normalisation; gigpo normalises"):
        grpo_args(tmp_path, advantage_estimator="gigpo", scale_rewards="none")
    args = grpo_args(tmp_path, advantage_estimator="gigpo")
    assert (args.gigpo_norm, args.gigpo_episode_stats) == ("mean_norm", "per_episode")
    grpo_args(tmp_path, scale_rewards="none")  # GRPO's own setting stays GRPO's
