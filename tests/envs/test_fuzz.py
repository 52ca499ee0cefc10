"""Every string is a legal action: hostile strings are answered as invalid actions, never raised.

Each scenario gets the same seeded strings: fixed nasties first (numbers past Python's int digit
limit in every slot that an action has, lone surrogates, NUL and control characters, bidirectional
and combining marks, texts up to 1 MB, nested brackets and tags, JSON, format strings), then random
concatenations of hostile fragments. None is a valid action anywhere, so each must be answered with
an observation, reward 0, `valid_action` False, and the episode going on; afterwards the expert
still finishes the episode. BabyAI, TextCraft and Deep Search take 10,000 strings; WebArena 1,000
(a browser snapshot per step) and SciWorld 300 (a JVM call per step, 10-50 ms).

Through `AgentGym/Remote-v0` (its in-process server), BabyAI, TextCraft and Deep Search take the
first 2,000 strings (every fixed nasty among them), and every answer equals the local env's.
"""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

import agentgym_envs
from agentgym_envs.core import normalise_action
from agentgym_envs.sciworld.env import normalise_action as sciworld_normalise_action

#: How many hostile strings each scenario answers (the slow ones take fewer).
COUNTS = {
    "AgentGym/BabyAI-v0": 10_000,
    "AgentGym/TextCraft-v0": 10_000,
    "AgentGym/DeepSearch-v0": 10_000,
    "AgentGym/WebArena-v0": 1_000,
    "AgentGym/SciWorld-v0": 300,
    "AgentGym/TextWorld-v0": 10_000,
}
REMOTE_IDS = ["AgentGym/BabyAI-v0", "AgentGym/TextCraft-v0", "AgentGym/DeepSearch-v0"]
REMOTE_COUNT = 2_000

HUGE = "9" * 5000  # past Python's 4,300-digit limit for int()

# Slots that take a number, in each scenario's action language (none valid with a huge number).
NUMBER_SLOTS = [
    "go to red ball {}",
    "pick up the blue key {}",
    "go through red door {}",
    "toggle and go through grey door {}",
    "get {} oak log",
    "craft {} stick using 1 oak planks",
    "craft stick using {} oak planks",
    "craft stick using 1 oak planks, {} stick",
    "click [{}]",
    "hover [{}]",
    "type [{}] [laptop] [1]",
    "tab_focus [{}]",
    "scroll [{}]",
    "{}",
    "-{}",
    "+{}",
    "{}.5",
    "1e{}",
    "0x{}",
    "[{}]",
    "<search>{}",
]
NUMBERS = [HUGE, "٣" * 5000, "１" * 5000, "0" * 5000 + "7" * 10, "9" * 100]  # Arabic-Indic, full-width digits too

NASTIES = [
    "",
    " ",
    # lone surrogates, alone and inside actions
    "\ud800",
    "\udfff",
    "a\udc80b",
    "\ud83d",
    "go to red ball \ud800",
    "get 1 \udc00 log",
    "click [\udfff]",
    "<search>\ud800",
    # NUL and control characters
    "\x00",
    "\x00" * 1000,
    "".join(chr(c) for c in range(32)) + "\x7f",
    "turn\x00left",
    "turn left\x00x",
    "\x1b[2J\x1b[31m",
    "\x85\u2028\u2029",
    # bidirectional, combining, invisible and edge-of-Unicode characters
    "\u202e",
    "\u202etfel nrut",
    "\u200f\u061c\u2066x\u2069",
    "e\u0301" * 100,
    "a" + "\u0300" * 10_000,
    "\u200b\u200c\u200d\ufeff",
    "\uffff\ufffe\U0010ffff\ufffd",
    "ｔｕｒｎ ｌｅｆｔ",
    # long texts, up to 1 MB
    "x" * 100_000,
    "a " * 500_000,
    "\n" * 100_000,
    " " * 1_000_000,
    "é" * 1_000_000,
    "go to red " + "b" * 200_000,  # echoed back whole, this would overflow the observation space
    "get " + "9" * 200_000 + " oak log",
    # nested brackets and tags (no tag is ever closed after it opens)
    "[" * 10_000,
    "]" * 10_000,
    "[" * 5000 + "]" * 5000,
    "(" * 10_000,
    "<div>" * 10_000,
    "<search>" * 10_000,
    "<answer>" * 10_000,
    "</search>" * 1000,
    "</answer><answer>",
    "<<<>>>",
    "<answer" * 1000,
    # JSON
    "{" * 10_000,
    "[" * 5000 + "1" + "]" * 5000,
    '{"name": "go to", "arguments": {"target": "red ball 1"}}',
    '{"a": ' * 1000,
    "null",
    "NaN",
    "-Infinity",
    "1e309",
    # format strings and templates
    "%s%s%s%n",
    "%" * 1000,
    "%(x)s",
    "{0}",
    "{}",
    "{{}}",
    "{__class__}",
    "{0.__class__.__mro__}",
    "{" + "0" * 5000 + "}",
    "${HOME}",
    "$(id)",
    "\\N{BULLET}",
    "{{7*7}}",
    # injection-shaped text
    "<script>alert(1)</script>",
    "'; DROP TABLE tasks; --",
    "../../etc/passwd",
    "file:///etc/shadow",
] + [slot.format(number) for slot in NUMBER_SLOTS for number in NUMBERS]

