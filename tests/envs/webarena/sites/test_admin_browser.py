"""The shop admin in the browser, through the env: the expert answers every admin information task of
the test split from what the page shows, solves a train sample (score 1.0 each) where doing nothing
scores 0, and a reset undoes what an episode changed.

(`tests/envs/webarena/test_world.py` runs the expert and the null policy on every test task of every
site, the admin's included.)"""

from __future__ import annotations

import random

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.tasks.splits import TemplateTask

SITE = "shopping_admin"
#: Train tasks of the admin whose expert runs here (a deterministic sample).
TRAIN_SAMPLE = 8


@pytest.fixture(scope="module")
def env() -> WebArenaEnv:
    env = gym.make("AgentGym/WebArena-v0").unwrapped
    yield env
    env.close()


def admin_tasks(env: WebArenaEnv, split: str) -> list[TemplateTask]:
    made = [t for t in env.catalog.by_id.values() if isinstance(t, TemplateTask) and t.category == SITE]
    return sorted((t for t in made if t.split == split), key=lambda t: t.task_id)


def answer_of(task: TemplateTask) -> str:
    return task.config["agentgym_expert"][-1]["answer"]


@pytest.mark.slow
def test_info_answers_are_on_the_page_the_expert_ends_on(env: WebArenaEnv) -> None:
    failures = []
    for task in admin_tasks(env, "test"):
        if task.kind != "info":
            continue
        rollout = expert_rollout(env, options={"task_id": task.task_id}, max_turns=20)
        if rollout["info"]["score"] != 1 or answer_of(task) not in rollout["observations"][-2]:
            failures.append(f"{task.task_id}: {answer_of(task)!r} scores {rollout['info']['score']} or is not shown")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_expert_solves_a_train_sample_where_doing_nothing_scores_zero(env: WebArenaEnv) -> None:
    failures = []
    for task in random.Random(3).sample(admin_tasks(env, "train"), TRAIN_SAMPLE):
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
    cancel = next(t for t in admin_tasks(env, "test") if t.template.template_id == f"{SITE}.cancel_with_comment")
    assert expert_rollout(env, options={"task_id": cancel.task_id}, max_turns=20)["info"]["score"] == 1
    env.reset(options={"task_id": cancel.task_id})
    assert env.step("stop []")[1] == 0  # the order is Pending again, without the comment
