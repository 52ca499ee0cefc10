"""Shared helpers for the test suite."""

from __future__ import annotations

from typing import Any

import gymnasium as gym


def expert_rollout(
    env: gym.Env, seed: int | None = None, options: dict | None = None, max_turns: int = 1000
) -> dict[str, Any]:
    """Run the scenario's expert for one episode; return observations, actions, rewards and the last info."""
    observation, info = env.reset(seed=seed, options=options)
    expert = env.unwrapped.make_expert()
    observations, actions, rewards = [observation], [], []
    for _ in range(max_turns):
        action = expert.act(observation, info)
        observation, reward, terminated, truncated, info = env.step(action)
        observations.append(observation)
        actions.append(action)
        rewards.append(reward)
        if terminated or truncated:
            break
    return {
        "observations": observations,
        "actions": actions,
        "rewards": rewards,
        "info": info,
        "terminated": terminated,
        "truncated": truncated,
    }
