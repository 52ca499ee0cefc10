"""Loopback Market Admin: the shop's back office (Starlette + Jinja2 + SQLite): dashboard, reports over
date ranges, orders (invoice, ship, cancel, comment), products, reviews, customers, price rules and CMS
pages. No JavaScript: every change is a plain form POST answered by a redirect; grids keep their
search, filter, sort and page in the URL query.

Input is checked as the shop checks it: a malformed value gets a 400 page, a well-formed one out of
bounds (a date range that ends before it starts, an over-long text, a change the order's status does
not allow) a 422 page, an unknown id a 404 page; each says what was wrong, and nothing changes. No
input gets a 500."""

from __future__ import annotations

import datetime
import math
import re
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from agentgym_envs.webarena.sites.admin import db as records
from agentgym_envs.webarena.sites.admin.db import (
    CUSTOMER_SORTS,
    FIRST_DAY,
    LAST_DAY,
    ORDER_SORTS,
    PAGE_SIZE,
    PRODUCT_SORTS,
    STATUSES,
    AdminDB,
    money,
)
from agentgym_envs.webarena.sites.pages import back_to, read_form, site_templates
from agentgym_envs.webarena.sites.refusals import Refused, check_lengths

SITE_NAME = "Loopback Market Admin"
USERNAME, PASSWORD = "admin", "admin1234"
#: The longest search query, in characters.
MAX_QUERY = 200
#: The longest value of each text field of the forms, in characters, and its name in error messages.
MAX_TEXT = {
    "comment": (2000, "comment"),
    "description": (5000, "description"),
    "email": (200, "email address"),
    "city": (100, "city"),
    "name": (100, "rule name"),
    "code": (40, "coupon code"),
    "title": (200, "title"),
    "content": (10000, "content"),
}
MAX_PRICE = 9_999_999  # cents
MAX_STOCK = 99_999
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_NUMBER = re.compile(r"[0-9]{1,9}")  # shorter than SQLite's 64-bit integers and Python's parsing limit
_PRICE = re.compile(r"\$?([0-9]{1,9})(?:\.([0-9]{1,2}))?")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
_CODE = re.compile(r"[A-Z0-9_-]+")
ORDER_ACTIONS = {"invoice": "Invoice", "ship": "Ship", "cancel": "Cancel Order"}


def number(text: str) -> int | None:
    """A record number from a URL, or None when `text` cannot be one."""
    return int(text) if _NUMBER.fullmatch(text) else None


def parse_date(text: str, what: str) -> str:
    """`text` as an ISO date (YYYY-MM-DD), or `Refused` (400)."""
    try:
        if _DATE.fullmatch(text):
            return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        pass
    raise Refused(400, f"The {what} date must be a date written YYYY-MM-DD, like 2024-03-01.")


def parse_range(params: Any) -> tuple[str, str]:
    """The report's date range from the query (`from`, `to`; all days with orders by default)."""
    start = parse_date(params.get("from", "").strip() or FIRST_DAY, "From")
    end = parse_date(params.get("to", "").strip() or LAST_DAY, "To")
    if start > end:
        raise Refused(422, f"The From date ({start}) must not be after the To date ({end}).")
    return start, end


def parse_whole(text: str, what: str, least: int, most: int) -> int:
    """`text` as a whole number from `least` to `most`, or `Refused` saying what is allowed."""
    if not re.fullmatch(r"[0-9]+", text):
        raise Refused(400, f"The {what} must be a whole number from {least} to {most}.")
    digits = text.lstrip("0") or "0"
    if len(digits) > len(str(most)) or not least <= int(digits) <= most:
        raise Refused(422, f"The {what} must be from {least} to {most}.")
    return int(digits)


def parse_price(text: str) -> int:
    """`'34.99'` or `'$34.99'` -> 3499 cents, or `Refused`."""
    match = _PRICE.fullmatch(text)
    if match is None:
        raise Refused(400, "The price must be an amount in dollars, like 34.99.")
    cents = int(match.group(1)) * 100 + int((match.group(2) or "0").ljust(2, "0"))
    if not 1 <= cents <= MAX_PRICE:
        raise Refused(422, f"The price must be from $0.01 to {money(MAX_PRICE)}.")
    return cents


