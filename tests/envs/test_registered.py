"""Every registered id: Gymnasium's env checker, seeded determinism (in and across processes), expert success."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env
from helpers import expert_rollout

import agentgym_envs
from agentgym_envs.babyai.levels import BOT_UNSUPPORTED

IDS = agentgym_envs.registered_ids


def _expert_supported(env_id: str) -> bool:
    level = env_id.removeprefix("AgentGym/BabyAI-").removesuffix("-v0")
    return level not in BOT_UNSUPPORTED


@pytest.mark.parametrize("env_id", IDS)
def test_check_env_without_warnings(env_id: str) -> None:
    env = gym.make(env_id)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    env.close()
    assert [str(w.message) for w in caught] == []


def _trace(env_id: str, seed: int, turns: int = 30) -> str:
    """A digest of the observations and rewards of an expert rollout on the test task `seed` picks."""
    env = gym.make(env_id)
    observation, info = env.reset(seed=seed, options={"split": "test"})
    trace: list = [observation]
    try:
        expert = env.unwrapped.make_expert()
        for _ in range(turns):
            observation, reward, terminated, truncated, info = env.step(expert.act(observation, info))
            trace += [observation, reward]
            if terminated or truncated:
                break
    except Exception as error:  # an expert that cannot go on still leaves a deterministic prefix
        trace.append(type(error).__name__)
    env.close()
    return hashlib.sha256(json.dumps(trace).encode()).hexdigest()


@pytest.mark.parametrize("env_id", IDS)
def test_seeded_determinism(env_id: str) -> None:
    first, second = _trace(env_id, 7), _trace(env_id, 7)
    assert first == second
    assert _trace(env_id, 8) != first  # another seed picks another task


def test_determinism_across_processes() -> None:
    tests_dir = Path(__file__).resolve().parents[1]
    code = (
        f"import json, sys; sys.path[:0] = [{str(tests_dir)!r}];"
        "from envs.test_registered import _trace, IDS;"
        "print(json.dumps({i: _trace(i, 7) for i in IDS}))"
    )
    here = {env_id: _trace(env_id, 7) for env_id in IDS}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    there = json.loads(out.stdout.strip().splitlines()[-1])
    assert there == here


@pytest.mark.parametrize("env_id", IDS)
def test_expert_succeeds(env_id: str) -> None:
    if not _expert_supported(env_id):
        pytest.skip("minigrid's BabyAIBot cannot solve this level (see levels.BOT_UNSUPPORTED)")
    env = gym.make(env_id)
    for index in range(3):
        rollout = expert_rollout(env, options={"split": "test", "task_id": index})
        info = rollout["info"]
        assert info["success"], f"expert failed {info['task_id']}: {rollout['observations'][-1][:200]}"
        assert rollout["terminated"] and not rollout["truncated"]
        assert sum(rollout["rewards"]) == pytest.approx(info["score"])
        assert 0 < info["score"] <= 1
    env.close()
