"""The code host's task templates of navigation."""

from __future__ import annotations

import sqlite3
from urllib.parse import urlencode

from agentgym_envs.webarena.sites.code.tasks.common import (
    _PROJECTS,
    ROOT,
    TASKS,
    _base,
    _member_instances,
    _open_project,
    _open_user,
    _rows,
    _spread,
    _users,
    _values,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, stop, type_text, url


def _issue_filter_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, l.name AS label FROM labels l "
        "JOIN projects p ON p.id = l.project_id ORDER BY p.id, l.name",
    )
    return _values(_spread(rows))


def _branch_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, b.name AS branch FROM branches b "
        "JOIN projects p ON p.id = b.project_id WHERE b.name != 'main' ORDER BY p.id, b.name",
    )
    return _values(_spread(rows))


def _file_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, f.path AS file FROM files f "
        "JOIN projects p ON p.id = f.project_id WHERE f.path != 'README.md' ORDER BY p.id, f.path",
    )
    return _values(_spread(rows, 1))


def _query_instances(seed: sqlite3.Connection) -> list[Values]:
    words = sorted({row["name"].split("-")[0] for row in _rows(seed, "SELECT name FROM projects")})
    words += sorted({row["name"].split("-")[1] for row in _rows(seed, "SELECT name FROM projects")})
    return [{"query": word} for word in words]


def _issues_url(values: Values, **params: str) -> str:
    return f"{_base(values)}/-/issues?{urlencode(params)}"


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "nav_label_issues",
        "nav",
        "Open the list of open issues labelled {{label}} in the project {{project}}.",
        _issue_filter_instances,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Issues"), click("link", v["label"]), stop()],
            url(_issues_url(v, state="opened", label=v["label"])),
        ),
    ),
    TASKS.template(
        "nav_assignee_issues",
        "nav",
        "Show the open issues of the project {{project}} that are assigned to {{user}}.",
        lambda seed: _member_instances(seed, "1"),
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Issues"), click("link", f"Assigned to {v['user']}"), stop()],
            url(_issues_url(v, state="opened", assignee=v["username"])),
        ),
    ),
    TASKS.template(
        "nav_closed_issues",
        "nav",
        "Open the list of closed issues of the project {{project}}.",
        lambda seed: _values(_rows(seed, _PROJECTS)),
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Issues"), click("link", "Closed"), stop()],
            url(_issues_url(v, state="closed")),
        ),
    ),
    TASKS.template(
        "nav_merged_mrs",
        "nav",
        "Show the merged merge requests of the project {{project}}.",
        lambda seed: _values(_rows(seed, _PROJECTS)),
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Merge requests"), click("link", "Merged"), stop()],
            url(f"{_base(v)}/-/merge_requests?state=merged"),
        ),
    ),
    TASKS.template(
        "nav_branch_commits",
        "nav",
        "Open the commit history of the branch {{branch}} of the project {{project}}.",
        _branch_instances,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Branches"), click("link", v["branch"]), stop()],
            url(f"{_base(v)}/-/commits?{urlencode({'branch': v['branch']})}"),
        ),
        held_out=True,
    ),
    TASKS.template(
        "nav_user_profile",
        "nav",
        "Open the profile page of {{user}}.",
        _users,
        lambda seed, v: TASKS.built([*_open_user(v["user"]), stop()], url(f"{ROOT}/users/{v['username']}")),
    ),
    TASKS.template(
        "nav_explore_sorted",
        "nav",
        'Search the projects for "{{query}}" and sort the results by most stars.',
        _query_instances,
        lambda seed, v: TASKS.built(
            [type_text("searchbox", "Search projects", v["query"]), click("link", "Most stars"), stop()],
            url(f"{ROOT}/explore?{urlencode({'q': v['query'], 'sort': 'stars'})}"),
        ),
    ),
    TASKS.template(
        "nav_file",
        "nav",
        "Open the file {{file}} of the project {{project}}.",
        _file_instances,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", v["file"]), stop()], url(f"{_base(v)}/-/blob/{v['file']}")
        ),
    ),
]
