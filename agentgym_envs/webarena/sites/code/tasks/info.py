"""The code host's task templates of information seeking."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.code.tasks.common import (
    TASKS,
    _issues,
    _member_instances,
    _merge_requests,
    _open_issue,
    _open_merge_request,
    _open_project,
    _open_user,
    _rows,
    _spread,
    _users,
    _values,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, exact, must_include, stop


def _one(seed: sqlite3.Connection, sql: str, *args: Any) -> Any:
    return seed.execute(sql, args).fetchone()[0]


def _project(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _rows(seed, "SELECT * FROM projects WHERE namespace = ? AND path = ?", values["namespace"], values["path"])[
        0
    ]


def _commit_count_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, u.name AS user, COUNT(*) AS count FROM commits c "
        "JOIN projects p ON p.id = c.project_id JOIN users u ON u.id = c.author_id "
        "GROUP BY p.id, u.id ORDER BY p.id, u.name",
    )
    return _values(_spread(rows))


def _page_of(seed: sqlite3.Connection, values: Values) -> list[dict[str, Any]]:
    """The click to the page of the project's commit list that shows the commit `values['sha']`."""
    project = _project(seed, values)
    shas = [
        row["sha"]
        for row in _rows(seed, "SELECT sha FROM commits WHERE project_id = ? ORDER BY committed DESC", project["id"])
    ]
    number = shas.index(values["sha"]) // 20 + 1
    return [click("link", f"Page {number}")] if number > 1 else []


def _unique_commits(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, c.message, c.sha, u.name AS user FROM commits c "
        "JOIN projects p ON p.id = c.project_id JOIN users u ON u.id = c.author_id "
        "WHERE (SELECT COUNT(*) FROM commits d WHERE d.project_id = c.project_id AND d.message = c.message) = 1 "
        "ORDER BY p.id, c.committed",
    )
    return _values(_spread(rows))


def _latest_commit_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, b.name AS branch, (SELECT c.message FROM commits c "
        "WHERE c.project_id = p.id AND c.branch = b.name ORDER BY c.committed DESC LIMIT 1) AS message "
        "FROM branches b JOIN projects p ON p.id = b.project_id ORDER BY p.id, b.name",
    )
    return _values(_spread([row for row in rows if row["message"]]))


def _project_number(sql: str) -> Callable[[sqlite3.Connection], list[Values]]:
    """Instances of every project with a number `sql` computes from the project id (`answer`)."""

    def instances(seed: sqlite3.Connection) -> list[Values]:
        rows = _rows(seed, "SELECT id, namespace, path, name AS project FROM projects ORDER BY id")
        for row in rows:
            row["answer"] = _one(seed, sql, row.pop("id"))
        return _values(rows)

    return instances


def _license_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, substr(f.content, 1, instr(f.content, char(10)) - 1) "
        "AS license FROM projects p JOIN files f ON f.project_id = p.id AND f.path = 'LICENSE' ORDER BY p.id",
    )
    return _values(rows)


def _group_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT g.path AS group_path, g.name AS group_name, "
        "(SELECT COUNT(*) FROM projects p WHERE p.namespace = g.path) AS count, "
        "(SELECT p.name FROM projects p WHERE p.namespace = g.path ORDER BY p.name LIMIT 1) AS project "
        "FROM groups g ORDER BY g.id",
    )
    return _values([row for row in rows if row["count"]])


def _label_count_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, l.name AS label, (SELECT COUNT(*) FROM issues i "
        "JOIN issue_labels x ON x.issue_id = i.id WHERE i.project_id = p.id AND i.state = 'opened' "
        "AND x.label = l.name) AS count FROM labels l JOIN projects p ON p.id = l.project_id ORDER BY p.id, l.name",
    )
    return _values(_spread([row for row in rows if row["count"]]))


