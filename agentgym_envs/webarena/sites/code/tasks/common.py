"""What the code host's task templates share: the site's `TASKS` vocabulary, reading the seed data and
the expert's ways through the site."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.tasks.templates import SiteTasks, Values, click, type_text

SITE = "gitlab"
ROOT = "__GITLAB__"
#: The vocabulary of the site's templates.
TASKS = SiteTasks(SITE, f"{ROOT}/explore")
#: Instances kept per project by templates with many records per project, so instances spread over projects.
PER_PROJECT = 2


# ---- reading the seed -----------------------------------------------------------------------------
def _rows(seed: sqlite3.Connection, sql: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in seed.execute(sql, args)]


def _spread(rows: list[dict[str, Any]], per_project: int = PER_PROJECT) -> list[dict[str, Any]]:
    """At most `per_project` rows of each project (rows carry `namespace` and `path`)."""
    seen: dict[tuple[str, str], int] = {}
    kept = []
    for row in rows:
        key = (row["namespace"], row["path"])
        seen[key] = seen.get(key, 0) + 1
        if seen[key] <= per_project:
            kept.append(row)
    return kept


def _values(rows: list[dict[str, Any]]) -> list[Values]:
    return [{key: str(value) for key, value in row.items()} for row in rows]


_PROJECTS = "SELECT namespace, path, name AS project FROM projects ORDER BY id"
_ISSUES = (
    "SELECT p.namespace, p.path, p.name AS project, i.iid, i.title, i.state{extra} FROM issues i "
    "JOIN projects p ON p.id = i.project_id {join} WHERE {where} ORDER BY p.id, i.iid"
)
_MRS = (
    "SELECT p.namespace, p.path, p.name AS project, m.iid, m.title, m.state, m.source FROM merge_requests m "
    "JOIN projects p ON p.id = m.project_id WHERE {where} ORDER BY p.id, m.iid"
)


def _issues(seed: sqlite3.Connection, where: str = "1", extra: str = "", join: str = "") -> list[Values]:
    return _values(_spread(_rows(seed, _ISSUES.format(where=where, extra=extra, join=join))))


def _merge_requests(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return _values(_spread(_rows(seed, _MRS.format(where=where))))


# ---- plans --------------------------------------------------------------------------------------
def _base(values: Values) -> str:
    return f"{ROOT}/{values['namespace']}/{values['path']}"


def _open_project(values: Values) -> list[dict[str, Any]]:
    """From the explore page: search the project by name and open it."""
    return [
        type_text("searchbox", "Search projects", values["project"]),
        click("link", f"{values['namespace']} / {values['project']}"),
    ]


def _open_issue(values: Values) -> list[dict[str, Any]]:
    """From the explore page to an issue's page (by the issue list's search, among all states)."""
    return [
        *_open_project(values),
        click("link", "Issues"),
        click("link", "All"),
        type_text("searchbox", "Search issues", values["title"]),
        click("link", values["title"]),
    ]


def _open_merge_request(values: Values) -> list[dict[str, Any]]:
    return [
        *_open_project(values),
        click("link", "Merge requests"),
        click("link", "All"),
        type_text("searchbox", "Search merge requests", values["title"]),
        click("link", values["title"]),
    ]


def _open_user(name: str) -> list[dict[str, Any]]:
    """From any page: the global search for a user, then the user's profile."""
    return [type_text("searchbox", "Search everything", name), click("link", "Users"), click("link", name)]


def _member_instances(seed: sqlite3.Connection, where: str = "m.role != 'Owner'") -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, u.name AS user, u.username, m.role FROM members m "
        f"JOIN projects p ON p.id = m.project_id JOIN users u ON u.id = m.user_id WHERE {where} ORDER BY p.id, u.name",
    )
    return _values(_spread(rows))


def _users(seed: sqlite3.Connection) -> list[Values]:
    return _values(_rows(seed, "SELECT name AS user, username, location FROM users WHERE id != 1 ORDER BY id"))
