"""The shop admin's task templates of state changes."""

from __future__ import annotations

import datetime
import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.admin.db import money
from agentgym_envs.webarena.sites.admin.tasks.common import (
    ADMIN,
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
    rules,
    unique_reviews,
)
from agentgym_envs.webarena.tasks.templates import (
    TaskTemplate,
    Values,
    check,
    click,
    program,
    seed_rows,
    stop,
    text_of,
    type_text,
)

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


def open_page(title: str) -> list[dict[str, Any]]:
    return [click("link", "Content"), click("link", title)]


def pages(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"page": row["title"], "id": str(row["id"]), "status": row["status"]}
        for row in seed_rows(seed, "SELECT * FROM cms_pages ORDER BY id")
    ]


def _order_check(number: str, element: str, value: str) -> dict[str, Any]:
    return check(f"{ADMIN}/orders/{number}", text_of(element), exact_match=value)


def _comments_check(number: str, comment: str) -> dict[str, Any]:
    return check(f"{ADMIN}/orders/{number}", text_of("#comments"), must=[comment])


def _cancel(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_order(v["number"]), click("button", "Cancel Order"), stop()]
    return TASKS.built(plan, program(_order_check(v["number"], "#status", "Canceled")))


def _invoice(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_order(v["number"]), click("button", "Invoice"), stop()]
    return TASKS.built(plan, program(_order_check(v["number"], "#invoiced", "Yes")))


def _ship(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_order(v["number"]), click("button", "Ship"), stop()]
    checks = [_order_check(v["number"], "#shipped", "Yes"), _order_check(v["number"], "#status", "Complete")]
    return TASKS.built(plan, program(*checks))


def _with_comments(found: list[Values]) -> list[Values]:
    return [{**v, "comment": COMMENTS[int(v["number"]) % len(COMMENTS)]} for v in found]


def _comment(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        *open_order(v["number"]),
        type_text("textbox", "Comment", v["comment"], enter=False),
        click("button", "Submit Comment"),
        stop(),
    ]
    return TASKS.built(plan, program(_comments_check(v["number"], v["comment"])))


def _cancel_with_comment(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [
        *open_order(v["number"]),
        click("button", "Cancel Order"),
        type_text("textbox", "Comment", v["comment"], enter=False),
        click("button", "Submit Comment"),
        stop(),
    ]
    checks = [_order_check(v["number"], "#status", "Canceled"), _comments_check(v["number"], v["comment"])]
    return TASKS.built(plan, program(*checks))


def _single_pending(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"customer": row["name"], "number": str(row["number"])}
        for row in seed_rows(
            seed,
            "SELECT c.name, MIN(o.number) AS number FROM orders o JOIN customers c "
            "ON c.id = o.customer_id WHERE o.status = 'Pending' GROUP BY c.id "
            "HAVING COUNT(*) = 1 ORDER BY c.id",
        )
    ]


