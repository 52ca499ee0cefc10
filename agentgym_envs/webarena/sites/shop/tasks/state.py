"""The shop's task templates of state changes."""

from __future__ import annotations

import sqlite3
from itertools import product as pairs
from typing import Any

from agentgym_envs.webarena.sites.shop.catalog import ADDRESSES, FIRST_NAMES, LAST_NAMES
from agentgym_envs.webarena.sites.shop.db import SHIPPING, money
from agentgym_envs.webarena.sites.shop.tasks.common import (
    HOME,
    TASKS,
    _open_order,
    _open_product,
    _orders,
    _product,
    _products,
)
from agentgym_envs.webarena.tasks.templates import (
    TaskTemplate,
    Values,
    check,
    click,
    fixed,
    program,
    seed_rows,
    stop,
    text_of,
    type_text,
)

REVIEWS = (
    ("Worth every cent", "I use it every day and it still looks new."),
    ("Not for me", "It arrived quickly but it did not suit my needs."),
    ("Solid choice", "Good quality for the price, I would buy it again."),
    ("Mixed feelings", "Some parts are great, others feel rushed."),
    ("Gift hit", "Bought it as a present and it was a big success."),
)
NEW_CITIES = ("Springfield", "Fairview", "Georgetown", "Madison", "Oakdale", "Clinton")
NEW_STREETS = ("12 Birch Lane", "88 Station Road", "5 Quarry Hill", "301 Lake Drive", "7 Mill Court", "46 Park Row")
NEW_ZIPS = ("10234", "20987", "31415", "48210", "55301", "67812")


#: The cart item of the seed (`seed.sql`).
CART_SKU, CART_NAME = "KI-2001", "Bamboo Cutting Board"


def _open_addresses() -> list[dict[str, Any]]:
    return [click("link", "My Account"), click("link", "Address Book")]


def _cart_check(sku: str, qty: str) -> dict[str, Any]:
    return check(f"{HOME}/cart", f"document.querySelector('[data-sku=\"{sku}\"] input').value", exact_match=qty)


def _absent(page: str, selector: str) -> dict[str, Any]:
    return check(f"{HOME}{page}", f"document.querySelectorAll('{selector}').length", exact_match="0")


def _products_to_add(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"product": p["name"], "qty": str(i % 3 + 1)} for i, p in enumerate(_products(seed, "p.sku != ?", CART_SKU))
    ]


def _not_in_cart(seed: sqlite3.Connection) -> list[Values]:
    return [{"product": p["name"]} for p in _products(seed, "p.sku != ?", CART_SKU)]


