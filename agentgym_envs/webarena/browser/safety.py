"""Where the browser may go: the task's own origins plus an allowlist, nothing else.

The policy is enforced by request routing: `blocked_pattern()` is a regular expression that matches
every URL outside the allowed origins (other hosts, `file://`, `chrome://`, `data:` ...), so only
those requests reach Python (to be counted and aborted) and allowed ones flow at full speed.

>>> policy = OriginPolicy(["http://shop.test", "https://maps.example.org:8443/tiles"])
>>> policy.allows("http://shop.test/cart?x=1"), policy.allows("http://shop.test.evil.com/")
(True, False)
>>> policy.allows("file:///etc/passwd"), policy.allows("https://maps.example.org:8443/")
(False, True)
>>> bool(policy.blocked_pattern().match("http://evil.com/")), bool(policy.blocked_pattern().match("http://shop.test/"))
(True, False)
>>> bool(policy.blocked_pattern(websocket=True).match("ws://shop.test/cable"))
False
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
#: Characters special in both Python and JavaScript regular expressions (Playwright runs the
#: pattern in JavaScript; Python's `re.escape` also escapes `-`, which JavaScript's unicode mode rejects).
_SPECIAL = re.compile(r"([.^$*+?()\[\]{}|\\/])")


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` of an http(s) URL (default port dropped, lower case), else None."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    host = parts.hostname.lower()
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS[parts.scheme]:
        return f"{parts.scheme}://{host}"
    return f"{parts.scheme}://{host}:{port}"


class OriginPolicy:
    """The set of origins a task's browser may reach (`about:blank` is always allowed)."""

    def __init__(self, origins: Iterable[str]):
        allowed = set()
        for url in origins:
            origin = origin_of(url)
            if origin is None:
                raise ValueError(f"not an http(s) origin: {url!r} (expected e.g. 'http://localhost:7770')")
            allowed.add(origin)
        if not allowed:
            raise ValueError("a task needs at least one allowed origin")
        self.origins = frozenset(allowed)

    def allows(self, url: str) -> bool:
        return url == "about:blank" or origin_of(url) in self.origins

    def blocked_pattern(self, websocket: bool = False) -> re.Pattern[str]:
        """A regex matching every URL whose origin is not allowed (for `BrowserContext.route`; with
        `websocket`, the same origins as `ws://` / `wss://` for `route_web_socket`)."""
        alternatives = []
        for origin in sorted(self.origins):
            scheme = origin.split("://", 1)[0]
            escaped = _SPECIAL.sub(r"\\\1", origin)
            if websocket:
                escaped = escaped.replace(scheme, {"http": "ws", "https": "wss"}[scheme], 1)
            if origin.count(":") == 1:  # no explicit port: the default one may be spelled out
                escaped += f"(?::{_DEFAULT_PORTS[scheme]})?"
            alternatives.append(escaped)
        return re.compile(r"^(?!(?:" + "|".join(alternatives) + r")(?:[/?#]|$)|about:blank$)", re.IGNORECASE)

    def describe(self) -> str:
        return ", ".join(sorted(self.origins))
