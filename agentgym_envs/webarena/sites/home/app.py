"""The homepage, like WebArena's: one page that links to every embedded site, with a line on what
each is for. It has no data and no tasks; its database is a stand-in that the registry's contract asks for."""

from __future__ import annotations

import sqlite3

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

#: What each WebArena site is for, one line each (a site not listed here shows only its title).
PURPOSES = {
    "shopping": "An online shop: search the catalogue, read reviews, buy, and follow your orders.",
    "shopping_admin": "The shop's admin panel: orders, products, customers, reviews, promotions and reports.",
    "reddit": "A forum: posts, comments and votes in many forums.",
    "gitlab": "A code host: projects, files, commits, issues and merge requests.",
    "map": "A map: places, search, and directions between two places.",
    "wikipedia": "An encyclopedia.",
}


class HomeDB:
    """The homepage keeps no data: restoring it does nothing."""

    def restore(self) -> None:
        """Nothing to put back."""

    def close(self) -> None:
        """Nothing to free."""


def seed_connection() -> sqlite3.Connection:
    """An empty database (the homepage has no seed data)."""
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.row_factory = sqlite3.Row
    return connection


def create_app(db: HomeDB) -> Starlette:
    """The homepage as an ASGI app; it lists the sites the registry found, except itself."""
    from agentgym_envs.webarena.sites import SITES

    templates = jinja2.Environment(
        loader=jinja2.PackageLoader("agentgym_envs.webarena.sites.home", "templates"), autoescape=True
    )
    sites = [
        {"title": site.title, "origin": site.origin, "purpose": PURPOSES.get(site.name, "")}
        for site in SITES.values()
        if site.name != "homepage"
    ]
    page = templates.get_template("home.html").render(sites=sites)
    missing = templates.get_template("not_found.html").render()

    async def home(request: Request) -> HTMLResponse:
        return HTMLResponse(page)

    async def not_found(request: Request, exc: Exception) -> HTMLResponse:
        return HTMLResponse(missing, status_code=404)

    return Starlette(routes=[Route("/", home)], exception_handlers={404: not_found, 405: not_found})
