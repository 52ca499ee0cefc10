"""Which requests the server answers at all: addressed to it (Host), from no foreign page (Origin), JSON bodies.

A server without a token on loopback is still reachable from web pages in the user's browser: a page
may send "simple" cross-site requests (no preflight: a form or `text/plain` body), and through DNS
rebinding (a name of the attacker's that resolves to 127.0.0.1) even read the replies. Three checks
close that, each answered before any route runs:

- `Host` must name the server: one of `allowed_hosts` (by default the loopback names when bound to
  loopback, the bound address otherwise); a rebound name is refused with 403.
- `Origin`, which browsers send on cross-site requests, must be the server's own origin (scheme
  aside, the same host and port as `Host`) or one of `allowed_origins`; 403 otherwise. Programs
  (our client, curl, AgentGym's clients) send none.
- A request body must be `application/json` (a content type a page cannot send without a
  preflight, which this server never grants): 415 otherwise. Bodyless POSTs are accepted only on the
  routes that take no body.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from typing import Any

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_WILDCARDS = frozenset({"", "0.0.0.0", "::"})
_CACHE_LIMIT = 256


def host_name(value: str) -> str:
    """The name in a Host header or an authority: lower case, without port, brackets or final dot."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    name, colon, port = value.rpartition(":")
    if colon and port.isdigit() and ":" not in name:
        value = name
    return value.rstrip(".")


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine's loopback."""
    if host_name(host) == "localhost":
        return True
    try:
        return ipaddress.ip_address(host_name(host)).is_loopback
    except ValueError:
        return False


def default_allowed_hosts(bind_host: str) -> frozenset[str]:
    """The Host names a server bound to `bind_host` answers by default.

    Loopback: the loopback names. A wildcard (0.0.0.0, ::): the loopback names, this machine's name
    and the addresses it resolves to. Any other address or name: itself.
    """
    host = host_name(bind_host)
    if is_loopback(host):
        return LOOPBACK_NAMES | {host}
    if host in _WILDCARDS:
        names = {socket.gethostname().lower(), socket.getfqdn().lower()}
        addresses: set[str] = set()
        for name in list(names):
            try:
                addresses.update(info[4][0] for info in socket.getaddrinfo(name, None))
            except OSError:
                continue
        return LOOPBACK_NAMES | names | addresses
    return frozenset({host})


def _is_json(content_type: bytes) -> bool:
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json"


class RequestGuard:
    """The Host, Origin and content-type checks of one server.

    Args:
        allowed_hosts: Host names the server answers; `"*"` among them turns the Host check off (behind
            a proxy that checks it). None: the loopback names.
        allowed_origins: Web origins (`https://app.example:8443`) allowed besides the server's own.
        bodyless_routes: A path predicate for POST routes that take no body (accepted without a content type).
    """

    def __init__(
        self,
        allowed_hosts: Iterable[str] | None = None,
        allowed_origins: Iterable[str] = (),
        bodyless_routes: Any = None,
    ):
        hosts = set(LOOPBACK_NAMES if allowed_hosts is None else allowed_hosts)
        self.any_host = "*" in hosts
        self.hosts = frozenset(host_name(h) for h in hosts if h != "*")
        if not self.hosts and not self.any_host:
            raise ValueError("allowed_hosts is empty: no request could reach the server; name at least one host")
        self.origins = frozenset(o.strip().lower().rstrip("/") for o in allowed_origins)
        self.bodyless = bodyless_routes or (lambda path: False)
        self._host_ok: dict[bytes, bool] = {}
        self._origin_ok: dict[tuple[bytes, bytes], bool] = {}

    def foreign(self, host: bytes | None, origin: bytes | None) -> tuple[int, dict[str, Any]] | None:
        """403 and its reply for a request not addressed to this server or sent by a foreign page; else None."""
        if not self.any_host and (host is None or not self._host_allowed(host)):
            shown = "no Host header" if host is None else f"Host {host[:100].decode('latin-1')!r}"
            return 403, {
                "detail": f"this server does not answer to {shown}; it answers to {sorted(self.hosts)} "
                "(agentgym serve --allowed-host NAME adds a name the server is reached by)",
                "error_type": "ForeignHost",
            }
        if origin is not None and not self._origin_allowed(origin, host or b""):
            return 403, {
                "detail": f"requests from the web origin {origin[:100].decode('latin-1')!r} are refused; only the "
                "server's own origin and those given with agentgym serve --allowed-origin are served",
                "error_type": "ForeignOrigin",
            }
        return None

    def unsupported(
        self, method: str, path: str, content_type: bytes | None, has_body: bool
    ) -> tuple[int, dict[str, Any]] | None:
        """415 and its reply for a body that is not JSON, or a bodyless POST to a route that takes a body; else None."""
        if method in ("POST", "PUT", "PATCH") or has_body:
            if content_type is None:
                if has_body or not self.bodyless(path):
                    return 415, _unsupported("no content type")
            elif not _is_json(content_type):
                return 415, _unsupported(f"{content_type[:100].decode('latin-1')!r}")
        return None

    def _host_allowed(self, host: bytes) -> bool:
        ok = self._host_ok.get(host)
        if ok is None:
            ok = host_name(host.decode("latin-1")) in self.hosts
            if len(self._host_ok) < _CACHE_LIMIT:
                self._host_ok[host] = ok
        return ok

    def _origin_allowed(self, origin: bytes, host: bytes) -> bool:
        key = (origin, host)
        ok = self._origin_ok.get(key)
        if ok is None:
            text = origin.decode("latin-1").strip().lower().rstrip("/")
            scheme, sep, authority = text.partition("://")
            same = bool(sep) and scheme in ("http", "https") and authority == host.decode("latin-1").strip().lower()
            ok = same or text in self.origins
            if len(self._origin_ok) < _CACHE_LIMIT:
                self._origin_ok[key] = ok
        return ok


def _unsupported(what: str) -> dict[str, Any]:
    return {
        "detail": f"request bodies must be JSON with 'Content-Type: application/json'; got {what}",
        "error_type": "UnsupportedMediaType",
    }
