"""The shop admin's live data: an in-memory SQLite database on the seed data (`seed`), restorable in a
millisecond, with the queries of the admin's pages and reports.
"""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.admin.seed import (
    FIRST_DAY,
    LAST_DAY,
    STATUSES,
    TODAY,
    money,
    seed_connection,
    seed_rows,
)
from agentgym_envs.webarena.sites.database import SiteDatabase
from agentgym_envs.webarena.sites.refusals import Refused

__all__ = ["FIRST_DAY", "LAST_DAY", "STATUSES", "TODAY", "AdminDB", "money", "seed_connection", "seed_rows"]

PAGE_SIZE = 20


# ---- reports (shared by the pages and the task templates) --------------------------------------
_SALE = "o.status != 'Canceled'"
_TOTAL = "(o.shipping + (SELECT SUM(i.price * i.qty) FROM order_items i WHERE i.order_number = o.number))"


def sales_report(connection: sqlite3.Connection, start: str, end: str) -> dict[str, Any]:
    """Orders placed from `start` to `end` (ISO dates, inclusive): counts, items and sales by month."""
    months = [
        dict(row)
        for row in connection.execute(
            f"SELECT substr(o.placed, 1, 7) AS month, COUNT(*) AS orders, SUM(o.status = 'Canceled') AS canceled, "
            f"SUM(CASE WHEN {_SALE} THEN (SELECT SUM(qty) FROM order_items i WHERE i.order_number = o.number) "
            f"ELSE 0 END) AS units, SUM(CASE WHEN {_SALE} THEN {_TOTAL} ELSE 0 END) AS sales "
            "FROM orders o WHERE o.placed BETWEEN ? AND ? GROUP BY month ORDER BY month",
            (start, end),
        )
    ]
    total = {key: sum(month[key] for month in months) for key in ("orders", "canceled", "units", "sales")}
    return {"months": months, "total": total}


def bestsellers(connection: sqlite3.Connection, start: str, end: str, limit: int = 10) -> list[dict[str, Any]]:
    """Products by units sold in orders (not canceled) placed from `start` to `end`, most first."""
    return [
        dict(row)
        for row in connection.execute(
            "SELECT i.sku, p.name, SUM(i.qty) AS units, SUM(i.qty * i.price) AS revenue FROM order_items i "
            f"JOIN orders o ON o.number = i.order_number JOIN products p ON p.sku = i.sku WHERE {_SALE} "
            "AND o.placed BETWEEN ? AND ? GROUP BY i.sku ORDER BY units DESC, p.name LIMIT ?",
            (start, end, limit),
        )
    ]


def top_customers(connection: sqlite3.Connection, start: str, end: str, limit: int = 10) -> list[dict[str, Any]]:
    """Customers by number of orders (canceled ones included) placed from `start` to `end`, most first."""
    return [
        dict(row)
        for row in connection.execute(
            f"SELECT c.id, c.name, COUNT(*) AS orders, SUM(CASE WHEN {_SALE} THEN {_TOTAL} ELSE 0 END) AS sales "
            "FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.placed BETWEEN ? AND ? "
            "GROUP BY c.id ORDER BY orders DESC, sales DESC, c.name LIMIT ?",
            (start, end, limit),
        )
    ]


def low_stock(connection: sqlite3.Connection, threshold: int) -> list[dict[str, Any]]:
    """Products with at most `threshold` units in stock, fewest first."""
    return [
        dict(row)
        for row in connection.execute(
            "SELECT sku, name, stock, status FROM products WHERE stock <= ? ORDER BY stock, name", (threshold,)
        )
    ]


def customer_summary(connection: sqlite3.Connection, customer_id: int) -> dict[str, Any] | None:
    """A customer with their number of orders and lifetime sales (orders that are not canceled)."""
    row = connection.execute(
        f"SELECT c.*, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS order_count, "
        f"(SELECT COALESCE(SUM({_TOTAL}), 0) FROM orders o WHERE o.customer_id = c.id AND {_SALE}) AS lifetime "
        "FROM customers c WHERE c.id = ?",
        (customer_id,),
    ).fetchone()
    return dict(row) if row else None


def order_total(connection: sqlite3.Connection, number: int) -> int:
    """The grand total of an order, in cents."""
    row = connection.execute(f"SELECT {_TOTAL} FROM orders o WHERE o.number = ?", (number,)).fetchone()
    return int(row[0])


