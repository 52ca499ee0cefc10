"""The shop's data: an in-memory SQLite database built from `seed.sql`, restorable in a millisecond."""

from __future__ import annotations

import sqlite3
import threading
from importlib import resources
from typing import Any

#: The shop's "today": orders placed during an episode carry this date, so pages are deterministic.
TODAY = "2024-05-01"
SHIPPING = {"Standard": 500, "Express": 1500}
#: The most of one product a cart may hold (the cart table's CHECK constraint says the same).
MAX_QUANTITY = 999
SORTS = {
    "": ("Relevance", "p.name"),
    "price_asc": ("Price: low to high", "p.price, p.name"),
    "price_desc": ("Price: high to low", "p.price DESC, p.name"),
    "name": ("Name", "p.name"),
}


def money(cents: int) -> str:
    """`3499` -> `'$34.99'`."""
    return f"${cents // 100:,}.{cents % 100:02d}"


def seed_connection() -> sqlite3.Connection:
    """A new connection on the seed data (rows as `sqlite3.Row`), for task templates to read."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript(resources.files(__package__).joinpath("seed.sql").read_text(encoding="utf-8"))
    connection.row_factory = sqlite3.Row
    return connection


class ShopDB:
    """The live database of one shop instance, plus a pristine copy to restore it from.

    All access goes through one lock: the web server's thread reads and writes while the env's
    thread restores the seed state at reset.
    """

    def __init__(self) -> None:
        self._pristine = seed_connection()
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

    def categories(self) -> list[dict[str, Any]]:
        return self._rows("SELECT slug, name FROM categories ORDER BY position")

    def category(self, slug: str) -> dict[str, Any] | None:
        return self._row("SELECT slug, name FROM categories WHERE slug = ?", slug)

    def _products(self, where: str, args: tuple, sort: str) -> list[dict[str, Any]]:
        order = SORTS.get(sort, SORTS[""])[1]
        return self._rows(
            "SELECT p.*, c.name AS category_name, COUNT(r.id) AS review_count, AVG(r.rating) AS rating "
            "FROM products p JOIN categories c ON c.slug = p.category LEFT JOIN reviews r ON r.sku = p.sku "
            f"WHERE {where} GROUP BY p.sku ORDER BY {order}",
            *args,
        )

    def search(self, query: str, sort: str = "") -> list[dict[str, Any]]:
        """Products whose name or description holds every word of `query` (case-insensitive).

        Words match literally: `instr`, unlike `LIKE`, gives `%` and `_` no special meaning.
        """
        words = list(dict.fromkeys(query.lower().split()))
        if not words:
            return []
        where = " AND ".join("(instr(LOWER(p.name), ?) > 0 OR instr(LOWER(p.description), ?) > 0)" for _ in words)
        args = tuple(arg for word in words for arg in (word, word))
        return self._products(where, args, sort)

    def in_category(self, slug: str, sort: str = "") -> list[dict[str, Any]]:
        return self._products("p.category = ?", (slug,), sort)

    def featured(self) -> list[dict[str, Any]]:
        return self._products("p.sku IN ('OF-4001', 'OU-3001', 'EL-1003', 'KI-2002')", (), "name")

    def product(self, sku: str) -> dict[str, Any] | None:
        found = self._products("p.sku = ?", (sku,), "")
        return found[0] if found else None

    def reviews(self, sku: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM reviews WHERE sku = ? ORDER BY posted DESC, id DESC", sku)

    def customer(self) -> dict[str, Any]:
        customer = self._row("SELECT * FROM customer WHERE id = 1")
        assert customer is not None
        return customer

    def cart(self) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT c.sku, c.qty, p.name, p.price, p.price * c.qty AS subtotal "
            "FROM cart c JOIN products p ON p.sku = c.sku ORDER BY c.position"
        )

    def orders(self, status: str = "") -> list[dict[str, Any]]:
        where, args = ("WHERE LOWER(o.status) = ?", (status.lower(),)) if status else ("", ())
        return self._rows(
            "SELECT o.*, o.shipping + SUM(i.price * i.qty) AS total, SUM(i.qty) AS items "
            f"FROM orders o JOIN order_items i ON i.order_number = o.number {where} "
            "GROUP BY o.number ORDER BY o.number DESC",
            *args,
        )

    def order(self, number: int) -> dict[str, Any] | None:
        order = self._row(
            "SELECT o.*, SUM(i.price * i.qty) AS subtotal, o.shipping + SUM(i.price * i.qty) AS total "
            "FROM orders o JOIN order_items i ON i.order_number = o.number WHERE o.number = ? GROUP BY o.number",
            number,
        )
        if order is not None:
            order["items"] = self._rows(
                "SELECT *, price * qty AS subtotal FROM order_items WHERE order_number = ? ORDER BY rowid", number
            )
        return order

    def latest_order_number(self) -> int:
        row = self._row("SELECT MAX(number) AS number FROM orders")
        return int(row["number"]) if row else 0

    # ---- writes ---------------------------------------------------------------------------------
    def _write(self, *statements: tuple[str, tuple]) -> None:
        with self._lock:
            self._live.execute("BEGIN")
            try:
                for sql, args in statements:
                    self._live.execute(sql, args)
            except Exception:
                self._live.execute("ROLLBACK")
                raise
            self._live.execute("COMMIT")

    def add_to_cart(self, sku: str, qty: int) -> None:
        self._write(
            (
                "INSERT INTO cart VALUES (?, ?, (SELECT COALESCE(MAX(position), 0) + 1 FROM cart)) "
                "ON CONFLICT(sku) DO UPDATE SET qty = qty + excluded.qty",
                (sku, qty),
            )
        )

    def set_cart_quantity(self, sku: str, qty: int) -> None:
        if qty <= 0:
            self._write(("DELETE FROM cart WHERE sku = ?", (sku,)))
        else:
            self._write(("UPDATE cart SET qty = ? WHERE sku = ?", (qty, sku)))

    def add_review(self, sku: str, author: str, rating: int, title: str, body: str) -> None:
        self._write(
            (
                "INSERT INTO reviews (sku, author, rating, title, body, posted) VALUES (?, ?, ?, ?, ?, ?)",
                (sku, author, rating, title, body, TODAY),
            )
        )

    def update_address(self, street: str, city: str, zip_code: str) -> None:
        self._write(("UPDATE customer SET street = ?, city = ?, zip = ? WHERE id = 1", (street, city, zip_code)))

    def place_order(self, method: str, name: str, street: str, city: str, zip_code: str) -> int:
        """Turn the cart into a Pending order; returns its number."""
        number = self.latest_order_number() + 1
        self._write(
            (
                "INSERT INTO orders VALUES (?, ?, 'Pending', ?, ?, ?, ?, ?, ?)",
                (number, TODAY, method, SHIPPING[method], name, street, city, zip_code),
            ),
            (
                "INSERT INTO order_items SELECT ?, c.sku, p.name, p.price, c.qty "
                "FROM cart c JOIN products p ON p.sku = c.sku ORDER BY c.position",
                (number,),
            ),
            ("DELETE FROM cart", ()),
        )
        return number

    def cancel_order(self, number: int) -> bool:
        """Cancel a Pending order; False when it is not pending."""
        with self._lock:
            cursor = self._live.execute(
                "UPDATE orders SET status = 'Canceled' WHERE number = ? AND status = 'Pending'", (number,)
            )
            return cursor.rowcount == 1
