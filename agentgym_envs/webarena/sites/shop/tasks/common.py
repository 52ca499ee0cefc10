"""What the shop's task templates share: the site's `TASKS` vocabulary, reading the seed data and
the expert's ways through the site."""

from __future__ import annotations

import functools
import sqlite3
from itertools import product as pairs
from typing import Any

from agentgym_envs.webarena.sites.shop.db import PAGE_SIZE, SORTS
from agentgym_envs.webarena.tasks.templates import SiteTasks, Values, click, seed_rows, type_text

SITE = "shopping"
HOME = "__SHOPPING__"
#: The vocabulary of the site's templates.
TASKS = SiteTasks(SITE, HOME)


PRICE_RANGES = ((10, 30), (20, 50), (30, 60), (50, 100), (100, 200))


def _products(seed: sqlite3.Connection, where: str = "1", *args: Any) -> list[sqlite3.Row]:
    """Products with their category name, review count and average rating, by SKU."""
    return seed_rows(
        seed,
        "SELECT p.*, c.name AS category_name, COUNT(r.id) AS review_count, AVG(r.rating) AS rating "
        "FROM products p JOIN categories c ON c.slug = p.category LEFT JOIN reviews r ON r.sku = p.sku "
        f"WHERE {where} GROUP BY p.sku ORDER BY p.sku",
        *args,
    )


def _product(seed: sqlite3.Connection, name: str) -> sqlite3.Row:
    return _products(seed, "p.name = ?", name)[0]


def _categories(seed: sqlite3.Connection) -> list[sqlite3.Row]:
    return seed_rows(seed, "SELECT slug, name FROM categories ORDER BY position")


def _category_slug(seed: sqlite3.Connection, name: str) -> str:
    return seed_rows(seed, "SELECT slug FROM categories WHERE name = ?", name)[0][0]


@functools.lru_cache(maxsize=4)
def _orders(seed: sqlite3.Connection) -> tuple[sqlite3.Row, ...]:
    """Orders newest first (as My Orders lists them), with their grand totals (read once per seed)."""
    return tuple(
        seed_rows(
            seed,
            "SELECT o.*, o.shipping + SUM(i.price * i.qty) AS total FROM orders o "
            "JOIN order_items i ON i.order_number = o.number GROUP BY o.number ORDER BY o.number DESC",
        )
    )


def _listing(seed: sqlite3.Connection, slug: str, sort: str, min_price: int = 0, max_price: int = 10**9,
             rating: int = 0) -> list[sqlite3.Row]:  # fmt: skip
    """A category's products as its page lists them (`ShopDB._products`' order)."""
    order = SORTS[sort][1]
    return seed_rows(
        seed,
        "SELECT p.*, AVG(r.rating) AS rating FROM products p LEFT JOIN reviews r ON r.sku = p.sku "
        "WHERE p.category = ? GROUP BY p.sku HAVING p.price BETWEEN ? AND ? AND COALESCE(AVG(r.rating), 0) >= ? "
        f"ORDER BY {order}",
        slug,
        min_price,
        max_price,
        rating,
    )


# ---- the expert's steps -------------------------------------------------------------------------
def _open_product(name: str) -> list[dict[str, Any]]:
    return [type_text("searchbox", "Search products", name), click("link", name)]


def _order_page(seed: sqlite3.Connection, number: int) -> int:
    numbers = [o["number"] for o in _orders(seed)]
    return numbers.index(number) // PAGE_SIZE + 1


def _open_order(seed: sqlite3.Connection, number: str) -> list[dict[str, Any]]:
    page = _order_page(seed, int(number))
    return [
        click("link", "My Orders"),
        *([click("link", f"Page {page}")] if page > 1 else []),
        click("link", f"#{number}"),
    ]


def _sort_label(sort: str) -> str:
    return SORTS[sort][0]


def _filter_steps(low: int | None = None, high: int | None = None, stars: int = 0) -> list[dict[str, Any]]:
    steps = []
    if low is not None:
        steps.append(type_text("textbox", "Min price", str(low), enter=False))
    if high is not None:
        steps.append(type_text("textbox", "Max price", str(high), enter=False))
    if stars:
        steps.append(type_text("combobox", "Minimum rating", f"{stars} star{'s' if stars != 1 else ''} and up", False))
    return [*steps, click("button", "Apply Filters")]


def _each_product(seed: sqlite3.Connection) -> list[Values]:
    return [{"product": p["name"]} for p in _products(seed)]


def _price_ranges(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for category, (low, high) in pairs(_categories(seed), PRICE_RANGES):
        prices = [p["price"] for p in _listing(seed, category["slug"], "name")]
        inside = [p for p in prices if low * 100 <= p <= high * 100]
        if inside and not {low * 100, high * 100} & set(prices):  # no price on a bound: "between" is clear
            found.append({"category": category["name"], "low": str(low), "high": str(high)})
    return found


def _each_order(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed)]
