"""The shop admin's task templates (no browser): counts and kinds, instances, complete configs, and
page checks that fail on the seed state (so doing nothing scores 0), read from the pages over HTTP."""

from __future__ import annotations

import html as html_module
import re
from collections import Counter

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites.admin.app import create_app
from agentgym_envs.webarena.sites.admin.db import AdminDB, seed_connection
from agentgym_envs.webarena.sites.admin.tasks import TEMPLATES
from agentgym_envs.webarena.sites.admin.tasks.common import ADMIN
from agentgym_envs.webarena.tasks.templates import KINDS

#: Instances of each template whose config is built and checked here.
CHECKED = 12


@pytest.fixture(scope="module")
def configs() -> list[dict]:
    seed = seed_connection()
    return [
        template.config(seed, values, f"{template.template_id}/{n}")
        for template in TEMPLATES
        for n, values in enumerate(template.instances(seed)[:CHECKED])
    ]


def test_templates_are_many_unique_and_in_the_admin_proportions() -> None:
    seed = seed_connection()
    ids = [t.template_id for t in TEMPLATES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    kinds = Counter(t.kind for t in TEMPLATES)
    assert set(kinds) == set(KINDS)
    assert 0.40 <= kinds["info"] / len(ids) <= 0.50 and 0.45 <= kinds["state"] / len(ids) <= 0.55
    assert kinds["nav"] == 1 and kinds["na"] <= 3
    held_out = [t for t in TEMPLATES if t.held_out]
    assert 0.08 <= len(held_out) / len(ids) <= 0.15 and len({t.kind for t in held_out}) >= 2
    counts = {t.template_id: len(t.instances(seed)) for t in TEMPLATES}
    assert min(counts.values()) >= 5, counts
    assert sum(n >= 30 for n in counts.values()) >= 30  # most templates give the train split many tasks
    for template in TEMPLATES:
        instances = template.instances(seed)
        assert len({tuple(sorted(v.items())) for v in instances}) == len(instances), template.template_id
        assert instances == template.instances(seed_connection())  # deterministic


def test_configs_are_complete_and_need_no_judge(configs: list[dict]) -> None:
    for config in configs:
        assert "{{" not in config["intent"] and config["sites"] == ["shopping_admin"]
        assert config["start_url"] == f"{ADMIN}/"
        evaluation, plan = config["eval"], config["agentgym_expert"]
        answers = evaluation["reference_answers"] or {}
        assert "fuzzy_match" not in answers and plan[-1]["do"] == "stop", config["task_id"]
        assert all(step["do"] in ("click", "type", "stop") for step in plan), config["task_id"]
        if config["agentgym_kind"] == "info":
            assert any(answers.values()) and plan[-1]["answer"], config["task_id"]
        if config["agentgym_kind"] == "na":
            assert answers == {"exact_match": "N/A"} and plan[-1]["answer"] == "N/A"
        if config["agentgym_kind"] == "nav":
            assert evaluation["reference_url"] != config["start_url"]
        if config["agentgym_kind"] == "state":
            assert evaluation["eval_types"] == ["program_html"] and evaluation["program_html"]


def page_value(client: TestClient, url: str, locator: str) -> str:
    """What `document.querySelector(SELECTOR).outerText` reads on the admin's page (tag-free text)."""
    selector = re.fullmatch(r"document\.querySelector\('([#\w-]+)'\)\.outerText", locator)
    assert selector, locator
    page = client.get(url.replace(ADMIN, "")).text
    if selector.group(1).startswith("#"):
        found = re.search(rf'id="{selector.group(1)[1:]}"[^>]*>(.*?)</(dd|ul|table)>', page, re.S)
    else:
        found = re.search(rf"<{selector.group(1)}>(.*?)</{selector.group(1)}>", page, re.S)
    assert found, (url, locator)
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", found.group(1))).split())


def test_page_checks_fail_on_the_seed_state(configs: list[dict]) -> None:
    db = AdminDB()
    client = TestClient(create_app(db), base_url="http://admin.shop.test")
    for config in configs:
        if config["agentgym_kind"] != "state":
            continue
        results = []
        for target in config["eval"]["program_html"]:
            value = page_value(client, target["url"], target["locator"])
            required = target["required_contents"]
            if "exact_match" in required:
                results.append(value == required["exact_match"])
            else:
                results.append(all(phrase in value for phrase in required["must_include"]))
        assert not all(results), f"{config['task_id']}: the seed state already passes its checks"
    db.close()
