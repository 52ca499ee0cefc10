"""The shop admin's task templates of navigation."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.admin.tasks.common import ADMIN, TASKS, ranges, report
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, stop, url


def _bestsellers_page(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    reference = f"{ADMIN}/reports/bestsellers?from={v['start']}&to={v['end']}"
    return TASKS.built([*report("Bestsellers Report", v["start"], v["end"]), stop()], url(reference))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "bestsellers_page",
        "nav",
        "Show me the bestsellers report from {{start}} to {{end}}.",
        ranges,
        _bestsellers_page,
    ),
]
