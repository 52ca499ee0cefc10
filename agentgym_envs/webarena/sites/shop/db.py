"""The shop's data: an in-memory SQLite database built from `seed.sql` and `catalog.py`, restorable in a
millisecond."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from importlib import resources
from typing import Any

from agentgym_envs.webarena.sites.database import SiteDatabase
from agentgym_envs.webarena.sites.shop.catalog import populate

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
    "rating": ("Rating: high to low", "rating IS NULL, rating DESC, p.name"),
}
#: Order statuses, in the order of their filter links.
STATUSES = ("pending", "processing", "shipped", "complete", "canceled")
#: Rows per page of every list.
PAGE_SIZE = 20


@dataclass(frozen=True)
class Filters:
    """Filters of a product listing: prices in cents (inclusive), the least average rating (0: any)."""

    min_price: int | None = None
    max_price: int | None = None
    min_rating: int = 0

    def sql(self) -> tuple[str, tuple]:
        """A HAVING clause over the listing's rows, and its arguments."""
        clauses, args = ["1"], []
        if self.min_price is not None:
            clauses.append("p.price >= ?")
            args.append(self.min_price)
        if self.max_price is not None:
            clauses.append("p.price <= ?")
            args.append(self.max_price)
        if self.min_rating:
            clauses.append("AVG(r.rating) >= ?")
            args.append(self.min_rating)
        return " AND ".join(clauses), tuple(args)


def money(cents: int) -> str:
    """`3499` -> `'$34.99'`."""
    return f"${cents // 100:,}.{cents % 100:02d}"


def seed_connection() -> sqlite3.Connection:
    """A new connection on the seed data (rows as `sqlite3.Row`), for task templates to read."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript(resources.files(__package__).joinpath("seed.sql").read_text(encoding="utf-8"))
    populate(connection)
    connection.row_factory = sqlite3.Row
    return connection


class ShopDB(SiteDatabase):
    """The live database of one shop instance: its queries and changes."""

    seed = staticmethod(seed_connection)

    # ---- reads ----------------------------------------------------------------------------------

    def categories(self) -> list[dict[str, Any]]:
        return self._rows("SELECT slug, name FROM categories ORDER BY position")

    def category(self, slug: str) -> dict[str, Any] | None:
        return self._row("SELECT slug, name FROM categories WHERE slug = ?", slug)

    def _products(self, where: str, args: tuple, sort: str, filters: Filters | None = None) -> list[dict[str, Any]]:
        order = SORTS.get(sort, SORTS[""])[1]
        having, more = (filters or Filters()).sql()
        return self._rows(
            "SELECT p.*, c.name AS category_name, COUNT(r.id) AS review_count, AVG(r.rating) AS rating "
            "FROM products p JOIN categories c ON c.slug = p.category LEFT JOIN reviews r ON r.sku = p.sku "
            f"WHERE {where} GROUP BY p.sku HAVING {having} ORDER BY {order}",
            *args,
            *more,
        )

    def search(self, query: str, sort: str = "", filters: Filters | None = None) -> list[dict[str, Any]]:
        """Products whose name or description holds every word of `query` (case-insensitive), that pass
        `filters`.

        Words match literally: `instr`, unlike `LIKE`, gives `%` and `_` no special meaning.
        """
        words = list(dict.fromkeys(query.lower().split()))
        if not words:
            return []
        where = " AND ".join("(instr(LOWER(p.name), ?) > 0 OR instr(LOWER(p.description), ?) > 0)" for _ in words)
        args = tuple(arg for word in words for arg in (word, word))
        return self._products(where, args, sort, filters)

    def in_category(self, slug: str, sort: str = "", filters: Filters | None = None) -> list[dict[str, Any]]:
        return self._products("p.category = ?", (slug,), sort, filters)

    def featured(self) -> list[dict[str, Any]]:
        return self._products("p.sku IN ('OF-4001', 'OU-3001', 'EL-1003', 'KI-2002')", (), "name")

    def product(self, sku: str) -> dict[str, Any] | None:
        found = self._products("p.sku = ?", (sku,), "")
        return found[0] if found else None

    def reviews(self, sku: str) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM reviews WHERE sku = ? ORDER BY posted DESC, id DESC", sku)

    def customer(self) -> dict[str, Any]:
        """The signed-in customer with the fields of the default address."""
        customer = self._row(
            "SELECT c.id, c.name, c.email, c.default_address, a.street, a.city, a.zip "
            "FROM customer c JOIN addresses a ON a.id = c.default_address WHERE c.id = 1"
        )
        assert customer is not None
        return customer

    def addresses(self) -> list[dict[str, Any]]:
        """The address book, the default address first."""
        return self._rows(
            "SELECT a.*, a.id = c.default_address AS is_default FROM addresses a JOIN customer c "
            "ORDER BY is_default DESC, a.id"
        )

    def address(self, address_id: int) -> dict[str, Any] | None:
        return self._row("SELECT * FROM addresses WHERE id = ?", address_id)

    def wishlist(self) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT w.sku, w.added, p.name, p.price FROM wishlist w JOIN products p ON p.sku = w.sku "
            "ORDER BY w.position"
        )

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
        """Change the street, city and ZIP code of the default address."""
        self._write(
            (
                "UPDATE addresses SET street = ?, city = ?, zip = ? "
                "WHERE id = (SELECT default_address FROM customer WHERE id = 1)",
                (street, city, zip_code),
            )
        )

    def update_account(self, name: str, email: str) -> None:
        self._write(("UPDATE customer SET name = ?, email = ? WHERE id = 1", (name, email)))

    def add_address(self, name: str, street: str, city: str, zip_code: str) -> int:
        """A new address book entry; returns its id."""
        cursor = self._execute(
            "INSERT INTO addresses (name, street, city, zip) VALUES (?, ?, ?, ?)", name, street, city, zip_code
        )
        return int(cursor.lastrowid)

    def edit_address(self, address_id: int, name: str, street: str, city: str, zip_code: str) -> None:
        self._write(
            (
                "UPDATE addresses SET name = ?, street = ?, city = ?, zip = ? WHERE id = ?",
                (name, street, city, zip_code, address_id),
            )
        )

    def delete_address(self, address_id: int) -> bool:
        """Delete an address that is not the default one; False when it is the default."""
        cursor = self._execute(
            "DELETE FROM addresses WHERE id = ? AND id != (SELECT default_address FROM customer WHERE id = 1)",
            address_id,
        )
        return cursor.rowcount == 1

    def set_default_address(self, address_id: int) -> None:
        self._write(("UPDATE customer SET default_address = ? WHERE id = 1", (address_id,)))

    def add_to_wishlist(self, sku: str) -> None:
        self._write(
            (
                "INSERT INTO wishlist VALUES (?, ?, (SELECT COALESCE(MAX(position), 0) + 1 FROM wishlist)) "
                "ON CONFLICT(sku) DO NOTHING",
                (sku, TODAY),
            )
        )

    def remove_from_wishlist(self, sku: str) -> None:
        self._write(("DELETE FROM wishlist WHERE sku = ?", (sku,)))

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
        cursor = self._execute("UPDATE orders SET status = 'Canceled' WHERE number = ? AND status = 'Pending'", number)
        return cursor.rowcount == 1