def _cancel_customer_order(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    plan = [*open_customer(v["customer"]), click("link", f"#{v['number']}"), click("button", "Cancel Order"), stop()]
    return TASKS.built(plan, program(_order_check(v["number"], "#status", "Canceled")))


def _product_check(sku: str, element: str, value: str) -> dict[str, Any]:
    return check(f"{ADMIN}/products/{sku}", text_of(element), exact_match=value)


def _edit_product(field: str, value: str, sku: str, name: str, check_value: str, element: str) -> dict[str, Any]:
    plan = [
        *open_product(name),
        type_text("combobox" if field == "Status" else "textbox", field, value, enter=False),
        click("button", "Save Product"),
        stop(),
    ]
    return TASKS.built(plan, program(_product_check(sku, element, check_value)))


def _new_prices(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for n, row in enumerate(seed_rows(seed, "SELECT * FROM products ORDER BY sku")):
        cents = row["price"] + (n % 7 + 1) * 100 if n % 2 else max(99, row["price"] - (n % 5 + 1) * 100)
        found.append({"product": row["name"], "sku": row["sku"], "price": money(cents)})
    return found


def _new_stock(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"product": row["name"], "sku": row["sku"], "stock": str(row["stock"] + 25 + n % 50)}
        for n, row in enumerate(seed_rows(seed, "SELECT * FROM products ORDER BY sku"))
    ]


def _new_descriptions(seed: sqlite3.Connection) -> list[Values]:
    return [{**v, "description": DESCRIPTIONS[n % len(DESCRIPTIONS)]} for n, v in enumerate(products(seed))]


def _reductions(seed: sqlite3.Connection) -> list[Values]:
    return [
        {
            "product": row["name"],
            "sku": row["sku"],
            "amount": money((n % 4 + 1) * 100),
            "price": money(row["price"] - (n % 4 + 1) * 100),
        }
        for n, row in enumerate(seed_rows(seed, "SELECT * FROM products WHERE price > 1000 ORDER BY sku"))
    ]


def _review_check(review_id: str, value: str, element: str = "#status") -> dict[str, Any]:
    return check(f"{ADMIN}/reviews/{review_id}", text_of(element), exact_match=value)


def _approve_all(seed: sqlite3.Connection, v: Values) -> dict[str, Any]:
    authors = [
        row[0]
        for row in seed_rows(
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
    total = seed_rows(seed, "SELECT COUNT(*) FROM reviews WHERE sku = ?", v["sku"])[0][0]
    return TASKS.built([*plan, stop()], program(_product_check(v["sku"], "#reviews", f"{total} (0 pending)")))


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
        text_of("#rules"),
        must=[v["name"], v["code"], f"{v['discount']}%", v["start"], v["end"], "Enabled"],
    )
    return TASKS.built(plan, program(rows))


def _edit_rule(v: Values, field: str, value: str, element: str, shown: str) -> dict[str, Any]:
    kind = "combobox" if field == "Status" else "textbox"
    plan = [*open_rule(v["rule"]), type_text(kind, field, value, enter=False), click("button", "Save Rule"), stop()]
    return TASKS.built(plan, program(check(f"{ADMIN}/promotions/{v['id']}", text_of(element), exact_match=shown)))


def _new_discounts(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for row in seed_rows(seed, "SELECT * FROM price_rules ORDER BY id"):
        for discount in (5, 12, 18, 35, 40):
            if discount != row["discount"]:
                found.append({"rule": row["name"], "id": str(row["id"]), "discount": str(discount)})
    return found


def _page_check(v: Values, element: str, value: str) -> dict[str, Any]:
    return check(f"{ADMIN}/cms/{v['id']}", text_of(element), exact_match=value)


def _edit_page(v: Values, field: str, value: str, element: str) -> dict[str, Any]:
    kind = "combobox" if field == "Status" else "textbox"
    plan = [*open_page(v["page"]), type_text(kind, field, value, enter=False), click("button", "Save Page"), stop()]
    return TASKS.built(plan, program(_page_check(v, element, value)))


def _edit_customer(v: Values, field: str, value: str, element: str) -> dict[str, Any]:
    plan = [
        *open_customer(v["customer"]),
        type_text("textbox", field, value, enter=False),
        click("button", "Save Customer"),
        stop(),
    ]
    page = check(f"{ADMIN}/customers/{v['id']}", text_of(element), exact_match=value)
    return TASKS.built(plan, program(page))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "cancel_order", "state", "Cancel order #{{number}}.", lambda seed: orders(seed, "status = 'Pending'"), _cancel
    ),
    TASKS.template(
        "invoice_order",
        "state",
        "Invoice order #{{number}}.",
        lambda seed: orders(seed, "invoiced = 0 AND status = 'Pending'"),
        _invoice,
    ),
    TASKS.template(
        "ship_order",
        "state",
        "Ship order #{{number}}; it is already invoiced.",
        lambda seed: orders(seed, "status = 'Processing' AND invoiced = 1 AND shipped = 0"),
        _ship,
    ),
    TASKS.template(
        "comment_order",
        "state",
        'Add the comment "{{comment}}" to order #{{number}}.',
        lambda seed: _with_comments(orders(seed, "number % 5 = 0")),
        _comment,
    ),
    TASKS.template(
        "cancel_with_comment",
        "state",
        'Cancel order #{{number}} and add the comment "{{comment}}" to it.',
        lambda seed: _with_comments(orders(seed, "status = 'Pending'")),
        _cancel_with_comment,
    ),
    TASKS.template(
        "cancel_customer_order",
        "state",
        "Cancel the pending order of {{customer}}.",
        _single_pending,
        _cancel_customer_order,
    ),
    TASKS.template(
        "product_price_set",
        "state",
        "Change the price of {{product}} to {{price}}.",
        _new_prices,
        lambda seed, v: _edit_product(
            "Price", v["price"].lstrip("$").replace(",", ""), v["sku"], v["product"], v["price"], "#price"
        ),
    ),
    TASKS.template(
        "product_stock_set",
        "state",
        "Set the stock of {{product}} to {{stock}} units.",
        _new_stock,
        lambda seed, v: _edit_product("Stock", v["stock"], v["sku"], v["product"], v["stock"], "#stock"),
    ),
    TASKS.template(
        "disable_product",
        "state",
        "Disable the product {{product}}.",
        lambda seed: products(seed, "status = 'Enabled'"),
        lambda seed, v: _edit_product("Status", "Disabled", v["sku"], v["product"], "Disabled", "#status"),
    ),
    TASKS.template(
        "enable_product",
        "state",
        "Enable the product {{product}}.",
        lambda seed: products(seed, "status = 'Disabled'"),
        lambda seed, v: _edit_product("Status", "Enabled", v["sku"], v["product"], "Enabled", "#status"),
    ),
    TASKS.template(
        "product_description",
        "state",
        'Change the description of {{product}} to "{{description}}"',
        _new_descriptions,
        lambda seed, v: _edit_product(
            "Description", v["description"], v["sku"], v["product"], v["description"], "#description"
        ),
    ),
    TASKS.template(
        "product_price_reduce",
        "state",
        "Reduce the price of {{product}} by {{amount}}.",
        _reductions,
        lambda seed, v: _edit_product(
            "Price", v["price"].lstrip("$").replace(",", ""), v["sku"], v["product"], v["price"], "#price"
        ),
        held_out=True,
    ),
    TASKS.template(
        "approve_review",
        "state",
        "Approve the review by {{author}} of {{product}}.",
        lambda seed: unique_reviews(seed, "r.status = 'Pending'"),
        lambda seed, v: TASKS.built(
            [*open_review(v["author"], v["product"]), click("button", "Approve Review"), stop()],
            program(_review_check(v["id"], "Approved")),
        ),
    ),
    TASKS.template(
        "delete_review",
        "state",
        "Delete the review by {{author}} of {{product}}.",
        unique_reviews,
        lambda seed, v: TASKS.built(
            [*open_review(v["author"], v["product"]), click("button", "Delete Review"), stop()],
            program(_review_check(v["id"], "Page not found", "h1")),
        ),
    ),
    TASKS.template(
        "approve_product_reviews",
        "state",
        "Approve every pending review of {{product}}.",
        lambda seed: _pending_products(seed, 2),
        _approve_all,
        held_out=True,
    ),
    TASKS.template(
        "create_rule",
        "state",
        'Create a price rule named "{{name}}" with the coupon code {{code}} for {{discount}}% '
        "off from {{start}} to {{end}}.",
        _new_rules,
        _create_rule,
    ),
    TASKS.template(
        "disable_rule",
        "state",
        "Disable the price rule {{rule}}.",
        lambda seed: rules(seed, "status = 'Enabled'"),
        lambda seed, v: _edit_rule(v, "Status", "Disabled", "#status", "Disabled"),
    ),
    TASKS.template(
        "rule_discount",
        "state",
        "Change the discount of the price rule {{rule}} to {{discount}}%.",
        _new_discounts,
        lambda seed, v: _edit_rule(v, "Discount (%)", v["discount"], "#discount", f"{v['discount']}%"),
    ),
    TASKS.template(
        "cms_title",
        "state",
        'Change the title of the CMS page "{{page}}" to "{{title}}".',
        lambda seed: [{**v, "title": title} for v in pages(seed) for title in NEW_TITLES],
        lambda seed, v: _edit_page(v, "Page title", v["title"], "#title"),
    ),
    TASKS.template(
        "cms_content",
        "state",
        'Replace the content of the CMS page "{{page}}" with "{{content}}".',
        lambda seed: [{**v, "content": content} for v in pages(seed) for content in NEW_CONTENT],
        lambda seed, v: _edit_page(v, "Content", v["content"], "#content"),
    ),
    TASKS.template(
        "cms_status",
        "state",
        '{{action}} the CMS page "{{page}}".',
        lambda seed: [{**v, "action": "Enable" if v["status"] == "Disabled" else "Disable"} for v in pages(seed)],
        lambda seed, v: _edit_page(v, "Status", f"{v['action']}d", "#status"),
    ),
    TASKS.template(
        "customer_email_set",
        "state",
        "Change the email address of {{customer}} to {{email}}.",
        lambda seed: [
            {**v, "email": f"{v['customer'].split()[0].lower()}{v['id']}@mail.test"} for v in customers(seed)
        ],
        lambda seed, v: _edit_customer(v, "Email", v["email"], "#email"),
    ),
    TASKS.template(
        "customer_city_set",
        "state",
        "{{customer}} has moved to {{city}}: update the city of their account.",
        lambda seed: [{**v, "city": CITIES[int(v["id"]) % len(CITIES)]} for v in customers(seed)],
        lambda seed, v: _edit_customer(v, "City", v["city"], "#city"),
        held_out=True,
    ),
]
