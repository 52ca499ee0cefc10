"""The estimators' edge cases and defaults that the mutation run (`tox -e mutants`, docs/contributing.md)
found untested: groups of 2 and groups with one scorable episode, rows with no model token, the documented
defaults, a reduce over another process's rows, the per-turn discount inside REINFORCE++, GiGPO's step groups
and scaling, and the refusals' messages. Expected values are worked out by hand or by naive loops here."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from agentgym_train import estimators as adv
from agentgym_train import gigpo

NAN = float("nan")


def close(actual: torch.Tensor, expected: list, atol: float = 1e-6) -> None:
    torch.testing.assert_close(actual.double(), torch.tensor(expected, dtype=torch.float64), atol=atol, rtol=0)


# ---- episode-level estimators ----------------------------------------------------------------------------
def test_grpo_and_rloo_on_groups_of_two_and_groups_with_one_scorable_episode() -> None:
    # groups of 2: RLOO is defined (each episode's baseline is its sibling); GRPO scales by the unbiased std
    close(adv.rloo(torch.tensor([1.0, 3.0]), 2), [-2.0, 2.0])
    std = statistics.stdev([1.0, 3.0])
    close(adv.grpo(torch.tensor([1.0, 3.0]), 2), [-1.0 / (std + 1e-4), 1.0 / (std + 1e-4)])
    close(adv.grpo(torch.tensor([1.0, 3.0]), 2, scale=False), [-1.0, 1.0])
    # one scorable episode in its group: no sibling to compare with, advantage 0 (not its reward's half)
    close(adv.rloo(torch.tensor([2.0, NAN, NAN]), 3), [0.0, 0.0, 0.0])
    close(adv.grpo(torch.tensor([2.0, NAN, NAN]), 3), [0.0, 0.0, 0.0])
    # two scorable of three: the statistics are the two's (unbiased std over 2 values)
    std = statistics.stdev([1.0, 4.0])
    close(adv.grpo(torch.tensor([1.0, NAN, 4.0]), 3), [-1.5 / (std + 1e-4), 0.0, 1.5 / (std + 1e-4)])
    with pytest.raises(ValueError, match=r"^RLOO needs at least 2 episodes per group"):
        adv.rloo(torch.tensor([1.0]), 1)


# ---- token-level pieces -----------------------------------------------------------------------------------
def test_token_rewards_skip_rows_without_model_tokens_or_score_and_ignore_kl_by_default() -> None:
    mask = torch.tensor([[0, 0, 0], [0, 1, 0], [1, 1, 0]])
    scores = torch.tensor([5.0, 2.0, NAN])
    paid = torch.tensor([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.5, 0.0, 0.0]])
    # no model token: nothing; one model token: the score there; NaN score: nothing, its payments neither
    close(adv.token_rewards(scores, mask, paid=paid), [[0, 0, 0], [0, 2.0, 0], [0, 0, 0]])
    kl = torch.ones(3, 3)
    close(adv.token_rewards(scores, mask, kl), adv.token_rewards(scores, mask).tolist())  # kl_coef 0 by default
    close(adv.token_rewards(scores, mask, None, 0.5), [[0, 0, 0], [0, 2.0, 0], [0, 0, 0]])


def test_defaults_are_the_documented_ones() -> None:
    generator = torch.Generator().manual_seed(0)
    rewards, values = torch.rand(2, 6, generator=generator), torch.rand(2, 6, generator=generator)
    mask = torch.tensor([[1, 1, 0, 1, 1, 0], [1, 1, 1, 0, 1, 1]])
    ends = torch.zeros(2, 6, dtype=torch.bool)
    ends[:, 1] = True
    torch.testing.assert_close(
        adv.returns_to_go(rewards, mask, turn_ends=ends), adv.returns_to_go(rewards, mask, 1.0, 1.0, ends)
    )
    for got, want in zip(
        adv.gae(rewards, values, mask, turn_ends=ends),
        adv.gae(rewards, values, mask, 1.0, 0.95, 1.0, ends),
        strict=True,
    ):
        torch.testing.assert_close(got, want)
    scores, kl, rows = torch.tensor([1.0, 2.0]), torch.rand(2, 6, generator=generator), slice(0, 2)
    torch.testing.assert_close(
        adv.reinforce_pp_advantages("reinforce++", scores, 2, rows, mask, kl, turn_ends=ends),
        adv.reinforce_pp_advantages("reinforce++", scores, 2, rows, mask, kl, 0.0, 1.0, None, None, ends, 1.0),
    )
    assert gigpo.turn_returns([0.5, 0.25], 2.0) == gigpo.turn_returns([0.5, 0.25], 2.0, 1.0) == [2.0, 1.5]


def naive_returns(scores, mask, paid, ends, gamma, turn_gamma):
    """REINFORCE++'s returns by loops: payments on their tokens, the rest of the score on the last model
    token, discounted by gamma per model token and turn_gamma once more at a turn's end."""
    out = []
    for score, row, row_paid, row_ends in zip(scores, mask, paid, ends, strict=True):
        tokens = [t for t, m in enumerate(row) if m]
        reward = {t: row_paid[t] for t in tokens}
        reward[tokens[-1]] += score - sum(row_paid[t] for t in tokens)
        returns, running = [0.0] * len(row), 0.0
        for t in reversed(range(len(row))):
            carried = gamma * running * (turn_gamma if row_ends[t] else 1.0)
            if row[t]:
                running = reward[t] + carried
                returns[t] = running
        out.append(returns)
    return out


