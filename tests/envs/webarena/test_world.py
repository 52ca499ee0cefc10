"""The offline web world: the train/test splits made from every embedded site's task templates, and the
expert and the null policy on them in the real browser.

The tests run on whatever sites are embedded (sites land one by one); each bundled template task must
be solved by its expert (score 1) and score 0 under the null policy (`stop []` at once) unless its
answer is "N/A".
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
from collections import Counter, defaultdict

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.scoring.evaluators import string_match, url_match
from agentgym_envs.webarena.sites import SITES
from agentgym_envs.webarena.tasks.catalog import TaskCatalog
from agentgym_envs.webarena.tasks.splits import (
    TEST_PER_TEMPLATE,
    TRAIN_CAP,
    SeedConnections,
    TemplateTask,
    place,
    site_templates,
    table,
    template_tasks,
)
from agentgym_envs.webarena.tasks.templates import KINDS, TaskTemplate, click, exact, stop

#: Train tasks of each site whose expert runs in the browser test (a deterministic sample).
TRAIN_SAMPLE = 6
SITE_URLS = {site.name: site.origin for site in SITES.values()}


def stand_in_seed() -> sqlite3.Connection:
    """A stand-in for a site's seed data: 100 numbered items."""
    connection = sqlite3.connect(":memory:")
    connection.row_factory = sqlite3.Row
    connection.execute("CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT)")
    connection.executemany("INSERT INTO items VALUES (?, ?)", [(i, f"item {i}") for i in range(100)])
    return connection


def stand_in_template(slug: str, held_out: bool = False, count: int = 100) -> TaskTemplate:
    return TaskTemplate(
        template_id=f"shopping.{slug}",
        site="shopping",
        kind="info",
        intent_template="What is item {{id}} called?",
        instances=lambda seed: [{"id": str(row["id"])} for row in seed.execute(f"SELECT id FROM items LIMIT {count}")],
        build=lambda seed, values: {
            "start_url": f"__SHOPPING__/items/{values['id']}",
            "eval": exact(seed.execute("SELECT name FROM items WHERE id = ?", (values["id"],)).fetchone()["name"]),
            "agentgym_expert": [click("link", "Items"), stop("?")],
        },
        held_out=held_out,
    )


def test_placement_is_deterministic_capped_and_keeps_held_out_templates_out_of_train() -> None:
    template = stand_in_template("name")
    placed = place(template, 100)
    assert placed == place(stand_in_template("name"), 100)  # the same on every run
    assert [p.split for p in placed].count("test") == TEST_PER_TEMPLATE
    assert [p.split for p in placed].count("train") == TRAIN_CAP
    assert len({p.index for p in placed}) == len(placed)
    assert all(p.task_id == f"shopping.name/{p.index}" for p in placed)
    assert {p.index for p in place(stand_in_template("other"), 100)} != {p.index for p in placed}  # per-template draws
    assert [p.split for p in place(stand_in_template("name", held_out=True), 100)] == ["test"] * TEST_PER_TEMPLATE
    assert place(template, 0) == [] and [p.split for p in place(template, 1)] == ["test"]


def test_template_tasks_build_their_config_on_first_use() -> None:
    seeds = SeedConnections({"shopping": stand_in_seed})
    tasks = template_tasks({"shopping": [stand_in_template("name"), stand_in_template("few", count=3)]}, seeds)
    assert Counter(t.split for t in tasks) == {"train": TRAIN_CAP + 2, "test": 2}
    task = next(t for t in tasks if t.task_id.startswith("shopping.few/"))
    assert task._config is None and task.category == "shopping" and task.kind == "info"
    number = task.task_id.split("/")[1]
    assert task.intent == f"What is item {number} called?"
    assert task.config["eval"]["reference_answers"] == {"exact_match": f"item {number}"}
    assert task.config["task_id"] == task.task_id and task.config["intent_template_id"] == "shopping.few"
    resolved = task.resolve({"shopping": "http://shop.test"})
    assert resolved.start_urls == [f"http://shop.test/items/{number}"]
    with pytest.raises(ValueError, match="appears twice"):
        template_tasks({"shopping": [stand_in_template("name"), stand_in_template("name")]}, seeds)


def test_the_homepage_links_to_every_other_site() -> None:
    from starlette.testclient import TestClient

    from agentgym_envs.webarena.sites.home.app import HomeDB, create_app

    client = TestClient(create_app(HomeDB()))
    page = client.get("/")
    assert page.status_code == 200 and "<title>Homepage</title>" in page.text
    for site in SITES.values():
        link = f'<a href="{site.origin}/">{site.title}</a>'
        assert (link in page.text) == (site.name != "homepage"), site.name
    assert client.get("/admin").status_code == 404 and client.post("/").status_code == 404


# ---- the bundled world --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def catalog() -> TaskCatalog:
    return TaskCatalog.bundled()


