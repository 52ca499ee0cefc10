"""Task templates of the shop admin (WebArena site `shopping_admin`), in WebArena's proportions for
the admin (about 45% information seeking, 2% navigation, 50% state changes, 3% unachievable).

Answers come from the seed data by SQL (the report queries are the ones the pages show); state
changes are checked by `program_html` on the page that shows the record. Every expert plan starts on
the dashboard and goes through the admin's menu, search boxes, links, forms and buttons.
"""

from __future__ import annotations

import calendar
import datetime
import sqlite3
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.admin.db import (
    FIRST_DAY,
    LAST_DAY,
    bestsellers,
    customer_summary,
    low_stock,
    money,
    order_total,
    sales_report,
    top_customers,
)
from agentgym_envs.webarena.tasks.templates import (
    TaskTemplate,
    Values,
    check,
    click,
    exact,
    must_include,
    not_achievable,
    program,
    stop,
    type_text,
    url,
)

SITE = "shopping_admin"
ADMIN = "__SHOPPING_ADMIN__"
START = f"{ADMIN}/"
MONTHS = [
    (calendar.month_name[m], f"2024-{m:02d}-01", f"2024-{m:02d}-{calendar.monthrange(2024, m)[1]:02d}")
    for m in range(1, 6)
]
COMMENTS = (
    "Customer asked to leave the parcel at the door.",
    "Refund approved by the manager.",
    "Customer called about the delivery date.",
    "Gift message added on request.",
    "Address confirmed by email.",
    "Priority handling requested.",
)
DESCRIPTIONS = (
    "Now with a two-year warranty.",
    "Limited edition, while stocks last.",
    "Best seller of the season.",
    "Made from recycled materials.",
)
NEW_RULES = (
    ("Autumn Savings", "AUTUMN"),
    ("Winter Warmup", "WINTER"),
    ("Mega Monday", "MEGA"),
    ("Family Bundle", "FAMILY"),
    ("Early Bird", "EARLY"),
    ("Night Owl", "OWL"),
)
NEW_TITLES = ("Help Center", "Our Story", "Delivery Information", "Legal Notice")
NEW_CONTENT = (
    "We are open every day from 9 to 5.",
    "Questions? Write to help@example.com.",
    "This page is being updated.",
)
CITIES = ("Raleigh", "Madison", "Boise", "Reno", "Fresno")
_TEXT = "document.querySelector('{}').outerText"


def _ranges() -> list[tuple[str, str]]:
    """The date ranges of report questions: each month, each Monday-to-Sunday week, two quarters."""
    ranges = [(start, end) for _, start, end in MONTHS]
    day = datetime.date.fromisoformat(FIRST_DAY)
    while (day + datetime.timedelta(days=6)).isoformat() <= LAST_DAY:
        ranges.append((day.isoformat(), (day + datetime.timedelta(days=6)).isoformat()))
        day += datetime.timedelta(days=7)
    return [*ranges, ("2024-01-01", "2024-03-31"), ("2024-04-01", "2024-05-31")]


def _text(element: str) -> str:
    """A locator for the visible text of the element with this CSS selector."""
    return _TEXT.format(element)


def _rows(seed: sqlite3.Connection, sql: str, *args: Any) -> list[sqlite3.Row]:
    return seed.execute(sql, args).fetchall()


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


def open_page(title: str) -> list[dict[str, Any]]:
    return [click("link", "Content"), click("link", title)]


def _built(plan: list[dict[str, Any]], evaluation: dict[str, Any]) -> dict[str, Any]:
    return {"start_url": START, "eval": evaluation, "agentgym_expert": plan}


TEMPLATES: list[TaskTemplate] = []


def define(
    slug: str,
    kind: str,
    intent: str,
    instances: Callable[[sqlite3.Connection], list[Values]],
    build: Callable[[sqlite3.Connection, Values], dict[str, Any]],
    held_out: bool = False,
) -> None:
    """Add one template to `TEMPLATES`."""
    TEMPLATES.append(TaskTemplate(f"{SITE}.{slug}", SITE, kind, intent, instances, build, held_out))


