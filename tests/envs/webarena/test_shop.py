"""The embedded shop (no browser): pages, state changes, hostile input, restoring the seed, the host
dispatcher and the episode secret."""

from __future__ import annotations

import html as html_module
import http.client
import random
import re
import socket
import urllib.error
import urllib.request
from urllib.parse import quote

import pytest
from starlette.testclient import TestClient

from agentgym_envs.webarena.sites import EmbeddedSites
from agentgym_envs.webarena.sites.server import SECRET_COOKIE, HostDispatcher
from agentgym_envs.webarena.sites.shop.app import MAX_QUERY, create_app
from agentgym_envs.webarena.sites.shop.db import MAX_QUANTITY, ShopDB, money

SECRET = "test-secret"


@pytest.fixture()
def shop() -> tuple[TestClient, ShopDB]:
    db = ShopDB()
    client = TestClient(
        HostDispatcher({"shop.test": create_app(db)}, secret=SECRET),
        base_url="http://shop.test",
        cookies={SECRET_COOKIE: SECRET},
    )
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


def state(db: ShopDB) -> tuple:
    """Everything an agent can change in the shop."""
    return db.cart(), db.orders(), db.reviews("OU-3001"), db.customer(), db.addresses(), db.wishlist()


LONG_NUMBER = "9" * 5000  # longer than Python's int-parsing limit
#: Values no field or id accepts: long and overflowing numbers, non-ASCII digits, signs, NUL, wildcards.
HOSTILE = [LONG_NUMBER, str(2**63), str(2**64), "1" + "0" * 30, "\u00b2", "\u0661\u0662", "-1", "1e3", "0x10", " ", "",
           "\x00", "%", "_", "%_", "1.5", "+3"]  # fmt: skip


@pytest.mark.parametrize("value", HOSTILE, ids=lambda v: repr(v[:12]))
def test_hostile_input_gets_a_4xx_page_and_changes_nothing(shop: tuple[TestClient, ShopDB], value: str) -> None:
    client, db = shop
    before = state(db)
    quoted = quote(value, safe="") or "%20"  # an empty path segment is another URL (/orders/ redirects to /orders)
    refused = {
        "order": client.get(f"/orders/{quoted}"),
        "cancel": client.post(f"/orders/{quoted}/cancel"),
        "product": client.get(f"/product/{quoted}"),
        "category": client.get(f"/category/{quoted}"),
        "add": client.post("/cart/add", data={"sku": "EL-1001", "qty": value}),
        "update": client.post("/cart/update", data={"qty_KI-2001": value}),
        "review": client.post("/product/OU-3001/review", data={"rating": value, "title": "t", "body": "b"}),
    }
    for name, response in refused.items():
        assert response.status_code in (400, 404, 422), (name, response.status_code)
        assert response.headers["content-type"].startswith("text/html") and "Loopback Market" in response.text
    assert state(db) == before
    assert client.get("/search", params={"q": value}).status_code == (422 if len(value) > MAX_QUERY else 200)
    assert client.get("/orders", params={"status": value}).status_code == 200
    assert client.get("/cart").status_code == 200


