"""Loopback Market: a small shop (Starlette + Jinja2 + SQLite) with search (sort, price and rating
filters, all in the URL query), categories, product pages and reviews, a cart, checkout, orders with
statuses, a wish list, an address book and an account page. Lists are paginated (`PAGE_SIZE`). No
JavaScript: every change is a plain form POST answered by a redirect, so pages are deterministic and
render fast.

Input is checked as a real shop checks it: a malformed value gets a 400 page, a well-formed one out of
bounds (a quantity over the cart's limit, an over-long field or query) a 422 page, an unknown id a 404
page; each says what was wrong, and nothing changes. No input gets a 500."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from agentgym_envs.webarena.sites.pages import back_to, page_links, read_form, site_templates
from agentgym_envs.webarena.sites.refusals import Refused, check_lengths, parse_page
from agentgym_envs.webarena.sites.shop.db import (
    MAX_QUANTITY,
    PAGE_SIZE,
    SHIPPING,
    SORTS,
    STATUSES,
    Filters,
    ShopDB,
    money,
)

SITE_NAME = "Loopback Market"
#: The longest search query, in characters.
MAX_QUERY = 200
#: The longest value of each text field of the forms, in characters, and its name in error messages.
MAX_TEXT = {
    "nickname": (60, "nickname"),
    "title": (200, "title"),
    "body": (5000, "review"),
    "name": (100, "full name"),
    "street": (200, "street"),
    "city": (100, "city"),
    "zip": (20, "ZIP code"),
    "email": (100, "email address"),
}
_PRICE = re.compile(r"([0-9]{1,6})(?:\.([0-9]{1,2}))?")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
#: The listing filters a URL query may carry, and the sort; the links of a listing keep them.
LISTING_KEYS = ("category", "min_price", "max_price", "rating", "sort")
_WHOLE_NUMBER = re.compile(r"[0-9]+")
_ORDER_NUMBER = re.compile(r"[0-9]{1,9}")  # shorter than SQLite's 64-bit integers and Python's parsing limit


def parse_quantity(text: str, least: int, what: str = "The quantity") -> int:
    """`text` as a quantity from `least` to `MAX_QUANTITY`, or `Refused` saying what is allowed."""
    if not _WHOLE_NUMBER.fullmatch(text):
        raise Refused(400, f"{what} must be a whole number from {least} to {MAX_QUANTITY}.")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_QUANTITY)) or not least <= int(digits) <= MAX_QUANTITY:
        raise Refused(422, f"{what} must be from {least} to {MAX_QUANTITY}.")
    return int(digits)


def parse_price(text: str, what: str) -> int | None:
    """Dollars (`12` or `12.5`) from a URL query as cents; None when empty."""
    if not text:
        return None
    found = _PRICE.fullmatch(text)
    if found is None:
        raise Refused(400, f"The {what} must be an amount in dollars such as 25 or 19.99.")
    return int(found.group(1)) * 100 + int((found.group(2) or "0").ljust(2, "0"))


def parse_filters(params: dict[str, str]) -> Filters:
    """The filters of a listing's URL query, or `Refused`."""
    rating = params.get("rating", "")
    if rating not in ("", "1", "2", "3", "4"):
        raise Refused(400, "The rating filter must be 1, 2, 3 or 4 (stars and up).")
    return Filters(
        min_price=parse_price(params.get("min_price", ""), "lowest price"),
        max_price=parse_price(params.get("max_price", ""), "highest price"),
        min_rating=int(rating or 0),
    )


def paginate(rows: list[dict[str, Any]], page: int) -> list[dict[str, Any]]:
    return rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]


def order_number(text: str) -> int | None:
    """An order number from a URL, or None when `text` cannot be one."""
    return int(text) if _ORDER_NUMBER.fullmatch(text) else None


