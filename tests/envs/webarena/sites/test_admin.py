"""The shop admin over HTTP (no browser): the seed, the reports against sums computed here, the order
workflow (only valid transitions), every edit form, input checks (400/422/404, never 500) and restore."""

from __future__ import annotations

import html as html_module
import random
import re
from collections import defaultdict

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites.admin.app import MAX_QUERY, create_app
from agentgym_envs.webarena.sites.admin.db import PAGE_SIZE, AdminDB, money, seed_connection, seed_rows


@pytest.fixture()
def admin() -> tuple[TestClient, AdminDB]:
    db = AdminDB()
    yield TestClient(create_app(db), base_url="http://admin.shop.test"), db
    db.close()


def text(html: str) -> str:
    html = re.sub(r"(?s)<style>.*?</style>|<header>.*?</header>", " ", html)
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def shown(html: str, element_id: str) -> str:
    """The text of the element with this id."""
    match = re.search(rf'id="{element_id}"[^>]*>(.*?)</(dd|ul|p|table)>', html, re.S)
    assert match, f"no #{element_id}"
    return text(match.group(1))


def post(client: TestClient, path: str, **data: str):
    return client.post(path, data=data, follow_redirects=False)


def everything(db: AdminDB) -> tuple:
    """Everything an admin can change."""
    with db._lock:
        return tuple(
            db._live.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
            for table in ("products", "customers", "orders", "order_comments", "reviews", "price_rules", "cms_pages")
        )


def test_the_seed_is_deterministic_and_has_hundreds_of_rows() -> None:
    first, second = seed_connection(), seed_connection()
    for table in ("products", "customers", "orders", "order_items", "reviews", "price_rules", "cms_pages"):
        rows = first.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
        assert [tuple(r) for r in rows] == [tuple(r) for r in second.execute(f"SELECT * FROM {table} ORDER BY rowid")]
    count = {t: first.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in ("products", "orders", "reviews")}
    assert count["products"] == 240 and count["orders"] >= 500 and count["reviews"] == 300
    statuses = {row[0] for row in first.execute("SELECT DISTINCT status FROM orders")}
    assert statuses == {"Pending", "Processing", "Complete", "Canceled"}
    assert {row[0] for row in first.execute("SELECT DISTINCT status FROM reviews")} == {"Pending", "Approved"}
    assert {row[0] for row in first.execute("SELECT DISTINCT status FROM products")} == {"Enabled", "Disabled"}