class AdminDB(SiteDatabase):
    """The live database of one admin instance: its queries and changes."""

    seed = staticmethod(seed_connection)

    # ---- reads ----------------------------------------------------------------------------------

    def report(self, function: Any, *args: Any) -> Any:
        """One of the report functions above, on the live data."""
        with self._lock:
            return function(self._live, *args)

    def dashboard(self) -> dict[str, Any]:
        with self._lock:
            totals = dict(
                self._live.execute(
                    f"SELECT (SELECT COALESCE(SUM({_TOTAL}), 0) FROM orders o WHERE {_SALE}) AS sales, "
                    "(SELECT COUNT(*) FROM orders) AS orders, (SELECT COUNT(*) FROM customers) AS customers, "
                    "(SELECT COUNT(*) FROM products) AS products, "
                    "(SELECT COUNT(*) FROM orders WHERE status = 'Pending') AS pending_orders, "
                    "(SELECT COUNT(*) FROM reviews WHERE status = 'Pending') AS pending_reviews"
                ).fetchone()
            )
        totals["latest"] = self.orders("", "", "number_desc")[0][:5]
        return totals

    def _page(self, sql: str, args: tuple, page: int) -> tuple[list[dict[str, Any]], int]:
        """One page of a query's rows and the number of rows in all."""
        with self._lock:
            count = self._live.execute(f"SELECT COUNT(*) FROM ({sql})", args).fetchone()[0]
            rows = self._live.execute(f"{sql} LIMIT ? OFFSET ?", (*args, PAGE_SIZE, (page - 1) * PAGE_SIZE))
            return [dict(row) for row in rows], count

    def orders(self, query: str, status: str, sort: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Orders whose number is `query` or whose customer's name holds it, with `status` (any when '')."""
        where, args = ["1"], []
        if query:
            where.append("(CAST(o.number AS TEXT) = ? OR instr(LOWER(c.name), ?) > 0)")
            args += [query, query.lower()]
        if status:
            where.append("o.status = ?")
            args.append(status)
        return self._page(
            f"SELECT o.*, c.name AS customer, {_TOTAL} AS total FROM orders o JOIN customers c ON c.id = o.customer_id "
            f"WHERE {' AND '.join(where)} ORDER BY {ORDER_SORTS[sort][1]}",
            tuple(args),
            page,
        )

    def order(self, number: int) -> dict[str, Any] | None:
        order = self._row(
            f"SELECT o.*, c.name AS customer, c.email, {_TOTAL} AS total FROM orders o "
            "JOIN customers c ON c.id = o.customer_id WHERE o.number = ?",
            number,
        )
        if order is not None:
            order["items"] = self._rows(
                "SELECT *, price * qty AS subtotal FROM order_items WHERE order_number = ? ORDER BY rowid", number
            )
            order["subtotal"] = sum(item["subtotal"] for item in order["items"])
            order["comments"] = self._rows(
                "SELECT * FROM order_comments WHERE order_number = ? ORDER BY id DESC", number
            )
        return order

    def products(self, query: str, status: str, sort: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Products whose name or SKU holds `query` (case-insensitive), with `status` (any when '')."""
        where, args = ["1"], []
        if query:
            where.append("(instr(LOWER(name), ?) > 0 OR instr(LOWER(sku), ?) > 0 OR LOWER(category) = ?)")
            args += [query.lower()] * 3
        if status:
            where.append("status = ?")
            args.append(status)
        return self._page(
            f"SELECT * FROM products WHERE {' AND '.join(where)} ORDER BY {PRODUCT_SORTS[sort][1]}", tuple(args), page
        )

    def product(self, sku: str) -> dict[str, Any] | None:
        product = self._row("SELECT * FROM products WHERE sku = ?", sku)
        if product is not None:
            counts = self._row(
                "SELECT COUNT(*) AS reviews, COALESCE(SUM(status = 'Pending'), 0) AS pending "
                "FROM reviews WHERE sku = ?",
                sku,
            )
            product.update(counts or {})
        return product

    def reviews(self, query: str, status: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Reviews whose author or product name holds `query`, with `status` (any when ''), newest first."""
        where, args = ["1"], []
        if query:
            where.append("(instr(LOWER(r.author), ?) > 0 OR instr(LOWER(p.name), ?) > 0)")
            args += [query.lower()] * 2
        if status:
            where.append("r.status = ?")
            args.append(status)
        return self._page(
            "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.sku = r.sku "
            f"WHERE {' AND '.join(where)} ORDER BY r.posted DESC, r.id DESC",
            tuple(args),
            page,
        )

    def review(self, review_id: int) -> dict[str, Any] | None:
        return self._row(
            "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.sku = r.sku WHERE r.id = ?", review_id
        )

    def customers(self, query: str, sort: str, page: int = 1) -> tuple[list[dict[str, Any]], int]:
        """Customers whose name, email or city holds `query`."""
        where, args = "1", ()
        if query:
            where = "(instr(LOWER(c.name), ?) > 0 OR instr(LOWER(c.email), ?) > 0 OR LOWER(c.city) = ?)"
            args = (query.lower(),) * 3
        return self._page(
            "SELECT c.*, (SELECT COUNT(*) FROM orders o WHERE o.customer_id = c.id) AS order_count FROM customers c "
            f"WHERE {where} ORDER BY {CUSTOMER_SORTS[sort][1]}",
            args,
            page,
        )

    def customer(self, customer_id: int) -> dict[str, Any] | None:
        with self._lock:
            customer = customer_summary(self._live, customer_id)
        if customer is not None:
            customer["orders"] = self._rows(
                f"SELECT o.*, {_TOTAL} AS total FROM orders o WHERE o.customer_id = ? ORDER BY o.number DESC",
                customer_id,
            )
        return customer

    def rules(self, query: str = "") -> list[dict[str, Any]]:
        """Price rules whose name or coupon code holds `query`."""
        return self._rows(
            "SELECT * FROM price_rules WHERE instr(LOWER(name), ?) > 0 OR instr(LOWER(code), ?) > 0 ORDER BY id",
            query.lower(),
            query.lower(),
        )

    def rule(self, rule_id: int) -> dict[str, Any] | None:
        return self._row("SELECT * FROM price_rules WHERE id = ?", rule_id)

    def pages(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM cms_pages ORDER BY title")

    def cms_page(self, page_id: int) -> dict[str, Any] | None:
        return self._row("SELECT * FROM cms_pages WHERE id = ?", page_id)

    # ---- writes ---------------------------------------------------------------------------------
    def order_action(self, number: int, action: str) -> str:
        """Invoice, ship or cancel an order; the new status, or `Refused` when the order's status does
        not allow it (nothing changes then)."""
        with self._lock:
            row = self._live.execute("SELECT * FROM orders WHERE number = ?", (number,)).fetchone()
            status, invoiced, shipped = row["status"], row["invoiced"], row["shipped"]
            if status in ("Canceled", "Complete"):
                raise Refused(422, f"Order #{number} is {status}; it cannot be changed any more.")
            if action == "cancel":
                if invoiced or shipped:
                    raise Refused(
                        422,
                        f"Order #{number} is already {'invoiced' if invoiced else 'shipped'}; "
                        "only pending orders can be canceled.",
                    )
                status = "Canceled"
            else:
                if invoiced if action == "invoice" else shipped:
                    raise Refused(
                        422,
                        f"Order #{number} is already {action}d."
                        if action == "invoice"
                        else f"Order #{number} is already shipped.",
                    )
                invoiced, shipped = invoiced or action == "invoice", shipped or action == "ship"
                status = "Complete" if invoiced and shipped else "Processing"
            self._live.execute(
                "UPDATE orders SET status = ?, invoiced = ?, shipped = ? WHERE number = ?",
                (status, int(invoiced), int(shipped), number),
            )
            return status

    def add_comment(self, number: int, body: str) -> None:
        self._execute("INSERT INTO order_comments (order_number, posted, body) VALUES (?, ?, ?)", number, TODAY, body)

    def update_product(self, sku: str, price: int, stock: int, status: str, description: str) -> None:
        self._execute(
            "UPDATE products SET price = ?, stock = ?, status = ?, description = ? WHERE sku = ?",
            price,
            stock,
            status,
            description,
            sku,
        )

    def approve_review(self, review_id: int) -> None:
        self._execute("UPDATE reviews SET status = 'Approved' WHERE id = ?", review_id)

    def delete_review(self, review_id: int) -> None:
        self._execute("DELETE FROM reviews WHERE id = ?", review_id)

    def update_customer(self, customer_id: int, email: str, city: str) -> None:
        self._execute("UPDATE customers SET email = ?, city = ? WHERE id = ?", email, city, customer_id)

    def save_rule(self, rule_id: int | None, fields: tuple[str, str, int, str, str, str]) -> int:
        """Create (`rule_id` None) or update a price rule of (name, code, discount, starts, ends, status); its id."""
        if rule_id is None:
            return int(
                self._execute(
                    "INSERT INTO price_rules (name, code, discount, starts, ends, status) VALUES (?, ?, ?, ?, ?, ?)",
                    *fields,
                ).lastrowid
            )
        self._execute(
            "UPDATE price_rules SET name = ?, code = ?, discount = ?, starts = ?, ends = ?, status = ? WHERE id = ?",
            *fields,
            rule_id,
        )
        return rule_id

    def update_page(self, page_id: int, title: str, content: str, status: str) -> None:
        self._execute(
            "UPDATE cms_pages SET title = ?, content = ?, status = ? WHERE id = ?", title, content, status, page_id
        )


ORDER_SORTS = {
    "number_desc": ("Newest first", "o.number DESC"),
    "number_asc": ("Oldest first", "o.number"),
    "total_desc": ("Total: high to low", f"{_TOTAL} DESC, o.number DESC"),
    "total_asc": ("Total: low to high", f"{_TOTAL}, o.number DESC"),
}
PRODUCT_SORTS = {
    "name": ("Name", "name"),
    "price_asc": ("Price: low to high", "price, name"),
    "price_desc": ("Price: high to low", "price DESC, name"),
    "stock_asc": ("Stock: low to high", "stock, name"),
}
CUSTOMER_SORTS = {
    "name": ("Name", "c.name"),
    "orders_desc": ("Most orders", "order_count DESC, c.name"),
    "joined_desc": ("Newest", "c.joined DESC, c.name"),
}
