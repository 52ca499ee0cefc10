"""`agentgym_envs.adapters.gem`: the scenarios as GEM envs, played by GEM's own vector env and wrappers.

The policy is a stand-in for a model: each env's scripted expert, writing its replies as a model
would ('Action: ...' lines, `<answer>` tags).
"""

from __future__ import annotations

import pytest

pytest.importorskip("gem")

import gem
from gem.wrappers.episode_tracking_wrapper import EpisodeTrackingWrapper
from gem.wrappers.wrapper_factory import get_wrapper_fns

from agentgym_envs.adapters.gem import register_all

IDS = ["agentgym:BabyAI-v0", "agentgym:TextCraft-v0", "agentgym:DeepSearch-v0"]


def test_every_scenario_is_registered() -> None:
    ids = register_all()
    assert set(IDS) | {"agentgym:SciWorld-v0", "agentgym:WebArena-v0"} <= set(ids)
    assert register_all() == ids  # idempotent


def test_gem_vector_env_plays_one_expert_episode_of_each(capsys: pytest.CaptureFixture[str]) -> None:
    register_all()
    wrappers = [*get_wrapper_fns("concat_with_action"), EpisodeTrackingWrapper]
    envs = gem.make_vec(IDS, wrappers=wrappers, vec_kwargs=[{"split": "test", "max_turns": 100}] * len(IDS), seed=0)
    observations, infos = envs.reset()
    assert all(
        obs.startswith(env.unwrapped.env.system_prompt) for obs, env in zip(observations, envs.envs, strict=True)
    )
    returns: dict[int, float] = {}
    for _ in range(100):
        live = {i: env.unwrapped.expert_reply() for i, env in enumerate(envs.envs) if i not in returns}
        if not live:
            break
        _, _, terminated, truncated, infos = envs.step(live)
        for slot, i in enumerate(live):
            if terminated[slot] or truncated[slot]:  # GEM resets it in the same step (its default)
                returns[i] = infos[slot]["prev_ep_cumulative_rewards"]
                assert terminated[slot] and infos[slot]["step_counter"] == 0
    assert sorted(returns) == [0, 1, 2] and all(value > 0 for value in returns.values()), returns
    for env in envs.envs:
        env.unwrapped.close()


def test_replies_are_parsed_and_bad_ones_answered_with_a_reminder() -> None:
    register_all()
    env = gem.make("agentgym:TextCraft-v0", split="test", seed=0)
    first, _ = env.reset()
    assert first == env.reset(seed=0)[0]  # the constructor's seed picks the same task as reset(seed=0)
    observation, reward, _, _, info = env.step("I will look at what I hold.\nAction: inventory")
    assert observation.startswith("Inventory") and info["parsed_action"] == "inventory" and reward == 0.0
    observation, _, _, _, info = env.step("no action here")
    assert info["format_error"] and "Action:" in observation and "parsed_action" not in info
    with pytest.raises(NotImplementedError, match="lists no actions"):
        env.sample_random_action()
    assert env.spawn(split="train").config["split"] == "train"
    env.close()
    babyai = gem.make("agentgym:BabyAI-v0", seed=0)
    babyai.reset()
    reply = babyai.sample_random_action()
    actions = babyai._info["available_actions"]
    assert reply.removeprefix("Action: ") in actions
    assert babyai.step(reply)[4]["parsed_action"] == reply.removeprefix("Action: ")
    babyai.close()
