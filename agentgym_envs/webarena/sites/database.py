"""The core every site's database shares: a pristine in-memory copy of the seed data, a live copy the
site reads and writes, one lock around both, and `restore()` to put the live copy back in a millisecond."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar


class SiteDatabase:
    """The live database of one site instance, plus a pristine copy to restore it from.

    A subclass names its seed: `seed = staticmethod(seed_connection)`, a function that returns a new
    connection on the seed data. All access goes through one lock: the web server's thread reads and
    writes while the env's thread restores the seed state at reset. The live connection is in
    autocommit mode: a lone statement commits at once, `_transaction()` groups several.
    """

    seed: ClassVar[Callable[[], sqlite3.Connection]]

    def __init__(self) -> None:
        self._pristine = self.seed()
        self._live = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._live.row_factory = sqlite3.Row
        self._lock = threading.Lock()
        self.restore()

    def restore(self) -> None:
        """Put every table back to the seed state."""
        with self._lock:
            self._pristine.backup(self._live)

    def close(self) -> None:
        self._live.close()
        self._pristine.close()

    # ---- reads ----------------------------------------------------------------------------------
    def _rows(self, sql: str, *args: Any) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(row) for row in self._live.execute(sql, args)]

    def _row(self, sql: str, *args: Any) -> dict[str, Any] | None:
        rows = self._rows(sql, *args)
        return rows[0] if rows else None

    # ---- writes ---------------------------------------------------------------------------------
    def _execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        """Run one statement (it commits at once); its cursor tells `rowcount` and `lastrowid`."""
        with self._lock:
            return self._live.execute(sql, args)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """The live connection, locked, inside BEGIN ... COMMIT; an exception rolls back and goes on."""
        with self._lock:
            self._live.execute("BEGIN")
            try:
                yield self._live
            except Exception:
                self._live.execute("ROLLBACK")
                raise
            self._live.execute("COMMIT")

    def _write(self, *statements: tuple[str, tuple]) -> None:
        """Run (sql, args) statements in one transaction: all of them or, on an error, none."""
        with self._transaction() as live:
            for sql, args in statements:
                live.execute(sql, args)