def test_over_long_fields_get_a_422_page_that_says_the_limit(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    before = state(db)
    address = {"name": "A", "street": "1 Road", "city": "Town", "zip": "1" * 21, "shipping": "Express"}
    review = {"rating": "5", "title": "Cold", "body": "x" * 5001}
    for response, limit in (
        (client.post("/checkout", data=address), "ZIP code can be at most 20 characters"),
        (client.post("/account/address", data={"street": "s" * 201, "city": "c", "zip": "1"}), "street can be at"),
        (client.post("/product/OU-3001/review", data=review), "review can be at most 5000 characters"),
        (client.get("/search", params={"q": "lamp " * MAX_QUERY}), f"at most {MAX_QUERY} characters"),
    ):
        assert response.status_code == 422 and limit in text(response.text)
    assert state(db) == before


def test_the_cart_holds_at_most_the_limit_of_one_product_and_never_breaks(shop: tuple[TestClient, ShopDB]) -> None:
    client, db = shop
    for _ in range(2):  # twice 2**62 overflowed SQLite's integers: a REAL quantity broke every cart page
        response = client.post("/cart/add", data={"sku": "EL-1001", "qty": str(2**62)})
        assert response.status_code == 422 and f"must be from 1 to {MAX_QUANTITY}" in text(response.text)
    assert client.post("/cart/add", data={"sku": "EL-1001", "qty": str(MAX_QUANTITY)}).status_code == 200
    response = client.post("/cart/add", data={"sku": "EL-1001", "qty": "1"})
    assert response.status_code == 422 and f"holds {MAX_QUANTITY} of this one" in text(response.text)
    response = client.post("/cart/update", data={"qty_KI-2001": "3", "qty_EL-1001": str(MAX_QUANTITY + 1)})
    assert response.status_code == 422 and "quantity of Nimbus Wireless Mouse must be from 0" in text(response.text)
    assert [(i["sku"], i["qty"]) for i in db.cart()] == [("KI-2001", 1), ("EL-1001", MAX_QUANTITY)]  # all or nothing
    assert f"Cart ({MAX_QUANTITY + 1})" in text(client.get("/cart").text)
    address = {"name": "A", "street": "1 Road", "city": "Town", "zip": "1", "shipping": "Standard"}
    assert "Grand total: $24,988.76" in text(client.post("/checkout", data=address).text)


def test_search_matches_words_literally(shop: tuple[TestClient, ShopDB]) -> None:
    client, _ = shop
    for query in ("%", "_", "m_use", "%mouse", "mouse%", "w%s"):  # LIKE made these wildcards
        assert "No products match" in client.get("/search", params={"q": query}).text, query
    assert "Nimbus Wireless Mouse" in text(client.get("/search", params={"q": "MOUSE wireless mouse"}).text)


def test_requests_without_the_episode_secret_get_403_and_change_nothing(shop: tuple[TestClient, ShopDB]) -> None:
    _, db = shop
    before = state(db)
    app = HostDispatcher({"shop.test": create_app(db)}, secret=SECRET)
    for cookies in ({}, {SECRET_COOKIE: "wrong"}, {SECRET_COOKIE: SECRET + "x"}, {"other": SECRET}):
        client = TestClient(app, base_url="http://shop.test", cookies=cookies)
        assert client.get("/cart").status_code == 403
        assert client.post("/orders/1007/cancel").status_code == 403
        assert client.post("/cart/add", data={"sku": "EL-1001", "qty": "2"}).status_code == 403
    assert state(db) == before
    app.secret = "renewed"
    assert TestClient(app, base_url="http://shop.test", cookies={SECRET_COOKIE: SECRET}).get("/").status_code == 403
    assert TestClient(app, base_url="http://shop.test", cookies={SECRET_COOKIE: "renewed"}).get("/").status_code == 200


def proxy_request(proxy: str, method: str, target: str, cookie: str | None = None, body: str = "") -> int:
    """Send one request to the embedded server as a local process would; return the status."""
    host, port = proxy.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    headers = {"Host": "shop.test", "Content-Type": "application/x-www-form-urlencoded"}
    if cookie is not None:
        headers["Cookie"] = f"{SECRET_COOKIE}={cookie}"
    try:
        conn.request(method, target, body=body, headers=headers)
        return conn.getresponse().status
    finally:
        conn.close()


def test_embedded_sites_run_on_a_loopback_port_answer_only_their_secret_and_stop() -> None:
    sites = EmbeddedSites(("shopping",))
    sites.start()
    try:
        assert sites.urls == {"shopping": "http://shop.test"}
        host, port = sites.proxy.removeprefix("http://").split(":")
        assert host == "127.0.0.1"
        (cookie,) = sites.cookies()
        assert cookie["url"] == "http://shop.test" and cookie["httpOnly"]
        db = sites._databases[0]
        before = state(db)
        for target in ("http://shop.test/orders/1007/cancel", "/orders/1007/cancel"):  # proxy and origin form
            assert proxy_request(sites.proxy, "POST", target) == 403
            assert proxy_request(sites.proxy, "POST", target, cookie="guess") == 403
        with pytest.raises(urllib.error.HTTPError, match="403"):
            opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": sites.proxy}))
            opener.open("http://shop.test/cart", data=b"sku=EL-1001&qty=3", timeout=5)
        assert state(db) == before
        assert proxy_request(sites.proxy, "GET", "http://shop.test/cart", cookie=cookie["value"]) == 200
        sites.restore()  # a new episode: the previous secret no longer works
        assert proxy_request(sites.proxy, "GET", "http://shop.test/cart", cookie=cookie["value"]) == 403
        assert proxy_request(sites.proxy, "GET", "/cart", cookie=sites.cookies()[0]["value"]) == 200
    finally:
        sites.stop()
    with pytest.raises(OSError), socket.create_connection((host, int(port)), timeout=2):
        pass
    sites.stop()  # idempotent


#: (method, path, form body) of every route; each `{}` gets a random hostile value.
ROUTES = [
    ("GET", "/orders/{}", ""),
    ("POST", "/orders/{}/cancel", ""),
    ("GET", "/product/{}", ""),
    ("GET", "/category/{}?sort={}", ""),
    ("GET", "/search?q={}&sort={}", ""),
    ("GET", "/orders?status={}", ""),
    ("POST", "/cart/add", "sku=EL-1001&qty={}"),
    ("POST", "/cart/add", "sku={}&qty={}"),
    ("POST", "/cart/update", "qty_KI-2001={}&qty_EL-1001={}"),
    ("POST", "/cart/remove", "sku={}"),
    ("POST", "/checkout", "name={}&street=a&city=b&zip={}&shipping=Express"),
    ("POST", "/account/address", "street={}&city=a&zip={}"),
    ("POST", "/product/OU-3001/review", "rating={}&title={}&body=b"),
    ("GET", "/search?q=a&min_price={}&max_price={}&rating={}&page={}", ""),
    ("GET", "/category/home?category={}&page={}", ""),
    ("GET", "/orders?status={}&page={}", ""),
    ("POST", "/wishlist/add", "sku={}"),
    ("POST", "/wishlist/remove", "sku={}"),
    ("POST", "/account/edit", "name={}&email={}"),
    ("POST", "/account/addresses", "name={}&street=a&city={}&zip=1"),
    ("GET", "/account/addresses/{}", ""),
    ("POST", "/account/addresses/{}", "name=a&street={}&city=c&zip=1"),
    ("POST", "/account/addresses/{}/delete", ""),
    ("POST", "/account/addresses/{}/default", ""),
]


def test_random_hostile_requests_to_every_route_never_get_a_500(shop: tuple[TestClient, ShopDB]) -> None:
    client, _ = shop
    rng = random.Random(7)
    atoms = [*HOSTILE, "\ud800", "\u00e9", "<b>", "../", "%00", "%ff", "EL-1001", "1007", "x" * 300, "a " * 150]

    def fill(template: str) -> str:
        values = ("".join(rng.choice(atoms) for _ in range(rng.randint(1, 3))) for _ in range(template.count("{}")))
        return template.format(*(quote(v.encode("utf-8", "surrogatepass"), safe="") for v in values))

    form = {"content-type": "application/x-www-form-urlencoded"}
    for _ in range(400):
        method, path, body = rng.choice(ROUTES)
        assert client.request(method, fill(path), content=fill(body), headers=form).status_code < 500
    assert client.get("/cart").status_code == 200 and client.get("/checkout").status_code == 200


def test_half_sent_requests_to_the_shop_port_are_closed() -> None:
    """A local process cannot hold the shop's connections open with requests it never finishes."""
    from agentgym_envs.webarena.sites.server import EmbeddedServer

    server = EmbeddedServer(create_app(ShopDB()), header_timeout=0.5)
    port = server.start()
    try:
        slow = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
        for i, sock in enumerate(slow):
            sock.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1"[: 5 + i])
        # the site still answers others meanwhile
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/")
        assert connection.getresponse().status == 200
        connection.close()
        for sock in slow:
            sock.settimeout(5)
            received = b""
            while chunk := sock.recv(4096):  # returns b"" once the server closes: no TimeoutError
                received += chunk
            sock.close()
            assert received.startswith(b"HTTP/1.1 408")
    finally:
        server.stop()