def create_app(db: ShopDB) -> Starlette:
    """The shop as an ASGI app over `db`."""
    templates = site_templates("agentgym_envs.webarena.sites.shop", SITE_NAME)
    templates.filters["money"] = money

    def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("cart_count", sum(item["qty"] for item in db.cart()))
        context.setdefault("categories", db.categories())
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status_code)

    def not_found(what: str) -> HTMLResponse:
        return page("not_found.html", status_code=404, what=what)

    async def home(request: Request) -> Response:
        return page("home.html", products=db.featured())

    def sort_links(path: str, params: dict[str, str], sort: str) -> list[tuple[str, str, bool]]:
        """(label, url, is_current) for each sort order of a listing (its filters kept)."""
        links = []
        for key, (label, _) in SORTS.items():
            query = urlencode({k: v for k, v in {**params, "sort": key}.items() if v})
            links.append((label, f"{path}?{query}" if query else path, key == sort))
        return links

    def listing(request: Request, path: str, title: str, base: dict[str, str], find: Any, **context: Any) -> Response:
        """A paginated, sorted, filtered product list; `find(sort, filters)` gives all its products."""
        query = request.query_params
        params = {**base, **{key: query.get(key, "").strip() for key in LISTING_KEYS if key not in base}}
        sort = params.pop("sort", "")
        sort = sort if sort in SORTS else ""
        try:
            filters = parse_filters(params)
            number = parse_page(query.get("page", ""))
        except Refused as refused:
            return page(
                "listing.html", status_code=refused.status, title=title, products=[], total=0, params=params,
                sort_links=[], page_links=[], path=path, error=refused.message, **context,
            )  # fmt: skip
        products = find(sort, filters)
        return page(
            "listing.html",
            title=title,
            products=paginate(products, number),
            total=len(products),
            first=(number - 1) * PAGE_SIZE + 1,
            params={**params, "sort": sort},
            path=path,
            sort_links=sort_links(path, params, sort),
            page_links=page_links(path, {**params, "sort": sort}, number, len(products), PAGE_SIZE),
            **context,
        )

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        if len(query) > MAX_QUERY:
            return page(
                "listing.html",
                status_code=422,
                title="Search",
                query=query[:MAX_QUERY],
                products=[],
                total=0,
                params={},
                sort_links=[],
                page_links=[],
                path="/search",
                error=f"Search queries can be at most {MAX_QUERY} characters long.",
            )
        slug = request.query_params.get("category", "").strip()
        if slug and db.category(slug) is None:
            return not_found("category")

        def find(sort: str, filters: Filters) -> list[dict[str, Any]]:
            found = db.search(query, sort, filters)
            return [p for p in found if p["category"] == slug] if slug else found

        return listing(request, "/search", f"Search results for '{query}'", {"q": query}, find, query=query)

    async def category(request: Request) -> Response:
        found = db.category(request.path_params["slug"])
        if found is None:
            return not_found("category")
        slug = found["slug"]
        return listing(
            request,
            f"/category/{slug}",
            found["name"],
            {"category": ""},  # a category page has no category filter
            lambda sort, filters: db.in_category(slug, sort, filters),
        )

    async def product(request: Request) -> Response:
        found = db.product(request.path_params["sku"])
        if found is None:
            return not_found("product")
        return page("product.html", product=found, reviews=db.reviews(found["sku"]))

    async def add_review(request: Request) -> Response:
        sku = request.path_params["sku"]
        data = await read_form(request)
        rating = data.get("rating", "")
        found = db.product(sku)
        if found is None:
            return not_found("product")
        try:
            if not (data.get("title") and data.get("body") and rating in ("1", "2", "3", "4", "5")):
                raise Refused(400, "Please give a rating, a title and a review.")
            check_lengths(MAX_TEXT, data, "nickname", "title", "body")
        except Refused as refused:
            return page(
                "product.html",
                status_code=refused.status,
                product=found,
                reviews=db.reviews(sku),
                error=refused.message,
            )
        db.add_review(sku, data.get("nickname") or db.customer()["name"], int(rating), data["title"], data["body"])
        return back_to(f"/product/{sku}")

    async def cart(request: Request) -> Response:
        items = db.cart()
        return page("cart.html", items=items, total=sum(item["subtotal"] for item in items))

    async def cart_add(request: Request) -> Response:
        data = await read_form(request)
        sku = data.get("sku", "")
        found = db.product(sku)
        if found is None:
            return not_found("product")
        try:
            qty = parse_quantity(data.get("qty", "1"), least=1)
            held = next((item["qty"] for item in db.cart() if item["sku"] == sku), 0)
            if held + qty > MAX_QUANTITY:
                raise Refused(
                    422, f"The cart can hold at most {MAX_QUANTITY} of one product; it holds {held} of this one."
                )
        except Refused as refused:
            return page(
                "product.html",
                status_code=refused.status,
                product=found,
                reviews=db.reviews(sku),
                error=refused.message,
            )
        db.add_to_cart(sku, qty)
        return back_to("/cart")

    async def cart_update(request: Request) -> Response:
        data = await read_form(request)
        items = db.cart()
        try:
            quantities = {
                item["sku"]: parse_quantity(data[key], least=0, what=f"The quantity of {item['name']}")
                for item in items
                if (key := f"qty_{item['sku']}") in data
            }
        except Refused as refused:
            total = sum(item["subtotal"] for item in items)
            return page("cart.html", status_code=refused.status, items=items, total=total, error=refused.message)
        for sku, qty in quantities.items():
            db.set_cart_quantity(sku, qty)
        return back_to("/cart")

    async def cart_remove(request: Request) -> Response:
        db.set_cart_quantity((await read_form(request)).get("sku", ""), 0)
        return back_to("/cart")

    async def checkout(request: Request) -> Response:
        items = db.cart()
        return page(
            "checkout.html",
            items=items,
            customer=db.customer(),
            shipping=SHIPPING,
            total=sum(item["subtotal"] for item in items),
        )

    async def place_order(request: Request) -> Response:
        data = await read_form(request)
        items = db.cart()
        fields = [data.get(key, "") for key in ("name", "street", "city", "zip")]
        method = data.get("shipping", "")
        try:
            if not items:
                raise Refused(400, "Your cart is empty.")
            if method not in SHIPPING:
                raise Refused(400, "Please choose a shipping method.")
            if not all(fields):
                raise Refused(400, "Please fill in every field of the shipping address.")
            check_lengths(MAX_TEXT, data, "name", "street", "city", "zip")
        except Refused as refused:
            return page(
                "checkout.html",
                status_code=refused.status,
                items=items,
                customer=db.customer(),
                shipping=SHIPPING,
                total=sum(item["subtotal"] for item in items),
                error=refused.message,
            )
        number = db.place_order(method, *fields)
        return back_to(f"/orders/{number}")

    async def orders(request: Request) -> Response:
        status = request.query_params.get("status", "").lower()
        try:
            number = parse_page(request.query_params.get("page", ""))
        except Refused as refused:
            return page("orders.html", status_code=refused.status, orders=[], total=0, status=status,
                        statuses=STATUSES, page_links=[], error=refused.message)  # fmt: skip
        found = db.orders(status)
        return page(
            "orders.html",
            orders=paginate(found, number),
            total=len(found),
            first=(number - 1) * PAGE_SIZE + 1,
            status=status,
            statuses=STATUSES,
            page_links=page_links("/orders", {"status": status}, number, len(found), PAGE_SIZE),
        )

    async def latest_order(request: Request) -> Response:
        return back_to(f"/orders/{db.latest_order_number()}")

    async def order(request: Request) -> Response:
        number = order_number(request.path_params["number"])
        found = db.order(number) if number is not None else None
        if found is None:
            return not_found("order")
        return page("order.html", order=found)

    async def cancel_order(request: Request) -> Response:
        number = order_number(request.path_params["number"])
        if number is None or db.order(number) is None:
            return not_found("order")
        db.cancel_order(number)
        return back_to(f"/orders/{number}")

    async def account(request: Request) -> Response:
        return page("account.html", customer=db.customer())

    async def address_form(request: Request) -> Response:
        return page("address.html", customer=db.customer())

    async def save_address(request: Request) -> Response:
        data = await read_form(request)
        fields = [data.get(key, "") for key in ("street", "city", "zip")]
        try:
            if not all(fields):
                raise Refused(400, "Please fill in the street, the city and the ZIP code.")
            check_lengths(MAX_TEXT, data, "street", "city", "zip")
        except Refused as refused:
            return page("address.html", status_code=refused.status, customer=db.customer(), error=refused.message)
        db.update_address(*fields)
        return back_to("/account")

    async def account_form(request: Request) -> Response:
        return page("account_edit.html", customer=db.customer())

    async def save_account(request: Request) -> Response:
        data = await read_form(request)
        name, email = data.get("name", ""), data.get("email", "")
        try:
            if not (name and email):
                raise Refused(400, "Please fill in your full name and your email address.")
            check_lengths(MAX_TEXT, data, "name", "email")
            if not _EMAIL.fullmatch(email):
                raise Refused(422, "The email address must look like name@example.com.")
        except Refused as refused:
            return page("account_edit.html", status_code=refused.status, customer=db.customer(), error=refused.message)
        db.update_account(name, email)
        return back_to("/account")

    async def address_book(request: Request) -> Response:
        return page("addresses.html", addresses=db.addresses())

    def address_fields(data: dict[str, str]) -> list[str]:
        """name, street, city, ZIP of an address form, or `Refused`."""
        fields = [data.get(key, "") for key in ("name", "street", "city", "zip")]
        if not all(fields):
            raise Refused(400, "Please fill in the full name, the street, the city and the ZIP code.")
        check_lengths(MAX_TEXT, data, "name", "street", "city", "zip")
        return fields

    def address_id(request: Request) -> dict[str, Any] | None:
        number = order_number(request.path_params["id"])
        return db.address(number) if number is not None else None

    async def new_address_form(request: Request) -> Response:
        return page("address_book_form.html", address=None)

    async def add_address(request: Request) -> Response:
        data = await read_form(request)
        try:
            fields = address_fields(data)
        except Refused as refused:
            return page("address_book_form.html", status_code=refused.status, address=None, error=refused.message)
        db.add_address(*fields)
        return back_to("/account/addresses")

    async def edit_address_form(request: Request) -> Response:
        found = address_id(request)
        return page("address_book_form.html", address=found) if found else not_found("address")

    async def edit_address(request: Request) -> Response:
        found = address_id(request)
        if found is None:
            return not_found("address")
        try:
            fields = address_fields(await read_form(request))
        except Refused as refused:
            return page("address_book_form.html", status_code=refused.status, address=found, error=refused.message)
        db.edit_address(found["id"], *fields)
        return back_to("/account/addresses")

    async def delete_address(request: Request) -> Response:
        found = address_id(request)
        if found is None:
            return not_found("address")
        if not db.delete_address(found["id"]):
            message = "The default address cannot be deleted; make another address the default first."
            return page("addresses.html", status_code=422, addresses=db.addresses(), error=message)
        return back_to("/account/addresses")

    async def default_address(request: Request) -> Response:
        found = address_id(request)
        if found is None:
            return not_found("address")
        db.set_default_address(found["id"])
        return back_to("/account/addresses")

    async def wishlist(request: Request) -> Response:
        return page("wishlist.html", items=db.wishlist())

    async def wishlist_add(request: Request) -> Response:
        sku = (await read_form(request)).get("sku", "")
        if db.product(sku) is None:
            return not_found("product")
        db.add_to_wishlist(sku)
        return back_to("/wishlist")

    async def wishlist_remove(request: Request) -> Response:
        db.remove_from_wishlist((await read_form(request)).get("sku", ""))
        return back_to("/wishlist")

    async def missing(request: Request, exc: Exception) -> Response:
        return not_found("page")

    routes = [
        Route("/", home),
        Route("/search", search),
        Route("/category/{slug}", category),
        Route("/product/{sku}", product),
        Route("/product/{sku}/review", add_review, methods=["POST"]),
        Route("/cart", cart),
        Route("/cart/add", cart_add, methods=["POST"]),
        Route("/cart/update", cart_update, methods=["POST"]),
        Route("/cart/remove", cart_remove, methods=["POST"]),
        Route("/checkout", checkout),
        Route("/checkout", place_order, methods=["POST"]),
        Route("/orders", orders),
        Route("/orders/latest", latest_order),
        Route("/orders/{number}", order),
        Route("/orders/{number}/cancel", cancel_order, methods=["POST"]),
        Route("/account", account),
        Route("/account/address", address_form),
        Route("/account/address", save_address, methods=["POST"]),
        Route("/account/edit", account_form),
        Route("/account/edit", save_account, methods=["POST"]),
        Route("/account/addresses", address_book),
        Route("/account/addresses", add_address, methods=["POST"]),
        Route("/account/addresses/new", new_address_form),
        Route("/account/addresses/{id}", edit_address_form),
        Route("/account/addresses/{id}", edit_address, methods=["POST"]),
        Route("/account/addresses/{id}/delete", delete_address, methods=["POST"]),
        Route("/account/addresses/{id}/default", default_address, methods=["POST"]),
        Route("/wishlist", wishlist),
        Route("/wishlist/add", wishlist_add, methods=["POST"]),
        Route("/wishlist/remove", wishlist_remove, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: missing, 405: missing})