def whiten(values: list[list[float]], mask: list[list[int]]) -> list[list[float]]:
    kept = [v for row, m in zip(values, mask, strict=True) for v, k in zip(row, m, strict=True) if k]
    mean, std = statistics.fmean(kept), statistics.pstdev(kept)
    return [
        [(v - mean) / std if k else 0.0 for v, k in zip(row, m, strict=True)]
        for row, m in zip(values, mask, strict=True)
    ]


def test_reinforce_pp_pays_turns_and_discounts_them_per_turn() -> None:
    mask = [[1, 1, 0, 1, 1], [1, 1, 1, 0, 0]]
    paid = [[0.0, 0.5, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 0.0]]
    ends = [[False, True, False, False, False], [False] * 5]
    scores = [2.0, 1.0]
    got = adv.reinforce_pp_advantages(
        "reinforce++",
        torch.tensor(scores),
        2,
        slice(0, 2),
        torch.tensor(mask),
        gamma=0.9,
        paid=torch.tensor(paid),
        turn_ends=torch.tensor(ends),
        turn_gamma=0.5,
    )
    close(got, whiten(naive_returns(scores, mask, paid, ends, 0.9, 0.5), mask), atol=1e-5)


def fake_reduce(theirs: torch.Tensor, their_mask: torch.Tensor):
    """Process 0 of 2's all-reduce sum: adds process 1's sums (its values' sum and count, then its squared
    deviations from the global mean that the first call gave)."""
    seen = {}

    def reduce(t: torch.Tensor) -> torch.Tensor:
        if t.dim() == 1:  # (sum, count)
            total = t + torch.stack([(theirs * their_mask).sum(), their_mask.sum().to(t.dtype)])
            seen["mean"] = total[0] / total[1]
            return total
        return t + ((theirs - seen["mean"]) ** 2 * their_mask).sum()

    return reduce


def test_whitening_spans_the_other_process_rows() -> None:
    """Process 0's whitened values are those of the concatenated rows at its rows."""
    theirs, their_mask = torch.tensor([[7.0, 9.0, 11.0]]), torch.tensor([[1, 1, 1]])
    my_mask = torch.tensor([[1, 1, 0]])
    everyone = [1.0, 2.0, 7.0, 9.0, 11.0]
    mean, std = statistics.fmean(everyone), statistics.pstdev(everyone)
    reduce = fake_reduce(theirs, their_mask)
    got = adv.masked_whiten(torch.tensor([[1.0, 2.0, 0.0]]), my_mask, reduce)
    close(got, [[(1.0 - mean) / std, (2.0 - mean) / std, 0.0]], atol=1e-5)
    # REINFORCE++ (gamma 1): process 0's returns are its score on each of its model tokens
    everyone = [3.0, 3.0, 7.0, 9.0, 11.0]
    mean, std = statistics.fmean(everyone), statistics.pstdev(everyone)
    reduce = fake_reduce(theirs, their_mask)
    got = adv.reinforce_pp_advantages("reinforce++", torch.tensor([3.0, 5.0]), 1, slice(0, 1), my_mask, reduce=reduce)
    close(got, [[(3.0 - mean) / std, (3.0 - mean) / std, 0.0]], atol=1e-5)
    # a single masked entry on one process: its own mean, so 0 (not half its value over a floored std)
    close(adv.masked_whiten(torch.tensor([[4.0, 1.0]]), torch.tensor([[1, 0]])), [[0.0, 0.0]])