@pytest.fixture(scope="module")
def made(catalog: TaskCatalog) -> list[TemplateTask]:
    return [task for task in catalog.by_id.values() if isinstance(task, TemplateTask)]


def test_splits_are_stratified_by_template_and_hold_some_templates_out(made: list[TemplateTask]) -> None:
    templates = site_templates()
    print("\n" + table(made, templates))  # proportions per site and kind, for the record
    by_template: dict[str, Counter] = defaultdict(Counter)
    for task in made:
        by_template[task.template.template_id][task.split] += 1
    for site, site_list in templates.items():
        assert SITES[site].templates, site
        for template in site_list:
            counts = by_template[template.template_id]
            assert counts["test"] == TEST_PER_TEMPLATE, f"{template.template_id} has no instance"
            assert counts["train"] <= TRAIN_CAP and (counts["train"] == 0 or not template.held_out)
    held_out = {t.template_id for site_list in templates.values() for t in site_list if t.held_out}
    assert not any(task.template.template_id in held_out for task in made if task.split == "train")
    assert all(task.kind in KINDS and task.category == task.template.site for task in made)


def test_splits_are_the_same_in_another_process(made: list[TemplateTask]) -> None:
    script = (
        "import json; from agentgym_envs.webarena.tasks.catalog import TaskCatalog; "
        "from agentgym_envs.webarena.tasks.splits import TemplateTask; "
        "print(json.dumps([[t.task_id, t.split, t.values] for t in "
        "TaskCatalog.bundled().by_id.values() if isinstance(t, TemplateTask)]))"
    )
    environ = {**os.environ, "PYTHONHASHSEED": "1234"}  # another order of sets, were any used
    output = subprocess.run([sys.executable, "-c", script], env=environ, capture_output=True, text=True, check=True)
    assert json.loads(output.stdout) == [[t.task_id, t.split, t.values] for t in made]


def test_every_config_is_complete_and_needs_no_judge(made: list[TemplateTask]) -> None:
    for task in made:
        config = task.config
        assert "{{" not in config["intent"], task.task_id
        assert config["sites"] and config["agentgym_expert"] and config["agentgym_kind"] == task.kind, task.task_id
        answers = config["eval"].get("reference_answers") or {}
        assert "fuzzy_match" not in answers, f"{task.task_id}: bundled tasks must score without a judge"
        if task.kind == "na":
            assert answers == {"exact_match": "N/A"}, task.task_id
        elif task.kind == "info":
            assert any(answers.values()), f"{task.task_id}: an empty answer would reward the null policy"


# ---- in the browser -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def env() -> WebArenaEnv:
    env = gym.make("AgentGym/WebArena-v0").unwrapped
    yield env
    env.close()


def _browser_tasks(made: list[TemplateTask]) -> list[str]:
    train = sorted(task.task_id for task in made if task.split == "train")
    sample = random.Random(18).sample(train, min(TRAIN_SAMPLE, len(train)))
    return sorted(task.task_id for task in made if task.split == "test") + sorted(sample)


def _null_score_without_browser(task: TemplateTask) -> float | None:
    """The null policy's score of a task scored by answer and URL alone (None for page checks): its
    episode ends on the start page with an empty answer, which WebArena's evaluators score directly."""
    config = task.resolve(SITE_URLS).config
    types = config["eval"]["eval_types"]
    if "program_html" in types:
        return None
    score = string_match(config, "", None) if "string_match" in types else 1.0
    return score * url_match(config, config["start_url"]) if "url_match" in types else score


@pytest.mark.slow
@pytest.mark.parametrize("site", [name for name, site in SITES.items() if site.templates])
def test_expert_solves_every_test_task_and_a_train_sample_and_doing_nothing_scores_zero(
    env: WebArenaEnv, made: list[TemplateTask], site: str
) -> None:
    failures = []
    for task_id in _browser_tasks([task for task in made if task.category == site]):
        task = env.catalog.by_id[task_id]
        null = _null_score_without_browser(task)
        if null is None:  # a page check: the null policy's episode in the browser
            _, info = env.reset(options={"task_id": task_id})
            assert info["kind"] == task.kind and info["category"] == site
            null = env.step("stop []")[1]
        if null != 0 and task.kind != "na":
            failures.append(f"{task_id}: the null policy scores {null}, not 0")
        try:
            rollout = expert_rollout(env, options={"task_id": task_id}, max_turns=40)
        except Exception as error:  # the expert got stuck: the plan does not fit the site
            failures.append(f"{task_id}: the expert failed: {error}")
            continue
        info = rollout["info"]
        if not (rollout["terminated"] and info["score"] == 1 and info["kind"] == task.kind):
            failures.append(f"{task_id}: the expert scores {info['score']}: {info}")
    assert not failures, "\n".join(failures)
