"""The TextEnv contract and TextSpace, checked on BabyAI (the reference scenario)."""

from __future__ import annotations

import random

import gymnasium as gym
import numpy as np
import pytest

import agentgym_envs
from agentgym_envs import EpisodeOverError, TextSpace
from agentgym_envs.core import INFO_KEYS, TextEnv
from agentgym_envs.textcraft.env import TextCraftEnv


@pytest.fixture
def env():
    env = gym.make("AgentGym/BabyAI-GoToLocal-v0")
    yield env
    env.close()


def test_text_space_accepts_any_string_up_to_its_bound() -> None:
    space = TextSpace(max_length=10)
    assert "héllo, wörld" not in space  # 12 characters
    assert "¡hola! 🙂" in space
    assert "" in space
    assert b"bytes" not in space and None not in space
    space.seed(3)
    samples = [space.sample() for _ in range(50)]
    assert all(s in space and len(s) >= 1 for s in samples)
    space.seed(3)
    assert [space.sample() for _ in range(50)] == samples


def test_info_keys_on_reset_and_step(env) -> None:
    _, info = env.reset(seed=0)
    assert set(INFO_KEYS) <= set(info)
    assert "valid_action" not in info
    _, _, _, _, info = env.step("turn left")
    assert set(INFO_KEYS) <= set(info) and info["valid_action"] is True
    assert info["task_id"].startswith("GoToLocal/") and info["category"] == "GoTo"
    assert isinstance(info["available_actions"], list) and "turn left" in info["available_actions"]


def test_only_an_env_class_that_says_so_shares_a_server_thread(env) -> None:
    assert TextEnv.shared_server_thread is False and env.unwrapped.shared_server_thread is False
    assert TextCraftEnv.shared_server_thread is True


def test_non_string_action_is_a_type_error(env) -> None:
    env.reset(seed=0)
    for bad in (3, None, b"turn left", ["turn left"]):
        with pytest.raises(TypeError, match="action must be a str"):
            env.unwrapped.step(bad)


def test_step_before_reset_and_after_end(env) -> None:
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step("turn left")
    env.reset(options={"task_id": "GoToLocal/0"})
    expert = env.unwrapped.make_expert()
    observation, info, done = None, {}, False
    while not done:
        _, _, terminated, truncated, info = env.unwrapped.step(expert.act(observation, info))
        done = terminated or truncated
    with pytest.raises(EpisodeOverError, match="call reset"):
        env.unwrapped.step("turn left")


def test_reset_options(env) -> None:
    base = env.unwrapped
    _, info = env.reset(options={"task_id": "GoToLocal/5"})
    assert (info["task_id"], info["split"]) == ("GoToLocal/5", "test")
    _, info = env.reset(options={"task_id": 5, "split": "test"})
    assert info["task_id"] == base.tasks("test")[5] == "GoToLocal/5"
    _, info = env.reset(seed=1, options={"split": "test"})
    assert info["task_id"] in base.tasks("test")
    with pytest.raises(ValueError, match="unknown split"):
        env.reset(options={"split": "validation"})
    with pytest.raises(ValueError, match="belongs to split 'test'"):
        env.reset(options={"task_id": "GoToLocal/5", "split": "train"})
    # a seed outside the listed ranges is a task (AgentGym's data_idx can name it), counted as train
    _, info = env.reset(options={"task_id": "GoToLocal/500"})
    assert (info["task_id"], info["split"]) == ("GoToLocal/500", "train")
    with pytest.raises(ValueError, match="unknown task_id"):
        env.reset(options={"task_id": "GoToObj/5"})  # a level this env does not play
    with pytest.raises(ValueError, match="out of range"):
        env.reset(options={"task_id": 100, "split": "test"})
    with pytest.raises(ValueError, match="unknown reset options"):
        env.reset(options={"level": "GoToLocal"})
    with pytest.raises(ValueError, match="unknown task_id") as error:  # a huge id is not echoed whole
        env.reset(options={"task_id": "x" * 100_000})
    assert len(str(error.value)) < 300


def test_same_seed_same_task_and_no_global_rng(env) -> None:
    random.seed(0)
    np.random.seed(0)
    before = (random.random(), np.random.random())
    random.seed(0)
    np.random.seed(0)
    first = env.reset(seed=42)
    for action in ("turn left", "move forward", "go to grey key 1"):
        env.step(action)
    assert env.reset(seed=42)[0] == first[0]
    assert (random.random(), np.random.random()) == before


def test_render_ansi_and_close_twice() -> None:
    env = gym.make("AgentGym/BabyAI-GoToLocal-v0", render_mode="ansi")
    observation, _ = env.reset(seed=0)
    assert env.render() == observation
    observation, *_ = env.step("turn right")
    assert env.render() == observation
    env.close()
    env.close()
    with pytest.raises(ValueError, match="render_mode"), pytest.warns(UserWarning, match="render_mode"):
        gym.make("AgentGym/BabyAI-GoToLocal-v0", render_mode="human")


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_make_vec_batches_text_as_tuples(mode: str) -> None:
    envs = gym.make_vec("AgentGym/BabyAI-GoToLocal-v0", num_envs=3, vectorization_mode=mode)
    observations, infos = envs.reset(seed=[0, 1, 2])
    assert isinstance(observations, tuple) and len(observations) == 3
    assert all(o.startswith("Mission: ") for o in observations)
    singles = [gym.make("AgentGym/BabyAI-GoToLocal-v0").reset(seed=s)[0] for s in range(3)]
    assert list(observations) == singles
    observations, rewards, _, _, infos = envs.step(("turn left", "héllo ✓", "move forward"))
    assert isinstance(observations, tuple) and rewards.shape == (3,)
    assert list(infos["valid_action"]) == [True, False, infos["valid_action"][2]]
    envs.close()


def test_registration_is_on_import() -> None:
    assert "AgentGym/BabyAI-v0" in gym.registry
    assert "AgentGym/BabyAI-GoToLocal-v0" in agentgym_envs.registered_ids
    assert set(agentgym_envs.PRIMARY_IDS) <= set(agentgym_envs.registered_ids)


@pytest.mark.parametrize("env_id", ["AgentGym/BabyAI-v0", "AgentGym/TextCraft-v0", "remote"])
def test_reset_options_that_are_not_a_dict_say_what_options_must_be(env_id) -> None:
    if env_id == "remote":
        from agentgym_envs.remote import RemoteEnv
        from agentgym_envs.remote.server import create_app
        from agentgym_envs.remote.server.local import ServerThread

        server = ServerThread(create_app(["AgentGym/BabyAI-v0"], ttl=None)).start()
        env = RemoteEnv(server.base_url, "AgentGym/BabyAI-v0")
    else:
        server, env = None, gym.make(env_id)
    try:
        for options in ["task_id=3", ["task_id", 3], 5, ("split", "test")]:
            with pytest.raises(TypeError, match=r"reset options must be a dict .*'task_id'.*'split'") as error:
                env.reset(options=options)
            assert type(options).__name__ in str(error.value) and "dictionary update" not in str(error.value)
        assert env.reset(options={"split": "test"})[1]["split"] == "test"  # a dict still works
    finally:
        env.close()
        if server is not None:
            server.stop()
