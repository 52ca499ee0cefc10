"""The forum's data: an in-memory SQLite database built by `seed.populate`, restorable in a millisecond.

The queries that decide what a page shows (listing order, comment threads) are plain functions of a
connection, so task templates compute their answers with the very code the pages use.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from agentgym_envs.webarena.sites.database import SiteDatabase
from agentgym_envs.webarena.sites.forum.seed import ME, NOW, TIME_FORMAT, populate

#: Listing orders, by their URL value: hot (score decayed by age, the default), new, top (all time).
SORTS = ("hot", "new", "top")
#: Rows per page of every list.
PAGE_SIZE = 20
#: The text a deleted comment shows (its replies stay).
DELETED = "[deleted]"
#: The signed-in user's id.
ME_ID = 1

_SUBMISSION_COLUMNS = (
    "s.*, f.name AS forum, u.username AS author, COALESCE(v.direction, 0) AS my_vote, "
    "(SELECT COUNT(*) FROM comments c WHERE c.submission_id = s.id) AS comment_count "
    "FROM submissions s JOIN forums f ON f.id = s.forum_id JOIN users u ON u.id = s.user_id "
    "LEFT JOIN submission_votes v ON v.submission_id = s.id"
)


def seed_connection() -> sqlite3.Connection:
    """A new connection on the seed data (rows as `sqlite3.Row`), for task templates to read."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    populate(connection)
    connection.row_factory = sqlite3.Row
    return connection


def hotness(row: dict[str, Any]) -> float:
    """The hot rank of a submission: its score, decayed by its age in hours at `NOW`."""
    hours = max((NOW - datetime.fromisoformat(row["created"])).total_seconds() / 3600, 0.0)
    return (row["score"] + 1) / (hours + 2) ** 1.5


def order(rows: list[dict[str, Any]], sort: str) -> list[dict[str, Any]]:
    """Submissions in a listing's order (ties: the newer first)."""
    rows = sorted(rows, key=lambda row: row["id"], reverse=True)
    if sort == "new":
        return sorted(rows, key=lambda row: row["created"], reverse=True)
    if sort == "top":
        return sorted(rows, key=lambda row: row["score"], reverse=True)
    return sorted(rows, key=hotness, reverse=True)


def submissions(connection: sqlite3.Connection, where: str, args: tuple, sort: str) -> list[dict[str, Any]]:
    """The submissions `where` selects (SQL over `s`, `f`, `u`), in the order of `sort`."""
    return order([dict(row) for row in connection.execute(f"SELECT {_SUBMISSION_COLUMNS} WHERE {where}", args)], sort)


def search_clause(query: str) -> tuple[str, tuple]:
    """SQL matching submissions whose title or body holds every word of `query` (case-insensitive,
    literally: `instr` gives `%` and `_` no meaning); `0` for an empty query."""
    words = list(dict.fromkeys(query.lower().split()))
    if not words:
        return "0", ()
    where = " AND ".join("(instr(LOWER(s.title), ?) > 0 OR instr(LOWER(s.body), ?) > 0)" for _ in words)
    return where, tuple(arg for word in words for arg in (word, word))


def thread(connection: sqlite3.Connection, submission_id: int, root: int | None = None) -> list[dict[str, Any]]:
    """The comments of a submission in page order, each with its `depth`: depth-first, siblings by
    score (ties: the older first). With `root`, only that comment and its replies."""
    rows = [
        dict(row)
        for row in connection.execute(
            "SELECT c.*, u.username AS author, COALESCE(v.direction, 0) AS my_vote FROM comments c "
            "JOIN users u ON u.id = c.user_id LEFT JOIN comment_votes v ON v.comment_id = c.id "
            "WHERE c.submission_id = ? ORDER BY c.score DESC, c.id",
            (submission_id,),
        )
    ]
    children: dict[int | None, list[dict[str, Any]]] = {}
    for row in rows:
        children.setdefault(row["parent_id"], []).append(row)
    ordered: list[dict[str, Any]] = []
    stack = [(row, 0) for row in reversed([r for r in rows if r["id"] == root] if root else children.get(None, []))]
    while stack:
        row, depth = stack.pop()
        ordered.append({**row, "depth": depth})
        stack.extend((child, depth + 1) for child in reversed(children.get(row["id"], [])))
    return ordered


