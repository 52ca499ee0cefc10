"""Fuzzed actions: 1,000 hostile strings per scenario are answered as invalid, never raised."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import agentgym_envs

FRAGMENTS = [
    "",
    " ",
    "\n\n\t",
    "\x00",
    "\x1b[31m",
    "\u202e",
    "\ufeff",
    "é",
    "🙂",
    "東京",
    "ｔｕｒｎ ｌｅｆｔ",
    "İ",
    "<script>alert(1)</script>",
    "<a href='javascript:x'>",
    "{{7*7}}",
    "${IFS}",
    "$(rm -rf /)",
    "`id`",
    "'; DROP TABLE tasks; --",
    "../../etc/passwd",
    "file:///etc/shadow",
    "%s%s%n",
    "\\",
    '"',
    "'",
    '{"name": "act"}',
    "Action:",
    "action: ",
    "<search>",
    "</answer>",
    "```",
    "[12]",
    "-1",
    "NaN",
    "1e309",
    "go to",
    "pick up the",
    "toggle and go through",
    "go through red ball 9",
    "turn",
    "move",
    "go to red 1",
]


def hostile_strings(n: int, seed: int = 0) -> list[str]:
    """`n` strings: fixed nasties (incl. one of 100 kB) then seeded concatenations of fragments and noise."""
    rng = np.random.default_rng(seed)
    out = [
        "",
        "x" * 100_000,
        "\x00" * 1000,
        "".join(chr(c) for c in range(32)),
        "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"),
    ]
    while len(out) < n:
        parts = [FRAGMENTS[i] for i in rng.integers(len(FRAGMENTS), size=rng.integers(1, 5))]
        if rng.random() < 0.3:
            parts.append("".join(chr(int(c)) for c in rng.integers(0x20, 0x2FFF, size=rng.integers(1, 30))))
        out.append("".join(parts))
    return out


@pytest.mark.parametrize("env_id", agentgym_envs.PRIMARY_IDS)
def test_fuzzed_actions_are_invalid_and_harmless(env_id: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=0)
    for action in hostile_strings(1000):
        observation, reward, terminated, truncated, info = env.step(action)
        assert info["valid_action"] is False, f"{action[:60]!r} was accepted"
        assert reward == 0 and not terminated and not truncated
        assert isinstance(observation, str) and observation in env.observation_space
    # the env still works: the expert finishes the episode
    expert = env.unwrapped.make_expert()
    info: dict = {}
    for _ in range(1000):
        observation, _, terminated, truncated, info = env.step(expert.act(observation, info))
        assert info["valid_action"]
        if terminated or truncated:
            break
    assert info["success"]
    env.close()
