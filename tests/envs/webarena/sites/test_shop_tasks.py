"""The shop's task templates: counts and proportions, instances and configs made from the seed data, and
(in the browser) the expert on a train instance of every state-changing template, whose change the
next reset undoes."""

from __future__ import annotations

import random
import re
import sqlite3
from collections import Counter

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.webarena.sites import SITES
from agentgym_envs.webarena.sites.shop.db import ShopDB, money, seed_connection
from agentgym_envs.webarena.sites.shop.tasks import TEMPLATES
from agentgym_envs.webarena.tasks.splits import TemplateTask
from agentgym_envs.webarena.tasks.templates import NOT_ACHIEVABLE


@pytest.fixture(scope="module")
def seed() -> sqlite3.Connection:
    connection = seed_connection()
    yield connection
    connection.close()


def test_templates_are_many_unique_and_in_webarenas_shop_proportions() -> None:
    ids = [t.template_id for t in TEMPLATES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    assert all(t.site == "shopping" and t.template_id.startswith("shopping.") for t in TEMPLATES)
    share = {kind: count / len(TEMPLATES) for kind, count in Counter(t.kind for t in TEMPLATES).items()}
    for kind, target in {"info": 0.37, "nav": 0.22, "state": 0.30, "na": 0.10}.items():
        assert abs(share[kind] - target) < 0.04, (kind, share[kind])
    held = [t for t in TEMPLATES if t.held_out]
    assert 0.08 <= len(held) / len(TEMPLATES) <= 0.12 and {t.kind for t in held} == {"info", "nav", "state", "na"}


def test_every_instance_builds_a_complete_config_the_null_policy_cannot_pass(seed: sqlite3.Connection) -> None:
    many = 0
    for template in TEMPLATES:
        instances = template.instances(seed)
        assert instances, template.template_id
        assert instances == template.instances(seed)  # a fixed order
        assert len({tuple(sorted(v.items())) for v in instances}) == len(instances), template.template_id
        many += len(instances) >= 30
        for index, values in enumerate(instances):
            config = template.config(seed, values, f"{template.template_id}/{index}")
            where = config["task_id"]
            assert "{{" not in config["intent"] and config["start_url"] == "__SHOPPING__", where
            plan, evaluation = config["agentgym_expert"], config["eval"]
            assert plan[-1]["do"] == "stop" and all(step["do"] in ("click", "type", "stop") for step in plan), where
            answers = evaluation["reference_answers"] or {}
            assert "fuzzy_match" not in answers, where
            if template.kind == "na":
                assert answers == {"exact_match": NOT_ACHIEVABLE} and plan[-1]["answer"] == NOT_ACHIEVABLE, where
            elif template.kind == "info":
                wanted = answers.get("exact_match") or answers["must_include"]
                assert wanted and all(wanted) and plan[-1]["answer"], where
                for phrase in [wanted] if isinstance(wanted, str) else wanted:
                    assert phrase.lower() in plan[-1]["answer"].lower(), where  # the expert's answer scores
            elif template.kind == "nav":
                assert evaluation["eval_types"] == ["url_match"] and evaluation["reference_url"] != "__SHOPPING__"
            else:
                assert evaluation["eval_types"] == ["program_html"] and evaluation["program_html"], where
                assert config["require_reset"], where
    assert many >= 0.6 * len(TEMPLATES)  # most templates give a train split of dozens


def test_info_answers_are_what_the_sites_pages_show(seed: sqlite3.Connection) -> None:
    """Spot checks of answers against the live app's own queries (the same seed)."""
    from agentgym_envs.webarena.sites.shop.tasks import common as tasks

    db = ShopDB()
    try:
        by_id = {t.template_id: t for t in TEMPLATES}
        for values in by_id["shopping.price"].instances(seed)[::37]:
            found = db.search(values["product"])
            expected = money(next(p for p in found if p["name"] == values["product"])["price"])
            built = by_id["shopping.price"].build(seed, values)
            assert built["eval"]["reference_answers"] == {"exact_match": expected}
        for values in by_id["shopping.order_total"].instances(seed)[::11]:
            order = db.order(int(values["number"]))
            built = by_id["shopping.order_total"].build(seed, values)
            assert built["eval"]["reference_answers"] == {"exact_match": money(order["total"])}
            page = tasks._order_page(seed, order["number"])  # the page of My Orders that lists it
            listed = [o["number"] for o in db.orders()][(page - 1) * 20 : page * 20]
            assert order["number"] in listed
        for values in by_id["shopping.count_in_range"].instances(seed):
            slug = next(c["slug"] for c in db.categories() if c["name"] == values["category"])
            low, high = int(values["low"]) * 100, int(values["high"]) * 100
            count = sum(low <= p["price"] <= high for p in db.in_category(slug))
            assert by_id["shopping.count_in_range"].build(seed, values)["eval"]["reference_answers"] == {
                "must_include": [str(count)]
            }
        for values in by_id["shopping.unsold_price"].instances(seed):
            assert db.search(values["product"]) == [], values
    finally:
        db.close()


# ---- in the browser -----------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.skipif(not SITES["shopping"].templates, reason="the shop's templates are not registered")
def test_expert_changes_the_state_of_each_kind_and_the_next_reset_undoes_it() -> None:
    env = gym.make("AgentGym/WebArena-v0").unwrapped
    try:
        state = [t for t in env.catalog.by_id.values() if isinstance(t, TemplateTask) and t.kind == "state"]
        state = [t for t in state if t.category == "shopping" and t.split == "train"]
        rng = random.Random(18)
        failures = []
        for template_id in sorted({t.template.template_id for t in state}):
            task = rng.choice(sorted((t for t in state if t.template.template_id == template_id), key=str))
            rollout = expert_rollout(env, options={"task_id": task.task_id}, max_turns=40)
            if rollout["info"]["score"] != 1:
                failures.append(f"{task.task_id}: the expert scores {rollout['info']['score']}")
            env.reset(options={"task_id": task.task_id})  # the change is gone: doing nothing scores 0
            if env.step("stop []")[1] != 0:
                failures.append(f"{task.task_id}: the reset did not undo the expert's change")
        assert not failures, "\n".join(failures)
        assert re.fullmatch(r"shopping\.[a-z_]+/[0-9]+", state[0].task_id)
    finally:
        env.close()
