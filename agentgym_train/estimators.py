"""Advantage estimators: GRPO and RLOO over episode rewards, REINFORCE++ and GAE over model tokens.

Rewards come in generation order: the G episodes of one task are consecutive, as TRL's sampler lays
them out. A reward is the scalar TRL computes from the configured `reward_funcs` and
`reward_weights` (the weighted sum; NaN where every function returned None). Token tensors are
(B, T) over the completion; `mask` is 1 on the model's own tokens and 0 on env tokens and padding.
Env tokens are not time steps: discounting and bootstrapping run over model tokens only, and env
tokens get no reward, no KL and no advantage.

- GRPO (Shao et al., 2024): `A_i = (r_i - mean(r_group)) / (std(r_group) + eps)`, one value per episode.
- RLOO (Ahmadian et al., 2024): `A_i = r_i - mean of the other G-1 rewards of the group`.
- REINFORCE++ (Hu, 2025): per model token `t`, the reward is `-kl_coef * (log pi(t) - log pi_ref(t))`
  plus the episode's reward on its last model token; `A_t` is the return-to-go `sum_{s>=t} gamma^(s-t)
  r_s`, whitened over every model token of the global batch (all processes). No critic.
  `reinforce++_baseline` subtracts the group's mean reward from each episode's reward first.
- GAE (Schulman et al., 2016) for PPO: `delta_t = r_t + gamma V_next - V_t`, `A_t = delta_t + gamma lambda A_next`.
- Turn rewards (REINFORCE++ and GAE): what the env pays during an episode (SciWorld's and TextWorld's
  score increments; BabyAI and TextCraft pay at the end only) sits on the last model token of the turn
  that earned it, the rest of the episode's reward on its last model token (`turn_payments`), and the
  return crosses each turn's end discounted by `turn_gamma` as well, so each turn is credited with its
  own discounted return-to-go. With `turn_gamma=1` and a terminal-only reward, nothing changes.
- GiGPO (Feng et al., 2025): an episode advantage plus `omega` times a step-level one over the turns that
  start from the same env state (its anchor); both levels are in `agentgym_train.gigpo`.

Each is registered by name (`register_estimator`, `ESTIMATORS`) as a function of an `EstimatorInput`;
the trainers look `advantage_estimator` up there, so a user's estimator needs no edit to them.

    >>> r = torch.tensor([1.0, 0.0, 1.0, 1.0])
    >>> grpo(r, group_size=2)
    tensor([ 0.7070, -0.7070,  0.0000,  0.0000])
    >>> rloo(r, group_size=2)
    tensor([ 1., -1.,  0.,  0.])
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from agentgym_train.gigpo import gigpo_episode_advantages, gigpo_step_advantages, per_turn_to_tokens, turn_returns
from agentgym_train.reward_groups import check_groups

#: Built-in estimators that fold the KL penalty into the reward (per token) instead of TRL's KL loss term.
KL_IN_REWARD = ("reinforce++", "reinforce++_baseline")

#: Sums a tensor over all processes (e.g. `lambda t: accelerator.reduce(t, reduction="sum")`).
Reduce = Callable[[torch.Tensor], torch.Tensor]


def _groups(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    check_groups(rewards, group_size)
    return rewards.float().view(-1, group_size)


def group_mean(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Each episode's group mean (NaN rewards left out), repeated per episode."""
    groups = _groups(rewards, group_size)
    return torch.nanmean(groups, dim=1, keepdim=True).expand_as(groups).flatten()


