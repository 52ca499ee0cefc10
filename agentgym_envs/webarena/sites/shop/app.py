"""Loopback Market: a small shop (Starlette + Jinja2 + SQLite) with search, categories, product
pages and reviews, a cart, checkout, orders and an account page. No JavaScript: every change is a
plain form POST answered by a redirect, so pages are deterministic and render fast.

Input is checked as a real shop checks it: a malformed value gets a 400 page, a well-formed one out of
bounds (a quantity over the cart's limit, an over-long field or query) a 422 page, an unknown id a 404
page; each says what was wrong, and nothing changes. No input gets a 500."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from agentgym_envs.webarena.sites.shop.db import MAX_QUANTITY, SHIPPING, SORTS, ShopDB, money

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
}
_WHOLE_NUMBER = re.compile(r"[0-9]+")
_ORDER_NUMBER = re.compile(r"[0-9]{1,9}")  # shorter than SQLite's 64-bit integers and Python's parsing limit


class Refused(Exception):
    """Input the shop does not accept: the HTTP status (400 malformed, 422 out of bounds) and why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def parse_quantity(text: str, least: int, what: str = "The quantity") -> int:
    """`text` as a quantity from `least` to `MAX_QUANTITY`, or `Refused` saying what is allowed."""
    if not _WHOLE_NUMBER.fullmatch(text):
        raise Refused(400, f"{what} must be a whole number from {least} to {MAX_QUANTITY}.")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(MAX_QUANTITY)) or not least <= int(digits) <= MAX_QUANTITY:
        raise Refused(422, f"{what} must be from {least} to {MAX_QUANTITY}.")
    return int(digits)


def check_lengths(data: dict[str, str], *keys: str) -> None:
    """`Refused` (422) when a field of `data` is longer than its `MAX_TEXT` limit."""
    for key in keys:
        limit, label = MAX_TEXT[key]
        if len(data.get(key, "")) > limit:
            raise Refused(422, f"The {label} can be at most {limit} characters long.")


def order_number(text: str) -> int | None:
    """An order number from a URL, or None when `text` cannot be one."""
    return int(text) if _ORDER_NUMBER.fullmatch(text) else None


def create_app(db: ShopDB) -> Starlette:
    """The shop as an ASGI app over `db`."""
    templates = jinja2.Environment(
        loader=jinja2.PackageLoader("agentgym_envs.webarena.sites.shop", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters["money"] = money
    templates.globals["site_name"] = SITE_NAME

    def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        context.setdefault("cart_count", sum(item["qty"] for item in db.cart()))
        context.setdefault("categories", db.categories())
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status_code)

    def not_found(what: str) -> HTMLResponse:
        return page("not_found.html", status_code=404, what=what)

    async def form(request: Request) -> dict[str, str]:
        body = (await request.body()).decode("utf-8", "replace")
        return {key: values[-1].strip() for key, values in parse_qs(body, keep_blank_values=True).items()}

    def back_to(url: str) -> RedirectResponse:
        return RedirectResponse(url, status_code=303)

    async def home(request: Request) -> Response:
        return page("home.html", products=db.featured())

    def sort_links(path: str, params: dict[str, str], sort: str) -> list[tuple[str, str, bool]]:
        """(label, url, is_current) for each sort order of a listing."""
        links = []
        for key, (label, _) in SORTS.items():
            query = urlencode({**params, "sort": key} if key else params)
            links.append((label, f"{path}?{query}" if query else path, key == sort))
        return links

    async def search(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        sort = request.query_params.get("sort", "")
        if len(query) > MAX_QUERY:
            return page(
                "listing.html",
                status_code=422,
                title="Search",
                query=query[:MAX_QUERY],
                products=[],
                sort_links=[],
                error=f"Search queries can be at most {MAX_QUERY} characters long.",
            )
        return page(
            "listing.html",
            title=f"Search results for '{query}'",
            query=query,
            products=db.search(query, sort),
            sort_links=sort_links("/search", {"q": query}, sort),
        )

    async def category(request: Request) -> Response:
        found = db.category(request.path_params["slug"])
        if found is None:
            return not_found("category")
        sort = request.query_params.get("sort", "")
        path = f"/category/{found['slug']}"
        return page(
            "listing.html",
            title=found["name"],
            products=db.in_category(found["slug"], sort),
            sort_links=sort_links(path, {}, sort),
        )

    async def product(request: Request) -> Response:
        found = db.product(request.path_params["sku"])
        if found is None:
            return not_found("product")
        return page("product.html", product=found, reviews=db.reviews(found["sku"]))

    async def add_review(request: Request) -> Response:
        sku = request.path_params["sku"]
        data = await form(request)
        rating = data.get("rating", "")
        found = db.product(sku)
        if found is None:
            return not_found("product")
        try:
            if not (data.get("title") and data.get("body") and rating in ("1", "2", "3", "4", "5")):
                raise Refused(400, "Please give a rating, a title and a review.")
            check_lengths(data, "nickname", "title", "body")
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
        data = await form(request)
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
        data = await form(request)
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
        db.set_cart_quantity((await form(request)).get("sku", ""), 0)
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
        data = await form(request)
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
            check_lengths(data, "name", "street", "city", "zip")
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
        return page(
            "orders.html",
            orders=db.orders(status),
            status=status,
            statuses=["pending", "shipped", "complete", "canceled"],
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
        data = await form(request)
        fields = [data.get(key, "") for key in ("street", "city", "zip")]
        try:
            if not all(fields):
                raise Refused(400, "Please fill in the street, the city and the ZIP code.")
            check_lengths(data, "street", "city", "zip")
        except Refused as refused:
            return page("address.html", status_code=refused.status, customer=db.customer(), error=refused.message)
        db.update_address(*fields)
        return back_to("/account")

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
    ]
    return Starlette(routes=routes, exception_handlers={404: missing, 405: missing})