# ---- GiGPO ---------------------------------------------------------------------------------------------
def test_gigpo_step_groups_scaling_and_refusals() -> None:
    # scaled: (R - mean) / (unbiased std + 1e-6), exactly
    scaled = gigpo.gigpo_step_advantages([[1.0], [3.0]], [["s"], ["s"]], 2, norm="mean_std_norm")
    assert scaled == [[-1.0 / (math.sqrt(2) + 1e-6)], [1.0 / (math.sqrt(2) + 1e-6)]]
    # a turn alone in its step group (the first met) does not stop the shared ones after it
    step = gigpo.gigpo_step_advantages([[1.0, 2.0], [5.0, 4.0]], [["a", "b"], ["c", "b"]], 2)
    assert step == [[0.0, -1.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match="a multiple of group_size=2"):
        gigpo.gigpo_step_advantages([[1.0], [2.0], [3.0]], [["s"], ["s"], ["s"]], 2)
    with pytest.raises(ValueError, match=r"gigpo_norm must be one of \('mean_norm', 'mean_std_norm'\), got 'std'"):
        gigpo.gigpo_step_advantages([[1.0], [2.0]], [["s"], ["s"]], 2, norm="std")
    with pytest.raises(ValueError, match="one turn count per episode"):
        gigpo.gigpo_episode_advantages(torch.tensor([1.0, 0.0]), 2, turns=[1])
    with pytest.raises(ValueError, match="episode 1: 2 returns for 1 states"):
        gigpo.gigpo_step_advantages([[1.0], [2.0, 3.0]], [["s"], ["s"]], 2)
    with pytest.raises(ValueError):  # values and spans of different lengths are refused, not zipped short
        gigpo.per_turn_to_tokens([[1.0, 2.0]], [[(0, 1)]], 4)
    with pytest.raises(ValueError):
        gigpo.per_turn_to_tokens([[1.0], [2.0]], [[(0, 1)]], 4)


def test_refusals_name_the_problem() -> None:
    with pytest.raises(ValueError, match=r"expected one of \('reinforce\+\+', 'reinforce\+\+_baseline'\), got 'ppo'"):
        adv.reinforce_pp_advantages("ppo", torch.zeros(2), 2, slice(0, 2), torch.ones(2, 2))


def test_turn_payments_skip_empty_rows_and_turns_before_any_model_token() -> None:
    mask = torch.tensor([[0, 0, 1, 1, 0, 1, 1], [0] * 7, [1, 1, 0, 1, 0, 0, 0]])
    rewards = [[0.1, 0.2, 0.3, 0.25, 0.4], [], [1.0, 2.0]]
    spans = [[(0, 2), (2, 3), (3, 5), (5, 6), (6, 7)], [], [(0, 2), (2, 4)]]
    paid, ends = adv.turn_payments(rewards, spans, mask)
    # row 0: turn 0 has no model token before its end (nothing); turns 1-3 pay on their last model token
    # (the first model token, the second, the second-to-last), which end a turn; the last turn pays nothing
    # (the score's rest goes there) and its token ends no turn. Row 1: no model token. Row 2: as row 0.
    close(paid, [[0, 0, 0.2, 0.3, 0, 0.25, 0], [0] * 7, [0, 1.0, 0, 0, 0, 0, 0]])
    assert ends.tolist() == [
        [False, False, True, True, False, True, False],
        [False] * 7,
        [False, True, False, False, False, False, False],
    ]
    with pytest.raises(ValueError):  # an episode's turn rewards without its spans are refused
        adv.turn_payments([[1.0], [2.0]], [[(0, 1)]], torch.ones(2, 2))
