"""The shop's grown features over HTTP (no browser): the generated catalogue, listing filters, sorts and
pages in the URL query, the wish list, the address book and the account, their input checks and
their restore."""

from __future__ import annotations

import html as html_module
import re

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites.shop.app import create_app
from agentgym_envs.webarena.sites.shop.db import PAGE_SIZE, ShopDB, seed_connection


@pytest.fixture()
def shop() -> tuple[TestClient, ShopDB]:
    db = ShopDB()
    yield TestClient(create_app(db), base_url="http://shop.test"), db
    db.close()


def text(html: str) -> str:
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def everything(db: ShopDB) -> tuple:
    """Everything an agent can change in the shop."""
    return db.cart(), db.orders(), db.reviews("OU-3001"), db.customer(), db.addresses(), db.wishlist()


def test_the_seed_has_hundreds_of_rows_of_every_kind_and_is_deterministic() -> None:
    first, second = seed_connection(), seed_connection()
    counts = {
        table: first.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0]
        for table in ("products", "reviews", "orders", "order_items", "categories", "addresses", "wishlist")
    }
    assert counts["products"] >= 250 and counts["reviews"] >= 300 and counts["orders"] >= 100
    assert counts["categories"] == 9 and counts["addresses"] >= 5 and counts["wishlist"] >= 3
    statuses = {row[0] for row in first.execute("SELECT status FROM orders")}
    assert statuses == {"Pending", "Processing", "Shipped", "Complete", "Canceled"}
    for table in ("products", "reviews", "orders", "order_items", "wishlist"):
        query = f"SELECT * FROM {table} ORDER BY 1, 2"
        assert [tuple(r) for r in first.execute(query)] == [tuple(r) for r in second.execute(query)]
    # The generated rows leave the hand-written tasks' answers as they were.
    kitchen = [r[0] for r in first.execute("SELECT name FROM products WHERE category = 'kitchen' ORDER BY price")]
    assert kitchen[:3] == ["Silicone Spatula Set", "Bamboo Cutting Board", "Ceramic Coffee Mug Set (4)"]
    office = first.execute("SELECT name FROM products WHERE category = 'office' ORDER BY price DESC").fetchone()
    assert office[0] == "Ergonomic Office Chair"
    assert first.execute("SELECT MAX(number) FROM orders").fetchone()[0] == 1007
    first.close()
    second.close()


