"""WebArena safety policy: which URLs a task's browser may reach, and the routing pattern that blocks the rest."""

from __future__ import annotations

import pytest

from agentgym_envs.webarena.browser.safety import OriginPolicy, origin_of

POLICY = OriginPolicy(["http://shop.test", "http://localhost:7770/admin", "https://maps.example.org:8443"])


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://shop.test/", True),
        ("http://shop.test", True),
        ("http://SHOP.test:80/cart?x=1#top", True),
        ("http://localhost:7770/anything", True),  # an origin, not a path prefix
        ("https://maps.example.org:8443/tiles/1.png", True),
        ("about:blank", True),
        ("https://shop.test/", False),  # another scheme is another origin
        ("http://shop.test:8080/", False),
        ("http://shop.test.evil.com/", False),
        ("http://evil.com/?http://shop.test/", False),
        ("http://user@evil.com/", False),
        ("http://localhost:7771/", False),
        ("https://maps.example.org/", False),
        ("file:///etc/passwd", False),
        ("chrome://version", False),
        ("view-source:http://shop.test/", False),
        ("javascript:alert(1)", False),
        ("data:text/html,hi", False),
        ("ftp://shop.test/", False),
    ],
)
def test_policy_and_routing_pattern_agree(url: str, allowed: bool) -> None:
    assert POLICY.allows(url) is allowed
    if url != "http://SHOP.test:80/cart?x=1#top":  # browsers lower-case hosts and drop default ports
        assert (POLICY.blocked_pattern().search(url) is None) is allowed


def test_websockets_may_reach_the_allowed_hosts_only() -> None:
    pattern = POLICY.blocked_pattern(websocket=True)
    assert pattern.search("ws://shop.test/cable") is None and pattern.search("wss://maps.example.org:8443/") is None
    assert pattern.search("ws://evil.test/") and pattern.search("wss://shop.test/")


def test_origins_are_normalised_and_bad_ones_rejected() -> None:
    assert origin_of("HTTP://Shop.Test:80/x") == "http://shop.test"
    assert origin_of("https://a.test:443") == "https://a.test"
    assert origin_of("http://[::1]:8080/") == "http://[::1]:8080"
    assert origin_of("mailto:x@y") is None
    with pytest.raises(ValueError, match="not an http"):
        OriginPolicy(["file:///tmp"])
    with pytest.raises(ValueError, match="at least one"):
        OriginPolicy([])
