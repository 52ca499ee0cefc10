"""What the shop admin's task templates share: the site's `TASKS` vocabulary, reading the seed data and
the expert's ways through the site."""

from __future__ import annotations

import calendar
import datetime
import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.admin.db import FIRST_DAY, LAST_DAY
from agentgym_envs.webarena.tasks.templates import SiteTasks, Values, click, seed_rows, type_text

SITE = "shopping_admin"
ADMIN = "__SHOPPING_ADMIN__"
START = f"{ADMIN}/"
#: The vocabulary of the site's templates.
TASKS = SiteTasks(SITE, START)
MONTHS = [
    (calendar.month_name[m], f"2024-{m:02d}-01", f"2024-{m:02d}-{calendar.monthrange(2024, m)[1]:02d}")
    for m in range(1, 6)
]


def _ranges() -> list[tuple[str, str]]:
    """The date ranges of report questions: each month, each Monday-to-Sunday week, two quarters."""
    ranges = [(start, end) for _, start, end in MONTHS]
    day = datetime.date.fromisoformat(FIRST_DAY)
    while (day + datetime.timedelta(days=6)).isoformat() <= LAST_DAY:
        ranges.append((day.isoformat(), (day + datetime.timedelta(days=6)).isoformat()))
        day += datetime.timedelta(days=7)
    return [*ranges, ("2024-01-01", "2024-03-31"), ("2024-04-01", "2024-05-31")]


# ---- the expert's ways through the admin -----------------------------------------------------------
def report(title: str, start: str, end: str) -> list[dict[str, Any]]:
    """Open a date-range report (`title` as the reports page links it)."""
    return [
        click("link", "Reports"),
        click("link", title),
        type_text("textbox", "From", start, enter=False),
        type_text("textbox", "To", end, enter=False),
        click("button", "Show Report"),
    ]


def open_order(number: int | str) -> list[dict[str, Any]]:
    return [
        click("link", "Orders"),
        type_text("searchbox", "Search orders by number or customer", str(number)),
        click("link", f"#{number}"),
    ]


def open_product(name: str) -> list[dict[str, Any]]:
    return [
        click("link", "Products"),
        type_text("searchbox", "Search products by name, SKU or category", name),
        click("link", name),
    ]


def open_customer(name: str) -> list[dict[str, Any]]:
    return [
        click("link", "Customers"),
        type_text("searchbox", "Search customers by name, email or city", name),
        click("link", name),
    ]


def open_review(author: str, product: str) -> list[dict[str, Any]]:
    return [
        click("link", "Reviews"),
        type_text("searchbox", "Search reviews by author or product", author),
        click("link", f"Review of {product} by {author}"),
    ]


def open_rule(name: str) -> list[dict[str, Any]]:
    return [click("link", "Promotions"), click("link", name)]


def ranges(_: sqlite3.Connection) -> list[Values]:
    return [{"start": start, "end": end} for start, end in _ranges()]


def customers(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"customer": row["name"], "id": str(row["id"])}
        for row in seed_rows(seed, "SELECT * FROM customers ORDER BY id")
    ]


def products(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return [
        {"product": row["name"], "sku": row["sku"]}
        for row in seed_rows(seed, f"SELECT * FROM products WHERE {where} ORDER BY sku")
    ]


def orders(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return [
        {"number": str(row["number"])} for row in seed_rows(seed, f"SELECT * FROM orders WHERE {where} ORDER BY number")
    ]


def unique_reviews(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    """Reviews as (author, product), for authors whose reviews the review search shows on one page."""
    return [
        {"author": row["author"], "product": row["product"], "id": str(row["id"])}
        for row in seed_rows(
            seed,
            "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.sku = r.sku "
            f"WHERE {where} ORDER BY r.id",
        )
    ]


def rules(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return [
        {"rule": row["name"], "id": str(row["id"])}
        for row in seed_rows(seed, f"SELECT * FROM price_rules WHERE {where} ORDER BY id")
    ]


def _pending_products(seed: sqlite3.Connection, least: int = 1) -> list[Values]:
    return [
        {"product": row["name"], "sku": row["sku"], "pending": str(row["pending"])}
        for row in seed_rows(
            seed,
            "SELECT p.sku, p.name, COUNT(*) AS pending FROM reviews r JOIN products p "
            "ON p.sku = r.sku WHERE r.status = 'Pending' GROUP BY p.sku HAVING pending >= ? "
            "ORDER BY p.sku",
            least,
        )
    ]
