"""The code host's data: an in-memory SQLite database built from `seed.py`, restorable in a millisecond."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.code.seed import ME, populate
from agentgym_envs.webarena.sites.database import SiteDatabase

#: The code host's "today": notes, issues and projects made during an episode carry this date.
TODAY = "2024-06-01"
#: Rows per page of every list.
PAGE_SIZE = 20
#: Sorts of the project lists: URL value -> (label, ORDER BY).
SORTS = {
    "": ("Name", "p.name, p.namespace"),
    "stars": ("Most stars", "stars DESC, p.name"),
    "created": ("Newest", "p.created DESC, p.name"),
    "oldest": ("Oldest", "p.created, p.name"),
}
#: Issue and merge request states shown by the list filters: URL value -> label.
ISSUE_STATES = {"opened": "Open", "closed": "Closed", "all": "All"}
MR_STATES = {"opened": "Open", "merged": "Merged", "closed": "Closed", "all": "All"}
_PROJECT = (
    "SELECT p.*, (SELECT COUNT(*) FROM stars s WHERE s.project_id = p.id) AS stars, "
    "EXISTS (SELECT 1 FROM stars s WHERE s.project_id = p.id AND s.user_id = 1) AS starred, "
    "(SELECT COUNT(*) FROM issues i WHERE i.project_id = p.id AND i.state = 'opened') AS open_issues, "
    "(SELECT COUNT(*) FROM merge_requests m WHERE m.project_id = p.id AND m.state = 'opened') AS open_mrs "
    "FROM projects p"
)


def seed_connection() -> sqlite3.Connection:
    """A new connection on the seed data (rows as `sqlite3.Row`), for task templates to read."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    populate(connection)
    connection.commit()
    connection.row_factory = sqlite3.Row
    return connection