# Pieces of random strings; the openers of <search> and <answer> appear, their closers never do.
FRAGMENTS = [
    " ",
    "\n\n\t",
    "\x00",
    "\x07",
    "\x1b[31m",
    "\x7f",
    "\u202e",
    "\u0301",
    "\ufeff",
    "\ud800",
    "\udfff",
    "é",
    "🙂",
    "東京",
    "İ",
    "<script>",
    "<a href='javascript:x'>",
    "{{7*7}}",
    "{0}",
    "%s%n",
    "${IFS}",
    "$(rm -rf /)",
    "`id`",
    "'; --",
    "\\",
    '"',
    "'",
    '{"name": "act"}',
    "{",
    "}",
    "[",
    "]",
    "Action:",
    "<search>",
    "<answer>",
    "</think>",
    "```",
    "[12]",
    "-1",
    "NaN",
    "1e309",
    HUGE,
    "go to",
    "pick up the",
    "toggle and go through",
    "go through red ball",
    "turn",
    "move",
    "get",
    "craft",
    "using",
    "click",
    "look at",
]


def hostile_strings(n: int, seed: int = 0) -> list[str]:
    """The fixed nasties, then seeded concatenations of fragments, noise and long repeats; `n` in all."""
    rng = np.random.default_rng(seed)
    out = NASTIES[:n]
    while len(out) < n:
        parts = [FRAGMENTS[i] for i in rng.integers(len(FRAGMENTS), size=rng.integers(1, 6))]
        if rng.random() < 0.3:
            parts.append("".join(chr(int(c)) for c in rng.integers(0x20, 0x2FFF, size=rng.integers(1, 30))))
        if rng.random() < 0.02:
            parts.append(parts[0] * int(rng.integers(100, 2000)))
        order = rng.permutation(len(parts))
        out.append("".join(parts[i] for i in order))
    return out


def assert_invalid(action: str, answer: tuple, space: gym.Space) -> None:
    observation, reward, terminated, truncated, info = answer
    shown = f"{action[:60]!r} ({len(action):,} chars)"
    assert info["valid_action"] is False, f"{shown} was accepted"
    assert reward == 0 and not terminated and not truncated, f"{shown} changed the episode"
    assert isinstance(observation, str) and observation and observation in space, f"{shown}: no observation"


@pytest.mark.parametrize("env_id", agentgym_envs.PRIMARY_IDS)
def test_hostile_actions_are_invalid_and_harmless(env_id: str) -> None:
    env = gym.make(env_id)
    env.reset(seed=0)
    for action in hostile_strings(COUNTS[env_id]):
        answer = env.step(action)
        assert_invalid(action, answer, env.observation_space)
    # the env still works: the expert finishes the episode
    observation, info = answer[0], {}
    expert = env.unwrapped.make_expert()
    for _ in range(1000):
        observation, _, terminated, truncated, info = env.step(expert.act(observation, info))
        assert info["valid_action"]
        if terminated or truncated:
            break
    assert info["success"]
    env.close()


# A high lone surrogate followed by a low one: two code points that JSON's escapes cannot tell from
# one astral character (see the xfail test below); the comparison leaves them to that test.
_SURROGATE_PAIR = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def _remote_and_local(env_id: str, actions: list[str]) -> None:
    """Step a local env and one through `AgentGym/Remote-v0` with `actions`; every answer must be equal."""
    local = gym.make(env_id)
    remote = gym.make("AgentGym/Remote-v0", env_id=env_id)
    try:
        assert remote.reset(seed=0) == local.reset(seed=0)
        for action in actions:
            answer = local.step(action)
            assert_invalid(action, answer, local.observation_space)
            assert remote.step(action) == answer, f"{action[:60]!r}: the remote answer differs"
    finally:
        remote.close()
        local.close()


@pytest.mark.parametrize("env_id", REMOTE_IDS)
def test_hostile_actions_remote_answers_equal_local(env_id: str) -> None:
    actions = [a for a in hostile_strings(REMOTE_COUNT) if not _SURROGATE_PAIR.search(a)]
    assert len(actions) > 0.9 * REMOTE_COUNT
    _remote_and_local(env_id, actions)


@pytest.mark.xfail(
    strict=True,
    reason="remote wire format (agentgym_envs/remote/wire.py): the two lone surrogates '\\ud800\\udfff' are sent "
    "as the JSON escapes \\ud800\\udfff, which the other side decodes as the one character U+103FF; the "
    "remote env then answers another action than the local one",
)
def test_remote_carries_adjacent_lone_surrogates() -> None:
    _remote_and_local("AgentGym/BabyAI-v0", ["go to red ball \ud800\udfff", "\udbff\udc00"])


_UNICODE_SPACES = re.compile(r"\s+")
_JAVA_SPACES = re.compile(r"[ \t\n\x0b\f\r]+")


def test_normalisers_equal_their_regex_definitions() -> None:
    """The str-method normalisers give what the regexes they replaced gave (those were slow on 1 MB)."""
    rng = np.random.default_rng(1)
    alphabet = list(" \t\n\x0b\f\r\x1c\x85\xa0\u2028\u3000`'\".!aB")
    texts = hostile_strings(2000) + ["".join(rng.choice(alphabet, size=rng.integers(0, 12))) for _ in range(5000)]
    for text in texts:
        expected = _UNICODE_SPACES.sub(" ", text).strip().strip("`'\"").rstrip(".!").strip()
        assert normalise_action(text, lower=False) == expected, repr(text[:60])
        expected = _JAVA_SPACES.sub(" ", text).strip().strip("`'\"").rstrip(".!").strip()
        assert sciworld_normalise_action(text) == expected, repr(text[:60])


@pytest.mark.parametrize("env_id", ["AgentGym/BabyAI-v0", "AgentGym/TextCraft-v0"])
@pytest.mark.parametrize("task_id", ["GoToLocal/" + HUGE, "GoToLocal/٣", "\ud800", "x" * 100_000, "GoToLocal/-1"])
def test_hostile_task_ids_are_unknown_tasks(env_id: str, task_id: str) -> None:
    env = gym.make(env_id)
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": task_id})
    env.close()
