"""Advantage estimators over episode returns (GRPO, RLOO, REINFORCE++) and over model tokens (GAE).

Returns come in generation order: the G episodes of one task are consecutive, as TRL's sampler
lays them out. GRPO is also what `trl.GRPOTrainer` computes itself (`scale_rewards="group"`); the
trainer uses these functions for the other estimators.

    >>> import torch
    >>> r = torch.tensor([1.0, 0.0, 1.0, 1.0])
    >>> grpo(r, group_size=2)
    tensor([ 0.7070, -0.7070,  0.0000,  0.0000])
    >>> rloo(r, group_size=2)
    tensor([ 1., -1.,  0.,  0.])
"""

from __future__ import annotations

import torch

ESTIMATORS = ("grpo", "rloo", "reinforce++")


def _groups(returns: torch.Tensor, group_size: int) -> torch.Tensor:
    if returns.dim() != 1 or returns.numel() % group_size:
        raise ValueError(
            f"expected a flat tensor of returns whose length is a multiple of group_size={group_size}, "
            f"got shape {tuple(returns.shape)}"
        )
    return returns.view(-1, group_size)


def grpo(returns: torch.Tensor, group_size: int, scale: bool = True, eps: float = 1e-4) -> torch.Tensor:
    """Group-normalised: `(r - mean of the group) / (std of the group + eps)` (std unscaled when `scale=False`)."""
    groups = _groups(returns.float(), group_size)
    centred = groups - groups.mean(dim=1, keepdim=True)
    if scale and group_size > 1:
        centred = centred / (groups.std(dim=1, keepdim=True) + eps)
    return centred.flatten()


def rloo(returns: torch.Tensor, group_size: int) -> torch.Tensor:
    """Leave-one-out baseline: `r_i - mean of the other G-1 returns of the group`."""
    if group_size < 2:
        raise ValueError("RLOO needs at least 2 episodes per group")
    groups = _groups(returns.float(), group_size)
    others = (groups.sum(dim=1, keepdim=True) - groups) / (group_size - 1)
    return (groups - others).flatten()


def reinforce_pp(returns: torch.Tensor, group_size: int, eps: float = 1e-4) -> torch.Tensor:
    """REINFORCE++ (baseline variant): subtract the group mean, then normalise by the whole batch's std."""
    groups = _groups(returns.float(), group_size)
    centred = (groups - groups.mean(dim=1, keepdim=True)).flatten()
    return centred / (centred.std() + eps) if centred.numel() > 1 else centred


def compute(name: str, returns: torch.Tensor, group_size: int) -> torch.Tensor:
    """One advantage per episode with the estimator `name` (one of `ESTIMATORS`)."""
    if name == "grpo":
        return grpo(returns, group_size)
    if name == "rloo":
        return rloo(returns, group_size)
    if name == "reinforce++":
        return reinforce_pp(returns, group_size)
    raise ValueError(f"unknown advantage estimator {name!r}; choose from {ESTIMATORS}")


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0, lam: float = 0.95
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimation over the model's own tokens.

    Env tokens (`mask == 0`) are skipped, not treated as time steps: the next model token after an
    observation is the next step, so the value bootstraps across the env's turn.

    Args:
        rewards: (B, T) reward on each token (typically the episode return on the last model token).
        values: (B, T) value estimates.
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
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        step = delta + gamma * lam * running
        running = torch.where(m > 0, step, running)
        next_value = torch.where(m > 0, values[:, t], next_value)
        advantages[:, t] = running * m
    return advantages, (advantages + values) * mask
