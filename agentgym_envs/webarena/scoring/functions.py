"""WebArena's `func:` evaluation helpers, looked up by name (never `eval`ed) by `program_html`.

A helper is called as `helper(probe, *args)`: `probe` is the page the evaluation is on (see
`evaluators.PageProbe`), `args` the call's constants, with `PAGE` for WebArena's `__page__`.

- `reddit_get_post_url(url)`: a Postmill post or comment URL `.../f/<forum>/<id>/...` cut to the
  post, `<scheme>://<host>/f/<forum>/<id>/`; any other URL unchanged.
- `gitlab_get_project_memeber_role(__page__, account)` (WebArena's spelling): on the page (a GitLab
  project's members page), the role shown in the row whose account is exactly `@account`; '' when
  there is none. WebArena reads the page here too, not GitLab's REST API.
- `shopping_get_latest_order_url()`: the page of the shop's newest order.
- `shopping_get_sku_latest_review_author(sku)` / `_rating(sku)`: the nickname, or the first rating
  in percent ("80" for 4 stars), of the last review the shop lists for the product (its newest);
  '' when it has none.

The shopping helpers need the shop's data. With the user's WebArena sites (`MagentoShop`) they call
Magento's REST API as WebArena does: an admin token from `/rest/default/V1/integration/admin/token`
(the admin account of WebArena's shopping image unless `AGENTGYM_SHOPPING_ADMIN_USERNAME` /
`AGENTGYM_SHOPPING_ADMIN_PASSWORD` say otherwise), the newest order by `created_at` from
`/rest/V1/orders` (its URL `<shop>/sales/order/view/order_id/<increment_id>/`), the reviews from
`/rest/V1/products/<sku>/reviews`. With the embedded shop (`EmbeddedShop`) they read its database:
the newest order is the highest order number, its page `<shop>/orders/<number>`, and a review's
rating is its stars times 20. The shop's URL is the operator's site configuration, never a client's.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote, urlencode, urlparse

#: A `func:` helper: called with the probe and the call's arguments.
Helper = Callable[..., Any]
#: The admin account WebArena's shopping image ships with (WebArena's browser_env/env_config.py).
WEBARENA_SHOP_ADMIN = ("admin", "admin1234")
#: Seconds one REST call may take.
REST_TIMEOUT = 30.0


class Unscorable(Exception):
    """The evaluation cannot be decided here; the message says why."""


class _Page:
    def __repr__(self) -> str:
        return "__page__"


#: The `__page__` argument of a helper call: the page the evaluation is on.
PAGE: Any = _Page()


# ---- site-independent helpers ---------------------------------------------------------------------
def reddit_get_post_url(probe: Any, url: Any) -> str:
    """The post URL of a Postmill post or comment URL; other URLs unchanged.

    >>> reddit_get_post_url(None, "http://forum.test/f/pics/12/-/comment/5")
    'http://forum.test/f/pics/12/'
    """
    if not isinstance(url, str):
        raise Unscorable(f"reddit_get_post_url takes a URL string, got {type(url).__name__}")
    parsed = urlparse(url)
    parts = parsed.path.split("/")
    if len(parts) < 4 or parts[1] != "f":
        return url
    return f"{parsed.scheme}://{parsed.netloc}/f/{parts[2]}/{parts[3]}/"


def gitlab_get_project_memeber_role(probe: Any, page: Any, account: Any) -> str:
    """The role shown for `@account` on a GitLab project's members page (the page evaluated)."""
    script = (
        "(() => { const names = [...document.querySelectorAll(\"td[data-label='Account'] "
        'span.gl-avatar-labeled-sublabel")].map(e => e.outerText);'
        f" const i = names.indexOf({json.dumps('@' + str(account))});"
        " const roles = document.querySelectorAll('td.col-max-role span');"
        " return i >= 0 && roles[i] ? roles[i].outerText : ''; })()"
    )
    value = probe.select(None, script, [])
    return "" if value is None else str(value)


# ---- the shop's data --------------------------------------------------------------------------------
class ShopData(Protocol):
    """What the shopping helpers read from a shop."""

    def latest_order_url(self) -> str:
        """The URL of the page of the shop's newest order."""
        ...

    def reviews(self, sku: str) -> list[dict[str, Any]]:
        """The product's reviews, oldest first, in Magento's REST shape: `nickname` and `ratings`
        (a list of `{"rating_name", "percent"}`)."""
        ...