def _shown_state(state: str) -> str:
    """A merge request's state as its page shows it ("opened" is "Open")."""
    return {"opened": "Open"}.get(state, state.capitalize())


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "commits_by_author",
        "info",
        "How many commits did {{user}} make to the project {{project}}?",
        _commit_count_instances,
        lambda seed, v: TASKS.built([*_open_project(v), click("link", "Commits"), stop(v["count"])], exact(v["count"])),
    ),
    TASKS.template(
        "issue_assignee",
        "info",
        'Who is assigned to the issue "{{title}}" of the project {{project}}?',
        lambda seed: _issues(
            seed, "i.assignee_id IS NOT NULL", ", u.name AS user", "JOIN users u ON u.id = i.assignee_id"
        ),
        lambda seed, v: TASKS.built([*_open_issue(v), stop(v["user"])], must_include(v["user"])),
    ),
    TASKS.template(
        "issue_author",
        "info",
        'Who opened the issue "{{title}}" in the project {{project}}?',
        lambda seed: _issues(seed, "1", ", u.name AS user", "JOIN users u ON u.id = i.author_id"),
        lambda seed, v: TASKS.built([*_open_issue(v), stop(v["user"])], must_include(v["user"])),
    ),
    TASKS.template(
        "issue_milestone",
        "info",
        'Which milestone is the issue "{{title}}" of the project {{project}} planned for?',
        lambda seed: _issues(
            seed,
            "i.milestone_id IS NOT NULL",
            ", ms.title AS milestone",
            "JOIN milestones ms ON ms.id = i.milestone_id",
        ),
        lambda seed, v: TASKS.built([*_open_issue(v), stop(v["milestone"])], exact(v["milestone"])),
    ),
    TASKS.template(
        "latest_commit",
        "info",
        "What is the message of the latest commit on the branch {{branch}} of {{project}}?",
        _latest_commit_instances,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Branches"), stop(v["message"])], exact(v["message"])
        ),
    ),
    TASKS.template(
        "commit_author",
        "info",
        'Who authored the commit "{{message}}" in the project {{project}}?',
        _unique_commits,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Commits"), *_page_of(seed, v), stop(v["user"])], must_include(v["user"])
        ),
    ),
    TASKS.template(
        "star_count",
        "info",
        "How many stars does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM stars WHERE project_id = ?"),
        lambda seed, v: TASKS.built([*_open_project(v), stop(v["answer"])], exact(v["answer"])),
    ),
    TASKS.template(
        "open_issue_count",
        "info",
        "How many open issues does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'"),
        lambda seed, v: TASKS.built([*_open_project(v), stop(v["answer"])], exact(v["answer"])),
    ),
    TASKS.template(
        "member_count",
        "info",
        "How many members does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM members WHERE project_id = ?"),
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Members"), stop(v["answer"])], exact(v["answer"])
        ),
    ),
    TASKS.template(
        "branch_count",
        "info",
        "How many branches does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM branches WHERE project_id = ?"),
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Branches"), stop(v["answer"])], exact(v["answer"])
        ),
    ),
    TASKS.template(
        "license",
        "info",
        "Under which license is the project {{project}} released?",
        _license_instances,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "LICENSE"), stop(v["license"])], must_include(v["license"])
        ),
    ),
    TASKS.template(
        "member_role",
        "info",
        "What role does {{user}} have in the project {{project}}?",
        _member_instances,
        lambda seed, v: TASKS.built([*_open_project(v), click("link", "Members"), stop(v["role"])], exact(v["role"])),
    ),
    TASKS.template(
        "mr_source_branch",
        "info",
        'From which branch is the merge request "{{title}}" of {{project}}?',
        _merge_requests,
        lambda seed, v: TASKS.built([*_open_merge_request(v), stop(v["source"])], exact(v["source"])),
    ),
    TASKS.template(
        "mr_state",
        "info",
        'Is the merge request "{{title}}" of {{project}} open, merged or closed?',
        _merge_requests,
        lambda seed, v: TASKS.built([*_open_merge_request(v), stop(state := _shown_state(v["state"]))], exact(state)),
    ),
    TASKS.template(
        "group_project_count",
        "info",
        "How many projects does the group {{group_name}} have?",
        _group_instances,
        lambda seed, v: TASKS.built(
            [
                *_open_project({"namespace": v["group_path"], "project": v["project"]}),
                click("link", v["group_path"]),
                stop(v["count"]),
            ],
            exact(v["count"]),
        ),
    ),
    TASKS.template(
        "user_location",
        "info",
        "Where is the user {{user}} located?",
        _users,
        lambda seed, v: TASKS.built([*_open_user(v["user"]), stop(v["location"])], exact(v["location"])),
    ),
    TASKS.template(
        "label_issue_count",
        "info",
        "How many open issues labelled {{label}} does the project {{project}} have?",
        _label_count_instances,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Issues"), click("link", v["label"]), stop(v["count"])], exact(v["count"])
        ),
        held_out=True,
    ),
]
