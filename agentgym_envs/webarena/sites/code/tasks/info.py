"""Task templates of the code host (WebArena site `gitlab`): about 35% information seeking, 15%
navigation, 45% state changes (checked by `program_html` on the page that shows the record) and 5%
unachievable, as in WebArena's GitLab tasks. Every answer and check is read off the seed data; every
expert plan starts from the explore page (or the dashboard) and goes where a user would click."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from agentgym_envs.webarena.sites.code.seed import ME, ROLES, VISIBILITIES
from agentgym_envs.webarena.tasks.templates import (
    TaskTemplate,
    Values,
    check,
    click,
    exact,
    must_include,
    not_achievable,
    program,
    stop,
    type_text,
    url,
)

SITE = "gitlab"
ROOT = "__GITLAB__"
#: Instances kept per project by templates with many records per project, so instances spread over projects.
PER_PROJECT = 2
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


# ---- reading the seed -----------------------------------------------------------------------------
def _rows(seed: sqlite3.Connection, sql: str, *args: Any) -> list[dict[str, Any]]:
    return [dict(row) for row in seed.execute(sql, args)]


def _one(seed: sqlite3.Connection, sql: str, *args: Any) -> Any:
    return seed.execute(sql, args).fetchone()[0]


def _project(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _rows(seed, "SELECT * FROM projects WHERE namespace = ? AND path = ?", values["namespace"], values["path"])[
        0
    ]


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


def _built(eval_: dict[str, Any], plan: list[dict[str, Any]], start: str = "/explore") -> dict[str, Any]:
    return {"start_url": f"{ROOT}{start}", "eval": eval_, "agentgym_expert": plan}


def _template(
    slug: str,
    kind: str,
    intent: str,
    instances: Callable[[sqlite3.Connection], list[Values]],
    build: Callable[[sqlite3.Connection, Values], dict[str, Any]],
    held_out: bool = False,
) -> TaskTemplate:
    return TaskTemplate(f"{SITE}.{slug}", SITE, kind, intent, instances, build, held_out)


# ---- information seeking ------------------------------------------------------------------------
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


def _member_instances(seed: sqlite3.Connection, where: str = "m.role != 'Owner'") -> list[Values]:
    rows = _rows(
        seed,
        "SELECT p.namespace, p.path, p.name AS project, u.name AS user, u.username, m.role FROM members m "
        f"JOIN projects p ON p.id = m.project_id JOIN users u ON u.id = m.user_id WHERE {where} ORDER BY p.id, u.name",
    )
    return _values(_spread(rows))


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


def _users(seed: sqlite3.Connection) -> list[Values]:
    return _values(_rows(seed, "SELECT name AS user, username, location FROM users WHERE id != 1 ORDER BY id"))


INFO = [
    _template(
        "commits_by_author",
        "info",
        "How many commits did {{user}} make to the project {{project}}?",
        _commit_count_instances,
        lambda seed, v: _built(exact(v["count"]), [*_open_project(v), click("link", "Commits"), stop(v["count"])]),
    ),
    _template(
        "issue_assignee",
        "info",
        'Who is assigned to the issue "{{title}}" of the project {{project}}?',
        lambda seed: _issues(
            seed, "i.assignee_id IS NOT NULL", ", u.name AS user", "JOIN users u ON u.id = i.assignee_id"
        ),
        lambda seed, v: _built(must_include(v["user"]), [*_open_issue(v), stop(v["user"])]),
    ),
    _template(
        "issue_author",
        "info",
        'Who opened the issue "{{title}}" in the project {{project}}?',
        lambda seed: _issues(seed, "1", ", u.name AS user", "JOIN users u ON u.id = i.author_id"),
        lambda seed, v: _built(must_include(v["user"]), [*_open_issue(v), stop(v["user"])]),
    ),
    _template(
        "issue_milestone",
        "info",
        'Which milestone is the issue "{{title}}" of the project {{project}} planned for?',
        lambda seed: _issues(
            seed,
            "i.milestone_id IS NOT NULL",
            ", ms.title AS milestone",
            "JOIN milestones ms ON ms.id = i.milestone_id",
        ),
        lambda seed, v: _built(exact(v["milestone"]), [*_open_issue(v), stop(v["milestone"])]),
    ),
    _template(
        "latest_commit",
        "info",
        "What is the message of the latest commit on the branch {{branch}} of {{project}}?",
        _latest_commit_instances,
        lambda seed, v: _built(exact(v["message"]), [*_open_project(v), click("link", "Branches"), stop(v["message"])]),
    ),
    _template(
        "commit_author",
        "info",
        'Who authored the commit "{{message}}" in the project {{project}}?',
        _unique_commits,
        lambda seed, v: _built(
            must_include(v["user"]), [*_open_project(v), click("link", "Commits"), *_page_of(seed, v), stop(v["user"])]
        ),
    ),
    _template(
        "star_count",
        "info",
        "How many stars does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM stars WHERE project_id = ?"),
        lambda seed, v: _built(exact(v["answer"]), [*_open_project(v), stop(v["answer"])]),
    ),
    _template(
        "open_issue_count",
        "info",
        "How many open issues does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM issues WHERE project_id = ? AND state = 'opened'"),
        lambda seed, v: _built(exact(v["answer"]), [*_open_project(v), stop(v["answer"])]),
    ),
    _template(
        "member_count",
        "info",
        "How many members does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM members WHERE project_id = ?"),
        lambda seed, v: _built(exact(v["answer"]), [*_open_project(v), click("link", "Members"), stop(v["answer"])]),
    ),
    _template(
        "branch_count",
        "info",
        "How many branches does the project {{project}} have?",
        _project_number("SELECT COUNT(*) FROM branches WHERE project_id = ?"),
        lambda seed, v: _built(exact(v["answer"]), [*_open_project(v), click("link", "Branches"), stop(v["answer"])]),
    ),
    _template(
        "license",
        "info",
        "Under which license is the project {{project}} released?",
        _license_instances,
        lambda seed, v: _built(
            must_include(v["license"]), [*_open_project(v), click("link", "LICENSE"), stop(v["license"])]
        ),
    ),
    _template(
        "member_role",
        "info",
        "What role does {{user}} have in the project {{project}}?",
        _member_instances,
        lambda seed, v: _built(exact(v["role"]), [*_open_project(v), click("link", "Members"), stop(v["role"])]),
    ),
    _template(
        "mr_source_branch",
        "info",
        'From which branch is the merge request "{{title}}" of {{project}}?',
        _merge_requests,
        lambda seed, v: _built(exact(v["source"]), [*_open_merge_request(v), stop(v["source"])]),
    ),
    _template(
        "mr_state",
        "info",
        'Is the merge request "{{title}}" of {{project}} open, merged or closed?',
        _merge_requests,
        lambda seed, v: _built(
            exact(state := {"opened": "Open"}.get(v["state"], v["state"].capitalize())),
            [*_open_merge_request(v), stop(state)],
        ),
    ),
    _template(
        "group_project_count",
        "info",
        "How many projects does the group {{group_name}} have?",
        _group_instances,
        lambda seed, v: _built(
            exact(v["count"]),
            [
                *_open_project({"namespace": v["group_path"], "project": v["project"]}),
                click("link", v["group_path"]),
                stop(v["count"]),
            ],
        ),
    ),
    _template(
        "user_location",
        "info",
        "Where is the user {{user}} located?",
        _users,
        lambda seed, v: _built(exact(v["location"]), [*_open_user(v["user"]), stop(v["location"])]),
    ),
    _template(
        "label_issue_count",
        "info",
        "How many open issues labelled {{label}} does the project {{project}} have?",
        _label_count_instances,
        lambda seed, v: _built(
            exact(v["count"]), [*_open_project(v), click("link", "Issues"), click("link", v["label"]), stop(v["count"])]
        ),
        held_out=True,
    ),
]


# ---- navigation ---------------------------------------------------------------------------------
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


NAV = [
    _template(
        "nav_label_issues",
        "nav",
        "Open the list of open issues labelled {{label}} in the project {{project}}.",
        _issue_filter_instances,
        lambda seed, v: _built(
            url(_issues_url(v, state="opened", label=v["label"])),
            [*_open_project(v), click("link", "Issues"), click("link", v["label"]), stop()],
        ),
    ),
    _template(
        "nav_assignee_issues",
        "nav",
        "Show the open issues of the project {{project}} that are assigned to {{user}}.",
        lambda seed: _member_instances(seed, "1"),
        lambda seed, v: _built(
            url(_issues_url(v, state="opened", assignee=v["username"])),
            [*_open_project(v), click("link", "Issues"), click("link", f"Assigned to {v['user']}"), stop()],
        ),
    ),
    _template(
        "nav_closed_issues",
        "nav",
        "Open the list of closed issues of the project {{project}}.",
        lambda seed: _values(_rows(seed, _PROJECTS)),
        lambda seed, v: _built(
            url(_issues_url(v, state="closed")),
            [*_open_project(v), click("link", "Issues"), click("link", "Closed"), stop()],
        ),
    ),
    _template(
        "nav_merged_mrs",
        "nav",
        "Show the merged merge requests of the project {{project}}.",
        lambda seed: _values(_rows(seed, _PROJECTS)),
        lambda seed, v: _built(
            url(f"{_base(v)}/-/merge_requests?state=merged"),
            [*_open_project(v), click("link", "Merge requests"), click("link", "Merged"), stop()],
        ),
    ),
    _template(
        "nav_branch_commits",
        "nav",
        "Open the commit history of the branch {{branch}} of the project {{project}}.",
        _branch_instances,
        lambda seed, v: _built(
            url(f"{_base(v)}/-/commits?{urlencode({'branch': v['branch']})}"),
            [*_open_project(v), click("link", "Branches"), click("link", v["branch"]), stop()],
        ),
        held_out=True,
    ),
    _template(
        "nav_user_profile",
        "nav",
        "Open the profile page of {{user}}.",
        _users,
        lambda seed, v: _built(url(f"{ROOT}/users/{v['username']}"), [*_open_user(v["user"]), stop()]),
    ),
    _template(
        "nav_explore_sorted",
        "nav",
        'Search the projects for "{{query}}" and sort the results by most stars.',
        _query_instances,
        lambda seed, v: _built(
            url(f"{ROOT}/explore?{urlencode({'q': v['query'], 'sort': 'stars'})}"),
            [type_text("searchbox", "Search projects", v["query"]), click("link", "Most stars"), stop()],
        ),
    ),
    _template(
        "nav_file",
        "nav",
        "Open the file {{file}} of the project {{project}}.",
        _file_instances,
        lambda seed, v: _built(
            url(f"{_base(v)}/-/blob/{v['file']}"), [*_open_project(v), click("link", v["file"]), stop()]
        ),
    ),
]


# ---- state changes ------------------------------------------------------------------------------
def _with(rows: list[Values], key: str, choices: tuple[str, ...]) -> list[Values]:
    """Each row with `key` set to one of `choices`, in turn."""
    return [{**row, key: choices[i % len(choices)]} for i, row in enumerate(rows)]


def _issue_check(values: Values, locator: str, **required: Any) -> dict[str, Any]:
    return program(check(f"{_base(values)}/-/issues/{values['iid']}", locator, **required))


def _text(element_id: str) -> str:
    return f"document.querySelector('#{element_id}').outerText"


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
    return program(*(check(_base(values), _text(element), exact_match=text) for element, text in checks))


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


STATE = [
    _template(
        "comment_issue",
        "state",
        'Comment "{{comment}}" on the issue "{{title}}" of the project {{project}}.',
        lambda seed: _with(_open_issues(seed), "comment", COMMENTS),
        lambda seed, v: _built(
            _issue_check(v, _text("notes"), must=[v["comment"]]),
            [
                *_open_issue(v),
                type_text("textbox", "Comment", v["comment"], enter=False),
                click("button", "Add comment"),
                stop(),
            ],
        ),
    ),
    _template(
        "close_issue",
        "state",
        'Close the issue "{{title}}" of the project {{project}}.',
        _open_issues,
        lambda seed, v: _built(
            _issue_check(v, _text("issue-state"), exact_match="Closed"),
            [*_open_issue(v), click("button", "Close issue"), stop()],
        ),
    ),
    _template(
        "reopen_issue",
        "state",
        'Reopen the closed issue "{{title}}" of the project {{project}}.',
        lambda seed: _issues(seed, "i.state = 'closed'"),
        lambda seed, v: _built(
            _issue_check(v, _text("issue-state"), exact_match="Open"),
            [*_open_issue(v), click("button", "Reopen issue"), stop()],
        ),
    ),
    _template(
        "add_label",
        "state",
        'Add the label {{label}} to the issue "{{title}}" of the project {{project}}.',
        _new_label_instances,
        lambda seed, v: _built(
            _issue_check(v, _text("issue-labels"), must=[v["label"]]),
            [*_open_issue(v), click("checkbox", v["label"]), click("button", "Save labels"), stop()],
        ),
    ),
    _template(
        "assign_issue",
        "state",
        'Assign the issue "{{title}}" of the project {{project}} to {{user}}.',
        _new_assignee_instances,
        lambda seed, v: _built(
            _issue_check(v, _text("issue-assignee"), exact_match=v["user"]),
            [
                *_open_issue(v),
                type_text("combobox", "Assignee", v["user"], enter=False),
                click("button", "Save assignee"),
                stop(),
            ],
        ),
    ),
    _template(
        "set_milestone",
        "state",
        'Set the milestone of the issue "{{title}}" of {{project}} to {{milestone}}.',
        _new_milestone_instances,
        lambda seed, v: _built(
            _issue_check(v, _text("issue-milestone"), exact_match=v["milestone"]),
            [
                *_open_issue(v),
                type_text("combobox", "Milestone", v["milestone"], enter=False),
                click("button", "Save milestone"),
                stop(),
            ],
        ),
        held_out=True,
    ),
    _template(
        "create_issue",
        "state",
        'Open a new issue titled "{{title}}" in the project {{project}}.',
        _new_issue_instances,
        lambda seed, v: _built(
            _issue_check(v, _text("issue-title"), exact_match=v["title"]),
            [
                *_open_project(v),
                click("link", "Issues"),
                click("link", "New issue"),
                type_text("textbox", "Title", v["title"], enter=False),
                click("button", "Create issue"),
                stop(),
            ],
        ),
    ),
    _template(
        "create_labelled_issue",
        "state",
        'Open a new issue titled "{{title}}" with the label {{label}} in the project {{project}}.',
        lambda seed: _new_issue_instances(seed, with_label=True),
        lambda seed, v: _built(
            program(
                check(f"{_base(v)}/-/issues/{v['iid']}", _text("issue-title"), exact_match=v["title"]),
                check(f"{_base(v)}/-/issues/{v['iid']}", _text("issue-labels"), must=[v["label"]]),
            ),
            [
                *_open_project(v),
                click("link", "Issues"),
                click("link", "New issue"),
                type_text("textbox", "Title", v["title"], enter=False),
                click("checkbox", v["label"]),
                click("button", "Create issue"),
                stop(),
            ],
        ),
    ),
    _template(
        "comment_mr",
        "state",
        'Comment "{{comment}}" on the merge request "{{title}}" of the project {{project}}.',
        lambda seed: _with(_open_mrs(seed), "comment", COMMENTS),
        lambda seed, v: _built(
            program(check(f"{_base(v)}/-/merge_requests/{v['iid']}", _text("notes"), must=[v["comment"]])),
            [
                *_open_merge_request(v),
                type_text("textbox", "Comment", v["comment"], enter=False),
                click("button", "Add comment"),
                stop(),
            ],
        ),
    ),
    _template(
        "merge_mr",
        "state",
        'Merge the merge request "{{title}}" of the project {{project}}.',
        _open_mrs,
        lambda seed, v: _built(
            program(check(f"{_base(v)}/-/merge_requests/{v['iid']}", _text("mr-state"), exact_match="Merged")),
            [*_open_merge_request(v), click("button", "Merge"), stop()],
        ),
    ),
    _template(
        "close_mr",
        "state",
        'Close the merge request "{{title}}" of the project {{project}} without merging it.',
        _open_mrs,
        lambda seed, v: _built(
            program(check(f"{_base(v)}/-/merge_requests/{v['iid']}", _text("mr-state"), exact_match="Closed")),
            [*_open_merge_request(v), click("button", "Close merge request"), stop()],
        ),
    ),
    _template(
        "add_member",
        "state",
        "Add {{user}} (username {{username}}) to the project {{project}} as a {{role}}.",
        _new_member_instances,
        lambda seed, v: _built(
            _member_check(v, _member_role(v["username"]), exact_match=v["role"]),
            [
                *_open_project(v),
                click("link", "Members"),
                type_text("textbox", "Username", v["username"], enter=False),
                type_text("combobox", "Role", v["role"], enter=False),
                click("button", "Add member"),
                stop(),
            ],
        ),
    ),
    _template(
        "change_role",
        "state",
        "Make {{user}} a {{new_role}} of the project {{project}}.",
        _role_change_instances,
        lambda seed, v: _built(
            _member_check(v, _member_role(v["username"]), exact_match=v["new_role"]),
            [
                *_open_project(v),
                click("link", "Members"),
                type_text("combobox", f"Role of {v['username']}", v["new_role"], enter=False),
                click("button", f"Change role of {v['username']}"),
                stop(),
            ],
        ),
    ),
    _template(
        "remove_member",
        "state",
        "Remove {{user}} from the members of the project {{project}}.",
        _member_instances,
        lambda seed, v: _built(
            _member_check(v, _member_absent(v["username"]), exact_match="True"),
            [*_open_project(v), click("link", "Members"), click("button", f"Remove {v['username']}"), stop()],
        ),
    ),
    _template(
        "star_project",
        "state",
        "Star the project {{project}}.",
        lambda seed: _starred(seed, False),
        lambda seed, v: _built(
            _project_check(v, ("star-button", "Unstar")), [*_open_project(v), click("button", "Star"), stop()]
        ),
    ),
    _template(
        "unstar_project",
        "state",
        "Remove your star from the project {{project}}.",
        lambda seed: _starred(seed, True),
        lambda seed, v: _built(
            _project_check(v, ("star-button", "Star")), [*_open_project(v), click("button", "Unstar"), stop()]
        ),
        held_out=True,
    ),
    _template(
        "set_description",
        "state",
        'Change the description of the project {{project}} to "{{description}}".',
        lambda seed: _with(_values(_rows(seed, _PROJECTS)), "description", DESCRIPTIONS),
        lambda seed, v: _built(
            _project_check(v, ("description", v["description"])),
            _settings_plan(v, type_text("textbox", "Description", v["description"], enter=False)),
        ),
    ),
    _template(
        "set_visibility",
        "state",
        "Make the project {{project}} {{visibility}}.",
        _visibility_instances,
        lambda seed, v: _built(
            _project_check(v, ("visibility", v["visibility"])),
            _settings_plan(v, type_text("combobox", "Visibility", v["visibility"], enter=False)),
        ),
    ),
    _template(
        "rename_project",
        "state",
        "Rename the project {{project}} to {{new_name}}.",
        _rename_instances,
        lambda seed, v: _built(
            _project_check(v, ("project-name", v["new_name"])),
            _settings_plan(v, type_text("textbox", "Project name", v["new_name"], enter=False)),
        ),
    ),
    _template(
        "create_project",
        "state",
        'Create a {{visibility}} project named {{name}} with the description "{{description}}".',
        _create_project_instances,
        lambda seed, v: _built(
            program(
                check(f"{ROOT}/{ME}/{v['name']}", _text("project-name"), exact_match=v["name"]),
                check(f"{ROOT}/{ME}/{v['name']}", _text("visibility"), exact_match=v["visibility"]),
                check(f"{ROOT}/{ME}/{v['name']}", _text("description"), exact_match=v["description"]),
            ),
            [
                click("link", "New project"),
                type_text("textbox", "Project name", v["name"], enter=False),
                type_text("textbox", "Description", v["description"], enter=False),
                type_text("combobox", "Visibility", v["visibility"], enter=False),
                click("button", "Create project"),
                stop(),
            ],
            start="/",
        ),
    ),
]


# ---- unachievable -------------------------------------------------------------------------------
NOT_ACHIEVABLE = [
    _template(
        "na_phone",
        "na",
        "What is the phone number of {{user}}?",
        _users,
        lambda seed, v: _built(not_achievable(), [*_open_user(v["user"]), stop("N/A")]),
    ),
    _template(
        "na_release_downloads",
        "na",
        "How many times was the latest release of the project {{project}} downloaded?",
        lambda seed: _values(_rows(seed, _PROJECTS)),
        lambda seed, v: _built(not_achievable(), [*_open_project(v), stop("N/A")]),
        held_out=True,
    ),
]

TEMPLATES: list[TaskTemplate] = [*INFO, *NAV, *STATE, *NOT_ACHIEVABLE]
