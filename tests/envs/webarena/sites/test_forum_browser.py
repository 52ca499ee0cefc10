"""The forum in the browser, through the env: the expert solves a sample of the forum's train tasks
(score 1.0 each) where doing nothing scores 0 (the N/A tasks aside), and a reset undoes what an episode
changed.

(`tests/envs/webarena/test_world.py` runs the expert and the null policy on every test task of every
site, the forum's included.)"""

from __future__ import annotations

import random

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.tasks.splits import TemplateTask

SITE = "reddit"
#: Train tasks of the forum whose expert runs here (a deterministic sample).
TRAIN_SAMPLE = 6


@pytest.fixture(scope="module")
def env() -> WebArenaEnv:
    env = gym.make("AgentGym/WebArena-v0").unwrapped
    yield env
    env.close()


def forum_tasks(env: WebArenaEnv, split: str) -> list[TemplateTask]:
    made = [t for t in env.catalog.by_id.values() if isinstance(t, TemplateTask) and t.category == SITE]
    return sorted((t for t in made if t.split == split), key=lambda t: t.task_id)


@pytest.mark.slow
def test_expert_solves_a_train_sample_where_doing_nothing_scores_zero(env: WebArenaEnv) -> None:
    failures = []
    for task in random.Random(18).sample(forum_tasks(env, "train"), TRAIN_SAMPLE):
        env.reset(options={"task_id": task.task_id})
        null = env.step("stop []")[1]
        if null != 0 and task.kind != "na":
            failures.append(f"{task.task_id}: the null policy scores {null}")
        rollout = expert_rollout(env, options={"task_id": task.task_id}, max_turns=40)
        if not (rollout["terminated"] and rollout["info"]["score"] == 1):
            failures.append(f"{task.task_id}: the expert scores {rollout['info']['score']}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_reset_restores_what_an_episode_changed(env: WebArenaEnv) -> None:
    delete = next(t for t in forum_tasks(env, "test") if t.template.template_id == f"{SITE}.delete_post")
    assert expert_rollout(env, options={"task_id": delete.task_id}, max_turns=20)["info"]["score"] == 1
    env.reset(options={"task_id": delete.task_id})
    assert env.step("stop []")[1] == 0  # the post is back
