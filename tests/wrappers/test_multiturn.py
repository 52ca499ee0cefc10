"""MultiTurnWrapper: chat messages, parsing, reminders, turn limits, statistics, history bound."""

from __future__ import annotations

import gymnasium as gym
import pytest

from agentgym_envs import EpisodeOverError
from agentgym_envs.babyai.env import BabyAIEnv
from agentgym_wrappers import MultiTurnWrapper


def babyai(**kwargs) -> MultiTurnWrapper:
    return MultiTurnWrapper(gym.make("AgentGym/BabyAI-GoToLocal-v0"), **kwargs)


def test_messages_follow_the_chat() -> None:
    env = babyai()
    observation, _ = env.reset(seed=0)
    assert env.messages == [
        {"role": "system", "content": BabyAIEnv.system_prompt},
        {"role": "user", "content": observation},
    ]
    reply = "I will look around.\nAction: turn left"
    observation, *_ = env.step(reply)
    assert env.messages[-2:] == [{"role": "assistant", "content": reply}, {"role": "user", "content": observation}]
    assert observation.startswith("You turned left.")


def test_defaults_come_from_the_scenario() -> None:
    env = babyai()
    assert env.max_turns == BabyAIEnv.default_max_turns
    assert env.parser("Action: drop") == "drop"


def test_unparsable_reply_costs_a_turn_and_does_not_step() -> None:
    env = babyai()
    env.reset(seed=0)
    steps = env.unwrapped.minigrid_env.step_count
    observation, reward, terminated, truncated, info = env.step("turn left please")
    assert observation == "Your reply must end with one line of the form 'Action: <action>'."
    assert (reward, terminated, truncated) == (0.0, False, False)
    assert info["format_error"] and info["valid_action"] is False
    assert env.unwrapped.minigrid_env.step_count == steps and env.turns == 1


def test_truncation_at_max_turns_and_change_between_episodes() -> None:
    env = babyai(max_turns=2)
    env.reset(seed=0)
    assert env.step("Action: turn left")[3] is False
    *_, truncated, info = env.step("Action: turn left")
    assert truncated and info["episode"]["turns"] == 2 and info["episode"]["truncated"]
    with pytest.raises(EpisodeOverError):
        env.step("Action: turn left")
    env.max_turns = 4
    env.reset(seed=0)
    for turn in range(1, 5):
        *_, truncated, info = env.step("Action: turn right")
        assert truncated == (turn == 4)


def test_episode_statistics() -> None:
    env = babyai(max_turns=50)
    observation, info = env.reset(options={"task_id": "GoToLocal/0"})
    expert = env.unwrapped.make_expert()
    env.step("no action here")  # invalid reply
    env.step("Action: fly")  # invalid action
    env.step("Action: turn left")
    env.step("Action: turn left")  # repeated
    env.step("Action: turn right")
    env.step("Action: turn right")  # repeated
    done = False
    while not done:
        observation, _, terminated, truncated, info = env.step("Action: " + expert.act(observation, info))
        done = terminated or truncated
    stats = info["episode"]
    assert stats["success"] and stats["terminated"] and not stats["truncated"]
    assert stats["invalid_replies"] == 1 and stats["invalid_actions"] == 1
    assert stats["repeated_actions"] >= 2
    assert stats["return"] == pytest.approx(info["score"]) and stats["turns"] == env.turns
    assert stats["wall_time"] > 0


def test_statistics_so_far_and_under_their_own_key() -> None:
    env = babyai(max_turns=3, stats_key="record")
    env.reset(seed=0)
    env.step("no action here")
    env.step("Action: turn left")
    so_far = env.episode_stats()  # what a caller that ends the episode here reads
    assert so_far["turns"] == 2 and so_far["invalid_replies"] == 1 and not so_far["terminated"]
    assert [step["action"] for step in so_far["steps"]] == [None, "turn left"]
    assert so_far["return"] == sum(step["reward"] for step in so_far["steps"])
    *_, truncated, info = env.step("Action: turn left")
    assert truncated and "episode" not in info
    assert info["record"]["turns"] == 3 and info["record"]["truncated"] and info["record"]["repeated_actions"] == 1


def test_stop_strings_are_the_scenarios_unless_given() -> None:
    assert babyai().stop_strings == BabyAIEnv.stop_strings == ("\nObservation:",)
    assert babyai(stop_strings=["\nDone"]).stop_strings == ("\nDone",)
    assert babyai(stop_strings=()).stop_strings == ()


def test_history_bound_keeps_task_and_last_turns() -> None:
    env = babyai(history=2, max_turns=10)
    env.reset(seed=0)
    for action in ("turn left", "turn right", "move forward", "turn left"):
        env.step(f"Action: {action}")
    messages = env.messages
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1]["content"].startswith("Mission:")
    assert messages[2]["content"] == "Action: move forward" and messages[4]["content"] == "Action: turn left"
    assert len(env.transcript) == 2 + 2 * 4
    env.reset(seed=1)  # no state carried across resets
    assert len(env.messages) == 2 and env.turns == 0
    zero = babyai(history=0)
    zero.reset(seed=0)
    zero.step("Action: turn left")
    assert [m["role"] for m in zero.messages] == ["system", "user"]


def test_double_wrapping_is_refused() -> None:
    env = babyai()
    with pytest.raises(ValueError, match="already wrapped"):
        MultiTurnWrapper(gym.wrappers.OrderEnforcing(env))


def test_non_string_reply_is_a_type_error() -> None:
    env = babyai()
    env.reset(seed=0)
    with pytest.raises(TypeError, match="model_output must be a str"):
        env.step(3)


class Echo(gym.Env):
    """A plain Gymnasium env of strings (no TextEnv attributes)."""

    observation_space = gym.spaces.Text(64)
    action_space = gym.spaces.Text(64)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return "say done", {}

    def step(self, action):
        return f"you said {action}", float(action == "done"), action == "done", False, {}


def test_plain_gymnasium_string_env() -> None:
    env = MultiTurnWrapper(Echo(), parser="fenced")
    assert env.max_turns is None and env.system_prompt == ""
    env.reset()
    assert env.messages == [{"role": "user", "content": "say done"}]
    observation, _, terminated, _, _ = env.step("ok ```hello```")
    assert observation == "you said hello" and not terminated
    observation, reward, terminated, _, info = env.step("```done```")
    assert terminated and reward == 1.0 and info["episode"]["return"] == 1.0 and info["episode"]["turns"] == 2


HOSTILE_REPLIES = [
    '{"name": "go to", "arguments": ' + "[" * 100_000 + "}",  # deeper than the JSON decoder goes
    '{"name": "go to", "arguments": {"n": ' + "9" * 5000 + "}}",  # past Python's int digit limit
    "\n" * 100_000 + "Action:",
    "<search>" * 10_000,
    "```" + "x" * 100_000,
    "Action: go to red ball " + "9" * 5000,
    "\ud800\x00\u202e",
]


@pytest.mark.parametrize("parser", ["action_line", "tags", "fenced", "json"])
def test_hostile_replies_cost_a_turn_and_raise_nothing(parser: str) -> None:
    env = babyai(parser=parser, max_turns=None)
    env.reset(seed=0)
    for reply in HOSTILE_REPLIES:
        observation, reward, terminated, truncated, info = env.step(reply)
        assert observation and reward == 0 and not (terminated or truncated) and info["valid_action"] is False
    assert env.turns == len(HOSTILE_REPLIES)
