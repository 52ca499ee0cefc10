"""The shop admin's task templates of information seeking."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.admin.db import (
    bestsellers,
    customer_summary,
    low_stock,
    money,
    order_total,
    sales_report,
    top_customers,
)
from agentgym_envs.webarena.sites.admin.tasks.common import (
    MONTHS,
    TASKS,
    _pending_products,
    customers,
    open_customer,
    open_order,
    open_product,
    open_review,
    open_rule,
    orders,
    products,
    ranges,
    report,
    rules,
    unique_reviews,
)
from agentgym_envs.webarena.tasks.templates import (
    TaskTemplate,
    Values,
    click,
    exact,
    must_include,
    seed_rows,
    stop,
    type_text,
)


# ---- instances shared by several templates --------------------------------------------------------
def months(_: sqlite3.Connection) -> list[Values]:
    return [{"month": name, "start": start, "end": end} for name, start, end in MONTHS]


def _sales(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    total = money(sales_report(seed, v["start"], v["end"])["total"]["sales"])
    return TASKS.built([*report("Sales Report", v["start"], v["end"]), stop(total)], must_include(total))


def _days(seed: sqlite3.Connection) -> list[Values]:
    return [{"day": row[0]} for row in seed_rows(seed, "SELECT DISTINCT placed FROM orders ORDER BY placed")]


def _orders_on_day(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    count = str(sales_report(seed, v["day"], v["day"])["total"]["orders"])
    return TASKS.built([*report("Sales Report", v["day"], v["day"]), stop(count)], must_include(count))


def _canceled(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    count = str(sales_report(seed, v["start"], v["end"])["total"]["canceled"])
    return TASKS.built([*report("Sales Report", v["start"], v["end"]), stop(count)], must_include(count))


def _units(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    count = str(sales_report(seed, v["start"], v["end"])["total"]["units"])
    return TASKS.built([*report("Sales Report", v["start"], v["end"]), stop(count)], must_include(count))


def _unique_top(rows: list[dict[str, Any]], key: str) -> bool:
    return len(rows) == 1 or (len(rows) > 1 and rows[0][key] > rows[1][key])


def _bestseller_ranges(seed: sqlite3.Connection) -> list[Values]:
    return [v for v in ranges(seed) if _unique_top(bestsellers(seed, v["start"], v["end"], 2), "units")]


def _bestseller(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    name = bestsellers(seed, v["start"], v["end"], 1)[0]["name"]
    return TASKS.built([*report("Bestsellers Report", v["start"], v["end"]), stop(name)], must_include(name))


def _bestseller_units(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    units = str(bestsellers(seed, v["start"], v["end"], 1)[0]["units"])
    return TASKS.built([*report("Bestsellers Report", v["start"], v["end"]), stop(units)], must_include(units))


def _top_customer_ranges(seed: sqlite3.Connection) -> list[Values]:
    return [v for v in ranges(seed) if _unique_top(top_customers(seed, v["start"], v["end"], 2), "orders")]


def _top_customer(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    name = top_customers(seed, v["start"], v["end"], 1)[0]["name"]
    return TASKS.built([*report("Customers by Orders Report", v["start"], v["end"]), stop(name)], must_include(name))


def _customer_fact(field: str, render: Callable[[Any], str]) -> Callable[[sqlite3.Connection, Values], dict]:
    def build(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
        summary = customer_summary(seed, int(v["id"]))
        assert summary is not None
        answer = render(summary[field])
        return TASKS.built([*open_customer(v["customer"]), stop(answer)], must_include(answer))

    return build


def _thresholds(seed: sqlite3.Connection) -> list[Values]:
    return [{"threshold": str(n)} for n in range(0, 16) if low_stock(seed, n)]


def _low_stock(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    count = str(len(low_stock(seed, int(v["threshold"]))))
    plan = [
        click("link", "Reports"),
        click("link", "Low Stock Report"),
        type_text("textbox", "Stock threshold", v["threshold"], enter=False),
        click("button", "Show Report"),
        stop(count),
    ]
    return TASKS.built(plan, must_include(count))


def _product_fact(field: str, render: Callable[[Any], str]) -> Callable[[sqlite3.Connection, Values], dict]:
    def build(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
        answer = render(seed_rows(seed, "SELECT * FROM products WHERE sku = ?", v["sku"])[0][field])
        return TASKS.built([*open_product(v["product"]), stop(answer)], must_include(answer))

    return build


def _order_fact(answer_of: Callable[[sqlite3.Connection, int], str], judge: Callable[[str], dict]) -> Callable:
    def build(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
        answer = answer_of(seed, int(v["number"]))
        return TASKS.built([*open_order(v["number"]), stop(answer)], judge(answer))

    return build


def _review_rating(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    rating = str(seed_rows(seed, "SELECT rating FROM reviews WHERE id = ?", int(v["id"]))[0][0])
    return TASKS.built([*open_review(v["author"], v["product"]), stop(rating)], must_include(rating))


def _pending_reviews(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        click("link", "Reviews"),
        type_text("searchbox", "Search reviews by author or product", v["product"]),
        click("link", "Pending"),
        stop(v["pending"]),
    ]
    return TASKS.built(plan, must_include(v["pending"]))


def _categories(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": row[0], "count": str(row[1])}
        for row in seed_rows(
            seed, "SELECT category, SUM(status = 'Disabled') FROM products GROUP BY category ORDER BY category"
        )
    ]


def _disabled(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        click("link", "Products"),
        type_text("searchbox", "Search products by name, SKU or category", v["category"]),
        click("link", "Disabled"),
        stop(v["count"]),
    ]
    return TASKS.built(plan, must_include(v["count"]))


def _rule_code(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    code = seed_rows(seed, "SELECT code FROM price_rules WHERE id = ?", int(v["id"]))[0][0]
    return TASKS.built([*open_rule(v["rule"]), stop(code)], exact(code))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template("sales_month", "info", "What is the total of sales in {{month}} 2024?", months, _sales),
    TASKS.template("sales_range", "info", "What was the total of sales from {{start}} to {{end}}?", ranges, _sales),
    TASKS.template("orders_on_day", "info", "How many orders were placed on {{day}}?", _days, _orders_on_day),
    TASKS.template(
        "canceled_month", "info", "How many of the orders placed in {{month}} 2024 were canceled?", months, _canceled
    ),
    TASKS.template(
        "units_range", "info", "How many items were sold from {{start}} to {{end}}?", ranges, _units, held_out=True
    ),
    TASKS.template(
        "bestseller",
        "info",
        "Which product sold the most units from {{start}} to {{end}}?",
        _bestseller_ranges,
        _bestseller,
    ),
    TASKS.template(
        "bestseller_units",
        "info",
        "How many units did the bestselling product sell from {{start}} to {{end}}?",
        ranges,
        _bestseller_units,
    ),
    TASKS.template(
        "top_customer",
        "info",
        "Which customer placed the most orders from {{start}} to {{end}}?",
        _top_customer_ranges,
        _top_customer,
    ),
    TASKS.template(
        "customer_orders",
        "info",
        "How many orders has {{customer}} placed?",
        customers,
        _customer_fact("order_count", str),
    ),
    TASKS.template(
        "customer_lifetime",
        "info",
        "What is the lifetime sales amount of {{customer}}?",
        lambda seed: [v for v in customers(seed) if customer_summary(seed, int(v["id"]))["lifetime"]],
        _customer_fact("lifetime", money),
    ),
    TASKS.template(
        "customer_email", "info", "What is the email address of {{customer}}?", customers, _customer_fact("email", str)
    ),
    TASKS.template(
        "low_stock", "info", "How many products have {{threshold}} or fewer units in stock?", _thresholds, _low_stock
    ),
    TASKS.template(
        "product_stock", "info", "How many units of {{product}} are in stock?", products, _product_fact("stock", str)
    ),
    TASKS.template(
        "product_price", "info", "What is the catalog price of {{product}}?", products, _product_fact("price", money)
    ),
    TASKS.template(
        "order_status",
        "info",
        "What is the status of order #{{number}}?",
        orders,
        _order_fact(lambda seed, n: seed_rows(seed, "SELECT status FROM orders WHERE number = ?", n)[0][0], exact),
    ),
    TASKS.template(
        "order_total",
        "info",
        "What is the grand total of order #{{number}}?",
        orders,
        _order_fact(lambda seed, n: money(order_total(seed, n)), must_include),
    ),
    TASKS.template(
        "order_customer",
        "info",
        "Who placed order #{{number}}?",
        orders,
        _order_fact(
            lambda seed, n: seed_rows(
                seed, "SELECT c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.number = ?", n
            )[0][0],
            must_include,
        ),
    ),
    TASKS.template(
        "review_rating", "info", "What rating did {{author}} give to {{product}}?", unique_reviews, _review_rating
    ),
    TASKS.template(
        "pending_reviews",
        "info",
        "How many reviews of {{product}} are waiting for approval?",
        _pending_products,
        _pending_reviews,
        held_out=True,
    ),
    TASKS.template(
        "disabled_in_category",
        "info",
        "How many products in the {{category}} category are disabled?",
        _categories,
        _disabled,
    ),
    TASKS.template("rule_code", "info", "What is the coupon code of the price rule {{rule}}?", rules, _rule_code),
]
