"""Advantage estimators against values worked out by hand from the papers' formulas.

Expected values are literal numbers or naive Python loops written here, never the module's own functions.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest
import torch
from train_helpers import launch_two_processes, rank_reports

from agentgym_train import estimators


def assert_values(actual: torch.Tensor, expected: list, atol: float = 1e-6) -> None:
    torch.testing.assert_close(actual.float(), torch.tensor(expected, dtype=torch.float32), atol=atol, rtol=0)


def test_grpo_is_the_group_normalised_reward() -> None:
    rewards = torch.tensor([1.0, 0.0, 0.0, 0.0, 0.9, 0.8, 0.0, 1.0])
    expected = []
    for group in ([1.0, 0.0, 0.0, 0.0], [0.9, 0.8, 0.0, 1.0]):
        mean, std = statistics.mean(group), statistics.stdev(group)  # stdev: the unbiased one, as TRL
        expected += [(r - mean) / (std + 1e-4) for r in group]
    assert estimators.grpo(rewards, 4).tolist() == pytest.approx(expected, abs=1e-6)
    # first group by hand: mean 0.25, unbiased std 0.5
    assert estimators.grpo(rewards, 4)[:2].tolist() == pytest.approx([0.75 / 0.5001, -0.25 / 0.5001], abs=1e-6)


def test_grpo_leaves_unscorable_episodes_out() -> None:
    out = estimators.grpo(torch.tensor([1.0, math.nan, 0.0, 0.0]), 4)
    # the scorable three: mean 1/3, unbiased std sqrt(1/3)
    std = math.sqrt(1 / 3) + 1e-4
    assert out.tolist() == pytest.approx([(2 / 3) / std, 0.0, (-1 / 3) / std, (-1 / 3) / std], abs=1e-6)


def test_rloo_is_leave_one_out() -> None:
    assert estimators.rloo(torch.tensor([3.0, 0.0, 0.0]), 3).tolist() == [3.0, -1.5, -1.5]
    # baselines of the scorable ones: (0 + 2) / 2, (1 + 2) / 2, (1 + 0) / 2; the unscorable one gets 0
    out = estimators.rloo(torch.tensor([1.0, 0.0, 2.0, math.nan, 5.0, 1.0]), 3)
    assert out.tolist() == pytest.approx([0.0, -1.5, 1.5, 0.0, 4.0, -4.0])
    with pytest.raises(ValueError, match="at least 2"):
        estimators.rloo(torch.zeros(4), 1)


def _kl_batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two episodes. A: model tokens 0, 1, 3 (an observation at 2, padding at 4). B: model tokens 0-2."""
    mask = torch.tensor([[1, 1, 0, 1, 0], [1, 1, 1, 0, 0]])
    logps = torch.tensor([[-1.0, -0.5, -7.0, -2.0, 0.0], [-0.3, -0.4, -0.1, -7.0, 0.0]])
    ref = torch.tensor([[-1.2, -0.5, -3.0, -1.5, 0.0], [-0.3, -0.9, -0.1, -3.0, 0.0]])
    return mask, logps, ref


def test_token_rewards_put_the_score_on_the_last_model_token_and_the_kl_on_every_one() -> None:
    mask, logps, ref = _kl_batch()
    kl = (logps - ref) * mask  # k1: A [0.2, 0, -, -0.5, -], B [0, 0.5, 0, -, -]
    rewards = estimators.token_rewards(torch.tensor([1.0, 0.0]), mask, kl, kl_coef=0.1)
    assert_values(rewards, [[-0.02, 0.0, 0.0, 1.05, 0.0], [0.0, -0.05, 0.0, 0.0, 0.0]])


def test_returns_to_go_discount_per_model_token_and_skip_env_tokens() -> None:
    mask = torch.tensor([[1, 1, 0, 1, 0]])
    rewards = torch.tensor([[-0.02, 0.0, 0.0, 1.05, 0.0]])
    # R3 = 1.05; R1 = 0 + 0.9 * 1.05; R0 = -0.02 + 0.9 * R1
    expected = [[0.8305, 0.945, 0.0, 1.05, 0.0]]
    assert_values(estimators.returns_to_go(rewards, mask, gamma=0.9), expected)


def _whiten(by_token: dict[tuple[int, int], float], shape: tuple[int, int]) -> list[list[float]]:
    """Naive whitening over the given entries (population std, as REINFORCE++/OpenRLHF); 0 elsewhere."""
    values = list(by_token.values())
    mean, std = statistics.fmean(values), statistics.pstdev(values)
    out = [[0.0] * shape[1] for _ in range(shape[0])]
    for (row, col), value in by_token.items():
        out[row][col] = (value - mean) / std
    return out


def test_reinforce_pp_with_kl_and_discount_matches_the_paper() -> None:
    mask, logps, ref = _kl_batch()
    rewards = torch.tensor([1.0, 0.0])
    out = estimators.reinforce_pp_advantages(
        "reinforce++", rewards, 2, slice(0, 2), mask, (logps - ref) * mask, kl_coef=0.1, gamma=0.9
    )
    # token rewards: A t0 -0.1*0.2, t1 0, t3 -0.1*(-0.5) + 1; B t0 0, t1 -0.1*0.5, t2 0 + 0
    # returns-to-go with gamma 0.9 over model tokens: A 0.8305, 0.945, 1.05; B -0.045, -0.05, 0
    returns = {(0, 0): 0.8305, (0, 1): 0.945, (0, 3): 1.05, (1, 0): -0.045, (1, 1): -0.05, (1, 2): 0.0}
    assert_values(out, _whiten(returns, (2, 5)), atol=1e-5)
    assert out[mask.bool()].mean().item() == pytest.approx(0.0, abs=1e-6)


