"""`SiteDatabase`, the core of every embedded site's database: restore, and all-or-nothing writes."""

from __future__ import annotations

import sqlite3

import pytest

from agentgym_envs.webarena.sites.database import SiteDatabase


def _seed() -> sqlite3.Connection:
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript(
        "CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT UNIQUE); INSERT INTO notes VALUES (1, 'a');"
    )
    return connection


class NotesDB(SiteDatabase):
    seed = staticmethod(_seed)


def test_a_failing_statement_rolls_back_the_whole_write_and_leaves_no_transaction_open() -> None:
    db = NotesDB()
    with pytest.raises(sqlite3.IntegrityError):
        db._write(("INSERT INTO notes VALUES (2, 'b')", ()), ("INSERT INTO notes VALUES (3, 'a')", ()))
    assert [row["text"] for row in db._rows("SELECT text FROM notes ORDER BY id")] == ["a"]
    assert not db._live.in_transaction
    db._write(("INSERT INTO notes VALUES (2, 'b')", ()))  # the connection still takes writes
    assert db._row("SELECT COUNT(*) AS n FROM notes")["n"] == 2


def test_restore_puts_the_seed_back_and_instances_do_not_share_data() -> None:
    first, second = NotesDB(), NotesDB()
    assert first._execute("INSERT INTO notes (text) VALUES ('c')").lastrowid == 2
    assert second._row("SELECT COUNT(*) AS n FROM notes")["n"] == 1
    first.restore()
    assert first._rows("SELECT id, text FROM notes") == [{"id": 1, "text": "a"}]