def _build_add_to_cart(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [*_open_product(found["name"]), type_text("spinbutton", "Quantity", values["qty"], enter=False)]
    plan += [click("button", "Add to Cart"), stop()]
    return TASKS.built(plan, program(_cart_check(found["sku"], values["qty"])))


def _build_cart_quantity(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [click("link", "Cart (1)"), type_text("spinbutton", f"Quantity of {CART_NAME}", values["qty"]), stop()]
    return TASKS.built(plan, program(_cart_check(CART_SKU, values["qty"])))


def _build_replace_in_cart(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [*_open_product(found["name"]), click("button", "Add to Cart"), click("button", f"Remove {CART_NAME}")]
    checks = program(_cart_check(found["sku"], "1"), _absent("/cart", f'[data-sku="{CART_SKU}"]'))
    return TASKS.built([*plan, stop()], checks)


def _not_wished(seed: sqlite3.Connection) -> list[Values]:
    return [{"product": p["name"]} for p in _products(seed, "p.sku NOT IN (SELECT sku FROM wishlist)")]


def _wished(seed: sqlite3.Connection) -> list[Values]:
    rows = seed_rows(seed, "SELECT p.name FROM wishlist w JOIN products p ON p.sku = w.sku ORDER BY w.position")
    return [{"product": r[0]} for r in rows]


def _wish_check(sku: str, count: str) -> dict[str, Any]:
    locator = f"document.querySelectorAll('#wishlist [data-sku=\"{sku}\"]').length"
    return check(f"{HOME}/wishlist", locator, exact_match=count)


def _build_wish(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [*_open_product(found["name"]), click("button", "Add to Wish List"), stop()]
    return TASKS.built(plan, program(_wish_check(found["sku"], "1")))


def _build_unwish(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [click("link", "My Wish List"), click("button", f"Remove {found['name']} from my wish list"), stop()]
    return TASKS.built(plan, program(_wish_check(found["sku"], "0")))


def _build_wish_to_cart(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [click("link", "My Wish List"), click("link", found["name"]), click("button", "Add to Cart")]
    plan += [click("link", "My Wish List"), click("button", f"Remove {found['name']} from my wish list"), stop()]
    return TASKS.built(plan, program(_cart_check(found["sku"], "1"), _wish_check(found["sku"], "0")))


def _reviews_to_write(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"product": p["name"], "stars": str(i % 5 + 1), "title": REVIEWS[i % 5][0], "body": REVIEWS[i % 5][1]}
        for i, p in enumerate(_products(seed))
    ]


def _build_review(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    stars = int(values["stars"])
    plan = [
        *_open_product(found["name"]),
        type_text("combobox", "Rating", f"{stars} star{'s' if stars != 1 else ''}", enter=False),
        type_text("textbox", "Title", values["title"], enter=False),
        type_text("textbox", "Review", values["body"], enter=False),
        click("button", "Submit Review"),
        stop(),
    ]
    required = [values["title"], values["body"], f"Rating: {stars} out of 5"]
    return TASKS.built(plan, program(check(f"{HOME}/product/{found['sku']}", text_of(".review"),
                                      must=required)))  # fmt: skip


def _pending(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed) if o["status"] == "Pending"]


def _status_check(number: str, status: str) -> dict[str, Any]:
    return check(f"{HOME}/orders/{number}", text_of(".order-status"), exact_match=status)


def _build_cancel(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_order(seed, values["number"]), click("button", "Cancel Order"), stop()]
    return TASKS.built(plan, program(_status_check(values["number"], "Canceled")))


def _purchases(seed: sqlite3.Connection) -> list[Values]:
    methods = list(SHIPPING)
    rows = _products(seed, "p.sku != ?", CART_SKU)
    return [{"product": p["name"], "method": methods[i % len(methods)]} for i, p in enumerate(rows)]


def _build_buy(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    method = values["method"]
    plan = [*_open_product(values["product"]), click("button", "Add to Cart"), click("link", "Proceed to Checkout")]
    plan += [click("radio", f"{method} ({money(SHIPPING[method])})"), click("button", "Place Order"), stop()]
    latest = f"{HOME}/orders/latest"
    checks = program(
        check(latest, text_of(".order-items"), must=[CART_NAME, values["product"]]),
        check(latest, text_of(".shipping-method"), exact_match=method),
        check(latest, text_of(".order-status"), exact_match="Pending"),
    )
    return TASKS.built(plan, checks)


def _new_addresses(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for i, (street, city) in enumerate(pairs(NEW_STREETS, NEW_CITIES)):
        name = f"{FIRST_NAMES[i % len(FIRST_NAMES)]} {LAST_NAMES[i % len(LAST_NAMES)]}"
        found.append({"name": name, "street": street, "city": city, "zip": NEW_ZIPS[i % len(NEW_ZIPS)]})
    return found


def _build_add_address(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    fields = (("Full name", "name"), ("Street", "street"), ("City", "city"), ("ZIP code", "zip"))
    plan = [*_open_addresses(), click("link", "Add New Address")]
    plan += [type_text("textbox", label, values[key], enter=False) for label, key in fields]
    plan += [click("button", "Save Address"), stop()]
    line = f"{values['name']}, {values['street']}, {values['city']} {values['zip']}"
    return TASKS.built(plan, program(check(f"{HOME}/account/addresses", text_of("#addresses"),
                                      must=[line])))  # fmt: skip


def _other_addresses(seed: sqlite3.Connection) -> list[Values]:
    return [{"street": street} for _, street, _, _ in ADDRESSES]


def _address_id(seed: sqlite3.Connection, street: str) -> int:
    return seed_rows(seed, "SELECT id FROM addresses WHERE street = ?", street)[0][0]


def _build_default_address(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    street = values["street"]
    plan = [*_open_addresses(), click("button", f"Make {street} the default"), stop()]
    return TASKS.built(plan, program(check(f"{HOME}/account", text_of("#default-address"),
                                      must=[street])))  # fmt: skip


def _build_delete_address(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    street = values["street"]
    plan = [*_open_addresses(), click("button", f"Delete {street}"), stop()]
    return TASKS.built(plan, program(_absent("/account/addresses", f'[data-address="{_address_id(seed, street)}"]')))


def _city_moves(seed: sqlite3.Connection) -> list[Values]:
    streets = [r[0] for r in seed_rows(seed, "SELECT street FROM addresses ORDER BY id")]
    return [{"street": s, "city": c} for s, c in pairs(streets, NEW_CITIES)]


def _build_city_move(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    street = values["street"]
    plan = [*_open_addresses(), click("link", f"Edit {street}")]
    plan += [type_text("textbox", "City", values["city"], enter=False), click("button", "Save Address"), stop()]
    locator = f"document.querySelector('[data-address=\"{_address_id(seed, street)}\"]').outerText"
    return TASKS.built(plan, program(check(f"{HOME}/account/addresses", locator, must=[street, values["city"]])))


def _new_names(seed: sqlite3.Connection) -> list[Values]:
    return [{"name": f"{first} {last}"} for first, last in zip(FIRST_NAMES, LAST_NAMES * 2, strict=False)]


def _contact_check(text: str) -> dict[str, Any]:
    return check(f"{HOME}/account", text_of("#contact"), must=[text])


def _edit_contact(label: str, value: str) -> list[dict[str, Any]]:
    form = [type_text("textbox", label, value, enter=False), click("button", "Save Contact Information"), stop()]
    return [click("link", "My Account"), click("link", "Edit Contact Information"), *form]


def _build_rename(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built(_edit_contact("Full name", values["name"]), program(_contact_check(values["name"])))


def _new_emails(seed: sqlite3.Connection) -> list[Values]:
    return [{"email": f"{v['name'].lower().replace(' ', '.')}@example.org"} for v in _new_names(seed)]


def _build_email(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built(_edit_contact("Email", values["email"]), program(_contact_check(values["email"])))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "add_to_cart", "state", "Add {{qty}} of the {{product}} to my cart.", _products_to_add, _build_add_to_cart
    ),
    TASKS.template(
        "cart_quantity",
        "state",
        f"Change the quantity of the {CART_NAME} in my cart to {{{{qty}}}}.",
        fixed("qty", tuple(str(n) for n in range(2, 13))),
        _build_cart_quantity,
    ),
    TASKS.template(
        "replace_in_cart",
        "state",
        f"Replace the {CART_NAME} in my cart with one {{{{product}}}}.",
        _not_in_cart,
        _build_replace_in_cart,
    ),
    TASKS.template("wishlist_add", "state", "Add the {{product}} to my wish list.", _not_wished, _build_wish),
    TASKS.template("wishlist_remove", "state", "Remove the {{product}} from my wish list.", _wished, _build_unwish),
    TASKS.template(
        "wishlist_to_cart",
        "state",
        "Move the {{product}} from my wish list to my cart (add one to the cart and remove it from the wish list).",
        _wished,
        _build_wish_to_cart,
    ),
    TASKS.template(
        "write_review",
        "state",
        "Write a {{stars}}-star review of the {{product}} titled '{{title}}' that says '{{body}}'",
        _reviews_to_write,
        _build_review,
    ),
    TASKS.template("cancel_order", "state", "Cancel my pending order #{{number}}.", _pending, _build_cancel),
    TASKS.template(
        "buy",
        "state",
        "Buy one {{product}} together with what is already in my cart, with {{method}} shipping to my default address.",
        _purchases,
        _build_buy,
    ),
    TASKS.template(
        "add_address",
        "state",
        "Add {{name}}, {{street}}, {{city}} {{zip}} to my address book.",
        _new_addresses,
        _build_add_address,
    ),
    TASKS.template(
        "default_address",
        "state",
        "Make my address at {{street}} my default shipping address.",
        _other_addresses,
        _build_default_address,
    ),
    TASKS.template(
        "delete_address",
        "state",
        "Delete my address at {{street}} from my address book.",
        _other_addresses,
        _build_delete_address,
    ),
    TASKS.template(
        "address_city",
        "state",
        "Change the city of my address at {{street}} to {{city}}.",
        _city_moves,
        _build_city_move,
        held_out=True,
    ),
    TASKS.template("rename", "state", "Change the name on my account to {{name}}.", _new_names, _build_rename),
    TASKS.template(
        "change_email", "state", "Change the email address of my account to {{email}}.", _new_emails, _build_email
    ),
]