class MagentoShop:
    """A WebArena shopping site (Magento), read through its REST API as WebArena's helpers read it."""

    def __init__(self, base_url: str, username: str | None = None, password: str | None = None):
        self.base_url = base_url.rstrip("/")
        self.username = username or os.environ.get("AGENTGYM_SHOPPING_ADMIN_USERNAME") or WEBARENA_SHOP_ADMIN[0]
        self.password = password or os.environ.get("AGENTGYM_SHOPPING_ADMIN_PASSWORD") or WEBARENA_SHOP_ADMIN[1]

    def _call(self, path: str, body: dict[str, Any] | None = None, token: str | None = None) -> Any:
        url = f"{self.base_url}{path}"
        headers = {"Content-Type": "application/json"}
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(url, data=data, headers=headers, method="POST" if data else "GET")
        try:
            with urllib.request.urlopen(request, timeout=REST_TIMEOUT) as response:
                return json.loads(response.read())
        except urllib.error.HTTPError as error:
            raise Unscorable(f"the shopping site's REST API answered {error.code} to {path.split('?')[0]}") from None
        except (OSError, ValueError) as error:
            raise Unscorable(f"the shopping site's REST API at {self.base_url} failed: {error}") from None

    def _token(self) -> str:
        token = self._call(
            "/rest/default/V1/integration/admin/token", {"username": self.username, "password": self.password}
        )
        if not isinstance(token, str):
            raise Unscorable("the shopping site's REST API gave no admin token")
        return token

    def latest_order_url(self) -> str:
        query = urlencode(
            {
                "searchCriteria[sortOrders][0][field]": "created_at",
                "searchCriteria[sortOrders][0][direction]": "DESC",
                "searchCriteria[pageSize]": "1",
            }
        )
        found = self._call(f"/rest/V1/orders?{query}", token=self._token())
        try:
            number = int(found["items"][0]["increment_id"])
        except (KeyError, IndexError, TypeError, ValueError):
            raise Unscorable("the shopping site's REST API listed no order") from None
        return f"{self.base_url}/sales/order/view/order_id/{number}/"

    def reviews(self, sku: str) -> list[dict[str, Any]]:
        found = self._call(f"/rest/V1/products/{quote(sku, safe='')}/reviews", token=self._token())
        if not isinstance(found, list):
            raise Unscorable(f"the shopping site's REST API gave no review list for SKU {sku!r}")
        return found


class EmbeddedShop:
    """The embedded shop (`sites.shop`), read from its database."""

    def __init__(self, db: Any, origin: str):
        self.db, self.origin = db, origin.rstrip("/")

    def latest_order_url(self) -> str:
        orders = self.db.orders()
        if not orders:
            raise Unscorable("the shop has no order")
        return f"{self.origin}/orders/{orders[0]['number']}"

    def reviews(self, sku: str) -> list[dict[str, Any]]:
        if self.db.product(sku) is None:
            raise Unscorable(f"the shop has no product with SKU {sku!r}")
        return [
            {"nickname": review["author"], "ratings": [{"rating_name": "Rating", "percent": review["rating"] * 20}]}
            for review in reversed(self.db.reviews(sku))
        ]


def shop_helpers(shop: ShopData | None) -> dict[str, Helper]:
    """The shopping helpers over `shop` (None: they are unscorable, naming what is missing)."""

    def data() -> ShopData:
        if shop is None:
            raise Unscorable(
                "this check needs the shopping site's data: set WebArena's SHOPPING URL (or site_urls) "
                "or use the embedded shop"
            )
        return shop

    def latest_order_url(probe: Any) -> str:
        return data().latest_order_url()

    def latest_review(sku: Any) -> dict[str, Any] | None:
        reviews = data().reviews(str(sku))
        return reviews[-1] if reviews else None

    def review_author(probe: Any, sku: Any) -> str:
        review = latest_review(sku)
        return "" if review is None else str(review.get("nickname", ""))

    def review_rating(probe: Any, sku: Any) -> str:
        reviews = data().reviews(str(sku))
        if not reviews:
            return ""
        try:
            if reviews[0]["ratings"][0]["rating_name"] != "Rating":  # WebArena asserts this
                raise Unscorable(f"the first review of {sku!r} does not rate 'Rating' first")
            return str(reviews[-1]["ratings"][0]["percent"])
        except (KeyError, IndexError, TypeError):
            raise Unscorable(f"a review of {sku!r} has no rating") from None

    return {
        "shopping_get_latest_order_url": latest_order_url,
        "shopping_get_sku_latest_review_author": review_author,
        "shopping_get_sku_latest_review_rating": review_rating,
    }


#: The helpers of WebArena's evaluation_harness that `func:` may name (shopping ones without a shop).
HELPERS: dict[str, Helper] = {
    "reddit_get_post_url": reddit_get_post_url,
    "gitlab_get_project_memeber_role": gitlab_get_project_memeber_role,
    **shop_helpers(None),
}


def site_helpers(site_urls: dict[str, str], shop_db: Any = None) -> dict[str, Helper]:
    """The helpers for one episode's sites: the embedded shop when `shop_db` is given, else the
    user's WebArena shopping site when its URL is configured."""
    url = site_urls.get("shopping")
    if url is None:
        return dict(HELPERS)
    shop: ShopData = EmbeddedShop(shop_db, url) if shop_db is not None else MagentoShop(url)
    return {**HELPERS, **shop_helpers(shop)}
