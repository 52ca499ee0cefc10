"""On 2 processes (gloo, CPU, `accelerate launch`), each estimator that reads its process's rows of the global
batch (rloo, reinforce++, reinforce++_baseline, gigpo, PPO's GAE) gives each rank the advantages and rewards
that one process computing over the whole batch gives at that rank's rows (estimators_job.py runs the ranks).
Groups span the processes and the ranks' episodes differ in length, so a rank that read another's rows, or
statistics of its own rows only, fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import launch_two_processes, rank_reports

from agentgym_train import estimators as adv
from agentgym_train import gigpo


def pad(rows: list[list], width: int) -> torch.Tensor:
    return torch.tensor([row + [0] * (width - len(row)) for row in rows], dtype=torch.float64)


def whole_batch(ranks: list[dict]) -> dict:
    """The ranks' rows concatenated in rank order, padded to one width."""
    width = max(len(r["mask"][0]) for r in ranks)
    join = lambda key: [row for r in ranks for row in r[key]]  # noqa: E731
    return {
        "width": width,
        "rewards": torch.tensor(join("scores"), dtype=torch.float64),
        "mask": pad(join("mask"), width),
        "turn_rewards": join("turn_rewards"),
        "reply_spans": [[tuple(s) for s in spans] for spans in join("reply_spans")],
        "state_keys": join("state_keys"),
        "values": None,
    }


def expected(name: str, whole: dict) -> torch.Tensor:
    """The estimator over the whole batch, on one process: (N,) or (N, width)."""
    from estimators_job import GAMMA, GIGPO_GAMMA, GROUP, LAMBDA, TURN_GAMMA

    rewards, mask = whole["rewards"], whole["mask"]
    if name == "rloo":
        return adv.rloo(rewards, GROUP)
    paid, ends = adv.turn_payments(whole["turn_rewards"], whole["reply_spans"], mask)
    if name in adv.KL_IN_REWARD:
        every = slice(0, len(rewards))
        return adv.reinforce_pp_advantages(
            name, rewards, GROUP, every, mask, None, 0.0, GAMMA, None, paid, ends, TURN_GAMMA
        )
    if name == "ppo":
        rewards = adv.token_rewards(rewards, mask, paid=paid)
        advantages, _ = adv.gae(rewards, whole["values"] * mask, mask, GAMMA, LAMBDA, TURN_GAMMA, ends)
        return adv.masked_whiten(advantages, mask)
    assert name == "gigpo"
    returns = [
        gigpo.turn_returns(turns, float(r), GIGPO_GAMMA)
        for turns, r in zip(whole["turn_rewards"], rewards, strict=True)
    ]
    states = [keys[: len(rs)] for keys, rs in zip(whole["state_keys"], returns, strict=True)]
    step = gigpo.gigpo_step_advantages(returns, states, GROUP)
    spans = [s[: len(v)] for s, v in zip(whole["reply_spans"], step, strict=True)]
    tokens = gigpo.per_turn_to_tokens(step, spans, whole["width"]).double()
    return gigpo.gigpo_episode_advantages(rewards, GROUP).unsqueeze(1) + 0.5 * tokens


def critic_values(ranks: list[dict], width: int) -> torch.Tensor:
    """PPO's critic values of every rank's rows (as each rank's critic computed them), padded to one width."""
    return pad([row for r in ranks for row in r["values"]], width)


@pytest.mark.slow
def test_each_rank_gets_the_whole_batch_estimate_at_its_own_rows(tiny_babyai: Path, tmp_path: Path) -> None:
    from estimators_job import ESTIMATORS, ROWS

    launch_two_processes("estimators_job.py", tiny_babyai, tmp_path, timeout=900)
    reports = rank_reports(tmp_path)
    assert [r["world_size"] for r in reports] == [2, 2]

    wrong = {}  # estimator: what differs, so that every estimator's verdict shows
    for name in ESTIMATORS:
        ranks = [report[name] for report in reports]
        # uneven episodes: rank 0's end after one turn, rank 1's run on
        assert set(ranks[0]["turns"]) == {1} and max(ranks[1]["turns"]) > 1, name
        whole = whole_batch(ranks)
        scores = whole["rewards"]
        assert len(scores) == 2 * ROWS and len(set(scores.tolist())) > 2, name
        if name == "ppo":
            whole["values"] = critic_values(ranks, whole["width"])
        estimate = expected(name, whole).double()
        if name == "gigpo":  # turns share anchor states (a group's first turns start from one state): GiGPO is not GRPO
            assert ((estimate - adv.grpo(scores, 2).double().unsqueeze(1)) * whole["mask"]).abs().sum() > 0
        for rank, r in enumerate(ranks):
            rows = slice(rank * ROWS, (rank + 1) * ROWS)
            got = torch.tensor(r["advantages"], dtype=torch.float64)
            want = estimate[rows] if got.dim() == 1 else estimate[rows, : got.size(1)]
            if got.dim() == 2:  # token advantages count on model tokens
                got = got * torch.tensor(r["mask"], dtype=torch.float64)
                want = want * torch.tensor(r["mask"], dtype=torch.float64)
            assert got.abs().sum() > 0, name
            checks = {
                # the trainer's rewards are every process's, in rank order; its own are its rows
                "rewards": (torch.tensor(r["rewards"], dtype=torch.float64), scores),
                "local rewards": (torch.tensor(r["local_rewards"], dtype=torch.float64), scores[rows]),
                "advantages": (got, want),
            }
            for what, (value, reference) in checks.items():
                if not torch.allclose(value, reference, atol=2e-4, rtol=1e-4):
                    wrong.setdefault(name, []).append(f"rank {rank}'s {what}")
    assert not wrong, wrong
