"""The code host in the browser, through the env: the expert solves every code-host test task and a train
sample (score 1.0 each), doing nothing scores 0 on all but the N/A tasks, and a reset undoes a change."""

from __future__ import annotations

import random

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.tasks.splits import TemplateTask

SITE = "gitlab"
#: Train tasks of the code host whose expert runs here (a deterministic sample).
TRAIN_SAMPLE = 8


@pytest.fixture(scope="module")
def env() -> WebArenaEnv:
    env = gym.make("AgentGym/WebArena-v0").unwrapped
    yield env
    env.close()


def code_tasks(env: WebArenaEnv) -> list[TemplateTask]:
    made = [t for t in env.catalog.by_id.values() if isinstance(t, TemplateTask) and t.category == SITE]
    train = sorted((t for t in made if t.split == "train"), key=lambda t: t.task_id)
    # The whole test split runs in webarena/test_world.py; here a train sample of other instances.
    return random.Random(3).sample(train, TRAIN_SAMPLE)


@pytest.mark.slow
def test_expert_solves_code_tasks_and_doing_nothing_scores_zero(env: WebArenaEnv) -> None:
    tasks = code_tasks(env)
    assert len(tasks) == TRAIN_SAMPLE
    failures = []
    for task in tasks:
        if task.kind in ("state", "nav"):  # info and N/A answers are checked without the browser
            env.reset(options={"task_id": task.task_id})
            null = env.step("stop []")[1]
            if null != 0:
                failures.append(f"{task.task_id}: the null policy scores {null}")
        elif task.kind == "na" and task.config["eval"]["reference_answers"] != {"exact_match": "N/A"}:
            failures.append(f"{task.task_id}: an N/A task whose answer is not N/A")
        try:
            rollout = expert_rollout(env, options={"task_id": task.task_id}, max_turns=40)
        except Exception as error:  # the plan does not fit the site
            failures.append(f"{task.task_id}: the expert failed: {error}")
            continue
        if not (rollout["terminated"] and rollout["info"]["score"] == 1):
            failures.append(f"{task.task_id}: the expert scores {rollout['info']['score']}")
    assert not failures, "\n".join(failures)


@pytest.mark.slow
def test_reset_restores_what_an_episode_changed(env: WebArenaEnv) -> None:
    made = [t for t in env.catalog.by_id.values() if isinstance(t, TemplateTask) and t.category == SITE]
    close = next(t for t in made if t.split == "test" and t.template.template_id == f"{SITE}.close_issue")
    assert expert_rollout(env, options={"task_id": close.task_id}, max_turns=20)["info"]["score"] == 1
    env.reset(options={"task_id": close.task_id})
    assert env.step("stop []")[1] == 0  # the issue is open again
