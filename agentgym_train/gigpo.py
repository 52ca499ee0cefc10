"""GiGPO (Feng et al., 2025): advantages at two levels, the step level grouped by anchor state.

The episode level compares an episode's reward with its group's, each episode counted once (the paper's) or
once per turn (verl-agent's step rows); the step level compares a turn's discounted return-to-go with those of
the group's turns that start from the same env state (its anchor: `Episode.state_keys`, from the env's
`state_key()` or its observation text). Both are normalised under one `norm` (`mean_norm`: `x - mean`;
`mean_std_norm`: over `std + 1e-6` too); a turn alone in its step group gets 0, and a group whose values are
all equal gets exact zeros at either level. The estimator `gigpo` (`agentgym_train.estimators`) adds
`omega` times the step advantage, on each turn's tokens, to the episode advantage.

    >>> gigpo_step_advantages([[1.0, 2.0], [3.0]], [["start", "near"], ["start"]], group_size=2)
    [[-1.0, 0.0], [1.0]]
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence

import torch

from agentgym_train.reward_groups import check_groups

#: GiGPO's normalisation of both levels (`gigpo_norm`).
GIGPO_NORMS = ("mean_norm", "mean_std_norm")
#: What the episode level's group statistics count (`gigpo_episode_stats`): each episode once, or once per turn.
GIGPO_EPISODE_STATS = ("per_episode", "step_rows")
#: float32's machine epsilon: TRL hands the rewards over as float32.
_F32_EPS = float(torch.finfo(torch.float32).eps)


def turn_returns(turn_rewards: Sequence[float], reward: float, gamma: float = 1.0) -> list[float]:
    """Each turn's discounted return-to-go `R_t = sum_{k>=t} gamma^(k-t) r_k` (GiGPO's Eq. 5).

    `turn_rewards` are what the env paid on each turn; `reward` is the episode's reward as the trainer
    scores it (TRL's weighted sum of the reward functions), and whatever it adds to the env's payments
    is paid on the last turn, so that the undiscounted returns-to-go start at the episode's reward. A rest
    within float32's rounding of the reward (TRL's rewards are float32) is that rounding, not a payment:
    episodes whose payments from turn t on are equal get equal returns at t, bit for bit.
    """
    if not turn_rewards:
        return []
    paid = [float(r) for r in turn_rewards]
    rest = float(reward) - sum(paid)
    if abs(rest) > 4 * _F32_EPS * max(1.0, abs(float(reward)), sum(abs(p) for p in paid)):
        paid[-1] += rest
    returns, running = [0.0] * len(paid), 0.0
    for t in reversed(range(len(paid))):
        running = paid[t] + gamma * running
        returns[t] = running
    return returns


def _normalise(values: Sequence[float], counts: Sequence[int], norm: str, eps: float) -> list[float]:
    """`v - mean` (`mean_norm`) or `(v - mean) / (std + eps)` (`mean_std_norm`) for each value, where the mean
    and the unbiased std count value i `counts[i]` times; exact zeros when the counted values are all equal."""
    if norm not in GIGPO_NORMS:
        raise ValueError(f"gigpo_norm must be one of {GIGPO_NORMS}, got {norm!r}")
    counted = [(v, c) for v, c in zip(values, counts, strict=True) if c > 0]
    if len({v for v, _ in counted}) < 2:
        return [0.0] * len(values)
    n = sum(c for _, c in counted)
    mean = math.fsum(v * c for v, c in counted) / n
    centred = [v - mean for v in values]
    if norm == "mean_norm":
        return centred
    std = math.sqrt(math.fsum(c * (v - mean) ** 2 for v, c in counted) / (n - 1))
    return [x / (std + eps) for x in centred]


def gigpo_episode_advantages(
    rewards: torch.Tensor,
    group_size: int,
    norm: str = "mean_norm",
    turns: Sequence[int] | None = None,
    eps: float = 1e-6,
) -> torch.Tensor:
    """GiGPO's episode-level advantages (Eq. 3), one per episode (float64).

    Args:
        rewards: (N,) every episode's reward (generation order, `group_size` consecutive episodes per task;
            NaN: left out of the statistics, advantage 0).
        norm: `mean_norm` (`r - mean`) or `mean_std_norm` (`(r - mean) / (std + eps)`, unbiased std).
        turns: per episode, the turns it played. Without them (the paper's per-episode statistics) each
            episode counts once in its group's mean and std; with them (verl-agent's step rows) an episode
            of k turns counts k times, as it has k rows there, and one of 0 turns not at all.
    """
    check_groups(rewards, group_size)
    flat = rewards.double().tolist()
    groups = [flat[start : start + group_size] for start in range(0, len(flat), group_size)]
    if turns is not None and len(turns) != len(rewards):
        raise ValueError(f"expected one turn count per episode ({len(rewards)}), got {len(turns)}")
    out: list[float] = []
    for g, values in enumerate(groups):
        counts = [
            0 if math.isnan(v) else (1 if turns is None else int(turns[g * group_size + k]))
            for k, v in enumerate(values)
        ]
        advantages = _normalise([0.0 if math.isnan(v) else v for v in values], counts, norm, eps)
        out += [0.0 if math.isnan(v) else a for v, a in zip(values, advantages, strict=True)]
    return torch.tensor(out, dtype=torch.float64)


def gigpo_step_advantages(
    returns: Sequence[Sequence[float]],
    states: Sequence[Sequence[Hashable]],
    group_size: int,
    norm: str = "mean_norm",
    eps: float = 1e-6,
) -> list[list[float]]:
    """GiGPO's step-level advantages (Eq. 6-7): per episode, per turn.

    Args:
        returns: per episode (generation order, `group_size` consecutive episodes per task), each turn's
            discounted return-to-go (`turn_returns`); an empty list for an episode left out (NaN reward).
        states: per episode, the key of the state each turn started from.
        norm: `mean_norm` (`R_t - mean`) or `mean_std_norm` (`(R_t - mean) / (std + eps)`, unbiased std),
            over the turns of the step group (each turn once: a row of verl-agent's batch).

    Returns:
        per episode, per turn: the normalised return; 0 for a turn alone in its step group, and exactly 0
        for every turn of a step group whose returns are all equal.
    """
    if norm not in GIGPO_NORMS:
        raise ValueError(f"gigpo_norm must be one of {GIGPO_NORMS}, got {norm!r}")
    if len(returns) != len(states) or len(returns) % group_size:
        raise ValueError(
            f"expected as many return lists as state lists ({len(returns)} vs {len(states)}), "
            f"a multiple of group_size={group_size}"
        )
    members: dict[tuple[int, Hashable], list[tuple[int, int]]] = defaultdict(list)
    for i, (episode_returns, episode_states) in enumerate(zip(returns, states, strict=True)):
        if len(episode_returns) != len(episode_states):
            raise ValueError(f"episode {i}: {len(episode_returns)} returns for {len(episode_states)} states")
        for t, state in enumerate(episode_states):
            members[(i // group_size, state)].append((i, t))
    advantages = [[0.0] * len(r) for r in returns]
    for turns in members.values():
        values = [float(returns[i][t]) for i, t in turns]
        for (i, t), value in zip(turns, _normalise(values, [1] * len(values), norm, eps), strict=True):
            advantages[i][t] = value
    return advantages


def per_turn_to_tokens(
    values: Sequence[Sequence[float]], spans: Sequence[Sequence[tuple[int, int]]], width: int
) -> torch.Tensor:
    """(B, width): each reply's value on its tokens (`spans`: per episode, each reply's `[start, end)` in
    the completion), 0 on env tokens and padding."""
    out = torch.zeros(len(values), width)
    for row, (episode_values, episode_spans) in enumerate(zip(values, spans, strict=True)):
        for value, (start, end) in zip(episode_values, episode_spans, strict=True):
            out[row, start : min(end, width)] = value
    return out