class ForumDB(SiteDatabase):
    """The live database of one forum instance: its queries and changes."""

    seed = staticmethod(seed_connection)

    # ---- reads ----------------------------------------------------------------------------------

    def me(self) -> dict[str, Any]:
        found = self.user(ME)
        assert found is not None
        return found

    def forums(self) -> list[dict[str, Any]]:
        """Every forum by name, with whether the signed-in user is subscribed."""
        return self._rows(
            "SELECT f.*, s.forum_id IS NOT NULL AS subscribed FROM forums f "
            "LEFT JOIN subscriptions s ON s.forum_id = f.id ORDER BY f.name COLLATE NOCASE"
        )

    def forum(self, name: str) -> dict[str, Any] | None:
        return self._row(
            "SELECT f.*, s.forum_id IS NOT NULL AS subscribed, u.username AS creator_name FROM forums f "
            "JOIN users u ON u.id = f.creator LEFT JOIN subscriptions s ON s.forum_id = f.id WHERE f.name = ?",
            name,
        )

    def subscribed(self) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT f.name, f.title FROM forums f JOIN subscriptions s ON s.forum_id = f.id "
            "ORDER BY f.name COLLATE NOCASE"
        )

    def submissions(self, where: str, args: tuple, sort: str) -> list[dict[str, Any]]:
        with self._lock:
            return submissions(self._live, where, args, sort)

    def search(self, query: str, sort: str) -> list[dict[str, Any]]:
        where, args = search_clause(query)
        return self.submissions(where, args, sort)

    def submission(self, submission_id: int) -> dict[str, Any] | None:
        found = self.submissions("s.id = ?", (submission_id,), "new")
        return found[0] if found else None

    def thread(self, submission_id: int, root: int | None = None) -> list[dict[str, Any]]:
        with self._lock:
            return thread(self._live, submission_id, root)

    def comment(self, comment_id: int) -> dict[str, Any] | None:
        return self._row(
            "SELECT c.*, u.username AS author FROM comments c JOIN users u ON u.id = c.user_id WHERE c.id = ?",
            comment_id,
        )

    def user(self, username: str) -> dict[str, Any] | None:
        return self._row(
            "SELECT u.*, (SELECT COUNT(*) FROM submissions s WHERE s.user_id = u.id) AS submission_count, "
            "(SELECT COUNT(*) FROM comments c WHERE c.user_id = u.id AND NOT c.deleted) AS comment_count "
            "FROM users u WHERE u.username = ?",
            username,
        )

    def user_comments(self, user_id: int) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT c.*, s.title AS submission_title, f.name AS forum FROM comments c "
            "JOIN submissions s ON s.id = c.submission_id JOIN forums f ON f.id = s.forum_id "
            "WHERE c.user_id = ? AND NOT c.deleted ORDER BY c.created DESC, c.id DESC",
            user_id,
        )

    # ---- writes ---------------------------------------------------------------------------------
    def _vote(self, table: str, key: str, target: str, item_id: int, direction: int) -> None:
        """Vote on an item: the same vote again retracts it (as on Postmill); the score follows."""
        with self._transaction() as live:
            row = live.execute(f"SELECT direction FROM {table} WHERE {key} = ?", (item_id,)).fetchone()
            current = row[0] if row else 0
            new = 0 if current == direction else direction
            live.execute(f"DELETE FROM {table} WHERE {key} = ?", (item_id,))
            if new:
                live.execute(f"INSERT INTO {table} VALUES (?, ?)", (item_id, new))
            live.execute(f"UPDATE {target} SET score = score + ? WHERE id = ?", (new - current, item_id))

    def vote_submission(self, submission_id: int, direction: int) -> None:
        self._vote("submission_votes", "submission_id", "submissions", submission_id, direction)

    def vote_comment(self, comment_id: int, direction: int) -> None:
        self._vote("comment_votes", "comment_id", "comments", comment_id, direction)

    def add_submission(self, forum_id: int, title: str, link: str, body: str) -> int:
        return int(self._execute(
            "INSERT INTO submissions (forum_id, user_id, title, url, body, created, score) "
            "VALUES (?, ?, ?, ?, ?, ?, 1)",
            forum_id, ME_ID, title, link, body, NOW.strftime(TIME_FORMAT),
        ).lastrowid)  # fmt: skip

    def edit_submission(self, submission_id: int, title: str, link: str, body: str) -> None:
        self._execute(
            "UPDATE submissions SET title = ?, url = ?, body = ?, edited = 1 WHERE id = ?",
            title,
            link,
            body,
            submission_id,
        )

    def delete_submission(self, submission_id: int) -> None:
        with self._transaction() as live:
            for sql in (
                "DELETE FROM comment_votes WHERE comment_id IN (SELECT id FROM comments WHERE submission_id = ?)",
                "DELETE FROM comments WHERE submission_id = ?",
                "DELETE FROM submission_votes WHERE submission_id = ?",
                "DELETE FROM submissions WHERE id = ?",
            ):
                live.execute(sql, (submission_id,))

    def add_comment(self, submission_id: int, parent_id: int | None, body: str) -> int:
        return int(self._execute(
            "INSERT INTO comments (submission_id, parent_id, user_id, body, created, score) VALUES (?, ?, ?, ?, ?, 1)",
            submission_id, parent_id, ME_ID, body, NOW.strftime(TIME_FORMAT),
        ).lastrowid)  # fmt: skip

    def edit_comment(self, comment_id: int, body: str) -> None:
        self._execute("UPDATE comments SET body = ?, edited = 1 WHERE id = ?", body, comment_id)

    def delete_comment(self, comment_id: int) -> None:
        """Mark a comment deleted: its text goes, its replies stay (as on Postmill)."""
        self._execute("UPDATE comments SET deleted = 1, body = '' WHERE id = ?", comment_id)

    def set_subscribed(self, forum_id: int, subscribed: bool) -> None:
        with self._transaction() as live:
            is_now = live.execute("SELECT 1 FROM subscriptions WHERE forum_id = ?", (forum_id,)).fetchone()
            if bool(is_now) == subscribed:
                return
            if subscribed:
                live.execute("INSERT INTO subscriptions VALUES (?)", (forum_id,))
            else:
                live.execute("DELETE FROM subscriptions WHERE forum_id = ?", (forum_id,))
            live.execute(
                "UPDATE forums SET subscribers = subscribers + ? WHERE id = ?", (1 if subscribed else -1, forum_id)
            )

    def set_bio(self, bio: str) -> None:
        self._execute("UPDATE users SET bio = ? WHERE id = ?", bio, ME_ID)

    def create_forum(self, name: str, title: str, description: str) -> None:
        """A new forum, created (and subscribed to) by the signed-in user."""
        with self._transaction() as live:
            cursor = live.execute(
                "INSERT INTO forums (name, title, description, created, creator, subscribers) "
                "VALUES (?, ?, ?, ?, ?, 1)",
                (name, title, description, NOW.strftime(TIME_FORMAT), ME_ID),
            )
            live.execute("INSERT INTO subscriptions VALUES (?)", (cursor.lastrowid,))
