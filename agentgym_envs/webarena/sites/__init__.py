"""The embedded default sites: small web apps of our own that stand in for WebArena's Docker sites.

Each site has a WebArena site name (the `sites` entry and `__SITE__` placeholder of a task config)
and a stable origin under the reserved `.test` domain. `EmbeddedSites` runs them for one env: one
database per site (restored at every reset) and one loopback server for all of them. The server
answers only the env's own browser context: every reset makes a new secret, which the context
carries as a cookie (`cookies()`); any other request gets 403.
"""

from __future__ import annotations

import importlib
import pkgutil
import secrets
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EmbeddedSite:
    """A site the env can serve itself.

    Every sub-package of `agentgym_envs.webarena.sites` that defines `SITE` (an `EmbeddedSite`) in its
    `__init__` is one. The factories are named as `"module:attribute"` so that listing the sites
    imports no web framework.

    Attributes:
        name: The WebArena site name (a task config's `sites` entry, its `__NAME__` placeholder).
        origin: The stable origin the browser sees, under the reserved `.test` domain.
        title: The site's name on its pages and on the homepage.
        database: A class whose instances hold one live copy of the site's data: `restore()` puts it
            back to the seed state, `close()` frees it.
        app: A function of such an instance that returns the site's ASGI app.
        seed: A function that returns a new `sqlite3.Connection` (rows as `sqlite3.Row`) on the seed
            data, which task templates read to instantiate tasks; the caller closes it.
        templates: A module whose `TEMPLATES` lists the site's `TaskTemplate`s, or None.
    """

    name: str
    origin: str
    title: str
    database: str
    app: str
    seed: str
    templates: str | None = None

    @property
    def host(self) -> str:
        return self.origin.split("://", 1)[1]


def resolve(reference: str) -> Any:
    """The object a `"module:attribute"` reference names."""
    module, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module), attribute)


def _discover() -> dict[str, EmbeddedSite]:
    found = {}
    for module in pkgutil.iter_modules(__path__, f"{__name__}."):
        site = getattr(importlib.import_module(module.name), "SITE", None) if module.ispkg else None
        if isinstance(site, EmbeddedSite):
            found[site.name] = site
    return dict(sorted(found.items()))


#: The embedded sites by WebArena site name.
SITES = _discover()


class EmbeddedSites:
    """The embedded sites of one env: their databases and the server, started on demand."""

    def __init__(self, names: tuple[str, ...] = tuple(SITES)):
        unknown = [name for name in names if name not in SITES]
        if unknown:
            raise ValueError(f"no embedded site named {unknown}; embedded sites: {sorted(SITES)}")
        self.sites = [SITES[name] for name in names]
        self._databases: list[Any] = []
        self._server: Any = None
        self._dispatcher: Any = None

    @property
    def urls(self) -> dict[str, str]:
        """Site name -> origin, for resolving `__SITE__` placeholders."""
        return {site.name: site.origin for site in self.sites}

    @property
    def proxy(self) -> str:
        """The server's address, to use as the browser context's HTTP proxy."""
        if self._server is None:
            raise RuntimeError("the embedded sites are not running; call start() first")
        return f"http://127.0.0.1:{self._server.port}"

    def cookies(self) -> list[dict[str, Any]]:
        """The cookies (Playwright's `add_cookies` format) that let a browser context reach the sites
        until the next `restore()`."""
        from agentgym_envs.webarena.sites.server import SECRET_COOKIE

        if self._dispatcher is None:
            raise RuntimeError("the embedded sites are not running; call start() first")
        return [
            {
                "name": SECRET_COOKIE,
                "value": self._dispatcher.secret,
                "url": site.origin,
                "httpOnly": True,
                "sameSite": "Lax",
            }
            for site in self.sites
        ]

    def database(self, name: str) -> Any:
        """The database of the site `name` while the sites run (for the evaluation helpers), else None."""
        names = [site.name for site in self.sites]
        return self._databases[names.index(name)] if name in names and self._databases else None

    def start(self) -> None:
        """Build the databases and start the server (once)."""
        if self._server is not None:
            return
        from agentgym_envs.webarena.sites.server import EmbeddedServer, HostDispatcher

        apps = {}
        for site in self.sites:
            db = resolve(site.database)()
            self._databases.append(db)
            apps[site.host] = resolve(site.app)(db)
        self._dispatcher = HostDispatcher(apps, secret=secrets.token_urlsafe(32))
        server = EmbeddedServer(self._dispatcher)
        server.start()
        self._server = server

    def restore(self) -> None:
        """Start a new episode: a new secret (the previous episode's browser context is locked out
        first), then every site's data back to its seed state."""
        if self._dispatcher is not None:
            self._dispatcher.secret = secrets.token_urlsafe(32)
        for db in self._databases:
            db.restore()

    def stop(self) -> None:
        """Stop the server and drop the databases (idempotent)."""
        if self._server is not None:
            self._server.stop()
            self._server = self._dispatcher = None
        for db in self._databases:
            db.close()
        self._databases.clear()