def test_reports_show_the_sums_of_the_seed(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    rows = seed_rows()
    totals = defaultdict(int)
    for number, _sku, _, price, qty in rows["order_items"]:
        totals[number] += price * qty
    march = [o for o in rows["orders"] if o[2].startswith("2024-03")]
    sales = sum(totals[o[0]] + o[6] for o in march if o[3] != "Canceled")
    page = client.get("/reports/sales?from=2024-03-01&to=2024-03-31")
    assert page.status_code == 200
    total_row = text(page.text).split("Total ", 1)[1]
    assert total_row.startswith(f"{len(march)} {sum(o[3] == 'Canceled' for o in march)} ")
    assert money(sales) in total_row
    units = defaultdict(int)
    for number, sku, _, _, qty in rows["order_items"]:
        if rows["orders"][number - 1001][3] != "Canceled":
            units[sku] += qty
    best_sku = max(sorted(units), key=lambda sku: units[sku])
    best = text(client.get("/reports/bestsellers").text)
    assert f"1 {next(p[1] for p in rows['products'] if p[0] == best_sku)} {best_sku} {units[best_sku]} " in best
    low = [p for p in rows["products"] if p[4] <= 3]
    assert f"{len(low)} products with 3 or fewer units" in text(client.get("/reports/low-stock?threshold=3").text)
    dashboard = client.get("/").text
    all_sales = sum(totals[o[0]] + o[6] for o in rows["orders"] if o[3] != "Canceled")
    assert shown(dashboard, "lifetime-sales") == money(all_sales)
    customers = text(client.get("/reports/customers?from=2024-01-01&to=2024-05-31").text)
    assert "Rank Customer Orders Sales 1 " in customers


def test_report_input_is_checked(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    assert client.get("/reports/sales?from=2024-02-30").status_code == 400
    assert client.get("/reports/sales?from=march").status_code == 400
    refused = client.get("/reports/bestsellers?from=2024-05-01&to=2024-04-01")
    assert refused.status_code == 422 and "must not be after" in refused.text
    assert client.get("/reports/low-stock?threshold=-1").status_code == 400
    assert client.get("/reports/low-stock?threshold=9999999").status_code == 422
    assert client.get("/reports/nothing").status_code == 404


def test_grids_filter_sort_and_paginate_in_the_query(admin: tuple[TestClient, AdminDB]) -> None:
    client, db = admin
    pending = text(client.get("/orders?status=pending").text)
    assert "Pending" in pending and "Complete" not in pending.split("records found", 1)[1]
    page_two = client.get("/orders?sort=number_asc&page=2").text
    assert f"#{1001 + PAGE_SIZE}" in page_two and "Page 2 of" in page_two and "Previous page" in page_two
    totals = [
        float(t.replace(",", ""))
        for t in re.findall(r"\$([0-9,]+\.[0-9]{2})</td></tr>", client.get("/orders?sort=total_desc").text)
    ]
    assert totals == sorted(totals, reverse=True) and len(totals) == PAGE_SIZE
    assert "#1001<" in client.get("/orders?q=1001").text
    disabled = text(client.get("/products?q=kitchen&status=disabled").text)
    assert "Enabled" not in disabled.split("records found", 1)[1]
    assert "1 records found" in text(client.get("/customers?q=" + db.customer(1)["email"]).text)
    assert "Pending" in text(client.get("/reviews?status=pending").text)
    for bad, status in (
        ("/orders?page=0", 422),
        ("/orders?page=x", 400),
        ("/orders?page=99", 422),
        ("/orders?status=lost", 400),
        ("/products?sort=up", 400),
        ("/customers?q=" + "x" * (MAX_QUERY + 1), 422),
        ("/promotions?q=" + "x" * 201, 422),
    ):
        assert client.get(bad).status_code == status, bad


def test_orders_allow_only_valid_transitions(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    number = next(o[0] for o in seed_rows()["orders"] if o[3] == "Pending")
    assert post(client, f"/orders/{number}/invoice").status_code == 303
    page = client.get(f"/orders/{number}").text
    assert (shown(page, "status"), shown(page, "invoiced"), shown(page, "shipped")) == ("Processing", "Yes", "No")
    assert "Cancel Order" not in page and "Invoice</button>" not in page and "Ship</button>" in page
    refused = post(client, f"/orders/{number}/cancel")
    assert refused.status_code == 422 and "already invoiced" in refused.text
    assert post(client, f"/orders/{number}/invoice").status_code == 422
    assert post(client, f"/orders/{number}/ship").status_code == 303
    assert shown(client.get(f"/orders/{number}").text, "status") == "Complete"
    assert post(client, f"/orders/{number}/ship").status_code == 422
    other = [o[0] for o in seed_rows()["orders"] if o[3] == "Pending"][1]
    assert post(client, f"/orders/{other}/cancel").status_code == 303
    assert shown(client.get(f"/orders/{other}").text, "status") == "Canceled"
    assert post(client, f"/orders/{other}/invoice").status_code == 422
    assert post(client, f"/orders/{other}/comment", comment="Called the customer.").status_code == 303
    assert "Called the customer." in shown(client.get(f"/orders/{other}").text, "comments")
    assert post(client, f"/orders/{other}/comment", comment="  ").status_code == 400
    assert post(client, f"/orders/{other}/comment", comment="x" * 2001).status_code == 422
    assert post(client, "/orders/42/cancel").status_code == 404
    assert post(client, f"/orders/{other}/refund").status_code == 404
    assert client.get("/orders/99999999999999999999").status_code == 404


def test_product_edits_are_checked_and_shown(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    fields = {"price": "$39.50", "stock": "7", "status": "Disabled", "description": "New words."}
    assert post(client, "/products/HO-1001", **fields).status_code == 303
    page = client.get("/products/HO-1001").text
    assert [shown(page, key) for key in ("price", "stock", "status", "description")] == [
        "$39.50",
        "7",
        "Disabled",
        "New words.",
    ]
    for key, value, status in (
        ("price", "abc", 400),
        ("price", "0", 422),
        ("price", "1.234", 400),
        ("stock", "-1", 400),
        ("stock", "1000000", 422),
        ("status", "Gone", 400),
        ("description", "", 400),
        ("description", "x" * 5001, 422),
    ):
        assert post(client, "/products/HO-1001", **{**fields, key: value}).status_code == status, (key, value)
    assert shown(client.get("/products/HO-1001").text, "price") == "$39.50"
    assert post(client, "/products/NOPE", **fields).status_code == 404


def test_reviews_are_approved_and_deleted(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    review = next(r for r in seed_rows()["reviews"] if r[7] == "Pending")
    assert post(client, f"/reviews/{review[0]}/approve").status_code == 303
    assert shown(client.get(f"/reviews/{review[0]}").text, "status") == "Approved"
    assert post(client, f"/reviews/{review[0]}/delete").status_code == 303
    gone = client.get(f"/reviews/{review[0]}")
    assert gone.status_code == 404 and "<h1>Page not found</h1>" in gone.text
    assert post(client, f"/reviews/{review[0]}/approve").status_code == 404
    assert post(client, "/reviews/1/like").status_code == 404


def test_customers_rules_and_pages_are_edited(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    assert post(client, "/customers/1", email="a@b.test", city="Reno").status_code == 303
    page = client.get("/customers/1").text
    assert (shown(page, "email"), shown(page, "city")) == ("a@b.test", "Reno")
    assert post(client, "/customers/1", email="not-an-email", city="Reno").status_code == 400
    assert post(client, "/customers/1", email="a@b.test", city="").status_code == 400
    assert post(client, "/customers/999", email="a@b.test", city="Reno").status_code == 404

    rule = {
        "name": "Mega Monday",
        "code": "mega20",
        "discount": "20",
        "starts": "2024-06-03",
        "ends": "2024-06-10",
        "status": "Enabled",
    }
    created = post(client, "/promotions/new", **rule)
    assert created.status_code == 303
    grid = shown(client.get("/promotions?q=MEGA20").text, "rules")
    assert "Mega Monday MEGA20 20% 2024-06-03 2024-06-10 Enabled" in grid
    rule_page = created.headers["location"]
    assert post(client, rule_page, **{**rule, "status": "Disabled", "discount": "35"}).status_code == 303
    page = client.get(rule_page).text
    assert (shown(page, "status"), shown(page, "discount")) == ("Disabled", "35%")
    for key, value, status in (
        ("discount", "0", 422),
        ("discount", "101", 422),
        ("discount", "ten", 400),
        ("starts", "2024-06-31", 400),
        ("ends", "2024-06-01", 422),
        ("code", "A B", 400),
        ("name", "", 400),
        ("status", "", 400),
    ):
        assert post(client, "/promotions/new", **{**rule, key: value}).status_code == status, (key, value)
    assert post(client, "/promotions/77", **rule).status_code == 404

    assert post(client, "/cms/1", title="Our Story", content="Hello.", status="Disabled").status_code == 303
    page = client.get("/cms/1").text
    assert [shown(page, key) for key in ("title", "content", "status")] == ["Our Story", "Hello.", "Disabled"]
    assert post(client, "/cms/1", title="Our Story", content="Hello.", status="Maybe").status_code == 400
    assert post(client, "/cms/1", title="", content="Hello.", status="Enabled").status_code == 400
    assert post(client, "/cms/99", title="T", content="C", status="Enabled").status_code == 404


def test_sign_in(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    assert "already signed in" in client.get("/login").text
    signed = post(client, "/login", username="admin", password="admin1234")
    assert signed.status_code == 303 and signed.headers["location"] == "/"
    assert post(client, "/login", username="admin", password="wrong").status_code == 422
    assert post(client, "/login", username="", password="").status_code == 400


def test_restore_undoes_every_change(admin: tuple[TestClient, AdminDB]) -> None:
    client, db = admin
    before = everything(db)
    pending = [o[0] for o in seed_rows()["orders"] if o[3] == "Pending"]
    post(client, f"/orders/{pending[0]}/cancel")
    post(client, f"/orders/{pending[1]}/ship")
    post(client, f"/orders/{pending[1]}/comment", comment="Shipped early.")
    post(client, "/products/KI-1001", price="1.00", stock="0", status="Disabled", description="Changed.")
    post(client, "/reviews/1/delete")
    post(client, "/reviews/2/approve")
    post(client, "/customers/3", email="x@y.test", city="Reno")
    post(
        client,
        "/promotions/new",
        name="N",
        code="N1",
        discount="5",
        starts="2024-06-01",
        ends="2024-06-02",
        status="Enabled",
    )
    post(
        client,
        "/promotions/2",
        name="M",
        code="M1",
        discount="5",
        starts="2024-06-01",
        ends="2024-06-02",
        status="Disabled",
    )
    post(client, "/cms/2", title="T", content="C", status="Disabled")
    assert everything(db) != before
    db.restore()
    assert everything(db) == before


def test_hostile_input_never_gets_a_500(admin: tuple[TestClient, AdminDB]) -> None:
    client, _ = admin
    rng = random.Random(3)
    junk = [
        "",
        "0",
        "-1",
        "1e9",
        "\uff19",
        "' OR 1=1 --",
        "%00",
        "\u202e",
        "x" * 300,
        "2024-13-40",
        "99999999999999999999",
    ]
    paths = [
        "/orders/1385/{}",
        "/orders/{}/comment",
        "/products/{}",
        "/reviews/{}/approve",
        "/customers/{}",
        "/promotions/{}",
        "/cms/{}",
        "/login",
    ]
    keys = [
        "comment",
        "price",
        "stock",
        "status",
        "description",
        "email",
        "city",
        "name",
        "code",
        "discount",
        "starts",
        "ends",
        "title",
        "content",
        "username",
        "password",
    ]
    for _ in range(60):
        path = rng.choice(paths).format(rng.choice([*junk, "invoice", "1", "new", "HO-1001"]))
        data = {key: rng.choice(junk) for key in rng.sample(keys, 5)}
        response = client.post(path, data=data, follow_redirects=False)
        assert response.status_code in (303, 307, 400, 404, 422), (path, data, response.status_code)
        query = {key: rng.choice(junk) for key in rng.sample(["q", "status", "sort", "page", "from", "to"], 3)}
        for page in ("/orders", "/products", "/reviews", "/customers", "/reports/sales", "/reports/low-stock"):
            assert client.get(page, params=query).status_code in (200, 307, 400, 404, 422), (page, query)
