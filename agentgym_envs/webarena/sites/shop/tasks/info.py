"""The shop's task templates (WebArena site `shopping`): 46 intents in WebArena's shop proportions
(16 information seeking, 10 navigation, 15 state changes, 5 unachievable; 5 held out of train).

Every instance's answer and the expert's plan come from the seed data (`ShopDB`'s seed), and the plan
uses the site as a user does: the search box, the category, sort, page and status links, the filter
form, buttons and form fields by their accessible names.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from itertools import product as pairs
from typing import Any
from urllib.parse import urlencode

from agentgym_envs.webarena.sites.shop.catalog import ADDRESSES, ADJECTIVES, CATEGORIES, FIRST_NAMES, LAST_NAMES
from agentgym_envs.webarena.sites.shop.db import PAGE_SIZE, SHIPPING, SORTS, STATUSES, money
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

SITE = "shopping"
HOME = "__SHOPPING__"
#: Sort phrases of intents -> the sort key in the URL (and its link's label in `SORTS`).
SORT_PHRASES = {
    "price from low to high": "price_asc",
    "price from high to low": "price_desc",
    "name": "name",
    "rating from high to low": "rating",
}
PRICE_RANGES = ((10, 30), (20, 50), (30, 60), (50, 100), (100, 200))
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")  # fmt: skip
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
COUPONS = ("SAVE10", "SPRING24", "WELCOME5", "FREESHIP", "VIP20", "BLACKFRIDAY", "SUMMER15", "LOYAL30")
ACCOUNT_FIELDS = ("phone number", "date of birth", "loyalty points balance", "membership level")
#: The cart item of the seed (`seed.sql`).
CART_SKU, CART_NAME = "KI-2001", "Bamboo Cutting Board"


# ---- reading the seed ---------------------------------------------------------------------------
def _rows(seed: sqlite3.Connection, sql: str, *args: Any) -> list[sqlite3.Row]:
    return list(seed.execute(sql, args))


def _products(seed: sqlite3.Connection, where: str = "1", *args: Any) -> list[sqlite3.Row]:
    """Products with their category name, review count and average rating, by SKU."""
    return _rows(
        seed,
        "SELECT p.*, c.name AS category_name, COUNT(r.id) AS review_count, AVG(r.rating) AS rating "
        "FROM products p JOIN categories c ON c.slug = p.category LEFT JOIN reviews r ON r.sku = p.sku "
        f"WHERE {where} GROUP BY p.sku ORDER BY p.sku",
        *args,
    )


def _product(seed: sqlite3.Connection, name: str) -> sqlite3.Row:
    return _products(seed, "p.name = ?", name)[0]


def _categories(seed: sqlite3.Connection) -> list[sqlite3.Row]:
    return _rows(seed, "SELECT slug, name FROM categories ORDER BY position")


def _category_slug(seed: sqlite3.Connection, name: str) -> str:
    return _rows(seed, "SELECT slug FROM categories WHERE name = ?", name)[0][0]


@functools.lru_cache(maxsize=4)
def _orders(seed: sqlite3.Connection) -> tuple[sqlite3.Row, ...]:
    """Orders newest first (as My Orders lists them), with their grand totals (read once per seed)."""
    return tuple(
        _rows(
            seed,
            "SELECT o.*, o.shipping + SUM(i.price * i.qty) AS total FROM orders o "
            "JOIN order_items i ON i.order_number = o.number GROUP BY o.number ORDER BY o.number DESC",
        )
    )


def _order(seed: sqlite3.Connection, number: str) -> sqlite3.Row:
    return next(o for o in _orders(seed) if str(o["number"]) == number)


def _listing(seed: sqlite3.Connection, slug: str, sort: str, min_price: int = 0, max_price: int = 10**9,
             rating: int = 0) -> list[sqlite3.Row]:  # fmt: skip
    """A category's products as its page lists them (`ShopDB._products`' order)."""
    order = SORTS[sort][1]
    return _rows(
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


def _open_addresses() -> list[dict[str, Any]]:
    return [click("link", "My Account"), click("link", "Address Book")]


def _built(plan: list[dict[str, Any]], evaluation: dict[str, Any]) -> dict[str, Any]:
    return {"start_url": HOME, "eval": evaluation, "agentgym_expert": plan}


def _template(slug: str, kind: str, intent: str, instances: Callable, build: Callable, held_out: bool = False):
    return TaskTemplate(f"{SITE}.{slug}", SITE, kind, intent, instances, build, held_out)


# ---- information seeking ------------------------------------------------------------------------
def _each_product(seed: sqlite3.Connection) -> list[Values]:
    return [{"product": p["name"]} for p in _products(seed)]


def _reviewed_product(seed: sqlite3.Connection) -> list[Values]:
    return [{"product": p["name"]} for p in _products(seed) if p["review_count"]]


def _product_fact(answer: Callable[[sqlite3.Row], dict[str, Any]]) -> Callable:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        found = _product(seed, values["product"])
        evaluation = answer(found)
        reference = evaluation["reference_answers"]
        said = reference.get("exact_match") or ", ".join(reference.get("must_include", []))
        return _built([*_open_product(found["name"]), stop(said)], evaluation)

    return build


def _latest_reviewer(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    author = _rows(seed, "SELECT author FROM reviews WHERE sku = ? ORDER BY posted DESC, id DESC", found["sku"])[0][0]
    return _built([*_open_product(found["name"]), stop(author)], must_include(author))


def _single_reviews(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(
        seed,
        "SELECT r.author, p.name FROM reviews r JOIN products p ON p.sku = r.sku GROUP BY r.sku, r.author "
        "HAVING COUNT(*) = 1 ORDER BY r.id",
    )
    return [{"author": r[0], "product": r[1]} for r in rows]


def _reviewer_rating(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    rating = _rows(seed, "SELECT rating FROM reviews WHERE sku = ? AND author = ?", found["sku"], values["author"])
    answer = str(rating[0][0])
    return _built([*_open_product(found["name"]), stop(answer)], must_include(answer))


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
    return _built(plan, must_include(*names))


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
    return _built([*plan, stop(name)], must_include(name))


def _price_ranges(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for category, (low, high) in pairs(_categories(seed), PRICE_RANGES):
        prices = [p["price"] for p in _listing(seed, category["slug"], "name")]
        inside = [p for p in prices if low * 100 <= p <= high * 100]
        if inside and not {low * 100, high * 100} & set(prices):  # no price on a bound: "between" is clear
            found.append({"category": category["name"], "low": str(low), "high": str(high)})
    return found


def _build_count_in_range(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    low, high = int(values["low"]), int(values["high"])
    count = len(_listing(seed, _category_slug(seed, values["category"]), "name", low * 100, high * 100))
    plan = [click("link", values["category"]), *_filter_steps(low, high), stop(str(count))]
    return _built(plan, must_include(str(count)))


def _each_order(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed)]


def _order_fact(answer: Callable[[sqlite3.Connection, sqlite3.Row], tuple[str, dict[str, Any]]]) -> Callable:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        said, evaluation = answer(seed, _order(seed, values["number"]))
        return _built([*_open_order(seed, values["number"]), stop(said)], evaluation)

    return build


def _order_items(seed: sqlite3.Connection, order: sqlite3.Row) -> tuple[str, dict[str, Any]]:
    names = [r[0] for r in _rows(seed, "SELECT name FROM order_items WHERE order_number = ?", order["number"])]
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
    return _built([*plan, stop(str(count))], must_include(str(count)))


# ---- navigation ---------------------------------------------------------------------------------
def _nouns() -> list[str]:
    return [noun.lower() for _, _, nouns, _ in CATEGORIES.values() for noun in nouns]


def _shop_url(path: str, **query: str) -> str:
    return f"{HOME}{path}" + (f"?{urlencode(query)}" if query else "")


def _build_search(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [type_text("searchbox", "Search products", values["query"]), stop()]
    return _built(plan, url(_shop_url("/search", q=values["query"])))


def _build_search_sorted(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    sort = SORT_PHRASES[values["order"]]
    plan = [type_text("searchbox", "Search products", values["query"]), click("link", _sort_label(sort)), stop()]
    return _built(plan, url(_shop_url("/search", q=values["query"], sort=sort)))


def _category_orders(seed: sqlite3.Connection) -> list[Values]:
    return [{"category": c["name"], "order": o} for c, o in pairs(_categories(seed), SORT_PHRASES)]


def _build_category_sorted(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    sort = SORT_PHRASES[values["order"]]
    plan = [click("link", values["category"]), click("link", _sort_label(sort)), stop()]
    return _built(plan, url(_shop_url(f"/category/{_category_slug(seed, values['category'])}", sort=sort)))


def _build_category_range(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    low, high = values["low"], values["high"]
    plan = [click("link", values["category"]), *_filter_steps(int(low), int(high)), stop()]
    path = f"/category/{_category_slug(seed, values['category'])}"
    return _built(plan, url(_shop_url(path, min_price=low, max_price=high)))


def _category_stars(seed: sqlite3.Connection) -> list[Values]:
    return [{"category": c["name"], "stars": str(s)} for c, s in pairs(_categories(seed), (2, 3, 4))]


def _build_category_rating(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [click("link", values["category"]), *_filter_steps(stars=int(values["stars"])), stop()]
    path = f"/category/{_category_slug(seed, values['category'])}"
    return _built(plan, url(_shop_url(path, rating=values["stars"])))


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
    return _built(plan, url(_shop_url("/search", q=values["query"], category=slug)))


def _build_product_page(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    return _built([*_open_product(found["name"]), stop()], url(_shop_url(f"/product/{found['sku']}")))


def _build_order_page(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([*_open_order(seed, values["number"]), stop()], url(_shop_url(f"/orders/{values['number']}")))


def _build_orders_by_status(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [click("link", "My Orders"), click("link", values["status"].capitalize()), stop()]
    return _built(plan, url(_shop_url("/orders", status=values["status"])))


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
    return _built(plan, url(_shop_url(f"/product/{first['sku']}")))


# ---- state changes ------------------------------------------------------------------------------
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
    return _built(plan, program(_cart_check(found["sku"], values["qty"])))


def _build_cart_quantity(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [click("link", "Cart (1)"), type_text("spinbutton", f"Quantity of {CART_NAME}", values["qty"]), stop()]
    return _built(plan, program(_cart_check(CART_SKU, values["qty"])))


def _build_replace_in_cart(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [*_open_product(found["name"]), click("button", "Add to Cart"), click("button", f"Remove {CART_NAME}")]
    checks = program(_cart_check(found["sku"], "1"), _absent("/cart", f'[data-sku="{CART_SKU}"]'))
    return _built([*plan, stop()], checks)


def _not_wished(seed: sqlite3.Connection) -> list[Values]:
    return [{"product": p["name"]} for p in _products(seed, "p.sku NOT IN (SELECT sku FROM wishlist)")]


def _wished(seed: sqlite3.Connection) -> list[Values]:
    rows = _rows(seed, "SELECT p.name FROM wishlist w JOIN products p ON p.sku = w.sku ORDER BY w.position")
    return [{"product": r[0]} for r in rows]


def _wish_check(sku: str, count: str) -> dict[str, Any]:
    locator = f"document.querySelectorAll('#wishlist [data-sku=\"{sku}\"]').length"
    return check(f"{HOME}/wishlist", locator, exact_match=count)


def _build_wish(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [*_open_product(found["name"]), click("button", "Add to Wish List"), stop()]
    return _built(plan, program(_wish_check(found["sku"], "1")))


def _build_unwish(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [click("link", "My Wish List"), click("button", f"Remove {found['name']} from my wish list"), stop()]
    return _built(plan, program(_wish_check(found["sku"], "0")))


def _build_wish_to_cart(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    found = _product(seed, values["product"])
    plan = [click("link", "My Wish List"), click("link", found["name"]), click("button", "Add to Cart")]
    plan += [click("link", "My Wish List"), click("button", f"Remove {found['name']} from my wish list"), stop()]
    return _built(plan, program(_cart_check(found["sku"], "1"), _wish_check(found["sku"], "0")))


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
    return _built(plan, program(check(f"{HOME}/product/{found['sku']}", "document.querySelector('.review').outerText",
                                      must=required)))  # fmt: skip


def _pending(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed) if o["status"] == "Pending"]


def _status_check(number: str, status: str) -> dict[str, Any]:
    return check(f"{HOME}/orders/{number}", "document.querySelector('.order-status').outerText", exact_match=status)


def _build_cancel(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_open_order(seed, values["number"]), click("button", "Cancel Order"), stop()]
    return _built(plan, program(_status_check(values["number"], "Canceled")))


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
        check(latest, "document.querySelector('.order-items').outerText", must=[CART_NAME, values["product"]]),
        check(latest, "document.querySelector('.shipping-method').outerText", exact_match=method),
        check(latest, "document.querySelector('.order-status').outerText", exact_match="Pending"),
    )
    return _built(plan, checks)


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
    return _built(plan, program(check(f"{HOME}/account/addresses", "document.querySelector('#addresses').outerText",
                                      must=[line])))  # fmt: skip


def _other_addresses(seed: sqlite3.Connection) -> list[Values]:
    return [{"street": street} for _, street, _, _ in ADDRESSES]


def _address_id(seed: sqlite3.Connection, street: str) -> int:
    return _rows(seed, "SELECT id FROM addresses WHERE street = ?", street)[0][0]


def _build_default_address(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    street = values["street"]
    plan = [*_open_addresses(), click("button", f"Make {street} the default"), stop()]
    return _built(plan, program(check(f"{HOME}/account", "document.querySelector('#default-address').outerText",
                                      must=[street])))  # fmt: skip


def _build_delete_address(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    street = values["street"]
    plan = [*_open_addresses(), click("button", f"Delete {street}"), stop()]
    return _built(plan, program(_absent("/account/addresses", f'[data-address="{_address_id(seed, street)}"]')))


def _city_moves(seed: sqlite3.Connection) -> list[Values]:
    streets = [r[0] for r in _rows(seed, "SELECT street FROM addresses ORDER BY id")]
    return [{"street": s, "city": c} for s, c in pairs(streets, NEW_CITIES)]


def _build_city_move(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    street = values["street"]
    plan = [*_open_addresses(), click("link", f"Edit {street}")]
    plan += [type_text("textbox", "City", values["city"], enter=False), click("button", "Save Address"), stop()]
    locator = f"document.querySelector('[data-address=\"{_address_id(seed, street)}\"]').outerText"
    return _built(plan, program(check(f"{HOME}/account/addresses", locator, must=[street, values["city"]])))


def _new_names(seed: sqlite3.Connection) -> list[Values]:
    return [{"name": f"{first} {last}"} for first, last in zip(FIRST_NAMES, LAST_NAMES * 2, strict=False)]


def _contact_check(text: str) -> dict[str, Any]:
    return check(f"{HOME}/account", "document.querySelector('#contact').outerText", must=[text])


def _edit_contact(label: str, value: str) -> list[dict[str, Any]]:
    form = [type_text("textbox", label, value, enter=False), click("button", "Save Contact Information"), stop()]
    return [click("link", "My Account"), click("link", "Edit Contact Information"), *form]


def _build_rename(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built(_edit_contact("Full name", values["name"]), program(_contact_check(values["name"])))


def _new_emails(seed: sqlite3.Connection) -> list[Values]:
    return [{"email": f"{v['name'].lower().replace(' ', '.')}@example.org"} for v in _new_names(seed)]


def _build_email(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built(_edit_contact("Email", values["email"]), program(_contact_check(values["email"])))


# ---- unachievable -------------------------------------------------------------------------------
def _unsold(seed: sqlite3.Connection) -> list[Values]:
    """Brand and noun of two different categories: a name the shop does not sell, nor any search finds."""
    found = []
    groups = list(CATEGORIES.values())
    for i, (_, brands, _, _) in enumerate(groups):
        _, _, nouns, _ = groups[(i + 1) % len(groups)]
        found += [{"product": f"{brand} {noun}"} for brand, noun in pairs(brands, nouns)]
    return found


def _build_unsold(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([type_text("searchbox", "Search products", values["product"]), stop("N/A")], not_achievable())


def _closed_orders(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed) if o["status"] == "Complete"]


def _in_transit(seed: sqlite3.Connection) -> list[Values]:
    return [{"number": str(o["number"])} for o in _orders(seed) if o["status"] in ("Shipped", "Processing")]


def _build_order_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([*_open_order(seed, values["number"]), stop("N/A")], not_achievable())


def _build_account_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([click("link", "My Account"), stop("N/A")], not_achievable())


def _build_coupon_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([click("link", "Cart (1)"), click("link", "Proceed to Checkout"), stop("N/A")], not_achievable())


def _fixed(key: str, options: tuple[str, ...]) -> Callable[[sqlite3.Connection], list[Values]]:
    return lambda seed: [{key: option} for option in options]


TEMPLATES: list[TaskTemplate] = [
    # information seeking
    _template("price", "info", "What is the price of the {{product}}?", _each_product,
              _product_fact(lambda p: exact(money(p["price"])))),
    _template("sku", "info", "What is the SKU of the {{product}}?", _each_product,
              _product_fact(lambda p: exact(p["sku"]))),
    _template("category_of", "info", "Which category is the {{product}} in?", _each_product,
              _product_fact(lambda p: exact(p["category_name"]))),
    _template("stock", "info", "How many units of the {{product}} are in stock?", _each_product,
              _product_fact(lambda p: must_include(str(p["stock"])))),
    _template("average_rating", "info", "What is the average rating of the {{product}}, out of 5?", _reviewed_product,
              _product_fact(lambda p: must_include(f"{p['rating']:.1f}"))),
    _template("review_count", "info", "How many reviews does the {{product}} have?", _reviewed_product,
              _product_fact(lambda p: must_include(str(p["review_count"])))),
    _template("latest_reviewer", "info", "Who wrote the most recent review of the {{product}}?", _reviewed_product,
              _latest_reviewer),
    _template("reviewer_rating", "info", "How many stars did {{author}} give the {{product}} in their review?",
              _single_reviews, _reviewer_rating, held_out=True),
    _template("cheapest_n", "info", "What are the {{n}} cheapest products in the {{category}} category?", _cheapest_n,
              _build_cheapest_n),
    _template("cheapest_rated", "info",
              "What is the cheapest product in the {{category}} category with an average rating of {{stars}} stars "
              "or more?", _cheapest_rated, _build_cheapest_rated),
    _template("count_in_range", "info", "How many products in the {{category}} category cost between ${{low}} and "
              "${{high}}?", _price_ranges, _build_count_in_range),
    _template("order_total", "info", "What is the grand total of my order #{{number}}?", _each_order,
              _order_fact(lambda seed, o: (money(o["total"]), exact(money(o["total"]))))),
    _template("order_items", "info", "Which products did I buy in order #{{number}}?", _each_order,
              _order_fact(_order_items)),
    _template("order_status", "info", "What is the status of my order #{{number}}?", _each_order,
              _order_fact(lambda seed, o: (o["status"], exact(o["status"])))),
    _template("order_date", "info", "On which date (YYYY-MM-DD) did I place my order #{{number}}?", _each_order,
              _order_fact(lambda seed, o: (o["placed"], must_include(o["placed"]))), held_out=True),
    _template("orders_in_month", "info", "How many orders did I place in {{month}}?", _order_months,
              _build_orders_in_month),
    # navigation
    _template("search", "nav", "Search the shop for '{{query}}'.", lambda seed: [{"query": n} for n in _nouns()],
              _build_search),
    _template("search_sorted", "nav", "Show me the search results for '{{query}}' sorted by {{order}}.",
              lambda seed: [{"query": n, "order": o} for n, o in pairs(_nouns(), SORT_PHRASES)], _build_search_sorted),
    _template("category_sorted", "nav", "Show me the {{category}} products sorted by {{order}}.", _category_orders,
              _build_category_sorted),
    _template("category_price_range", "nav", "Show me the {{category}} products that cost between ${{low}} and "
              "${{high}}.", _price_ranges, _build_category_range),
    _template("category_rating", "nav", "Show me the {{category}} products rated {{stars}} stars and up.",
              _category_stars, _build_category_rating, held_out=True),
    _template("search_in_category", "nav", "Search for '{{query}}' in the {{category}} category only.",
              _word_categories, _build_search_in_category),
    _template("product_page", "nav", "Open the product page of the {{product}}.", _each_product, _build_product_page),
    _template("order_page", "nav", "Open the page of my order #{{number}}.", _each_order, _build_order_page),
    _template("orders_by_status", "nav", "Show me the list of my {{status}} orders.", _fixed("status", STATUSES),
              _build_orders_by_status),
    _template("extreme_product_page", "nav", "Open the product page of the {{which}} product in the {{category}} "
              "category.", _extremes, _build_extreme_page),
    # state changes
    _template("add_to_cart", "state", "Add {{qty}} of the {{product}} to my cart.", _products_to_add,
              _build_add_to_cart),
    _template("cart_quantity", "state", f"Change the quantity of the {CART_NAME} in my cart to {{{{qty}}}}.",
              _fixed("qty", tuple(str(n) for n in range(2, 13))), _build_cart_quantity),
    _template("replace_in_cart", "state", f"Replace the {CART_NAME} in my cart with one {{{{product}}}}.",
              _not_in_cart, _build_replace_in_cart),
    _template("wishlist_add", "state", "Add the {{product}} to my wish list.", _not_wished, _build_wish),
    _template("wishlist_remove", "state", "Remove the {{product}} from my wish list.", _wished, _build_unwish),
    _template("wishlist_to_cart", "state", "Move the {{product}} from my wish list to my cart (add one to the cart "
              "and remove it from the wish list).", _wished, _build_wish_to_cart),
    _template("write_review", "state", "Write a {{stars}}-star review of the {{product}} titled '{{title}}' that "
              "says '{{body}}'", _reviews_to_write, _build_review),
    _template("cancel_order", "state", "Cancel my pending order #{{number}}.", _pending, _build_cancel),
    _template("buy", "state", "Buy one {{product}} together with what is already in my cart, with {{method}} "
              "shipping to my default address.", _purchases, _build_buy),
    _template("add_address", "state", "Add {{name}}, {{street}}, {{city}} {{zip}} to my address book.",
              _new_addresses, _build_add_address),
    _template("default_address", "state", "Make my address at {{street}} my default shipping address.",
              _other_addresses, _build_default_address),
    _template("delete_address", "state", "Delete my address at {{street}} from my address book.", _other_addresses,
              _build_delete_address),
    _template("address_city", "state", "Change the city of my address at {{street}} to {{city}}.", _city_moves,
              _build_city_move, held_out=True),
    _template("rename", "state", "Change the name on my account to {{name}}.", _new_names, _build_rename),
    _template("change_email", "state", "Change the email address of my account to {{email}}.", _new_emails,
              _build_email),
    # unachievable
    _template("unsold_price", "na", "What is the price of the {{product}}?", _unsold, _build_unsold),
    _template("cancel_closed_order", "na", "Cancel my order #{{number}}.", _closed_orders, _build_order_na),
    _template("delivery_date", "na", "On which day will my order #{{number}} be delivered?", _in_transit,
              _build_order_na, held_out=True),
    _template("account_field", "na", "What is the {{field}} on my account?", _fixed("field", ACCOUNT_FIELDS),
              _build_account_na),
    _template("coupon", "na", "Apply the coupon code {{code}} to my order.", _fixed("code", COUPONS),
              _build_coupon_na),
]  # fmt: skip
