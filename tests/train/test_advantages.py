"""Advantage estimators."""

from __future__ import annotations

import pytest
import torch

from agentgym_train import advantages


def test_equal_returns_give_zero_advantages_for_every_estimator() -> None:
    returns = torch.tensor([0.5] * 4 + [0.0] * 4)
    for name in advantages.ESTIMATORS:
        assert torch.count_nonzero(advantages.compute(name, returns, 4)) == 0, name


def test_grpo_matches_trl_group_normalisation() -> None:
    returns = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.9, 0.8, 0.0, 1.0])
    groups = returns.view(-1, 4)
    expected = ((groups - groups.mean(1, keepdim=True)) / (groups.std(1, keepdim=True) + 1e-4)).flatten()
    assert torch.allclose(advantages.grpo(returns, 4), expected)


def test_rloo_is_leave_one_out() -> None:
    returns = torch.tensor([3.0, 0.0, 0.0])
    assert advantages.rloo(returns, 3).tolist() == [3.0, -1.5, -1.5]


def test_reinforce_pp_normalises_over_the_batch() -> None:
    returns = torch.tensor([1.0, 0.0, 2.0, 0.0])
    out = advantages.reinforce_pp(returns, 2)
    assert out.std().item() == pytest.approx(1.0, abs=1e-3) and out.sum().abs() < 1e-6


def test_gae_skips_env_tokens_and_bootstraps_across_them() -> None:
    rewards = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]])
    values = torch.tensor([[0.2, 9.0, 9.0, 0.5, 0.7]])
    mask = torch.tensor([[1, 0, 0, 1, 1]])
    adv, ret = advantages.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    # model tokens 0, 3, 4 form the trajectory; the env's values (9.0) never enter
    assert adv[0].tolist() == pytest.approx([0.8, 0.0, 0.0, 0.5, 0.3])
    assert ret[0].tolist() == pytest.approx([1.0, 0.0, 0.0, 1.0, 1.0])


def test_unknown_estimator_and_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="unknown advantage estimator"):
        advantages.compute("ppo", torch.zeros(4), 2)
    with pytest.raises(ValueError, match="multiple of group_size"):
        advantages.grpo(torch.zeros(5), 2)
