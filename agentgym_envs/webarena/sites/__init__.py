"""The embedded default sites: small web apps of our own that stand in for WebArena's Docker sites.

Each site has a WebArena site name (the `sites` entry and `__SITE__` placeholder of a task config)
and a stable origin under the reserved `.test` domain. `EmbeddedSites` runs them for one env: one
database per site (restored at every reset) and one loopback server for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class EmbeddedSite:
    """A site the env can serve itself: its WebArena name and the origin the browser sees."""

    name: str
    origin: str

    @property
    def host(self) -> str:
        return self.origin.split("://", 1)[1]


#: The embedded sites by WebArena site name.
SITES = {"shopping": EmbeddedSite("shopping", "http://shop.test")}


class EmbeddedSites:
    """The embedded sites of one env: their databases and the server, started on demand."""

    def __init__(self, names: tuple[str, ...] = tuple(SITES)):
        unknown = [name for name in names if name not in SITES]
        if unknown:
            raise ValueError(f"no embedded site named {unknown}; embedded sites: {sorted(SITES)}")
        self.sites = [SITES[name] for name in names]
        self._databases: list[Any] = []
        self._server: Any = None

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

    def start(self) -> None:
        """Build the databases and start the server (once)."""
        if self._server is not None:
            return
        from agentgym_envs.webarena.sites.server import EmbeddedServer, HostDispatcher
        from agentgym_envs.webarena.sites.shop.app import create_app
        from agentgym_envs.webarena.sites.shop.db import ShopDB

        apps = {}
        for site in self.sites:
            if site.name == "shopping":
                db = ShopDB()
                self._databases.append(db)
                apps[site.host] = create_app(db)
        server = EmbeddedServer(HostDispatcher(apps))
        server.start()
        self._server = server

    def restore(self) -> None:
        """Put every site's data back to its seed state."""
        for db in self._databases:
            db.restore()

    def stop(self) -> None:
        """Stop the server and drop the databases (idempotent)."""
        if self._server is not None:
            self._server.stop()
            self._server = None
        for db in self._databases:
            db.close()
        self._databases.clear()