def test_reinforce_pp_baseline_subtracts_the_group_mean_first() -> None:
    mask, logps, ref = _kl_batch()
    out = estimators.reinforce_pp_advantages(
        "reinforce++_baseline", torch.tensor([1.0, 0.0]), 2, slice(0, 2), mask, (logps - ref) * mask, 0.1, 0.9
    )
    # scores after the group mean 0.5: A 0.5, B -0.5. A: t3 0.05 + 0.5 = 0.55, t1 0.9 * 0.55, t0 -0.02 + 0.9 * 0.495.
    # B: t2 -0.5, t1 -0.05 + 0.9 * (-0.5), t0 0.9 * (-0.5)
    returns = {(0, 0): 0.4255, (0, 1): 0.495, (0, 3): 0.55, (1, 0): -0.45, (1, 1): -0.5, (1, 2): -0.5}
    assert_values(out, _whiten(returns, (2, 5)), atol=1e-5)


def test_reinforce_pp_takes_this_process_rows_and_leaves_unscorable_episodes_out() -> None:
    mask = torch.ones(2, 2)
    rewards = torch.tensor([4.0, 0.0, 1.0, math.nan])  # the global batch; this process holds rows 2 and 3
    out = estimators.reinforce_pp_advantages("reinforce++_baseline", rewards, 2, slice(2, 4), mask, gamma=1.0)
    # group (1.0, nan): mean 1.0 over the scorable one -> score 0 for row 2; row 3 leaves the statistics
    assert out.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    out = estimators.reinforce_pp_advantages("reinforce++", rewards, 2, slice(0, 2), mask, gamma=0.5)
    # returns: row 0 [2, 4], row 1 [0, 0]; mean 1.5, population std sqrt(2.75)
    std = math.sqrt(((2 - 1.5) ** 2 + (4 - 1.5) ** 2 + 2 * 1.5**2) / 4)
    assert_values(out, [[0.5 / std, 2.5 / std], [-1.5 / std, -1.5 / std]], atol=1e-6)


def test_gae_with_discount_and_lambda_across_an_observation() -> None:
    mask = torch.tensor([[1, 0, 0, 1, 1, 0]])  # model, env, env, model, model, padding
    rewards = estimators.token_rewards(torch.tensor([1.0]), mask)
    assert rewards.tolist() == [[0.0, 0.0, 0.0, 0.0, 1.0, 0.0]]  # on the last model token, not the last column
    values = torch.tensor([[0.2, 9.0, 9.0, 0.5, 0.7, 9.0]])  # the env's and padding's values never enter
    adv, ret = estimators.gae(rewards, values, mask, gamma=0.9, lam=0.8)
    # t4: delta = 1 - 0.7 = 0.3. t3: delta = 0.9 * 0.7 - 0.5 = 0.13, A = 0.13 + 0.72 * 0.3 = 0.346.
    # t0 (bootstraps from t3's value across the observation): delta = 0.9 * 0.5 - 0.2 = 0.25, A = 0.25 + 0.72 * 0.346
    assert_values(adv, [[0.49912, 0.0, 0.0, 0.346, 0.3, 0.0]])
    assert_values(ret, [[0.69912, 0.0, 0.0, 0.846, 1.0, 0.0]])


def test_masked_whiten_uses_only_masked_entries() -> None:
    values = torch.tensor([[1.0, 100.0, 3.0], [5.0, -100.0, 7.0]])
    mask = torch.tensor([[1, 0, 1], [1, 0, 1]])
    std = statistics.pstdev([1.0, 3.0, 5.0, 7.0])
    expected = [[(1 - 4) / std, 0.0, (3 - 4) / std], [(5 - 4) / std, 0.0, (7 - 4) / std]]
    assert_values(estimators.masked_whiten(values, mask), expected)


def test_equal_rewards_give_zero_advantages() -> None:
    rewards = torch.tensor([0.5] * 4 + [0.0] * 4)
    for estimator in (estimators.grpo, estimators.rloo):
        assert torch.count_nonzero(estimator(rewards, 4)) == 0, estimator.__name__
    out = estimators.reinforce_pp_advantages("reinforce++_baseline", rewards, 4, slice(0, 8), torch.ones(8, 3))
    assert torch.count_nonzero(out) == 0


def test_unknown_estimator_and_bad_shapes_are_refused() -> None:
    with pytest.raises(ValueError, match="advantage_estimator must be one of"):
        estimators.get_estimator("ppo")
    with pytest.raises(ValueError, match="expected one of"):  # the per-token estimator takes only its own names
        estimators.reinforce_pp_advantages("rloo", torch.zeros(4), 2, slice(0, 4), torch.ones(4, 3))
    with pytest.raises(ValueError, match="multiple of group_size"):
        estimators.grpo(torch.zeros(5), 2)


def test_batch_statistics_span_every_process(tmp_path: Path) -> None:
    """REINFORCE++ and PPO whitening on 2 processes (gloo, CPU) equal one process on the concatenated batch."""
    import advantages_job

    launch_two_processes("advantages_job.py", tmp_path, timeout=300)
    ranks = rank_reports(tmp_path)
    assert [r["world_size"] for r in ranks] == [2, 2]

    batch = advantages_job.global_batch()
    whole = advantages_job.estimates(batch, slice(0, advantages_job.ROWS), None)
    half = advantages_job.ROWS // 2
    alone = advantages_job.estimates(batch, slice(0, half), None)  # what a process-local statistic would give
    for name in (*estimators.KL_IN_REWARD, "ppo_whitening"):
        distributed = torch.tensor(ranks[0][name] + ranks[1][name])
        assert_values(distributed, whole[name], atol=1e-5)
        assert not torch.allclose(torch.tensor(ranks[0][name]), torch.tensor(alone[name]), atol=1e-3), name
