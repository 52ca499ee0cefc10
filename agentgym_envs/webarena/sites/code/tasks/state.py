"""The code host's task templates of state changes."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.code.seed import ME, ROLES, VISIBILITIES
from agentgym_envs.webarena.sites.code.tasks.common import (
    _PROJECTS,
    ROOT,
    TASKS,
    _base,
    _issues,
    _member_instances,
    _merge_requests,
    _open_issue,
    _open_merge_request,
    _open_project,
    _rows,
    _spread,
    _values,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, check, click, program, stop, text_of, type_text

COMMENTS = (
    "Confirmed on the latest main branch.",
    "I will pick this up next sprint.",
    "Needs a test before it can be closed.",
    "Fixed locally, a merge request is coming soon.",
    "Please add the exact version you are using.",
)
DESCRIPTIONS = (
    "Maintained by the platform team.",
    "Archived: see the new repository for updates.",
    "Experimental, expect breaking changes.",
    "Stable and in production use.",
)
NEW_KINDS = ("notes", "lab", "site", "toolkit")
NEW_ISSUES = (
    "Crash when the config file is empty",
    "Add a changelog for the next release",
    "Broken link in the installation guide",
    "Support Python 3.13",
)


def _with(rows: list[Values], key: str, choices: tuple[str, ...]) -> list[Values]:
    """Each row with `key` set to one of `choices`, in turn."""
    return [{**row, key: choices[i % len(choices)]} for i, row in enumerate(rows)]


def _issue_check(values: Values, locator: str, **required: Any) -> dict[str, Any]:
    return program(check(f"{_base(values)}/-/issues/{values['iid']}", locator, **required))


def _open_issue_rows(seed: sqlite3.Connection) -> list[dict[str, Any]]:
    return _rows(
        seed,
        "SELECT p.id AS project_id, i.id AS issue_id, p.namespace, p.path, p.name AS project, i.iid, i.title, "
        "i.assignee_id FROM issues i JOIN projects p ON p.id = i.project_id WHERE i.state = 'opened' "
        "ORDER BY p.id, i.iid",
    )


def _new_label_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = []
    for row in _open_issue_rows(seed):
        labels = [
            r["name"]
            for r in _rows(
                seed,
                "SELECT name FROM labels WHERE project_id = ? AND name NOT IN "
                "(SELECT label FROM issue_labels WHERE issue_id = ?) ORDER BY name",
                row["project_id"],
                row["issue_id"],
            )
        ]
        if labels:
            rows.append({**_public(row), "label": labels[row["iid"] % len(labels)]})
    return _values(_spread(rows))


def _new_assignee_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = []
    for row in _open_issue_rows(seed):
        users = [
            r["name"]
            for r in _rows(
                seed,
                "SELECT u.name FROM members m JOIN users u ON u.id = m.user_id WHERE m.project_id = ? "
                "AND m.user_id IS NOT ? ORDER BY u.name",
                row["project_id"],
                row["assignee_id"],
            )
        ]
        if users:
            rows.append({**_public(row), "user": users[row["iid"] % len(users)]})
    return _values(_spread(rows))


def _public(row: dict[str, Any]) -> dict[str, Any]:
    """An issue row without its database ids."""
    return {key: row[key] for key in ("namespace", "path", "project", "iid", "title")}


def _new_milestone_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, i.iid, i.title, (SELECT ms.title FROM milestones ms "
        "WHERE ms.project_id = p.id AND ms.id IS NOT i.milestone_id ORDER BY ms.title LIMIT 1) AS milestone "
        "FROM issues i JOIN projects p ON p.id = i.project_id WHERE i.state = 'opened' ORDER BY p.id, i.iid",
    )
    return _values(_spread([row for row in rows if row["milestone"]]))


def _new_issue_instances(seed: sqlite3.Connection, with_label: bool = False) -> list[Values]:
    """Every other project (odd or even ones), with the number its next issue gets and one of its labels."""
    rows = _rows(
        seed,
        "SELECT p.id, p.namespace, p.path, p.name AS project, MAX(i.iid) + 1 AS iid FROM projects p "
        "JOIN issues i ON i.project_id = p.id GROUP BY p.id ORDER BY p.id",
    )
    for row in rows:
        labels = [
            r["name"] for r in _rows(seed, "SELECT name FROM labels WHERE project_id = ? ORDER BY name", row["id"])
        ]
        row["label"] = labels[row.pop("id") % len(labels)]
    return _with(_values(rows[1::2] if with_label else rows[::2]), "title", NEW_ISSUES)


def _new_member_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, u.name AS user, u.username FROM projects p JOIN users u "
        "ON u.id = 2 + (p.id * 7) % 39 WHERE u.id NOT IN (SELECT user_id FROM members m WHERE m.project_id = p.id) "
        "ORDER BY p.id",
    )
    return _with(_values(rows), "role", ROLES[:4])


def _role_change_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _member_instances(seed)
    return [{**row, "new_role": ROLES[(ROLES.index(row["role"]) + 1 + i % 2) % 4]} for i, row in enumerate(rows)]


def _member_check(values: Values, locator: str, **required: Any) -> dict[str, Any]:
    return program(check(f"{_base(values)}/-/project_members", locator, **required))


def _member_role(username: str) -> str:
    return f"document.querySelector('[data-member=\"{username}\"] .member-role').outerText"


def _member_absent(username: str) -> str:
    return f"document.querySelector('[data-member=\"{username}\"]') === null"


def _starred(seed: sqlite3.Connection, starred: bool) -> list[Values]:
    where = "" if starred else "NOT "
    return _values(
        _rows(
            seed,
            f"SELECT namespace, path, name AS project FROM projects WHERE {where}EXISTS (SELECT 1 FROM stars s "
            "WHERE s.project_id = projects.id AND s.user_id = 1) ORDER BY id",
        )
    )


def _project_check(values: Values, *checks: tuple[str, str]) -> dict[str, Any]:
    return program(*(check(_base(values), text_of(f"#{element}"), exact_match=text) for element, text in checks))


def _settings_plan(values: Values, *steps: dict[str, Any]) -> list[dict[str, Any]]:
    return [*_open_project(values), click("link", "Settings"), *steps, click("button", "Save changes"), stop()]


def _visibility_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(seed, "SELECT namespace, path, name AS project, visibility FROM projects ORDER BY id")
    return _values(
        [
            {**row, "visibility": VISIBILITIES[(VISIBILITIES.index(row["visibility"]) + 1 + i % 2) % 3]}
            for i, row in enumerate(rows)
        ]
    )


def _rename_instances(seed: sqlite3.Connection) -> list[Values]:
    rows = _values(_rows(seed, _PROJECTS))
    return [
        {**row, "new_name": f"{row['project']}-{('legacy', 'next', 'classic')[i % 3]}"} for i, row in enumerate(rows)
    ]


def _create_project_instances(seed: sqlite3.Connection) -> list[Values]:
    taken = {row["name"] for row in _rows(seed, "SELECT name FROM projects")}
    prefixes = sorted({name.split("-")[0] for name in taken})
    names = [f"{prefix}-{kind}" for kind in NEW_KINDS for prefix in prefixes if f"{prefix}-{kind}" not in taken]
    return [
        {"name": name, "visibility": VISIBILITIES[i % 3], "description": DESCRIPTIONS[i % len(DESCRIPTIONS)]}
        for i, name in enumerate(names)
    ]


def _open_issues(seed: sqlite3.Connection) -> list[Values]:
    return _issues(seed, "i.state = 'opened'")


def _open_mrs(seed: sqlite3.Connection) -> list[Values]:
    return _merge_requests(seed, "m.state = 'opened'")


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "comment_issue",
        "state",
        'Comment "{{comment}}" on the issue "{{title}}" of the project {{project}}.',
        lambda seed: _with(_open_issues(seed), "comment", COMMENTS),
        lambda seed, v: TASKS.built(
            [
                *_open_issue(v),
                type_text("textbox", "Comment", v["comment"], enter=False),
                click("button", "Add comment"),
                stop(),
            ],
            _issue_check(v, text_of("#notes"), must=[v["comment"]]),
        ),
    ),
    TASKS.template(
        "close_issue",
        "state",
        'Close the issue "{{title}}" of the project {{project}}.',
        _open_issues,
        lambda seed, v: TASKS.built(
            [*_open_issue(v), click("button", "Close issue"), stop()],
            _issue_check(v, text_of("#issue-state"), exact_match="Closed"),
        ),
    ),
    TASKS.template(
        "reopen_issue",
        "state",
        'Reopen the closed issue "{{title}}" of the project {{project}}.',
        lambda seed: _issues(seed, "i.state = 'closed'"),
        lambda seed, v: TASKS.built(
            [*_open_issue(v), click("button", "Reopen issue"), stop()],
            _issue_check(v, text_of("#issue-state"), exact_match="Open"),
        ),
    ),
    TASKS.template(
        "add_label",
        "state",
        'Add the label {{label}} to the issue "{{title}}" of the project {{project}}.',
        _new_label_instances,
        lambda seed, v: TASKS.built(
            [*_open_issue(v), click("checkbox", v["label"]), click("button", "Save labels"), stop()],
            _issue_check(v, text_of("#issue-labels"), must=[v["label"]]),
        ),
    ),
    TASKS.template(
        "assign_issue",
        "state",
        'Assign the issue "{{title}}" of the project {{project}} to {{user}}.',
        _new_assignee_instances,
        lambda seed, v: TASKS.built(
            [
                *_open_issue(v),
                type_text("combobox", "Assignee", v["user"], enter=False),
                click("button", "Save assignee"),
                stop(),
            ],
            _issue_check(v, text_of("#issue-assignee"), exact_match=v["user"]),
        ),
    ),
    TASKS.template(
        "set_milestone",
        "state",
        'Set the milestone of the issue "{{title}}" of {{project}} to {{milestone}}.',
        _new_milestone_instances,
        lambda seed, v: TASKS.built(
            [
                *_open_issue(v),
                type_text("combobox", "Milestone", v["milestone"], enter=False),
                click("button", "Save milestone"),
                stop(),
            ],
            _issue_check(v, text_of("#issue-milestone"), exact_match=v["milestone"]),
        ),
        held_out=True,
    ),
    TASKS.template(
        "create_issue",
        "state",
        'Open a new issue titled "{{title}}" in the project {{project}}.',
        _new_issue_instances,
        lambda seed, v: TASKS.built(
            [
                *_open_project(v),
                click("link", "Issues"),
                click("link", "New issue"),
                type_text("textbox", "Title", v["title"], enter=False),
                click("button", "Create issue"),
                stop(),
            ],
            _issue_check(v, text_of("#issue-title"), exact_match=v["title"]),
        ),
    ),
    TASKS.template(
        "create_labelled_issue",
        "state",
        'Open a new issue titled "{{title}}" with the label {{label}} in the project {{project}}.',
        lambda seed: _new_issue_instances(seed, with_label=True),
        lambda seed, v: TASKS.built(
            [
                *_open_project(v),
                click("link", "Issues"),
                click("link", "New issue"),
                type_text("textbox", "Title", v["title"], enter=False),
                click("checkbox", v["label"]),
                click("button", "Create issue"),
                stop(),
            ],
            program(
                check(f"{_base(v)}/-/issues/{v['iid']}", text_of("#issue-title"), exact_match=v["title"]),
                check(f"{_base(v)}/-/issues/{v['iid']}", text_of("#issue-labels"), must=[v["label"]]),
            ),
        ),
    ),
    TASKS.template(
        "comment_mr",
        "state",
        'Comment "{{comment}}" on the merge request "{{title}}" of the project {{project}}.',
        lambda seed: _with(_open_mrs(seed), "comment", COMMENTS),
        lambda seed, v: TASKS.built(
            [
                *_open_merge_request(v),
                type_text("textbox", "Comment", v["comment"], enter=False),
                click("button", "Add comment"),
                stop(),
            ],
            program(check(f"{_base(v)}/-/merge_requests/{v['iid']}", text_of("#notes"), must=[v["comment"]])),
        ),
    ),
    TASKS.template(
        "merge_mr",
        "state",
        'Merge the merge request "{{title}}" of the project {{project}}.',
        _open_mrs,
        lambda seed, v: TASKS.built(
            [*_open_merge_request(v), click("button", "Merge"), stop()],
            program(check(f"{_base(v)}/-/merge_requests/{v['iid']}", text_of("#mr-state"), exact_match="Merged")),
        ),
    ),
    TASKS.template(
        "close_mr",
        "state",
        'Close the merge request "{{title}}" of the project {{project}} without merging it.',
        _open_mrs,
        lambda seed, v: TASKS.built(
            [*_open_merge_request(v), click("button", "Close merge request"), stop()],
            program(check(f"{_base(v)}/-/merge_requests/{v['iid']}", text_of("#mr-state"), exact_match="Closed")),
        ),
    ),
    TASKS.template(
        "add_member",
        "state",
        "Add {{user}} (username {{username}}) to the project {{project}} as a {{role}}.",
        _new_member_instances,
        lambda seed, v: TASKS.built(
            [
                *_open_project(v),
                click("link", "Members"),
                type_text("textbox", "Username", v["username"], enter=False),
                type_text("combobox", "Role", v["role"], enter=False),
                click("button", "Add member"),
                stop(),
            ],
            _member_check(v, _member_role(v["username"]), exact_match=v["role"]),
        ),
    ),
    TASKS.template(
        "change_role",
        "state",
        "Make {{user}} a {{new_role}} of the project {{project}}.",
        _role_change_instances,
        lambda seed, v: TASKS.built(
            [
                *_open_project(v),
                click("link", "Members"),
                type_text("combobox", f"Role of {v['username']}", v["new_role"], enter=False),
                click("button", f"Change role of {v['username']}"),
                stop(),
            ],
            _member_check(v, _member_role(v["username"]), exact_match=v["new_role"]),
        ),
    ),
    TASKS.template(
        "remove_member",
        "state",
        "Remove {{user}} from the members of the project {{project}}.",
        _member_instances,
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("link", "Members"), click("button", f"Remove {v['username']}"), stop()],
            _member_check(v, _member_absent(v["username"]), exact_match="True"),
        ),
    ),
    TASKS.template(
        "star_project",
        "state",
        "Star the project {{project}}.",
        lambda seed: _starred(seed, False),
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("button", "Star"), stop()], _project_check(v, ("star-button", "Unstar"))
        ),
    ),
    TASKS.template(
        "unstar_project",
        "state",
        "Remove your star from the project {{project}}.",
        lambda seed: _starred(seed, True),
        lambda seed, v: TASKS.built(
            [*_open_project(v), click("button", "Unstar"), stop()], _project_check(v, ("star-button", "Star"))
        ),
        held_out=True,
    ),
    TASKS.template(
        "set_description",
        "state",
        'Change the description of the project {{project}} to "{{description}}".',
        lambda seed: _with(_values(_rows(seed, _PROJECTS)), "description", DESCRIPTIONS),
        lambda seed, v: TASKS.built(
            _settings_plan(v, type_text("textbox", "Description", v["description"], enter=False)),
            _project_check(v, ("description", v["description"])),
        ),
    ),
    TASKS.template(
        "set_visibility",
        "state",
        "Make the project {{project}} {{visibility}}.",
        _visibility_instances,
        lambda seed, v: TASKS.built(
            _settings_plan(v, type_text("combobox", "Visibility", v["visibility"], enter=False)),
            _project_check(v, ("visibility", v["visibility"])),
        ),
    ),
    TASKS.template(
        "rename_project",
        "state",
        "Rename the project {{project}} to {{new_name}}.",
        _rename_instances,
        lambda seed, v: TASKS.built(
            _settings_plan(v, type_text("textbox", "Project name", v["new_name"], enter=False)),
            _project_check(v, ("project-name", v["new_name"])),
        ),
    ),
    TASKS.template(
        "create_project",
        "state",
        'Create a {{visibility}} project named {{name}} with the description "{{description}}".',
        _create_project_instances,
        lambda seed, v: TASKS.built(
            [
                click("link", "New project"),
                type_text("textbox", "Project name", v["name"], enter=False),
                type_text("textbox", "Description", v["description"], enter=False),
                type_text("combobox", "Visibility", v["visibility"], enter=False),
                click("button", "Create project"),
                stop(),
            ],
            program(
                check(f"{ROOT}/{ME}/{v['name']}", text_of("#project-name"), exact_match=v["name"]),
                check(f"{ROOT}/{ME}/{v['name']}", text_of("#visibility"), exact_match=v["visibility"]),
                check(f"{ROOT}/{ME}/{v['name']}", text_of("#description"), exact_match=v["description"]),
            ),
            f"{ROOT}/",
        ),
    ),
]