def grpo(rewards: torch.Tensor, group_size: int, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """Group-normalised: `(r - group mean) / (group std + eps)` (unscaled when `scale=False`), TRL's formula.

    The std is the unbiased one (as `torch.std` and TRL). NaN rewards get 0 and stay out of the statistics.
    """
    groups = _groups(rewards, group_size)
    valid = ~torch.isnan(groups)
    count = valid.sum(dim=1, keepdim=True)
    mean = torch.nansum(groups, dim=1, keepdim=True) / count.clamp(min=1)
    centred = torch.where(valid, groups - mean, torch.zeros_like(groups))
    if scale and group_size > 1:
        std = (centred.pow(2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)).sqrt()
        centred = centred / (std + eps)
    return centred.flatten()


def rloo(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """Leave-one-out baseline: `r_i - mean of the other G-1 rewards of the group`.

    NaN rewards get 0 and are left out of their siblings' baselines (as TRL's `RLOOTrainer`).
    """
    if group_size < 2:
        raise ValueError("RLOO needs at least 2 episodes per group (num_generations >= 2)")
    groups = _groups(rewards, group_size)
    valid = ~torch.isnan(groups)
    others = valid.sum(dim=1, keepdim=True) - 1
    total = torch.nansum(groups, dim=1, keepdim=True)
    advantages = groups - (total - groups) / others.clamp(min=1)
    return torch.where(valid & (others > 0), advantages, torch.zeros_like(groups)).flatten()


def last_token(mask: torch.Tensor) -> torch.Tensor:
    """(B,) index of each row's last model token (0 for a row without one)."""
    positions = torch.arange(1, mask.size(1) + 1, device=mask.device)
    return ((mask > 0) * positions).argmax(dim=1)


def token_rewards(
    scores: torch.Tensor,
    mask: torch.Tensor,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    paid: torch.Tensor | None = None,
) -> torch.Tensor:
    """(B, T) rewards: each episode's score on its last model token, minus `kl_coef * kl` on every model token.

    With `paid` ((B, T) env payments on the turns' last model tokens, see `turn_payments`), those payments
    stay where they are and only the rest of the score (`score - paid.sum()`) goes on the last model token,
    so that each episode's rewards still sum to its score. Rows without a model token (or with a NaN score)
    get no score.
    """
    mask = mask.to(torch.float32)
    rewards = torch.zeros_like(mask)
    if kl is not None and kl_coef:
        rewards = rewards - kl_coef * kl.to(torch.float32) * mask
    scores = scores.to(torch.float32)
    scored = (mask.sum(dim=1) > 0) & ~torch.isnan(scores)
    rows = torch.nonzero(scored).flatten()
    if paid is not None:
        paid = paid.to(torch.float32) * mask * scored.unsqueeze(1)
        rewards = rewards + paid
        scores = scores - paid.sum(dim=1)  # x - 0.0 == x: terminal-only payments leave the score as it was
    rewards[rows, last_token(mask)[rows]] += scores[rows]
    return rewards


def turn_payments(
    turn_rewards: Sequence[Sequence[float]], spans: Sequence[Sequence[tuple[int, int]]], mask: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Where the env's payments during an episode go among its model tokens, and where its turns end.

    A turn's payment lands on the last model token (`mask` 1) at or before the end of its reply, so a reply
    left out of the loss is no time step: its payment counts at the policy's last step before it. The last
    turn's payment is not placed (`token_rewards` puts the rest of the score there), nor is a payment with
    no model token before it. Turn ends mark the tokens that close a turn and have model tokens after them:
    there the per-turn discount of `returns_to_go` and `gae` applies.

    Args:
        turn_rewards: per episode, what the env paid on each turn.
        spans: per episode, each reply's `[start, end)` in the completion.
        mask: (B, T) the model tokens that are time steps.

    Returns:
        `paid` (B, T) float and `turn_ends` (B, T) bool.
    """
    paid = torch.zeros(mask.shape, dtype=torch.float32, device=mask.device)
    ends = torch.zeros(mask.shape, dtype=torch.bool, device=mask.device)
    steps = mask > 0
    for row, (episode_rewards, episode_spans) in enumerate(zip(turn_rewards, spans, strict=True)):
        tokens = torch.nonzero(steps[row]).flatten().tolist()
        if not tokens:
            continue
        for turn, (reward, (_, end)) in enumerate(zip(episode_rewards, episode_spans, strict=False)):
            before = bisect_left(tokens, end) - 1  # the last model token before `end`
            if before < 0:
                continue
            if before < len(tokens) - 1:
                ends[row, tokens[before]] = True
            if turn < len(episode_rewards) - 1:
                paid[row, tokens[before]] += float(reward)
    return paid, ends


def returns_to_go(
    rewards: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    turn_gamma: float = 1.0,
    turn_ends: torch.Tensor | None = None,
) -> torch.Tensor:
    """(B, T) discounted sum of the rewards from each model token to the episode's end.

    The discount applies per model token; env tokens are skipped (their entries are 0). Across a turn's end
    (`turn_ends`, from `turn_payments`) the next turn's return is discounted by `gamma * turn_gamma`, so with
    `gamma=1` every token of turn t gets `sum_{k>=t} turn_gamma^(k-t) r_k`.
    """
    mask = mask.to(rewards.dtype)
    returns = torch.zeros_like(rewards)
    running = torch.zeros(rewards.size(0), dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.size(1))):
        carried = gamma * running
        if turn_ends is not None:
            carried = torch.where(turn_ends[:, t], carried * turn_gamma, carried)
        running = torch.where(mask[:, t] > 0, rewards[:, t] + carried, running)
        returns[:, t] = running * mask[:, t]
    return returns


def masked_whiten(values: torch.Tensor, mask: torch.Tensor, reduce: Reduce | None = None) -> torch.Tensor:
    """`(x - mean) / std` over the mask-1 entries of every process (population std, floored at 1e-4); 0 elsewhere.

    Args:
        values: (B, T) this process's values.
        mask: (B, T) which entries count.
        reduce: sums a tensor over processes; None on one process.
    """
    total = (lambda t: t) if reduce is None else reduce
    mask = mask.to(values.dtype)
    sums = total(torch.stack([(values * mask).sum(), mask.sum()]))
    count = sums[1].clamp(min=1)
    mean = sums[0] / count
    variance = total(((values - mean) ** 2 * mask).sum()) / count
    return (values - mean) / variance.sqrt().clamp(min=1e-4) * mask


def reinforce_pp_advantages(
    name: str,
    rewards: torch.Tensor,
    group_size: int,
    rows: slice,
    mask: torch.Tensor,
    kl: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    gamma: float = 1.0,
    reduce: Reduce | None = None,
    paid: torch.Tensor | None = None,
    turn_ends: torch.Tensor | None = None,
    turn_gamma: float = 1.0,
) -> torch.Tensor:
    """REINFORCE++ token advantages for this process's episodes.

    Args:
        name: `reinforce++` or `reinforce++_baseline` (group mean subtracted from the rewards first).
        rewards: (N,) rewards of the whole global batch (all processes, generation order).
        group_size: episodes per task (the baseline's groups).
        rows: this process's rows of the global batch.
        mask: (B, T) model tokens of this process's episodes.
        kl: (B, T) per-token KL estimate `log pi - log pi_ref` (k1), or None.
        kl_coef: the KL coefficient (TRL's `beta`).
        gamma: discount per model token.
        reduce: sums over processes (the whitening spans the global batch).
        paid: (B, T) the env's payments during each episode (`turn_payments`), or None: all on the last token.
        turn_ends: (B, T) the tokens that end a turn (`turn_payments`), where `turn_gamma` discounts too.
        turn_gamma: discount per turn, on top of `gamma` per model token.

    Returns:
        (B, T) whitened advantages, 0 on env tokens, padding and episodes with a NaN reward.
    """
    if name not in KL_IN_REWARD:
        raise ValueError(f"expected one of {KL_IN_REWARD}, got {name!r}")
    if name == "reinforce++_baseline":
        rewards = rewards.float() - group_mean(rewards, group_size)
    scores = rewards[rows]
    mask = mask * ~torch.isnan(scores).to(mask.device).unsqueeze(1)
    returns = returns_to_go(token_rewards(scores, mask, kl, kl_coef, paid), mask, gamma, turn_gamma, turn_ends)
    return masked_whiten(returns, mask, reduce)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    gamma: float = 1.0,
    lam: float = 0.95,
    turn_gamma: float = 1.0,
    turn_ends: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the model's own tokens.

    Env tokens (`mask == 0`) are skipped, not treated as time steps: the next model token after an
    observation is the next step, so the value bootstraps across the env's turn. At a turn's last token
    (`turn_ends`, from `turn_payments`) the discount is `gamma * turn_gamma`: `delta_t = r_t + gamma
    turn_gamma V_next - V_t` and `A_t = delta_t + gamma turn_gamma lambda A_next`.

    Args:
        rewards: (B, T) reward on each token (typically the episode's reward on its last model token).
        values: (B, T) value estimates: `values[:, t]` is V of the state before model token t.
        mask: (B, T) 1 on model tokens, 0 on env tokens and padding.

    Returns:
        (advantages, returns), both (B, T) and zero where `mask == 0`.

    Example:
        >>> r = torch.tensor([[0.0, 0.0, 0.0, 1.0]]); m = torch.tensor([[1, 0, 0, 1]])
        >>> adv, ret = gae(r, torch.zeros(1, 4), m, gamma=1.0, lam=1.0)
        >>> adv.tolist(), ret.tolist()
        ([[1.0, 0.0, 0.0, 1.0]], [[1.0, 0.0, 0.0, 1.0]])
    """
    mask = mask.to(values.dtype)
    advantages = torch.zeros_like(values)
    next_value = torch.zeros(values.size(0), dtype=values.dtype, device=values.device)
    running = torch.zeros_like(next_value)
    for t in reversed(range(values.size(1))):
        m = mask[:, t]
        bootstrap, carried = gamma * next_value, gamma * lam * running
        if turn_ends is not None:
            bootstrap = torch.where(turn_ends[:, t], bootstrap * turn_gamma, bootstrap)
            carried = torch.where(turn_ends[:, t], carried * turn_gamma, carried)
        delta = rewards[:, t] + bootstrap - values[:, t]
        step = delta + carried
        running = torch.where(m > 0, step, running)
        next_value = torch.where(m > 0, values[:, t], next_value)
        advantages[:, t] = running * m
    return advantages, (advantages + values) * mask


# ---- the estimator registry (`advantage_estimator`) ---------------------------------------------------


@dataclass
class EstimatorInput:
    """What an estimator sees of one scored rollout batch; it returns advantages for this process's rows.

    Attributes:
        rewards: (N,) the reward of every episode of the global batch (all processes, generation order,
            `group_size` consecutive episodes per task; NaN: unscorable).
        group_size: episodes per task.
        rows: this process's rows of the global batch.
        grpo: (B,) TRL's GRPO advantages of this process's rows (its `scale_rewards` and aggregation).
        mask: (B, T) this process's model tokens (env tokens, padding and masked replies 0).
        episodes: this process's episodes (`agentgym_train.rollout.Episode`: `turn_rewards`, `reply_spans`,
            `state_keys`, ...).
        config: the trainer's `MultiTurnGRPOConfig`.
        kl_coef: the KL coefficient (TRL's `beta`).
        reduce: sums a tensor over processes (None on one process).
        gather: lists from every process, concatenated in global order (None on one process).
        kl: (B, T) `log pi - log pi_ref` per model token of the sampling policy (None when `beta` is 0);
            asked for only by estimators registered with `kl_in_reward`.
        log: records a metric of this batch (`log(name, value)`).
    """

    rewards: torch.Tensor
    group_size: int
    rows: slice
    grpo: torch.Tensor
    mask: torch.Tensor
    episodes: Sequence[Any] = ()
    config: Any = None
    kl_coef: float = 0.0
    reduce: Reduce | None = None
    gather: Callable[[list], list] | None = None
    kl: Callable[[], torch.Tensor | None] = lambda: None
    log: Callable[[str, float], None] = lambda name, value: None

    @property
    def local_rewards(self) -> torch.Tensor:
        return self.rewards[self.rows]


@dataclass(frozen=True)
class Estimator:
    """A registered estimator: `fn(EstimatorInput) -> (B,) or (B, T) advantages` and what the trainer must do
    for it: `kl_in_reward` (no KL loss term; `EstimatorInput.kl` is computed), `record_states` (the rollout
    records each turn's state key), `any_aggregation` (takes TRL's `normalize_then_sum` too; others take the
    weighted sum of the rewards), `group_relative` (its advantages compare each episode with its group's, so
    that a group whose episodes all score alike carries no signal: what dynamic sampling assumes)."""

    name: str
    fn: Callable[[EstimatorInput], torch.Tensor]
    kl_in_reward: bool = False
    record_states: bool = False
    any_aggregation: bool = False
    group_relative: bool = False


#: The registry: name -> `Estimator`. Add one with `register_estimator`.
ESTIMATORS: dict[str, Estimator] = {}


def register_estimator(
    name: str,
    *,
    kl_in_reward: bool = False,
    record_states: bool = False,
    any_aggregation: bool = False,
    group_relative: bool = False,
    override: bool = False,
) -> Callable[[Callable[[EstimatorInput], torch.Tensor]], Callable[[EstimatorInput], torch.Tensor]]:
    """Registers `fn(EstimatorInput) -> advantages` as `advantage_estimator=name` (a decorator):

        @register_estimator("mean_baseline")
        def mean_baseline(batch):
            return (batch.rewards - group_mean(batch.rewards, batch.group_size))[batch.rows]

    The trainer replaces TRL's advantages with what it returns: (B,) one per episode, or (B, T) per token.
    A name already taken is refused unless `override`. `group_relative=True` declares that its advantages
    are relative to the group's (dynamic sampling is refused for the others).
    """

    def register(fn: Callable[[EstimatorInput], torch.Tensor]) -> Callable[[EstimatorInput], torch.Tensor]:
        if name in ESTIMATORS and not override:
            raise ValueError(f"advantage estimator {name!r} is already registered (override=True replaces it)")
        ESTIMATORS[name] = Estimator(name, fn, kl_in_reward, record_states, any_aggregation, group_relative)
        return fn

    return register


def get_estimator(name: str) -> Estimator:
    """The registered estimator `name`; a ValueError naming the registered ones otherwise."""
    if name not in ESTIMATORS:
        raise ValueError(
            f"advantage_estimator must be one of {tuple(ESTIMATORS)}, got {name!r} "
            "(agentgym_train.estimators.register_estimator adds one)"
        )
    return ESTIMATORS[name]


@register_estimator("grpo", any_aggregation=True, group_relative=True)
def _grpo(batch: EstimatorInput) -> torch.Tensor:
    """TRL's group normalisation, as TRL computed it; KL as TRL's loss term."""
    return batch.grpo


@register_estimator("rloo", group_relative=True)
def _rloo(batch: EstimatorInput) -> torch.Tensor:
    """Leave-one-out baseline (`rloo`); KL as TRL's loss term."""
    return rloo(batch.rewards, batch.group_size)[batch.rows]


def _reinforce_pp(name: str) -> Callable[[EstimatorInput], torch.Tensor]:
    def estimate(batch: EstimatorInput) -> torch.Tensor:
        """REINFORCE++ (`reinforce_pp_advantages`): the k1 KL in the reward, turn payments on their turns."""
        kl = batch.kl()
        paid, ends = turn_payments(
            [e.turn_rewards for e in batch.episodes], [e.reply_spans for e in batch.episodes], batch.mask
        )
        config = batch.config
        return reinforce_pp_advantages(
            name,
            batch.rewards,
            batch.group_size,
            batch.rows,
            batch.mask,
            kl,
            batch.kl_coef,
            config.reinforce_gamma,
            batch.reduce,
            paid,
            ends,
            config.turn_gamma,
        )

    return estimate


for _name in KL_IN_REWARD:
    # reinforce++ whitens over the whole batch: a group whose episodes score alike still carries signal
    register_estimator(_name, kl_in_reward=True, group_relative=_name == "reinforce++_baseline")(_reinforce_pp(_name))


@register_estimator("gigpo", record_states=True, group_relative=True)
def _gigpo(batch: EstimatorInput) -> torch.Tensor:
    """GiGPO's (B, T) advantages: each episode's episode-level advantage plus `gigpo_omega` times each turn's
    step advantage on the turn's tokens, both under `gigpo_norm` (step groups span every process, as the
    episode groups do; `gigpo_episode_stats` says what the episode level's statistics count)."""
    config, episodes, group = batch.config, batch.episodes, batch.group_size
    returns = [
        [] if math.isnan(r) else turn_returns(e.turn_rewards, r, config.gigpo_gamma)  # NaN: left out
        for e, r in zip(episodes, batch.local_rewards.tolist(), strict=True)
    ]
    states = [e.state_keys[: len(rs)] for e, rs in zip(episodes, returns, strict=True)]
    if batch.gather is not None:  # every process's episodes, in the global batch's order
        returns, states = batch.gather(returns), batch.gather(states)
    turns = [len(r) for r in returns] if config.gigpo_episode_stats == "step_rows" else None
    episode = gigpo_episode_advantages(batch.rewards, group, config.gigpo_norm, turns)[batch.rows]
    step = gigpo_step_advantages(returns, states, group, config.gigpo_norm)[batch.rows]
    spans = [e.reply_spans[: len(values)] for e, values in zip(episodes, step, strict=True)]
    tokens = per_turn_to_tokens(step, spans, batch.mask.size(1)).to(batch.grpo)
    # the share of turns that share their anchor state with another turn of their group (all processes)
    visits = Counter((i // group, key) for i, keys in enumerate(states) for key in keys)
    shared = sum(count for count in visits.values() if count > 1)
    batch.log("gigpo/anchored_turn_share", shared / max(1, sum(visits.values())))
    return episode.to(batch.grpo).unsqueeze(1) + config.gigpo_omega * tokens
