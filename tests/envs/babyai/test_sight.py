"""The cached view (`babyai/sight.py`) gives minigrid's own observation, and the env with it plays as without it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from minigrid.core.actions import Actions

from agentgym_envs.babyai.env import BabyAIEnv
from agentgym_envs.babyai.sight import Sight, visibility

LEVELS = ["GoToLocal", "BossLevel", "UnlockPickup", "KeyCorridorS3R3", "OpenDoorsOrderN4", "PutNextLocal"]
PRIMITIVES = ["turn left", "turn right", "move forward", "pick up", "drop", "toggle"]


@pytest.mark.parametrize("level", LEVELS)
def test_cached_view_equals_minigrids_gen_obs_over_random_steps(level: str) -> None:
    mg = gym.make(f"BabyAI-{level}-v0").unwrapped
    rng = np.random.default_rng(0)
    checked = changed = 0
    for seed in range(20):
        mg.reset(seed=seed)
        sight = Sight(mg)
        for _ in range(200):
            action = Actions(int(rng.integers(7)))
            obs, _, terminated, truncated, _ = mg.step(action)
            if action in (Actions.pickup, Actions.drop, Actions.toggle):
                sight.invalidate()
                changed += 1
            fast = sight.gen_obs()
            assert np.array_equal(fast["image"], obs["image"]), (level, seed, action)
            assert fast["image"].dtype == obs["image"].dtype and fast["image"].shape == obs["image"].shape
            assert (fast["direction"], fast["mission"]) == (obs["direction"], obs["mission"])
            checked += 1
            if terminated or truncated:
                break
    assert checked > 300 and changed > 30


def test_a_stale_view_is_wrong_until_invalidated() -> None:
    """The cache is what makes it fast, so it must be refreshed: a door opened behind its back shows up only after
    `invalidate()`."""
    mg = gym.make("BabyAI-OpenDoorLoc-v0").unwrapped
    for seed in range(50):
        mg.reset(seed=seed)
        sight = Sight(mg)
        sight.gen_obs()
        closed = [
            obj
            for obj, visible in zip(mg.gen_obs_grid()[0].grid, mg.gen_obs_grid()[1].T.ravel(), strict=True)
            if visible and obj is not None and obj.type == "door" and not obj.is_open
        ]
        if closed:
            break
    else:
        pytest.skip("no closed door in view in the first 50 seeds")
    closed[0].is_open = True
    assert not np.array_equal(sight.gen_obs()["image"], mg.gen_obs()["image"])
    sight.invalidate()
    assert np.array_equal(sight.gen_obs()["image"], mg.gen_obs()["image"])


def test_visibility_matches_minigrids_process_vis_on_random_blockers() -> None:
    from minigrid.core.grid import Grid
    from minigrid.core.world_object import Wall

    rng = np.random.default_rng(1)
    for _ in range(300):
        opaque = rng.random((7, 7)) < rng.random()
        grid = Grid(7, 7)
        for i, j in zip(*np.nonzero(opaque), strict=True):
            grid.set(int(i), int(j), Wall())
        assert np.array_equal(visibility(opaque), grid.process_vis(agent_pos=(3, 6)))


def _play(env: BabyAIEnv, level: str, seeds: range, rng: np.random.Generator) -> list:
    record = []
    for seed in seeds:
        observation, info = env.reset(options={"task_id": f"{level}/{seed}"})
        record.append((observation, info))
        for _ in range(120):
            actions = info["available_actions"]
            action = PRIMITIVES[rng.integers(6)] if rng.random() < 0.6 else actions[rng.integers(len(actions))]
            step = env.step(action)
            record.append((*step, env.state_key()))
            info = step[4]
            if step[2] or step[3]:
                break
    return record


@pytest.mark.parametrize("level", ["GoToLocal", "BossLevel", "UnlockPickup"])
def test_env_with_the_cached_view_plays_exactly_as_with_minigrids_own(level: str) -> None:
    fast = gym.make(f"AgentGym/BabyAI-{level}-v0").unwrapped
    slow = gym.make(f"AgentGym/BabyAI-{level}-v0").unwrapped
    slow.reset(options={"task_id": f"{level}/0"})
    slow._sights[level] = None  # minigrid's own gen_obs on every step
    fast_record = _play(fast, level, range(20), np.random.default_rng(3))
    slow_record = _play(slow, level, range(20), np.random.default_rng(3))
    assert fast._sight is not None and slow._sight is None
    assert len(fast_record) > 200
    assert fast_record == slow_record
