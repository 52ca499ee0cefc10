"""The shop's task templates of information seeking."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from itertools import product as pairs
from typing import Any

from agentgym_envs.webarena.sites.shop.db import PAGE_SIZE, money
from agentgym_envs.webarena.sites.shop.tasks.common import (
    TASKS,
    _categories,
    _category_slug,
    _each_order,
    _each_product,
    _filter_steps,
    _listing,
    _open_order,
    _open_product,
    _orders,
    _price_ranges,
    _product,
    _products,
    _sort_label,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, exact, must_include, seed_rows, stop

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip


def _order(seed: sqlite3.Connection, number: str) -> sqlite3.Row:
    return next(o for o in _orders(seed) if str(o["number"]) == number)


def _reviewed_product(seed: sqlite3.Connection) -> list[Values]:
    return [{"product": p["name"]} for p in _products(seed) if p["review_count"]]


def _product_fact(answer: Callable[[sqlite3.Row], dict[str, Any]]) -> Callable:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        found = _product(seed, values["product"])
        evaluation = answer(found)
        reference = evaluation["reference_answers"]
        said = reference.get("exact_match") or ", ".join(reference.get("must_include", []))
        return TASKS.built([*_open_product(found["name"]), stop(said)], evaluation)

    return build


def _latest_reviewer(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    author = seed_rows(seed, "SELECT author FROM reviews WHERE sku = ? ORDER BY posted DESC, id DESC", found["sku"])[0][
        0
    ]
    return TASKS.built([*_open_product(found["name"]), stop(author)], must_include(author))


def _single_reviews(seed: sqlite3.Connection) -> list[Values]:
    rows = seed_rows(
        seed,
        "SELECT r.author, p.name FROM reviews r JOIN products p ON p.sku = r.sku GROUP BY r.sku, r.author "
        "HAVING COUNT(*) = 1 ORDER BY r.id",
    )
    return [{"author": r[0], "product": r[1]} for r in rows]


def _reviewer_rating(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    rating = seed_rows(seed, "SELECT rating FROM reviews WHERE sku = ? AND author = ?", found["sku"], values["author"])
    answer = str(rating[0][0])
    return TASKS.built([*_open_product(found["name"]), stop(answer)], must_include(answer))


def _cheapest_n(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for category, n in pairs(_categories(seed), (2, 3, 4, 5)):
        prices = [p["price"] for p in _listing(seed, category["slug"], "price_asc")]
        if prices[n - 1] != prices[n]:  # no tie at the cut
            found.append({"n": str(n), "category": category["name"]})
    return found


def _build_cheapest_n(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    slug = _category_slug(seed, values["category"])
    names = [p["name"] for p in _listing(seed, slug, "price_asc")[: int(values["n"])]]
    plan = [click("link", values["category"]), click("link", _sort_label("price_asc")), stop(", ".join(names))]
    return TASKS.built(plan, must_include(*names))


def _cheapest_rated(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for category, stars in pairs(_categories(seed), (3, 4)):
        listed = _listing(seed, category["slug"], "price_asc", rating=stars)
        if len(listed) >= 2 and listed[0]["price"] != listed[1]["price"]:
            found.append({"category": category["name"], "stars": str(stars)})
    return found


def _build_cheapest_rated(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    stars = int(values["stars"])
    name = _listing(seed, _category_slug(seed, values["category"]), "price_asc", rating=stars)[0]["name"]
    plan = [click("link", values["category"]), *_filter_steps(stars=stars), click("link", _sort_label("price_asc"))]
    return TASKS.built([*plan, stop(name)], must_include(name))


def _build_count_in_range(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    low, high = int(values["low"]), int(values["high"])
    count = len(_listing(seed, _category_slug(seed, values["category"]), "name", low * 100, high * 100))
    plan = [click("link", values["category"]), *_filter_steps(low, high), stop(str(count))]
    return TASKS.built(plan, must_include(str(count)))


def _order_fact(answer: Callable[[sqlite3.Connection, sqlite3.Row], tuple[str, dict[str, Any]]]) -> Callable:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        said, evaluation = answer(seed, _order(seed, values["number"]))
        return TASKS.built([*_open_order(seed, values["number"]), stop(said)], evaluation)

    return build


def _order_items(seed: sqlite3.Connection, order: sqlite3.Row) -> tuple[str, dict[str, Any]]:
    names = [r[0] for r in seed_rows(seed, "SELECT name FROM order_items WHERE order_number = ?", order["number"])]
    return ", ".join(names), must_include(*names)


def _month_name(iso: str) -> str:
    year, month = iso[:7].split("-")
    return f"{MONTHS[int(month) - 1]} {year}"


def _order_months(seed: sqlite3.Connection) -> list[Values]:
    return [{"month": m} for m in dict.fromkeys(_month_name(o["placed"]) for o in reversed(_orders(seed)))]


def _build_orders_in_month(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    orders = _orders(seed)
    pages = sorted({i // PAGE_SIZE + 1 for i, o in enumerate(orders) if _month_name(o["placed"]) == values["month"]})
    count = sum(_month_name(o["placed"]) == values["month"] for o in orders)
    plan = [click("link", "My Orders"), *(click("link", f"Page {page}") for page in pages if page > 1)]
    return TASKS.built([*plan, stop(str(count))], must_include(str(count)))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "price",
        "info",
        "What is the price of the {{product}}?",
        _each_product,
        _product_fact(lambda p: exact(money(p["price"]))),
    ),
    TASKS.template(
        "sku", "info", "What is the SKU of the {{product}}?", _each_product, _product_fact(lambda p: exact(p["sku"]))
    ),
    TASKS.template(
        "category_of",
        "info",
        "Which category is the {{product}} in?",
        _each_product,
        _product_fact(lambda p: exact(p["category_name"])),
    ),
    TASKS.template(
        "stock",
        "info",
        "How many units of the {{product}} are in stock?",
        _each_product,
        _product_fact(lambda p: must_include(str(p["stock"]))),
    ),
    TASKS.template(
        "average_rating",
        "info",
        "What is the average rating of the {{product}}, out of 5?",
        _reviewed_product,
        _product_fact(lambda p: must_include(f"{p['rating']:.1f}")),
    ),
    TASKS.template(
        "review_count",
        "info",
        "How many reviews does the {{product}} have?",
        _reviewed_product,
        _product_fact(lambda p: must_include(str(p["review_count"]))),
    ),
    TASKS.template(
        "latest_reviewer",
        "info",
        "Who wrote the most recent review of the {{product}}?",
        _reviewed_product,
        _latest_reviewer,
    ),
    TASKS.template(
        "reviewer_rating",
        "info",
        "How many stars did {{author}} give the {{product}} in their review?",
        _single_reviews,
        _reviewer_rating,
        held_out=True,
    ),
    TASKS.template(
        "cheapest_n",
        "info",
        "What are the {{n}} cheapest products in the {{category}} category?",
        _cheapest_n,
        _build_cheapest_n,
    ),
    TASKS.template(
        "cheapest_rated",
        "info",
        "What is the cheapest product in the {{category}} category with an average rating of {{stars}} stars or more?",
        _cheapest_rated,
        _build_cheapest_rated,
    ),
    TASKS.template(
        "count_in_range",
        "info",
        "How many products in the {{category}} category cost between ${{low}} and ${{high}}?",
        _price_ranges,
        _build_count_in_range,
    ),
    TASKS.template(
        "order_total",
        "info",
        "What is the grand total of my order #{{number}}?",
        _each_order,
        _order_fact(lambda seed, o: (money(o["total"]), exact(money(o["total"])))),
    ),
    TASKS.template(
        "order_items", "info", "Which products did I buy in order #{{number}}?", _each_order, _order_fact(_order_items)
    ),
    TASKS.template(
        "order_status",
        "info",
        "What is the status of my order #{{number}}?",
        _each_order,
        _order_fact(lambda seed, o: (o["status"], exact(o["status"]))),
    ),
    TASKS.template(
        "order_date",
        "info",
        "On which date (YYYY-MM-DD) did I place my order #{{number}}?",
        _each_order,
        _order_fact(lambda seed, o: (o["placed"], must_include(o["placed"]))),
        held_out=True,
    ),
    TASKS.template(
        "orders_in_month", "info", "How many orders did I place in {{month}}?", _order_months, _build_orders_in_month
    ),
]