# ---- instances shared by several templates --------------------------------------------------------
def months(_: sqlite3.Connection) -> list[Values]:
    return [{"month": name, "start": start, "end": end} for name, start, end in MONTHS]


def ranges(_: sqlite3.Connection) -> list[Values]:
    return [{"start": start, "end": end} for start, end in _ranges()]


def customers(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"customer": row["name"], "id": str(row["id"])} for row in _rows(seed, "SELECT * FROM customers ORDER BY id")
    ]


def products(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return [
        {"product": row["name"], "sku": row["sku"]}
        for row in _rows(seed, f"SELECT * FROM products WHERE {where} ORDER BY sku")
    ]


def orders(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return [
        {"number": str(row["number"])} for row in _rows(seed, f"SELECT * FROM orders WHERE {where} ORDER BY number")
    ]


def unique_reviews(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    """Reviews as (author, product), for authors whose reviews the review search shows on one page."""
    return [
        {"author": row["author"], "product": row["product"], "id": str(row["id"])}
        for row in _rows(
            seed,
            "SELECT r.*, p.name AS product FROM reviews r JOIN products p ON p.sku = r.sku "
            f"WHERE {where} ORDER BY r.id",
        )
    ]


def rules(seed: sqlite3.Connection, where: str = "1") -> list[Values]:
    return [
        {"rule": row["name"], "id": str(row["id"])}
        for row in _rows(seed, f"SELECT * FROM price_rules WHERE {where} ORDER BY id")
    ]


def pages(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"page": row["title"], "id": str(row["id"]), "status": row["status"]}
        for row in _rows(seed, "SELECT * FROM cms_pages ORDER BY id")
    ]


# ---- information seeking --------------------------------------------------------------------------
def _sales(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    total = money(sales_report(seed, v["start"], v["end"])["total"]["sales"])
    return _built([*report("Sales Report", v["start"], v["end"]), stop(total)], must_include(total))


define("sales_month", "info", "What is the total of sales in {{month}} 2024?", months, _sales)
define("sales_range", "info", "What was the total of sales from {{start}} to {{end}}?", ranges, _sales)


def _days(seed: sqlite3.Connection) -> list[Values]:
    return [{"day": row[0]} for row in _rows(seed, "SELECT DISTINCT placed FROM orders ORDER BY placed")]


def _orders_on_day(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    count = str(sales_report(seed, v["day"], v["day"])["total"]["orders"])
    return _built([*report("Sales Report", v["day"], v["day"]), stop(count)], must_include(count))


define("orders_on_day", "info", "How many orders were placed on {{day}}?", _days, _orders_on_day)


def _canceled(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    count = str(sales_report(seed, v["start"], v["end"])["total"]["canceled"])
    return _built([*report("Sales Report", v["start"], v["end"]), stop(count)], must_include(count))


define("canceled_month", "info", "How many of the orders placed in {{month}} 2024 were canceled?", months, _canceled)


def _units(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    count = str(sales_report(seed, v["start"], v["end"])["total"]["units"])
    return _built([*report("Sales Report", v["start"], v["end"]), stop(count)], must_include(count))


define("units_range", "info", "How many items were sold from {{start}} to {{end}}?", ranges, _units, held_out=True)


def _unique_top(rows: list[dict[str, Any]], key: str) -> bool:
    return len(rows) == 1 or (len(rows) > 1 and rows[0][key] > rows[1][key])


def _bestseller_ranges(seed: sqlite3.Connection) -> list[Values]:
    return [v for v in ranges(seed) if _unique_top(bestsellers(seed, v["start"], v["end"], 2), "units")]


def _bestseller(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    name = bestsellers(seed, v["start"], v["end"], 1)[0]["name"]
    return _built([*report("Bestsellers Report", v["start"], v["end"]), stop(name)], must_include(name))


define(
    "bestseller",
    "info",
    "Which product sold the most units from {{start}} to {{end}}?",
    _bestseller_ranges,
    _bestseller,
)


def _bestseller_units(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    units = str(bestsellers(seed, v["start"], v["end"], 1)[0]["units"])
    return _built([*report("Bestsellers Report", v["start"], v["end"]), stop(units)], must_include(units))


define(
    "bestseller_units",
    "info",
    "How many units did the bestselling product sell from {{start}} to {{end}}?",
    ranges,
    _bestseller_units,
)


def _top_customer_ranges(seed: sqlite3.Connection) -> list[Values]:
    return [v for v in ranges(seed) if _unique_top(top_customers(seed, v["start"], v["end"], 2), "orders")]


def _top_customer(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    name = top_customers(seed, v["start"], v["end"], 1)[0]["name"]
    return _built([*report("Customers by Orders Report", v["start"], v["end"]), stop(name)], must_include(name))


define(
    "top_customer",
    "info",
    "Which customer placed the most orders from {{start}} to {{end}}?",
    _top_customer_ranges,
    _top_customer,
)


def _customer_fact(field: str, render: Callable[[Any], str]) -> Callable[[sqlite3.Connection, Values], dict]:
    def build(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
        summary = customer_summary(seed, int(v["id"]))
        assert summary is not None
        answer = render(summary[field])
        return _built([*open_customer(v["customer"]), stop(answer)], must_include(answer))

    return build


define(
    "customer_orders", "info", "How many orders has {{customer}} placed?", customers, _customer_fact("order_count", str)
)
define(
    "customer_lifetime",
    "info",
    "What is the lifetime sales amount of {{customer}}?",
    lambda seed: [v for v in customers(seed) if customer_summary(seed, int(v["id"]))["lifetime"]],
    _customer_fact("lifetime", money),
)
define("customer_email", "info", "What is the email address of {{customer}}?", customers, _customer_fact("email", str))


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
    return _built(plan, must_include(count))


define("low_stock", "info", "How many products have {{threshold}} or fewer units in stock?", _thresholds, _low_stock)


def _product_fact(field: str, render: Callable[[Any], str]) -> Callable[[sqlite3.Connection, Values], dict]:
    def build(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
        answer = render(_rows(seed, "SELECT * FROM products WHERE sku = ?", v["sku"])[0][field])
        return _built([*open_product(v["product"]), stop(answer)], must_include(answer))

    return build


define("product_stock", "info", "How many units of {{product}} are in stock?", products, _product_fact("stock", str))
define("product_price", "info", "What is the catalog price of {{product}}?", products, _product_fact("price", money))


def _order_fact(answer_of: Callable[[sqlite3.Connection, int], str], judge: Callable[[str], dict]) -> Callable:
    def build(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
        answer = answer_of(seed, int(v["number"]))
        return _built([*open_order(v["number"]), stop(answer)], judge(answer))

    return build


define(
    "order_status",
    "info",
    "What is the status of order #{{number}}?",
    orders,
    _order_fact(lambda seed, n: _rows(seed, "SELECT status FROM orders WHERE number = ?", n)[0][0], exact),
)
define(
    "order_total",
    "info",
    "What is the grand total of order #{{number}}?",
    orders,
    _order_fact(lambda seed, n: money(order_total(seed, n)), must_include),
)
define(
    "order_customer",
    "info",
    "Who placed order #{{number}}?",
    orders,
    _order_fact(
        lambda seed, n: _rows(
            seed, "SELECT c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.number = ?", n
        )[0][0],
        must_include,
    ),
)


def _review_rating(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    rating = str(_rows(seed, "SELECT rating FROM reviews WHERE id = ?", int(v["id"]))[0][0])
    return _built([*open_review(v["author"], v["product"]), stop(rating)], must_include(rating))


define("review_rating", "info", "What rating did {{author}} give to {{product}}?", unique_reviews, _review_rating)


def _pending_products(seed: sqlite3.Connection, least: int = 1) -> list[Values]:
    return [
        {"product": row["name"], "sku": row["sku"], "pending": str(row["pending"])}
        for row in _rows(
            seed,
            "SELECT p.sku, p.name, COUNT(*) AS pending FROM reviews r JOIN products p "
            "ON p.sku = r.sku WHERE r.status = 'Pending' GROUP BY p.sku HAVING pending >= ? "
            "ORDER BY p.sku",
            least,
        )
    ]


def _pending_reviews(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        click("link", "Reviews"),
        type_text("searchbox", "Search reviews by author or product", v["product"]),
        click("link", "Pending"),
        stop(v["pending"]),
    ]
    return _built(plan, must_include(v["pending"]))


define(
    "pending_reviews",
    "info",
    "How many reviews of {{product}} are waiting for approval?",
    _pending_products,
    _pending_reviews,
    held_out=True,
)


def _categories(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": row[0], "count": str(row[1])}
        for row in _rows(
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
    return _built(plan, must_include(v["count"]))


define(
    "disabled_in_category",
    "info",
    "How many products in the {{category}} category are disabled?",
    _categories,
    _disabled,
)


def _rule_code(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    code = _rows(seed, "SELECT code FROM price_rules WHERE id = ?", int(v["id"]))[0][0]
    return _built([*open_rule(v["rule"]), stop(code)], exact(code))


define("rule_code", "info", "What is the coupon code of the price rule {{rule}}?", rules, _rule_code)


# ---- navigation -----------------------------------------------------------------------------------
def _bestsellers_page(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    reference = f"{ADMIN}/reports/bestsellers?from={v['start']}&to={v['end']}"
    return _built([*report("Bestsellers Report", v["start"], v["end"]), stop()], url(reference))


define(
    "bestsellers_page", "nav", "Show me the bestsellers report from {{start}} to {{end}}.", ranges, _bestsellers_page
)


# ---- state changes --------------------------------------------------------------------------------
def _order_check(number: str, element: str, value: str) -> dict[str, Any]:
    return check(f"{ADMIN}/orders/{number}", _text(element), exact_match=value)


def _comments_check(number: str, comment: str) -> dict[str, Any]:
    return check(f"{ADMIN}/orders/{number}", _text("#comments"), must=[comment])


def _cancel(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_order(v["number"]), click("button", "Cancel Order"), stop()]
    return _built(plan, program(_order_check(v["number"], "#status", "Canceled")))


define("cancel_order", "state", "Cancel order #{{number}}.", lambda seed: orders(seed, "status = 'Pending'"), _cancel)


def _invoice(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_order(v["number"]), click("button", "Invoice"), stop()]
    return _built(plan, program(_order_check(v["number"], "#invoiced", "Yes")))


define(
    "invoice_order",
    "state",
    "Invoice order #{{number}}.",
    lambda seed: orders(seed, "invoiced = 0 AND status = 'Pending'"),
    _invoice,
)


def _ship(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_order(v["number"]), click("button", "Ship"), stop()]
    checks = [_order_check(v["number"], "#shipped", "Yes"), _order_check(v["number"], "#status", "Complete")]
    return _built(plan, program(*checks))


define(
    "ship_order",
    "state",
    "Ship order #{{number}}; it is already invoiced.",
    lambda seed: orders(seed, "status = 'Processing' AND invoiced = 1 AND shipped = 0"),
    _ship,
)


def _with_comments(found: list[Values]) -> list[Values]:
    return [{**v, "comment": COMMENTS[int(v["number"]) % len(COMMENTS)]} for v in found]


def _comment(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        *open_order(v["number"]),
        type_text("textbox", "Comment", v["comment"], enter=False),
        click("button", "Submit Comment"),
        stop(),
    ]
    return _built(plan, program(_comments_check(v["number"], v["comment"])))


define(
    "comment_order",
    "state",
    'Add the comment "{{comment}}" to order #{{number}}.',
    lambda seed: _with_comments(orders(seed, "number % 5 = 0")),
    _comment,
)


def _cancel_with_comment(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        *open_order(v["number"]),
        click("button", "Cancel Order"),
        type_text("textbox", "Comment", v["comment"], enter=False),
        click("button", "Submit Comment"),
        stop(),
    ]
    checks = [_order_check(v["number"], "#status", "Canceled"), _comments_check(v["number"], v["comment"])]
    return _built(plan, program(*checks))


define(
    "cancel_with_comment",
    "state",
    'Cancel order #{{number}} and add the comment "{{comment}}" to it.',
    lambda seed: _with_comments(orders(seed, "status = 'Pending'")),
    _cancel_with_comment,
)


def _single_pending(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"customer": row["name"], "number": str(row["number"])}
        for row in _rows(
            seed,
            "SELECT c.name, MIN(o.number) AS number FROM orders o JOIN customers c "
            "ON c.id = o.customer_id WHERE o.status = 'Pending' GROUP BY c.id "
            "HAVING COUNT(*) = 1 ORDER BY c.id",
        )
    ]


def _cancel_customer_order(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_customer(v["customer"]), click("link", f"#{v['number']}"), click("button", "Cancel Order"), stop()]
    return _built(plan, program(_order_check(v["number"], "#status", "Canceled")))


define(
    "cancel_customer_order",
    "state",
    "Cancel the pending order of {{customer}}.",
    _single_pending,
    _cancel_customer_order,
)


def _product_check(sku: str, element: str, value: str) -> dict[str, Any]:
    return check(f"{ADMIN}/products/{sku}", _text(element), exact_match=value)


def _edit_product(field: str, value: str, sku: str, name: str, check_value: str, element: str) -> dict[str, Any]:
    plan = [
        *open_product(name),
        type_text("combobox" if field == "Status" else "textbox", field, value, enter=False),
        click("button", "Save Product"),
        stop(),
    ]
    return _built(plan, program(_product_check(sku, element, check_value)))


def _new_prices(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for n, row in enumerate(_rows(seed, "SELECT * FROM products ORDER BY sku")):
        cents = row["price"] + (n % 7 + 1) * 100 if n % 2 else max(99, row["price"] - (n % 5 + 1) * 100)
        found.append({"product": row["name"], "sku": row["sku"], "price": money(cents)})
    return found


define(
    "product_price_set",
    "state",
    "Change the price of {{product}} to {{price}}.",
    _new_prices,
    lambda seed, v: _edit_product(
        "Price", v["price"].lstrip("$").replace(",", ""), v["sku"], v["product"], v["price"], "#price"
    ),
)


def _new_stock(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"product": row["name"], "sku": row["sku"], "stock": str(row["stock"] + 25 + n % 50)}
        for n, row in enumerate(_rows(seed, "SELECT * FROM products ORDER BY sku"))
    ]


define(
    "product_stock_set",
    "state",
    "Set the stock of {{product}} to {{stock}} units.",
    _new_stock,
    lambda seed, v: _edit_product("Stock", v["stock"], v["sku"], v["product"], v["stock"], "#stock"),
)
define(
    "disable_product",
    "state",
    "Disable the product {{product}}.",
    lambda seed: products(seed, "status = 'Enabled'"),
    lambda seed, v: _edit_product("Status", "Disabled", v["sku"], v["product"], "Disabled", "#status"),
)
define(
    "enable_product",
    "state",
    "Enable the product {{product}}.",
    lambda seed: products(seed, "status = 'Disabled'"),
    lambda seed, v: _edit_product("Status", "Enabled", v["sku"], v["product"], "Enabled", "#status"),
)


def _new_descriptions(seed: sqlite3.Connection) -> list[Values]:
    return [{**v, "description": DESCRIPTIONS[n % len(DESCRIPTIONS)]} for n, v in enumerate(products(seed))]


define(
    "product_description",
    "state",
    'Change the description of {{product}} to "{{description}}"',
    _new_descriptions,
    lambda seed, v: _edit_product(
        "Description", v["description"], v["sku"], v["product"], v["description"], "#description"
    ),
)


def _reductions(seed: sqlite3.Connection) -> list[Values]:
    return [
        {
            "product": row["name"],
            "sku": row["sku"],
            "amount": money((n % 4 + 1) * 100),
            "price": money(row["price"] - (n % 4 + 1) * 100),
        }
        for n, row in enumerate(_rows(seed, "SELECT * FROM products WHERE price > 1000 ORDER BY sku"))
    ]


define(
    "product_price_reduce",
    "state",
    "Reduce the price of {{product}} by {{amount}}.",
    _reductions,
    lambda seed, v: _edit_product(
        "Price", v["price"].lstrip("$").replace(",", ""), v["sku"], v["product"], v["price"], "#price"
    ),
    held_out=True,
)


def _review_check(review_id: str, value: str, element: str = "#status") -> dict[str, Any]:
    return check(f"{ADMIN}/reviews/{review_id}", _text(element), exact_match=value)


define(
    "approve_review",
    "state",
    "Approve the review by {{author}} of {{product}}.",
    lambda seed: unique_reviews(seed, "r.status = 'Pending'"),
    lambda seed, v: _built(
        [*open_review(v["author"], v["product"]), click("button", "Approve Review"), stop()],
        program(_review_check(v["id"], "Approved")),
    ),
)
define(
    "delete_review",
    "state",
    "Delete the review by {{author}} of {{product}}.",
    unique_reviews,
    lambda seed, v: _built(
        [*open_review(v["author"], v["product"]), click("button", "Delete Review"), stop()],
        program(_review_check(v["id"], "Page not found", "h1")),
    ),
)


def _approve_all(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    authors = [
        row[0]
        for row in _rows(
            seed,
            "SELECT author FROM reviews WHERE sku = ? AND status = 'Pending' ORDER BY posted DESC, id DESC",
            v["sku"],
        )
    ]
    plan = []
    for author in authors:
        plan += [
            click("link", "Reviews"),
            type_text("searchbox", "Search reviews by author or product", v["product"]),
            click("link", "Pending"),
            click("link", f"Review of {v['product']} by {author}"),
            click("button", "Approve Review"),
        ]
    total = _rows(seed, "SELECT COUNT(*) FROM reviews WHERE sku = ?", v["sku"])[0][0]
    return _built([*plan, stop()], program(_product_check(v["sku"], "#reviews", f"{total} (0 pending)")))


define(
    "approve_product_reviews",
    "state",
    "Approve every pending review of {{product}}.",
    lambda seed: _pending_products(seed, 2),
    _approve_all,
    held_out=True,
)


def _new_rules(_: sqlite3.Connection) -> list[Values]:
    found = []
    for n in range(36):
        name, code = NEW_RULES[n % len(NEW_RULES)]
        discount = 5 * (n % 6 + 1)
        start = datetime.date(2024, 6, 1) + datetime.timedelta(days=n)
        found.append(
            {
                "name": name,
                "code": f"{code}{discount}",
                "discount": str(discount),
                "start": start.isoformat(),
                "end": (start + datetime.timedelta(days=14)).isoformat(),
            }
        )
    return found


def _create_rule(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        click("link", "Promotions"),
        click("link", "Add New Rule"),
        type_text("textbox", "Rule name", v["name"], enter=False),
        type_text("textbox", "Coupon code", v["code"], enter=False),
        type_text("textbox", "Discount (%)", v["discount"], enter=False),
        type_text("textbox", "From", v["start"], enter=False),
        type_text("textbox", "To", v["end"], enter=False),
        click("button", "Save Rule"),
        stop(),
    ]
    rows = check(
        f"{ADMIN}/promotions?q={v['code']}",
        _text("#rules"),
        must=[v["name"], v["code"], f"{v['discount']}%", v["start"], v["end"], "Enabled"],
    )
    return _built(plan, program(rows))


define(
    "create_rule",
    "state",
    'Create a price rule named "{{name}}" with the coupon code {{code}} for {{discount}}% '
    "off from {{start}} to {{end}}.",
    _new_rules,
    _create_rule,
)


def _edit_rule(v: Values, field: str, value: str, element: str, shown: str) -> dict[str, Any]:
    kind = "combobox" if field == "Status" else "textbox"
    plan = [*open_rule(v["rule"]), type_text(kind, field, value, enter=False), click("button", "Save Rule"), stop()]
    return _built(plan, program(check(f"{ADMIN}/promotions/{v['id']}", _text(element), exact_match=shown)))


define(
    "disable_rule",
    "state",
    "Disable the price rule {{rule}}.",
    lambda seed: rules(seed, "status = 'Enabled'"),
    lambda seed, v: _edit_rule(v, "Status", "Disabled", "#status", "Disabled"),
)


def _new_discounts(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for row in _rows(seed, "SELECT * FROM price_rules ORDER BY id"):
        for discount in (5, 12, 18, 35, 40):
            if discount != row["discount"]:
                found.append({"rule": row["name"], "id": str(row["id"]), "discount": str(discount)})
    return found


define(
    "rule_discount",
    "state",
    "Change the discount of the price rule {{rule}} to {{discount}}%.",
    _new_discounts,
    lambda seed, v: _edit_rule(v, "Discount (%)", v["discount"], "#discount", f"{v['discount']}%"),
)


def _page_check(v: Values, element: str, value: str) -> dict[str, Any]:
    return check(f"{ADMIN}/cms/{v['id']}", _text(element), exact_match=value)


def _edit_page(v: Values, field: str, value: str, element: str) -> dict[str, Any]:
    kind = "combobox" if field == "Status" else "textbox"
    plan = [*open_page(v["page"]), type_text(kind, field, value, enter=False), click("button", "Save Page"), stop()]
    return _built(plan, program(_page_check(v, element, value)))


define(
    "cms_title",
    "state",
    'Change the title of the CMS page "{{page}}" to "{{title}}".',
    lambda seed: [{**v, "title": title} for v in pages(seed) for title in NEW_TITLES],
    lambda seed, v: _edit_page(v, "Page title", v["title"], "#title"),
)
define(
    "cms_content",
    "state",
    'Replace the content of the CMS page "{{page}}" with "{{content}}".',
    lambda seed: [{**v, "content": content} for v in pages(seed) for content in NEW_CONTENT],
    lambda seed, v: _edit_page(v, "Content", v["content"], "#content"),
)
define(
    "cms_status",
    "state",
    '{{action}} the CMS page "{{page}}".',
    lambda seed: [{**v, "action": "Enable" if v["status"] == "Disabled" else "Disable"} for v in pages(seed)],
    lambda seed, v: _edit_page(v, "Status", f"{v['action']}d", "#status"),
)


def _edit_customer(v: Values, field: str, value: str, element: str) -> dict[str, Any]:
    plan = [
        *open_customer(v["customer"]),
        type_text("textbox", field, value, enter=False),
        click("button", "Save Customer"),
        stop(),
    ]
    page = check(f"{ADMIN}/customers/{v['id']}", _text(element), exact_match=value)
    return _built(plan, program(page))


define(
    "customer_email_set",
    "state",
    "Change the email address of {{customer}} to {{email}}.",
    lambda seed: [{**v, "email": f"{v['customer'].split()[0].lower()}{v['id']}@mail.test"} for v in customers(seed)],
    lambda seed, v: _edit_customer(v, "Email", v["email"], "#email"),
)
define(
    "customer_city_set",
    "state",
    "{{customer}} has moved to {{city}}: update the city of their account.",
    lambda seed: [{**v, "city": CITIES[int(v["id"]) % len(CITIES)]} for v in customers(seed)],
    lambda seed, v: _edit_customer(v, "City", v["city"], "#city"),
    held_out=True,
)


# ---- not achievable -------------------------------------------------------------------------------
define(
    "customer_phone",
    "na",
    "What is the phone number of {{customer}}?",
    customers,
    lambda seed, v: _built([*open_customer(v["customer"]), stop("N/A")], not_achievable()),
)
define(
    "refund_order",
    "na",
    "Refund order #{{number}} to the customer's credit card.",
    lambda seed: orders(seed, "status = 'Complete'"),
    lambda seed, v: _built([*open_order(v["number"]), stop("N/A")], not_achievable()),
)
