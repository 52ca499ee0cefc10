"""The embedded shop (no browser): pages, state changes, restoring the seed, and the host dispatcher."""

from __future__ import annotations

import html as html_module
import re

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites import EmbeddedSites
from agentgym_envs.webarena.sites.server import HostDispatcher
from agentgym_envs.webarena.sites.shop.app import create_app
from agentgym_envs.webarena.sites.shop.db import ShopDB, money


@pytest.fixture()
def shop() -> tuple[TestClient, ShopDB]:
    db = ShopDB()
    client = TestClient(HostDispatcher({"shop.test": create_app(db)}), base_url="http://shop.test")
    yield client, db
    db.close()


def text(html: str) -> str:
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def test_pages_show_the_catalogue(shop: tuple[TestClient, ShopDB]) -> None:
    client, _ = shop
    assert "Aurora Desk Lamp $34.99" in text(client.get("/search?q=desk+LAMP").text)
    assert "No products match" in client.get("/search?q=quantum+smartwatch").text
    kitchen = text(client.get("/category/kitchen?sort=price_asc").text)
    assert kitchen.index("Silicone Spatula Set") < kitchen.index("Bamboo Cutting Board") < kitchen.index("Chef's Knife")
    product = text(client.get("/product/OU-3002").text)
    assert "Price: $149.00" in product and "Rating: 4.3 out of 5 (3 reviews)" in product
    assert product.index("Jordan Lee on 2024-04-03") < product.index("Ava Thompson on 2024-01-28")  # newest first
    assert "Grand total: $234.00" in text(client.get("/orders/1004").text)
    canceled = text(client.get("/orders?status=canceled").text)
    assert "#1003" in canceled and "#1006" in canceled and "#1005" not in canceled
    assert client.get("/product/NOPE").status_code == 404 and client.get("/nowhere").status_code == 404
    assert money(123456) == "$1,234.56"


def test_cart_checkout_cancel_review_and_address_change_the_database(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    added = client.post("/cart/add", data={"sku": "EL-1001", "qty": "2"}, follow_redirects=False)
    assert added.status_code == 303 and added.headers["location"] == "/cart"
    client.post("/cart/add", data={"sku": "EL-1001", "qty": "1"})
    assert [(i["sku"], i["qty"]) for i in db.cart()] == [("KI-2001", 1), ("EL-1001", 3)]
    client.post("/cart/update", data={"qty_KI-2001": "4", "qty_EL-1001": "0"})
    assert [(i["sku"], i["qty"]) for i in db.cart()] == [("KI-2001", 4)]
    assert client.post("/cart/add", data={"sku": "EL-1001", "qty": "-1"}).status_code == 400
    response = client.post(
        "/checkout",
        data={"name": "A", "street": "1 Road", "city": "Town", "zip": "1", "shipping": "Express"},
        follow_redirects=False,
    )
    assert response.headers["location"] == "/orders/1008" and db.cart() == []
    order = text(client.get("/orders/latest").text)
    assert "Order #1008" in order and "Express" in order and "Grand total: $90.00" in order
    assert client.post("/checkout", data={"shipping": "Express"}).status_code == 400  # the cart is empty now
    client.post("/orders/1005/cancel")
    client.post("/orders/1002/cancel")  # complete orders cannot be canceled
    assert [o["status"] for o in db.orders() if o["number"] in (1005, 1002)] == ["Canceled", "Complete"]
    client.post("/product/OU-3001/review", data={"rating": "5", "title": "Cold", "body": "Very cold."})
    assert db.reviews("OU-3001")[0]["title"] == "Cold"
    assert client.post("/product/OU-3001/review", data={"rating": "", "title": "x", "body": "y"}).status_code == 400
    client.post("/account/address", data={"street": "9 Oak Lane", "city": "Springfield", "zip": "11111"})
    assert "9 Oak Lane, Springfield 11111" in text(client.get("/account").text)


def test_restore_brings_back_the_seed(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    before = (db.cart(), db.orders(), db.reviews("OU-3001"), db.customer())
    client.post("/cart/remove", data={"sku": "KI-2001"})
    client.post("/orders/1007/cancel")
    client.post("/account/address", data={"street": "x", "city": "y", "zip": "z"})
    assert (db.cart(), db.orders(), db.customer()) != before[0:2] + before[3:]
    db.restore()
    assert (db.cart(), db.orders(), db.reviews("OU-3001"), db.customer()) == before


def test_dispatcher_serves_proxy_style_requests_for_its_hosts_only(shop: tuple[TestClient, ShopDB]) -> None:
    client, _ = shop
    assert client.get("/", headers={"host": "evil.test"}).status_code == 403
    assert client.get("/cart", headers={"host": "shop.test:80"}).status_code == 200


def test_embedded_sites_run_on_a_loopback_port_and_stop() -> None:
    import socket

    sites = EmbeddedSites()
    sites.start()
    try:
        assert sites.urls == {"shopping": "http://shop.test"}
        host, port = sites.proxy.removeprefix("http://").split(":")
        assert host == "127.0.0.1"
        with socket.create_connection((host, int(port)), timeout=5) as conn:  # a browser's proxy request
            conn.sendall(b"GET http://shop.test/cart HTTP/1.1\r\nHost: shop.test\r\nConnection: close\r\n\r\n")
            reply = b""
            while chunk := conn.recv(65536):
                reply += chunk
        assert reply.startswith(b"HTTP/1.1 200") and b"Shopping Cart" in reply
    finally:
        sites.stop()
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
        pass
    sites.stop()  # idempotent
