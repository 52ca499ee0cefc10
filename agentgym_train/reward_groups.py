"""The layout every group-relative estimator reads its rewards in: one flat tensor, `group_size`
consecutive episodes per task (TRL's generation order)."""

from __future__ import annotations

import torch


def check_groups(rewards: torch.Tensor, group_size: int) -> None:
    """Raise ValueError unless `rewards` is flat and splits into whole groups of `group_size`."""
    if rewards.dim() != 1 or rewards.numel() % group_size:
        raise ValueError(
            f"expected a flat tensor of rewards whose length is a multiple of group_size={group_size}, "
            f"got shape {tuple(rewards.shape)}"
        )
