"""The map's task templates (no browser: template sanity) and, in the browser, the expert on every
test task of the map and a sample of train, and the null policy."""

from __future__ import annotations

import random
from collections import Counter

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.scoring.evaluators import string_match, url_match
from agentgym_envs.webarena.sites.map.db import seed_connection
from agentgym_envs.webarena.sites.map.tasks import TEMPLATES
from agentgym_envs.webarena.tasks.catalog import TaskCatalog
from agentgym_envs.webarena.tasks.splits import TemplateTask
from agentgym_envs.webarena.tasks.templates import NOT_ACHIEVABLE

#: Train tasks of the map whose expert runs in the browser test (a deterministic sample).
TRAIN_SAMPLE = 5


def test_templates_are_many_unique_and_in_the_maps_proportions() -> None:
    assert len(TEMPLATES) >= 40
    assert len({t.template_id for t in TEMPLATES}) == len(TEMPLATES)
    kinds = Counter(t.kind for t in TEMPLATES)
    assert kinds["state"] == 0  # the map has nothing to change
    assert 0.55 <= kinds["info"] / len(TEMPLATES) <= 0.65 and 0.25 <= kinds["nav"] / len(TEMPLATES) <= 0.32
    assert 0.08 <= kinds["na"] / len(TEMPLATES) <= 0.13
    held_out = [t for t in TEMPLATES if t.held_out]
    assert 3 <= len(held_out) <= 6 and {t.kind for t in held_out} == {"info", "nav", "na"}


def test_every_instance_makes_a_complete_config_the_null_policy_fails() -> None:
    seed = seed_connection()
    try:
        for template in TEMPLATES:
            instances = template.instances(seed)
            assert len(instances) >= 15, template.template_id
            assert instances == template.instances(seed)  # deterministic
            assert len({tuple(sorted(v.items())) for v in instances}) == len(instances), template.template_id
            for index in range(0, len(instances), max(1, len(instances) // 6)):  # a spread of instances
                config = template.config(seed, instances[index], f"{template.template_id}/{index}")
                assert "{{" not in config["intent"] and config["agentgym_expert"][-1]["do"] == "stop"
                evaluation = config["eval"]
                if template.kind == "nav":
                    assert evaluation["eval_types"] == ["url_match"]
                    assert url_match(config, config["start_url"]) == 0.0, config["task_id"]
                else:
                    answers = evaluation["reference_answers"]
                    assert "fuzzy_match" not in answers and any(answers.values()), config["task_id"]
                    assert string_match(config, "", None) == 0.0, config["task_id"]
                    said = config["agentgym_expert"][-1]["answer"]
                    assert string_match(config, said, None) == 1.0, config["task_id"]  # the plan's answer scores
                    assert (answers == {"exact_match": NOT_ACHIEVABLE}) == (template.kind == "na")
    finally:
        seed.close()


# ---- in the browser -----------------------------------------------------------------------------
@pytest.mark.slow
def test_expert_solves_a_train_sample_and_doing_nothing_scores_zero() -> None:
    # The whole test split runs in webarena/test_world.py; here a train sample of other instances.
    made = [t for t in TaskCatalog.bundled().by_id.values() if isinstance(t, TemplateTask) and t.category == "map"]
    test = sorted(t.task_id for t in made if t.split == "test")
    assert len(test) == len(TEMPLATES)
    train = random.Random(6).sample(sorted(t.task_id for t in made if t.split == "train"), TRAIN_SAMPLE)
    env: WebArenaEnv = gym.make("AgentGym/WebArena-v0").unwrapped
    failures = []
    try:
        for task_id in train:
            task = env.catalog.by_id[task_id]
            config = task.resolve({"map": "http://map.test"}).config
            null = string_match(config, "", None) if task.kind != "nav" else url_match(config, config["start_url"])
            if null != 0 and task.kind != "na":
                failures.append(f"{task_id}: the null policy scores {null}")
            rollout = expert_rollout(env, options={"task_id": task_id}, max_turns=20)
            info = rollout["info"]
            if not (rollout["terminated"] and info["score"] == 1 and info["kind"] == task.kind):
                failures.append(f"{task_id}: the expert scores {info['score']} on {info.get('url')}")
    finally:
        env.close()
    assert not failures, "\n".join(failures)
