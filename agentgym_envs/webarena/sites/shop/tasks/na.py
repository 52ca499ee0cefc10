"""The shop's task templates of unachievable tasks."""

from __future__ import annotations

import sqlite3
from itertools import product as pairs
from typing import Any

from agentgym_envs.webarena.sites.shop.catalog import CATEGORIES
from agentgym_envs.webarena.sites.shop.tasks.common import TASKS, _open_order, _orders
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, fixed, not_achievable, stop, type_text

COUPONS = ("SAVE10", "SPRING24", "WELCOME5", "FREESHIP", "VIP20", "BLACKFRIDAY", "SUMMER15", "LOYAL30")
ACCOUNT_FIELDS = ("phone number", "date of birth", "loyalty points balance", "membership level")


def _unsold(seed: sqlite3.Connection) -> list[Values]:
    """Brand and noun of two different categories: a name the shop does not sell, nor any search finds."""
    found = []
    groups = list(CATEGORIES.values())
    for i, (_, brands, _, _) in enumerate(groups):
        _, _, nouns, _ = groups[(i + 1) % len(groups)]
        found += [{"product": f"{brand} {noun}"} for brand, noun in pairs(brands, nouns)]
    return found


def _build_unsold(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([type_text("searchbox", "Search products", values["product"]), stop("N/A")], not_achievable())


def _closed_orders(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed) if o["status"] == "Complete"]


def _in_transit(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed) if o["status"] in ("Shipped", "Processing")]


def _build_order_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([*_open_order(seed, values["number"]), stop("N/A")], not_achievable())


def _build_account_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([click("link", "My Account"), stop("N/A")], not_achievable())


def _build_coupon_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([click("link", "Cart (1)"), click("link", "Proceed to Checkout"), stop("N/A")], not_achievable())


TEMPLATES: list[TaskTemplate] = [
    TASKS.template("unsold_price", "na", "What is the price of the {{product}}?", _unsold, _build_unsold),
    TASKS.template("cancel_closed_order", "na", "Cancel my order #{{number}}.", _closed_orders, _build_order_na),
    TASKS.template(
        "delivery_date",
        "na",
        "On which day will my order #{{number}} be delivered?",
        _in_transit,
        _build_order_na,
        held_out=True,
    ),
    TASKS.template(
        "account_field", "na", "What is the {{field}} on my account?", fixed("field", ACCOUNT_FIELDS), _build_account_na
    ),
    TASKS.template(
        "coupon", "na", "Apply the coupon code {{code}} to my order.", fixed("code", COUPONS), _build_coupon_na
    ),
]