class CodeDB(SiteDatabase):
    """The live database of one code host: its queries and changes."""

    seed = staticmethod(seed_connection)

    # ---- reads ----------------------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        found = self.user(ME)
        assert found is not None
        return found

    def user(self, username: str) -> dict[str, Any] | None:
        return self._row("SELECT * FROM users WHERE username = ?", username)

    def users(self, query: str = "") -> list[dict[str, Any]]:
        """Users whose username or name holds `query` (case-insensitive), by name."""
        return self._rows(
            "SELECT * FROM users WHERE instr(LOWER(username || ' ' || name), ?) > 0 ORDER BY name", query.lower()
        )

    def group(self, path: str) -> dict[str, Any] | None:
        return self._row("SELECT * FROM groups WHERE path = ?", path)

    def group_members(self, group_id: int) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT u.* FROM group_members g JOIN users u ON u.id = g.user_id WHERE g.group_id = ? ORDER BY u.name",
            group_id,
        )

    def user_groups(self, user_id: int) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT g.* FROM group_members m JOIN groups g ON g.id = m.group_id WHERE m.user_id = ? ORDER BY g.name",
            user_id,
        )

    def projects(self, query: str = "", sort: str = "") -> list[dict[str, Any]]:
        """Projects whose namespace, name or description holds every word of `query`, sorted."""
        words = list(dict.fromkeys(query.lower().split()))
        where = " AND ".join("instr(LOWER(p.namespace || ' ' || p.name || ' ' || p.description), ?) > 0" for _ in words)
        order = SORTS.get(sort, SORTS[""])[1]
        return self._rows(f"{_PROJECT} WHERE {where or '1'} ORDER BY {order}", *words)

    def member_projects(self, user_id: int) -> list[dict[str, Any]]:
        return self._rows(
            f"{_PROJECT} WHERE p.id IN (SELECT project_id FROM members WHERE user_id = ?) ORDER BY p.name", user_id
        )

    def starred_projects(self, user_id: int) -> list[dict[str, Any]]:
        return self._rows(
            f"{_PROJECT} WHERE p.id IN (SELECT project_id FROM stars WHERE user_id = ?) ORDER BY p.name", user_id
        )

    def namespace_projects(self, namespace: str) -> list[dict[str, Any]]:
        return self._rows(f"{_PROJECT} WHERE p.namespace = ? ORDER BY p.name", namespace)

    def project(self, namespace: str, path: str) -> dict[str, Any] | None:
        return self._row(f"{_PROJECT} WHERE p.namespace = ? AND p.path = ?", namespace, path)

    def files(self, project_id: int) -> list[dict[str, Any]]:
        return self._rows("SELECT path FROM files WHERE project_id = ? ORDER BY path", project_id)

    def file(self, project_id: int, path: str) -> dict[str, Any] | None:
        return self._row("SELECT * FROM files WHERE project_id = ? AND path = ?", project_id, path)

    def branches(self, project_id: int) -> list[dict[str, Any]]:
        """Branches with their latest commit and commit count, the default branch first."""
        return self._rows(
            "SELECT b.name, (SELECT COUNT(*) FROM commits c WHERE c.project_id = b.project_id AND c.branch = b.name) "
            "AS commits, (SELECT c.message FROM commits c WHERE c.project_id = b.project_id AND c.branch = b.name "
            "ORDER BY c.committed DESC LIMIT 1) AS latest FROM branches b WHERE b.project_id = ? "
            "ORDER BY b.name != 'main', b.name",
            project_id,
        )

    def commits(self, project_id: int, branch: str = "", author: str = "") -> list[dict[str, Any]]:
        """Commits, newest first, of one branch and one author's username when given."""
        return self._rows(
            "SELECT c.*, u.name AS author, u.username FROM commits c JOIN users u ON u.id = c.author_id "
            "WHERE c.project_id = ? AND (? = '' OR c.branch = ?) AND (? = '' OR u.username = ?) "
            "ORDER BY c.committed DESC",
            project_id, branch, branch, author, author,
        )  # fmt: skip

    def commit(self, project_id: int, sha: str) -> dict[str, Any] | None:
        return self._row(
            "SELECT c.*, u.name AS author, u.username FROM commits c JOIN users u ON u.id = c.author_id "
            "WHERE c.project_id = ? AND c.sha = ?",
            project_id,
            sha,
        )

    def labels(self, project_id: int) -> list[dict[str, Any]]:
        return self._rows("SELECT name, color FROM labels WHERE project_id = ? ORDER BY name", project_id)

    def milestones(self, project_id: int) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM milestones WHERE project_id = ? ORDER BY title", project_id)

    def members(self, project_id: int) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT u.*, m.role FROM members m JOIN users u ON u.id = m.user_id WHERE m.project_id = ? ORDER BY u.name",
            project_id,
        )

    def _issue_rows(self, where: str, *args: Any) -> list[dict[str, Any]]:
        rows = self._rows(
            "SELECT i.*, a.name AS author, a.username AS author_username, s.name AS assignee, "
            "s.username AS assignee_username, ms.title AS milestone, p.namespace, p.path AS project_path, "
            "p.name AS project_name, (SELECT group_concat(label, ', ') FROM (SELECT label FROM issue_labels l "
            "WHERE l.issue_id = i.id ORDER BY label)) AS labels "
            "FROM issues i JOIN users a ON a.id = i.author_id LEFT JOIN users s ON s.id = i.assignee_id "
            "LEFT JOIN milestones ms ON ms.id = i.milestone_id JOIN projects p ON p.id = i.project_id "
            f"WHERE {where} ORDER BY p.name, i.iid DESC",
            *args,
        )
        for row in rows:
            row["labels"] = row["labels"].split(", ") if row["labels"] else []
        return rows

    def issues(
        self, project_id: int, state: str = "opened", label: str = "", assignee: str = "", query: str = ""
    ) -> list[dict[str, Any]]:
        """A project's issues, newest first, filtered by state (`ISSUE_STATES`), a label, an assignee's
        username and words of the title."""
        clauses, args = ["i.project_id = ?"], [project_id]
        if state != "all":
            clauses.append("i.state = ?")
            args.append(state)
        if label:
            clauses.append("EXISTS (SELECT 1 FROM issue_labels l WHERE l.issue_id = i.id AND l.label = ?)")
            args.append(label)
        if assignee:
            clauses.append("s.username = ?")
            args.append(assignee)
        for word in dict.fromkeys(query.lower().split()):
            clauses.append("instr(LOWER(i.title), ?) > 0")
            args.append(word)
        return self._issue_rows(" AND ".join(clauses), *args)

    def search_issues(self, query: str) -> list[dict[str, Any]]:
        words = list(dict.fromkeys(query.lower().split()))
        return self._issue_rows(" AND ".join("instr(LOWER(i.title), ?) > 0" for _ in words) or "1", *words)

    def issue(self, project_id: int, iid: int) -> dict[str, Any] | None:
        found = self._issue_rows("i.project_id = ? AND i.iid = ?", project_id, iid)
        if not found:
            return None
        issue = found[0]
        issue["notes"] = self.notes("issue", issue["id"])
        return issue

    def notes(self, target: str, target_id: int) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT n.*, u.name AS author, u.username FROM notes n JOIN users u ON u.id = n.author_id "
            "WHERE n.target = ? AND n.target_id = ? ORDER BY n.id",
            target,
            target_id,
        )

    def merge_requests(self, project_id: int, state: str = "opened", query: str = "") -> list[dict[str, Any]]:
        clauses, args = ["m.project_id = ?"], [project_id]
        if state != "all":
            clauses.append("m.state = ?")
            args.append(state)
        for word in dict.fromkeys(query.lower().split()):
            clauses.append("instr(LOWER(m.title), ?) > 0")
            args.append(word)
        return self._rows(
            "SELECT m.*, u.name AS author, u.username FROM merge_requests m JOIN users u ON u.id = m.author_id "
            f"WHERE {' AND '.join(clauses)} ORDER BY m.iid DESC",
            *args,
        )

    def merge_request(self, project_id: int, iid: int) -> dict[str, Any] | None:
        found = self._row(
            "SELECT m.*, u.name AS author, u.username FROM merge_requests m JOIN users u ON u.id = m.author_id "
            "WHERE m.project_id = ? AND m.iid = ?",
            project_id,
            iid,
        )
        if found is not None:
            found["notes"] = self.notes("merge_request", found["id"])
        return found

    # ---- writes ---------------------------------------------------------------------------------
    def add_note(self, target: str, target_id: int, body: str) -> None:
        self._write(
            ("INSERT INTO notes (target, target_id, author_id, body, created) VALUES (?, ?, 1, ?, ?)",
             (target, target_id, body, TODAY))
        )  # fmt: skip

    def set_issue(self, issue_id: int, column: str, value: Any) -> None:
        """Set the state, assignee_id or milestone_id of an issue."""
        if column not in ("state", "assignee_id", "milestone_id"):
            raise ValueError(f"an issue has no settable column {column!r}")
        self._write((f"UPDATE issues SET {column} = ? WHERE id = ?", (value, issue_id)))

    def set_issue_labels(self, issue_id: int, labels: list[str]) -> None:
        self._write(
            ("DELETE FROM issue_labels WHERE issue_id = ?", (issue_id,)),
            *(("INSERT INTO issue_labels VALUES (?, ?)", (issue_id, label)) for label in labels),
        )

    def create_issue(
        self,
        project_id: int,
        title: str,
        body: str,
        labels: list[str],
        assignee_id: int | None,
        milestone_id: int | None,
    ) -> int:
        """A new open issue by the signed-in user; returns its number in the project."""
        with self._transaction() as live:
            iid = live.execute(
                "SELECT COALESCE(MAX(iid), 0) + 1 FROM issues WHERE project_id = ?", (project_id,)
            ).fetchone()[0]
            cursor = live.execute(
                "INSERT INTO issues (project_id, iid, title, body, author_id, assignee_id, milestone_id, state, "
                "created) "
                "VALUES (?, ?, ?, ?, 1, ?, ?, 'opened', ?)",
                (project_id, iid, title, body, assignee_id, milestone_id, TODAY),
            )
            live.executemany("INSERT INTO issue_labels VALUES (?, ?)", [(cursor.lastrowid, label) for label in labels])
            return int(iid)

    def set_merge_request_state(self, mr_id: int, state: str) -> None:
        self._write(("UPDATE merge_requests SET state = ? WHERE id = ?", (state, mr_id)))

    def set_member(self, project_id: int, user_id: int, role: str) -> None:
        """Add a member with `role`, or change a member's role."""
        self._write(
            ("INSERT INTO members VALUES (?, ?, ?) ON CONFLICT DO UPDATE SET role = excluded.role",
             (project_id, user_id, role))
        )  # fmt: skip

    def remove_member(self, project_id: int, user_id: int) -> None:
        self._write(("DELETE FROM members WHERE project_id = ? AND user_id = ?", (project_id, user_id)))

    def set_star(self, project_id: int, starred: bool) -> None:
        if starred:
            self._write(("INSERT OR IGNORE INTO stars VALUES (?, 1)", (project_id,)))
        else:
            self._write(("DELETE FROM stars WHERE project_id = ? AND user_id = 1", (project_id,)))

    def update_project(self, project_id: int, name: str, description: str, visibility: str) -> None:
        self._write(
            ("UPDATE projects SET name = ?, description = ?, visibility = ? WHERE id = ?",
             (name, description, visibility, project_id))
        )  # fmt: skip

    def create_project(self, path: str, name: str, description: str, visibility: str) -> None:
        """A new project of the signed-in user, with a README and the user as its owner."""
        with self._transaction() as live:
            cursor = live.execute(
                "INSERT INTO projects (namespace, path, name, description, visibility, default_branch, created) "
                "VALUES (?, ?, ?, ?, ?, 'main', ?)",
                (ME, path, name, description, visibility, TODAY),
            )
            pid = cursor.lastrowid
            live.execute("INSERT INTO members VALUES (?, 1, 'Owner')", (pid,))
            live.execute("INSERT INTO branches VALUES (?, 'main')", (pid,))
            live.execute("INSERT INTO files VALUES (?, 'README.md', ?)", (pid, f"# {name}\n\n{description}\n"))