def test_listings_filter_sort_and_paginate_from_the_url_query(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    query = {"sort": "price_asc", "min_price": "40", "max_price": "60.5"}
    page = text(client.get("/category/kitchen", params=query).text)
    prices = [float(p.replace(",", "")) for p in re.findall(r"\$([0-9,]+\.[0-9]{2})", page.split("Sort by:")[1])]
    assert prices and prices == sorted(prices) and all(40 <= p <= 60.5 for p in prices)
    rated = db.search("set", "rating")
    four_up = text(client.get("/search", params={"q": "set", "rating": "4", "sort": "rating"}).text)
    best = [p for p in rated if p["rating"] is not None and p["rating"] >= 4]
    assert f"{len(best)} product" in four_up and best[0]["name"] in four_up
    only_home = text(client.get("/search", params={"q": "set", "category": "home"}).text)
    assert "Willow Coaster Set" in only_home and "Silicone Spatula Set" not in only_home
    second = client.get("/category/electronics", params={"page": "2", "sort": "name"})
    names = [p["name"] for p in db.in_category("electronics", "name")]
    assert second.status_code == 200 and names[PAGE_SIZE] in text(second.text) and names[0] not in text(second.text)
    assert 'href="/category/electronics?sort=name&amp;page=1"' in second.text  # links keep the sort
    sort_link = client.get("/search", params={"q": "set", "min_price": "5"}).text
    assert 'href="/search?q=set&amp;min_price=5&amp;sort=price_desc"' in sort_link  # sorts keep the filters
    orders = text(client.get("/orders", params={"page": "2"}).text)
    assert f"{len(db.orders())} orders, showing 21 to 40" in orders
    assert "18 orders" in text(client.get("/orders?status=canceled").text)
    assert "Processing" in text(client.get("/orders?status=processing").text)


@pytest.mark.parametrize(
    "path",
    [
        "/search?q=x&min_price=abc", "/search?q=x&max_price=-1", "/search?q=x&max_price=1.234", "/search?q=x&rating=5",
        "/search?q=x&page=0", "/search?q=x&page=99999", "/category/home?rating=%00", "/orders?page=x",
        "/search?q=x&category=nope", "/account/addresses/99", "/account/addresses/abc",
        "/account/addresses/" + "9" * 50,
    ],
)  # fmt: skip
def test_bad_listing_queries_and_ids_get_a_4xx_page(shop: tuple[TestClient, ShopDB], path: str) -> None:
    client, _ = shop
    response = client.get(path)
    assert response.status_code in (400, 404, 422) and "Loopback Market" in response.text


def test_wishlist_add_and_remove_and_restore(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    before = everything(db)
    added = client.post("/wishlist/add", data={"sku": "KI-2006"}, follow_redirects=False)
    assert added.status_code == 303 and added.headers["location"] == "/wishlist"
    client.post("/wishlist/add", data={"sku": "KI-2006"})  # twice is once
    assert [i["sku"] for i in db.wishlist()].count("KI-2006") == 1
    page = client.get("/wishlist").text
    assert "Chef's Knife 8 in" in text(page) and 'aria-label="Remove Chef&#39;s Knife 8 in from my wish list"' in page
    client.post("/wishlist/remove", data={"sku": "OU-3003"})
    assert "Summit Hiking Backpack" not in text(client.get("/wishlist").text)
    assert client.post("/wishlist/add", data={"sku": "NOPE"}).status_code == 404
    db.restore()
    assert everything(db) == before


def test_address_book_add_edit_default_delete_and_restore(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    before = everything(db)
    new = {"name": "Alex Morgan", "street": "5 Pier Street", "city": "Portmouth", "zip": "70001"}
    assert client.post("/account/addresses", data=new, follow_redirects=False).headers["location"] == (
        "/account/addresses"
    )
    added = next(a for a in db.addresses() if a["street"] == "5 Pier Street")
    client.post(f"/account/addresses/{added['id']}", data={**new, "city": "Portsmouth"})
    assert db.address(added["id"])["city"] == "Portsmouth"
    client.post(f"/account/addresses/{added['id']}/default")
    assert db.customer()["street"] == "5 Pier Street" and db.addresses()[0]["id"] == added["id"]
    account = text(client.get("/account").text)
    assert "5 Pier Street, Portsmouth 70001" in account  # the default address shows on the account page
    refused = client.post(f"/account/addresses/{added['id']}/delete")
    assert refused.status_code == 422 and "default address cannot be deleted" in text(refused.text)
    client.post("/account/addresses/2/delete")
    assert db.address(2) is None and "9 Harbor Road" not in text(client.get("/account/addresses").text)
    assert client.post("/account/addresses", data={**new, "zip": ""}).status_code == 400
    assert client.post("/account/addresses", data={**new, "street": "s" * 201}).status_code == 422
    assert client.post("/account/addresses/99/delete").status_code == 404
    assert client.post("/account/addresses/99/default").status_code == 404
    db.restore()
    assert everything(db) == before


def test_account_edit_checks_the_email_and_restores(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    before = everything(db)
    assert client.post("/account/edit", data={"name": "Alex M", "email": "not-an-email"}).status_code == 422
    assert client.post("/account/edit", data={"name": "", "email": "a@b.co"}).status_code == 400
    assert client.post("/account/edit", data={"name": "A", "email": "a" * 95 + "@b.com"}).status_code == 422
    assert everything(db) == before
    client.post("/account/edit", data={"name": "Alex Morgan-Reyes", "email": "alex@reyes.example"})
    assert "Alex Morgan-Reyes, alex@reyes.example" in text(client.get("/account").text)
    db.restore()
    assert everything(db) == before
