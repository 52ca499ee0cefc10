"""The shop's task templates of navigation."""

from __future__ import annotations

import sqlite3
from itertools import product as pairs
from typing import Any
from urllib.parse import urlencode

from agentgym_envs.webarena.sites.shop.catalog import ADJECTIVES, CATEGORIES
from agentgym_envs.webarena.sites.shop.db import STATUSES
from agentgym_envs.webarena.sites.shop.tasks.common import (
    HOME,
    TASKS,
    _categories,
    _category_slug,
    _each_order,
    _each_product,
    _filter_steps,
    _listing,
    _open_order,
    _open_product,
    _price_ranges,
    _product,
    _products,
    _sort_label,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, fixed, stop, type_text, url

#: Sort phrases of intents -> the sort key in the URL (and its link's label in `SORTS`).
SORT_PHRASES = {
    "price from low to high": "price_asc",
    "price from high to low": "price_desc",
    "name": "name",
    "rating from high to low": "rating",
}


def _nouns() -> list[str]:
    return [noun.lower() for _, _, nouns, _ in CATEGORIES.values() for noun in nouns]


def _shop_url(path: str, **query: str) -> str:
    return f"{HOME}{path}" + (f"?{urlencode(query)}" if query else "")


def _build_search(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [type_text("searchbox", "Search products", values["query"]), stop()]
    return TASKS.built(plan, url(_shop_url("/search", q=values["query"])))


def _build_search_sorted(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    sort = SORT_PHRASES[values["order"]]
    plan = [type_text("searchbox", "Search products", values["query"]), click("link", _sort_label(sort)), stop()]
    return TASKS.built(plan, url(_shop_url("/search", q=values["query"], sort=sort)))


def _category_orders(seed: sqlite3.Connection) -> list[Values]:
    return [{"category": c["name"], "order": o} for c, o in pairs(_categories(seed), SORT_PHRASES)]


def _build_category_sorted(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    sort = SORT_PHRASES[values["order"]]
    plan = [click("link", values["category"]), click("link", _sort_label(sort)), stop()]
    return TASKS.built(plan, url(_shop_url(f"/category/{_category_slug(seed, values['category'])}", sort=sort)))


def _build_category_range(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    low, high = values["low"], values["high"]
    plan = [click("link", values["category"]), *_filter_steps(int(low), int(high)), stop()]
    path = f"/category/{_category_slug(seed, values['category'])}"
    return TASKS.built(plan, url(_shop_url(path, min_price=low, max_price=high)))


def _category_stars(seed: sqlite3.Connection) -> list[Values]:
    return [{"category": c["name"], "stars": str(s)} for c, s in pairs(_categories(seed), (2, 3, 4))]


def _build_category_rating(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [click("link", values["category"]), *_filter_steps(stars=int(values["stars"])), stop()]
    path = f"/category/{_category_slug(seed, values['category'])}"
    return TASKS.built(plan, url(_shop_url(path, rating=values["stars"])))


def _word_categories(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for word, category in pairs(ADJECTIVES, _categories(seed)):
        hit = _products(seed, "p.category = ? AND instr(LOWER(p.description), ?) > 0", category["slug"], word.lower())
        if hit:
            found.append({"query": word.lower(), "category": category["name"]})
    return found


def _build_search_in_category(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [
        type_text("searchbox", "Search products", values["query"]),
        type_text("combobox", "Category", values["category"], enter=False),
        click("button", "Apply Filters"),
        stop(),
    ]
    slug = _category_slug(seed, values["category"])
    return TASKS.built(plan, url(_shop_url("/search", q=values["query"], category=slug)))


def _build_product_page(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    return TASKS.built([*_open_product(found["name"]), stop()], url(_shop_url(f"/product/{found['sku']}")))


def _build_order_page(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([*_open_order(seed, values["number"]), stop()], url(_shop_url(f"/orders/{values['number']}")))


def _build_orders_by_status(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [click("link", "My Orders"), click("link", values["status"].capitalize()), stop()]
    return TASKS.built(plan, url(_shop_url("/orders", status=values["status"])))


def _extremes(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for which, category in pairs(("cheapest", "most expensive"), _categories(seed)):
        listed = _listing(seed, category["slug"], "price_asc" if which == "cheapest" else "price_desc")
        if listed[0]["price"] != listed[1]["price"]:
            found.append({"which": which, "category": category["name"]})
    return found


def _build_extreme_page(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    sort = "price_asc" if values["which"] == "cheapest" else "price_desc"
    first = _listing(seed, _category_slug(seed, values["category"]), sort)[0]
    plan = [click("link", values["category"]), click("link", _sort_label(sort)), click("link", first["name"]), stop()]
    return TASKS.built(plan, url(_shop_url(f"/product/{first['sku']}")))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "search",
        "nav",
        "Search the shop for '{{query}}'.",
        lambda seed: [{"query": n} for n in _nouns()],
        _build_search,
    ),
    TASKS.template(
        "search_sorted",
        "nav",
        "Show me the search results for '{{query}}' sorted by {{order}}.",
        lambda seed: [{"query": n, "order": o} for n, o in pairs(_nouns(), SORT_PHRASES)],
        _build_search_sorted,
    ),
    TASKS.template(
        "category_sorted",
        "nav",
        "Show me the {{category}} products sorted by {{order}}.",
        _category_orders,
        _build_category_sorted,
    ),
    TASKS.template(
        "category_price_range",
        "nav",
        "Show me the {{category}} products that cost between ${{low}} and ${{high}}.",
        _price_ranges,
        _build_category_range,
    ),
    TASKS.template(
        "category_rating",
        "nav",
        "Show me the {{category}} products rated {{stars}} stars and up.",
        _category_stars,
        _build_category_rating,
        held_out=True,
    ),
    TASKS.template(
        "search_in_category",
        "nav",
        "Search for '{{query}}' in the {{category}} category only.",
        _word_categories,
        _build_search_in_category,
    ),
    TASKS.template(
        "product_page", "nav", "Open the product page of the {{product}}.", _each_product, _build_product_page
    ),
    TASKS.template("order_page", "nav", "Open the page of my order #{{number}}.", _each_order, _build_order_page),
    TASKS.template(
        "orders_by_status",
        "nav",
        "Show me the list of my {{status}} orders.",
        fixed("status", STATUSES),
        _build_orders_by_status,
    ),
    TASKS.template(
        "extreme_product_page",
        "nav",
        "Open the product page of the {{which}} product in the {{category}} category.",
        _extremes,
        _build_extreme_page,
    ),
]
