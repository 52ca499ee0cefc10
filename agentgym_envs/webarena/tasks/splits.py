"""The bundled train and test splits, made from every embedded site's task templates.

Each template's instances (its `instances(seed)`, in their fixed order) are shuffled by a generator
seeded with the template id, so a template's split depends on nothing else (adding a template or a
site leaves every other task where it was):

- test: the first `TEST_PER_TEMPLATE` of them, for every template (so the test split is stratified
  by site and kind as the templates are);
- train: the next `TRAIN_CAP` of them, for every template that is not `held_out` (a held-out
  template is only in test: success on it measures generalisation to an intent never trained on).

A task's id is `"<template_id>/<n>"`, `n` the instance's index in the template's list. Configs are
built on first use (`TemplateTask.config`): listing thousands of tasks reads each template's
instances but builds no config.

`agentgym tasks webarena` prints the table of sites, templates and task
counts per kind (Markdown).
"""

from __future__ import annotations

import functools
import importlib
import random
import sqlite3
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentgym_envs.webarena.sites import SITES, resolve
from agentgym_envs.webarena.tasks.task import Task
from agentgym_envs.webarena.tasks.templates import KINDS, TaskTemplate, Values

#: Instances of each template in the test split.
TEST_PER_TEMPLATE = 1
#: The most instances of one template in the train split.
TRAIN_CAP = 60


@dataclass(frozen=True)
class Placement:
    """Where one instance of a template goes."""

    task_id: str
    split: str
    index: int


def place(
    template: TaskTemplate, count: int, test_per_template: int = TEST_PER_TEMPLATE, train_cap: int = TRAIN_CAP
) -> list[Placement]:
    """The test and train placements of a template with `count` instances (deterministic).

    >>> from agentgym_envs.webarena.tasks.templates import TaskTemplate, exact
    >>> t = TaskTemplate("shopping.x", "shopping", "info", "Q {{a}}", lambda s: [], lambda s, v: {})
    >>> [(p.split, p.task_id) for p in place(t, 3)] == [(p.split, p.task_id) for p in place(t, 3)]
    True
    >>> sorted(p.split for p in place(t, 3))
    ['test', 'train', 'train']
    """
    order = list(range(count))
    random.Random(template.template_id).shuffle(order)
    test = sorted(order[:test_per_template])
    train = [] if template.held_out else sorted(order[test_per_template : test_per_template + train_cap])
    return [Placement(f"{template.template_id}/{i}", "test", i) for i in test] + [
        Placement(f"{template.template_id}/{i}", "train", i) for i in train
    ]


class SeedConnections:
    """Seed-data connections by site name, one per thread (a `sqlite3.Connection` may be bound to the
    thread that made it), opened on first use."""

    def __init__(self, factories: Mapping[str, Callable[[], sqlite3.Connection]]):
        self._factories = dict(factories)
        self._local = threading.local()

    def __call__(self, site: str) -> sqlite3.Connection:
        connections = self._local.__dict__.setdefault("connections", {})
        if site not in connections:
            connections[site] = self._factories[site]()
        return connections[site]


class TemplateTask(Task):
    """A task made from a template instance; its config is built on first access and kept."""

    def __init__(self, task_id: str, split: str, template: TaskTemplate, values: Values, seeds: SeedConnections):
        self.task_id, self.split, self.source, self.resolved, self.start_urls = task_id, split, None, False, []
        self.template, self.values = template, values
        self._seeds = seeds
        self._config: dict[str, Any] | None = None
        self._lock = threading.Lock()

    @property
    def config(self) -> dict[str, Any]:  # type: ignore[override]
        with self._lock:
            if self._config is None:
                self._config = self.template.config(self._seeds(self.template.site), self.values, self.task_id)
            return self._config

    @property
    def category(self) -> str:
        return self.template.site

    @property
    def kind(self) -> str:
        return self.template.kind

    def __repr__(self) -> str:
        return f"TemplateTask({self.task_id!r}, {self.split!r})"


def site_templates(sites: Iterable[Any] | None = None) -> dict[str, list[TaskTemplate]]:
    """Site name -> its `TEMPLATES`, for every embedded site (or `sites`) that has templates."""
    found = {}
    for site in SITES.values() if sites is None else sites:
        if site.templates:
            templates = list(importlib.import_module(site.templates).TEMPLATES)
            wrong = [t.template_id for t in templates if t.site != site.name]
            if wrong:
                raise ValueError(f"templates {wrong} of {site.templates} are not of the site {site.name!r}")
            found[site.name] = templates
    return found


def template_tasks(
    templates: Mapping[str, Sequence[TaskTemplate]],
    seeds: SeedConnections,
    test_per_template: int = TEST_PER_TEMPLATE,
    train_cap: int = TRAIN_CAP,
) -> list[TemplateTask]:
    """The split tasks of `templates` (site name -> templates), configs not yet built."""
    tasks, seen = [], set()
    for site, site_list in templates.items():
        for template in site_list:
            if template.template_id in seen:
                raise ValueError(f"template id {template.template_id!r} appears twice; template ids must be unique")
            seen.add(template.template_id)
            instances = template.instances(seeds(site))
            for placement in place(template, len(instances), test_per_template, train_cap):
                values = instances[placement.index]
                tasks.append(TemplateTask(placement.task_id, placement.split, template, values, seeds))
    return tasks


@functools.lru_cache(maxsize=1)
def bundled_template_tasks() -> tuple[TemplateTask, ...]:
    """The split tasks of every embedded site's templates (made once per process)."""
    seeds = SeedConnections({site.name: resolve(site.seed) for site in SITES.values()})
    return tuple(template_tasks(site_templates(), seeds))


# ---- the table for the README -------------------------------------------------------------------
def table(tasks: Sequence[Task], templates: Mapping[str, Sequence[TaskTemplate]]) -> str:
    """A Markdown table: per site, templates (held out) and train/test tasks per kind."""
    header = "| site | templates (held out) | " + " | ".join(f"{k} train/test" for k in KINDS) + " | train | test |"
    lines = [header, "|" + "---|" * (len(KINDS) + 4)]
    count = Counter((task.category, task.kind, task.split) for task in tasks)
    for site in sorted({task.category for task in tasks} | set(templates)):
        site_list = templates.get(site, [])
        held = sum(t.held_out for t in site_list)
        cells = [f"{count[site, k, 'train']}/{count[site, k, 'test']}" for k in KINDS]
        train = sum(count[site, k, "train"] for k in KINDS)
        test = sum(count[site, k, "test"] for k in KINDS)
        lines.append(f"| {site} | {len(site_list)} ({held}) | " + " | ".join(cells) + f" | {train} | {test} |")
    return "\n".join(lines)