def check_text(data: dict[str, str], *keys: str, required: bool = True) -> None:
    """`Refused` when a field is empty (400) or longer than its `MAX_TEXT` limit (422)."""
    for key in keys:
        if required and not data.get(key):
            raise Refused(400, f"Please fill in the {MAX_TEXT[key][1]}.")
        check_lengths(MAX_TEXT, data, key)


def choice(value: str, allowed: Any, what: str) -> str:
    """`value` when it is one of `allowed`, else `Refused` (400) listing them."""
    if value not in allowed:
        raise Refused(400, f"The {what} must be one of: {', '.join(allowed)}.")
    return value


def create_app(db: AdminDB) -> Starlette:
    """The admin as an ASGI app over `db`."""
    templates = site_templates("agentgym_envs.webarena.sites.admin", SITE_NAME)
    templates.filters["money"] = money

    def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status_code)

    def not_found(what: str) -> HTMLResponse:
        return page("not_found.html", status_code=404, what=what)

    def refused(error: Refused) -> HTMLResponse:
        return page("refused.html", status_code=error.status, error=error.message)

    def grid_params(request: Request, sorts: dict[str, Any], statuses: tuple[str, ...] = ()) -> dict[str, Any]:
        """The grid's search, status filter, sort and page from the query, checked."""
        params = request.query_params
        query = params.get("q", "").strip()
        if len(query) > MAX_QUERY:
            raise Refused(422, f"Searches can be at most {MAX_QUERY} characters long.")
        status = params.get("status", "")
        if status:
            choice(status.capitalize(), statuses, "status")
        sort = params.get("sort", "") or next(iter(sorts))
        choice(sort, sorts, "sort order")
        page_number = parse_whole(params.get("page", "1"), "page number", 1, 99_999)
        return {"q": query, "status": status.capitalize(), "sort": sort, "page": page_number}

    def grid(path: str, params: dict[str, Any], rows: list[dict[str, Any]], count: int, **context: Any) -> dict:
        """The context of a grid page: rows, counts and the links to other pages, filters and sorts."""
        pages = max(1, math.ceil(count / PAGE_SIZE))
        if params["page"] > pages:
            raise Refused(422, f"There are only {pages} pages.")

        def link(**changes: Any) -> str:
            merged = {**params, "page": 1, **changes}
            merged["status"] = merged["status"].lower()
            query = urlencode({key: value for key, value in merged.items() if value not in ("", None, 1)})
            return f"{path}?{query}" if query else path

        return {
            "rows": rows,
            "count": count,
            "params": params,
            "pages": pages,
            "previous": link(page=params["page"] - 1) if params["page"] > 1 else None,
            "next": link(page=params["page"] + 1) if params["page"] < pages else None,
            "status_links": [
                (label, link(status=label if label != "All" else "")) for label in context.pop("statuses", ())
            ],
            "sort_links": [
                (label, link(sort=key), key == params["sort"]) for key, (label, _) in context.pop("sorts", {}).items()
            ],
            **context,
        }

    # ---- pages ----------------------------------------------------------------------------------
    async def dashboard(request: Request) -> Response:
        return page("dashboard.html", totals=db.dashboard())

    async def login_form(request: Request) -> Response:
        return page("login.html")

    async def login(request: Request) -> Response:
        data = await read_form(request)
        if not data.get("username") or not data.get("password"):
            return page("login.html", status_code=400, error="Please enter a username and a password.")
        if (data["username"], data["password"]) != (USERNAME, PASSWORD):
            return page("login.html", status_code=422, error="The username or the password is wrong.")
        return back_to("/")

    async def reports(request: Request) -> Response:
        return page("reports.html")

    def report_page(kind: str) -> Any:
        async def show(request: Request) -> Response:
            try:
                start, end = parse_range(request.query_params)
                if kind == "low-stock":
                    threshold = parse_whole(request.query_params.get("threshold", "5") or "5", "threshold", 0, 99_999)
                    return page(
                        "report.html", kind=kind, threshold=threshold, rows=db.report(records.low_stock, threshold)
                    )
            except Refused as error:
                return page(
                    "report.html",
                    status_code=error.status,
                    kind=kind,
                    error=error.message,
                    start=request.query_params.get("from", ""),
                    end=request.query_params.get("to", ""),
                )
            function = {
                "sales": records.sales_report,
                "bestsellers": records.bestsellers,
                "customers": records.top_customers,
            }[kind]
            return page("report.html", kind=kind, start=start, end=end, result=db.report(function, start, end))

        return show

    async def orders(request: Request) -> Response:
        try:
            params = grid_params(request, ORDER_SORTS, STATUSES)
            rows, count = db.orders(params["q"], params["status"], params["sort"], params["page"])
            context = grid("/orders", params, rows, count, statuses=("All", *STATUSES), sorts=ORDER_SORTS)
        except Refused as error:
            return refused(error)
        return page("orders.html", **context)

    async def order(request: Request) -> Response:
        found = db.order(number(request.path_params["number"]) or 0)
        if found is None:
            return not_found("order")
        return page("order.html", order=found)

    async def order_action(request: Request) -> Response:
        found = db.order(number(request.path_params["number"]) or 0)
        action = request.path_params["action"]
        if found is None or action not in ORDER_ACTIONS:
            return not_found("order" if found is None else "page")
        try:
            db.order_action(found["number"], action)
        except Refused as error:
            return page("order.html", status_code=error.status, order=found, error=error.message)
        return back_to(f"/orders/{found['number']}")

    async def order_comment(request: Request) -> Response:
        found = db.order(number(request.path_params["number"]) or 0)
        if found is None:
            return not_found("order")
        data = await read_form(request)
        try:
            check_text(data, "comment")
        except Refused as error:
            return page("order.html", status_code=error.status, order=found, error=error.message)
        db.add_comment(found["number"], data["comment"])
        return back_to(f"/orders/{found['number']}")

    async def products(request: Request) -> Response:
        try:
            params = grid_params(request, PRODUCT_SORTS, ("Enabled", "Disabled"))
            rows, count = db.products(params["q"], params["status"], params["sort"], params["page"])
            context = grid(
                "/products", params, rows, count, statuses=("All", "Enabled", "Disabled"), sorts=PRODUCT_SORTS
            )
        except Refused as error:
            return refused(error)
        return page("products.html", **context)

    async def product(request: Request) -> Response:
        found = db.product(request.path_params["sku"])
        return page("product.html", product=found) if found else not_found("product")

    async def save_product(request: Request) -> Response:
        found = db.product(request.path_params["sku"])
        if found is None:
            return not_found("product")
        data = await read_form(request)
        try:
            price = parse_price(data.get("price", ""))
            stock = parse_whole(data.get("stock", ""), "stock", 0, MAX_STOCK)
            status = choice(data.get("status", ""), ("Enabled", "Disabled"), "status")
            check_text(data, "description")
        except Refused as error:
            return page("product.html", status_code=error.status, product=found, error=error.message)
        db.update_product(found["sku"], price, stock, status, data["description"])
        return back_to(f"/products/{found['sku']}")

    async def reviews(request: Request) -> Response:
        try:
            params = grid_params(request, {"newest": ("Newest first", "")}, ("Pending", "Approved"))
            rows, count = db.reviews(params["q"], params["status"], params["page"])
            context = grid("/reviews", params, rows, count, statuses=("All", "Pending", "Approved"))
        except Refused as error:
            return refused(error)
        return page("reviews.html", **context)

    async def review(request: Request) -> Response:
        found = db.review(number(request.path_params["id"]) or 0)
        return page("review.html", review=found) if found else not_found("review")

    async def review_action(request: Request) -> Response:
        found = db.review(number(request.path_params["id"]) or 0)
        if found is None:
            return not_found("review")
        if request.path_params["action"] == "approve":
            db.approve_review(found["id"])
            return back_to(f"/reviews/{found['id']}")
        if request.path_params["action"] == "delete":
            db.delete_review(found["id"])
            return back_to("/reviews")
        return not_found("page")

    async def customers(request: Request) -> Response:
        try:
            params = grid_params(request, CUSTOMER_SORTS)
            rows, count = db.customers(params["q"], params["sort"], params["page"])
            context = grid("/customers", params, rows, count, sorts=CUSTOMER_SORTS)
        except Refused as error:
            return refused(error)
        return page("customers.html", **context)

    async def customer(request: Request) -> Response:
        found = db.customer(number(request.path_params["id"]) or 0)
        return page("customer.html", customer=found) if found else not_found("customer")

    async def save_customer(request: Request) -> Response:
        found = db.customer(number(request.path_params["id"]) or 0)
        if found is None:
            return not_found("customer")
        data = await read_form(request)
        try:
            check_text(data, "email", "city")
            if not _EMAIL.fullmatch(data["email"]):
                raise Refused(400, "The email address must look like name@example.com.")
        except Refused as error:
            return page("customer.html", status_code=error.status, customer=found, error=error.message)
        db.update_customer(found["id"], data["email"], data["city"])
        return back_to(f"/customers/{found['id']}")

    async def promotions(request: Request) -> Response:
        query = request.query_params.get("q", "").strip()
        if len(query) > MAX_QUERY:
            return refused(Refused(422, f"Searches can be at most {MAX_QUERY} characters long."))
        return page("promotions.html", rules=db.rules(query), query=query)

    def rule_fields(data: dict[str, str]) -> tuple[str, str, int, str, str, str]:
        check_text(data, "name", "code")
        code = data["code"].upper()
        if not _CODE.fullmatch(code):
            raise Refused(400, "The coupon code may hold only letters, digits, '-' and '_'.")
        discount = parse_whole(data.get("discount", ""), "discount", 1, 100)
        starts = parse_date(data.get("starts", ""), "From")
        ends = parse_date(data.get("ends", ""), "To")
        if starts > ends:
            raise Refused(422, f"The rule must not end ({ends}) before it starts ({starts}).")
        return (
            data["name"],
            code,
            discount,
            starts,
            ends,
            choice(data.get("status", ""), ("Enabled", "Disabled"), "status"),
        )

    async def rule(request: Request) -> Response:
        if request.path_params["id"] == "new":
            return page("rule.html", rule=None)
        found = db.rule(number(request.path_params["id"]) or 0)
        return page("rule.html", rule=found) if found else not_found("price rule")

    async def save_rule(request: Request) -> Response:
        rule_id = None
        found = None
        if request.path_params["id"] != "new":
            found = db.rule(number(request.path_params["id"]) or 0)
            if found is None:
                return not_found("price rule")
            rule_id = found["id"]
        data = await read_form(request)
        try:
            fields = rule_fields(data)
        except Refused as error:
            return page("rule.html", status_code=error.status, rule=found, error=error.message, form=data)
        return back_to(f"/promotions/{db.save_rule(rule_id, fields)}")

    async def cms(request: Request) -> Response:
        return page("cms.html", pages=db.pages())

    async def cms_page(request: Request) -> Response:
        found = db.cms_page(number(request.path_params["id"]) or 0)
        return page("cms_page.html", page=found) if found else not_found("CMS page")

    async def save_cms_page(request: Request) -> Response:
        found = db.cms_page(number(request.path_params["id"]) or 0)
        if found is None:
            return not_found("CMS page")
        data = await read_form(request)
        try:
            check_text(data, "title", "content")
            status = choice(data.get("status", ""), ("Enabled", "Disabled"), "status")
        except Refused as error:
            return page("cms_page.html", status_code=error.status, page=found, error=error.message)
        db.update_page(found["id"], data["title"], data["content"], status)
        return back_to(f"/cms/{found['id']}")

    async def missing(request: Request, exc: Exception) -> Response:
        return not_found("page")

    routes = [
        Route("/", dashboard),
        Route("/login", login_form),
        Route("/login", login, methods=["POST"]),
        Route("/reports", reports),
        *(Route(f"/reports/{kind}", report_page(kind)) for kind in ("sales", "bestsellers", "low-stock", "customers")),
        Route("/orders", orders),
        Route("/orders/{number}", order),
        Route("/orders/{number}/comment", order_comment, methods=["POST"]),
        Route("/orders/{number}/{action}", order_action, methods=["POST"]),
        Route("/products", products),
        Route("/products/{sku}", product),
        Route("/products/{sku}", save_product, methods=["POST"]),
        Route("/reviews", reviews),
        Route("/reviews/{id}", review),
        Route("/reviews/{id}/{action}", review_action, methods=["POST"]),
        Route("/customers", customers),
        Route("/customers/{id}", customer),
        Route("/customers/{id}", save_customer, methods=["POST"]),
        Route("/promotions", promotions),
        Route("/promotions/{id}", rule),
        Route("/promotions/{id}", save_rule, methods=["POST"]),
        Route("/cms", cms),
        Route("/cms/{id}", cms_page),
        Route("/cms/{id}", save_cms_page, methods=["POST"]),
    ]
    return Starlette(routes=routes, exception_handlers={404: missing, 405: missing})
