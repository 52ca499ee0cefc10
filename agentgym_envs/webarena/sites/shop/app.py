"""Loopback Market: a small shop (Starlette + Jinja2 + SQLite) with search, categories, product
pages and reviews, a cart, checkout, orders and an account page. No JavaScript: every change is a
plain form POST answered by a redirect, so pages are deterministic and render fast."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from agentgym_envs.webarena.sites.shop.db import SHIPPING, SORTS, ShopDB, money

SITE_NAME = "Loopback Market"


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
        if db.product(sku) is None:
            return not_found("product")
        if not (data.get("title") and data.get("body") and rating[:1] in "12345" and rating[:1]):
            return page(
                "product.html",
                status_code=400,
                product=db.product(sku),
                reviews=db.reviews(sku),
                error="Please give a rating, a title and a review.",
            )
        db.add_review(sku, data.get("nickname") or db.customer()["name"], int(rating[0]), data["title"], data["body"])
        return back_to(f"/product/{sku}")

    async def cart(request: Request) -> Response:
        items = db.cart()
        return page("cart.html", items=items, total=sum(item["subtotal"] for item in items))

    async def cart_add(request: Request) -> Response:
        data = await form(request)
        sku, qty = data.get("sku", ""), data.get("qty", "1")
        if db.product(sku) is None:
            return not_found("product")
        if not qty.isdigit() or int(qty) < 1:
            return page(
                "product.html",
                status_code=400,
                product=db.product(sku),
                reviews=db.reviews(sku),
                error="The quantity must be a whole number of at least 1.",
            )
        db.add_to_cart(sku, int(qty))
        return back_to("/cart")

    async def cart_update(request: Request) -> Response:
        data = await form(request)
        for item in db.cart():
            qty = data.get(f"qty_{item['sku']}", str(item["qty"]))
            if qty.isdigit():
                db.set_cart_quantity(item["sku"], int(qty))
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
        error = None
        if not items:
            error = "Your cart is empty."
        elif method not in SHIPPING:
            error = "Please choose a shipping method."
        elif not all(fields):
            error = "Please fill in every field of the shipping address."
        if error:
            return page(
                "checkout.html",
                status_code=400,
                items=items,
                customer=db.customer(),
                shipping=SHIPPING,
                total=sum(item["subtotal"] for item in items),
                error=error,
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
        number = request.path_params["number"]
        found = db.order(int(number)) if number.isdigit() else None
        if found is None:
            return not_found("order")
        return page("order.html", order=found)

    async def cancel_order(request: Request) -> Response:
        number = request.path_params["number"]
        if not number.isdigit() or db.order(int(number)) is None:
            return not_found("order")
        db.cancel_order(int(number))
        return back_to(f"/orders/{number}")

    async def account(request: Request) -> Response:
        return page("account.html", customer=db.customer())

    async def address_form(request: Request) -> Response:
        return page("address.html", customer=db.customer())

    async def save_address(request: Request) -> Response:
        data = await form(request)
        fields = [data.get(key, "") for key in ("street", "city", "zip")]
        if not all(fields):
            return page(
                "address.html",
                status_code=400,
                customer=db.customer(),
                error="Please fill in the street, the city and the ZIP code.",
            )
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
