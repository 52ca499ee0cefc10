"""Loopback Maps: a small map site (Starlette + Jinja2 + SQLite) modelled on WebArena's OpenStreetMap:
search (names, categories, "cafes in Ashford", "hospitals near Ashford Central Station"), place pages
with hours and nearby places, directions by car, bicycle or foot over the road graph, "what's here" at
coordinates, and browsing by category, town and street. No accounts, no JavaScript, nothing changes.

Every page's state is in its URL query (search, filters, the route's from/to/mode), so navigation
tasks can be scored by URL. Input is checked as the shop checks it: a malformed value gets a 400 page,
a well-formed one out of bounds (an over-long query, a latitude of 100, a page past the last) a 422
page, an unknown place, town, category or street a 404 page; no input gets a 500."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from agentgym_envs.webarena.sites.map.db import MapDB, address, category_of, coordinates
from agentgym_envs.webarena.sites.map.gazetteer import CATEGORIES, MODES
from agentgym_envs.webarena.sites.map.routing import format_distance, format_duration
from agentgym_envs.webarena.sites.pages import site_templates
from agentgym_envs.webarena.sites.refusals import Refused

SITE_NAME = "Loopback Maps"
HOMEPAGE = "http://home.test"
#: The longest search query or place name in a form, in characters.
MAX_QUERY = 200
PER_PAGE = 20
#: "What's here" lists the places within this many metres, at most `HERE_LIMIT` of them.
HERE_RADIUS, HERE_LIMIT = 300, 10
NEARBY_LIMIT = 10
_PAGE = re.compile(r"[0-9]{1,6}")
_PLACE_ID = re.compile(r"[0-9]{1,9}")
_DEGREES = re.compile(r"-?[0-9]{1,3}(\.[0-9]{1,12})?")
_NEAR, _IN = re.compile(r"(.+?)\s+near\s+(.+)", re.I), re.compile(r"(.+?)\s+in\s+(.+)", re.I)


def place_id(text: str) -> int | None:
    """A place id from a URL, or None when `text` cannot be one."""
    return int(text) if _PLACE_ID.fullmatch(text) else None


def degrees(text: str, what: str, limit: int) -> float:
    """`text` as a latitude or longitude within +-`limit`, or `Refused` saying what is allowed."""
    if not _DEGREES.fullmatch(text):
        raise Refused(400, f"The {what} must be a decimal number of degrees, like 51.52 or -1.24.")
    value = float(text)
    if not -limit <= value <= limit:
        raise Refused(422, f"The {what} must be from -{limit} to {limit} degrees.")
    return value


def paginate(items: list[Any], page_text: str) -> tuple[list[Any], int, int]:
    """(the items of the page, page number, number of pages), or `Refused` for a bad page number."""
    if not _PAGE.fullmatch(page_text):
        raise Refused(400, "The page must be a whole number from 1 on.")
    pages = max(1, -(-len(items) // PER_PAGE))
    page = int(page_text)
    if not 1 <= page <= pages:
        raise Refused(422, f"The page must be from 1 to {pages}.")
    return items[(page - 1) * PER_PAGE : page * PER_PAGE], page, pages


def create_app(db: MapDB) -> Starlette:
    """The map as an ASGI app over `db`."""
    templates = site_templates("agentgym_envs.webarena.sites.map", SITE_NAME)
    templates.filters["distance"] = format_distance
    templates.filters["duration"] = format_duration
    templates.filters["address"] = address
    templates.globals.update(homepage=HOMEPAGE, categories=CATEGORIES, modes=MODES, coordinates=coordinates)

    def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(templates.get_template(name).render(**context), status_code=status_code)

    def refused(refusal: Refused) -> HTMLResponse:
        return page("error.html", status_code=refusal.status, message=refusal.message)

    def not_found(what: str) -> HTMLResponse:
        return refused(Refused(404, f"There is no such {what} on this map."))

    def listing(request: Request, title: str, places: list[dict[str, Any]], **context: Any) -> Response:
        """A paginated list of places; the page number's links keep the rest of the URL query."""
        try:
            shown, number, pages = paginate(places, request.query_params.get("page", "1"))
        except Refused as refusal:
            return refused(refusal)
        params = {key: value for key, value in request.query_params.items() if key != "page"}
        links = {n: f"{request.url.path}?{urlencode({**params, 'page': n})}" for n in range(1, pages + 1)}
        return page(
            "listing.html", title=title, places=shown, total=len(places), number=number, page_links=links, **context
        )

    async def home(request: Request) -> Response:
        return page("home.html", towns=db.towns(), counts=db.category_counts())

    async def search(request: Request) -> Response:
        query = " ".join(request.query_params.get("q", "").split())
        if len(query) > MAX_QUERY:
            return refused(Refused(422, f"Search queries can be at most {MAX_QUERY} characters long."))
        if not query:
            return page("listing.html", title="Search", query="", places=[], total=0, page_links={})
        near, inside = _NEAR.fullmatch(query), _IN.fullmatch(query)
        if near and (category := category_of(near.group(1))):
            label = CATEGORIES[category][1]
            centre = db.place_named(near.group(2))
            if centre is not None:
                found = db.nearest(centre["lat"], centre["lon"], category, exclude=centre["id"])
                return listing(request, f"{label} near {centre['name']}", found, query=query, distances=True)
            town = db.town_named(near.group(2))
            if town is not None:
                found = db.nearest(town["lat"], town["lon"], category)
                return listing(request, f"{label} near {town['name']}", found, query=query, distances=True)
        if inside and (category := category_of(inside.group(1))) and (town := db.town_named(inside.group(2))):
            found = db.places("category = ? AND town = ?", category, town["slug"])
            return listing(request, f"{CATEGORIES[category][1]} in {town['name']}", found, query=query)
        return listing(request, f"Search results for '{query}'", db.search(query), query=query)

    async def place(request: Request) -> Response:
        number = place_id(request.path_params["id"])
        found = db.place(number) if number is not None else None
        if found is None:
            return not_found("place")
        nearby = db.nearest(found["lat"], found["lon"], exclude=found["id"])[:5]
        return page("place.html", place=found, hours=db.hours(found["id"]), nearby=nearby)

    async def nearby(request: Request) -> Response:
        text, category = request.query_params.get("place", ""), request.query_params.get("category", "")
        if not _PLACE_ID.fullmatch(text):
            return refused(Refused(400, "The place must be given by its number, like place=12."))
        centre = db.place(int(text))
        if centre is None:
            return not_found("place")
        if category not in CATEGORIES:
            return not_found("category")
        found = db.nearest(centre["lat"], centre["lon"], category, exclude=centre["id"])[:NEARBY_LIMIT]
        title = f"{CATEGORIES[category][1]} near {centre['name']}"
        return page("nearby.html", title=title, centre=centre, places=found)

    async def directions(request: Request) -> Response:
        params = request.query_params
        start_text, end_text = " ".join(params.get("from", "").split()), " ".join(params.get("to", "").split())
        mode = params.get("mode", "car")
        context: dict[str, Any] = {"start": start_text, "end": end_text, "mode": mode}
        try:
            if mode not in MODES:
                raise Refused(400, f"The travel mode must be one of: {', '.join(MODES)}.")
            if len(start_text) > MAX_QUERY or len(end_text) > MAX_QUERY:
                raise Refused(422, f"Place names can be at most {MAX_QUERY} characters long.")
            if not (start_text and end_text):
                return page("directions.html", **context)
            start, end = db.place_named(start_text), db.place_named(end_text)
            for text, found in ((start_text, start), (end_text, end)):
                if found is None:
                    raise Refused(404, f"There is no place named '{text}' on this map; search for it first.")
            if start["id"] == end["id"]:
                raise Refused(422, "The start and the destination are the same place.")
        except Refused as refusal:
            return page("directions.html", status_code=refusal.status, error=refusal.message, **context)
        canonical = {"from": start["name"], "to": end["name"], "mode": mode}
        if dict(params) != canonical:  # one address per route: exact names, every parameter
            return RedirectResponse(f"/directions?{urlencode(canonical)}", status_code=303)
        route = db.graph.route(start["node"], end["node"], mode)
        modes = {key: f"/directions?{urlencode({**canonical, 'mode': key})}" for key in MODES}
        reverse = f"/directions?{urlencode({'from': end['name'], 'to': start['name'], 'mode': mode})}"
        return page(
            "directions.html", route=route, origin=start, target=end, mode_links=modes, reverse=reverse, **context
        )

    async def whats_here(request: Request) -> Response:
        lat_text, lon_text = request.query_params.get("lat", "").strip(), request.query_params.get("lon", "").strip()
        context: dict[str, Any] = {"lat": lat_text, "lon": lon_text}
        if not (lat_text or lon_text):
            return page("whats_here.html", **context)
        try:
            lat, lon = degrees(lat_text, "latitude", 90), degrees(lon_text, "longitude", 180)
        except Refused as refusal:
            return page("whats_here.html", status_code=refusal.status, error=refusal.message, **context)
        found = [p for p in db.nearest(lat, lon) if p["metres"] <= HERE_RADIUS][:HERE_LIMIT]
        return page("whats_here.html", places=found, point=coordinates(lat, lon), **context)

    async def categories(request: Request) -> Response:
        return page("categories.html", counts=db.category_counts())

    async def category(request: Request) -> Response:
        slug = request.path_params["slug"]
        if slug not in CATEGORIES:
            return not_found("category")
        town_slug = request.query_params.get("town", "")
        town = db.town(town_slug) if town_slug else None
        if town_slug and town is None:
            return not_found("town")
        where, args = ("category = ? AND town = ?", (slug, town_slug)) if town else ("category = ?", (slug,))
        title = CATEGORIES[slug][1] + (f" in {town['name']}" if town else "")
        filters = {"All towns": f"/category/{slug}"}
        filters.update({t["name"]: f"/category/{slug}?town={t['slug']}" for t in db.towns()})
        current = town["name"] if town else "All towns"
        return listing(request, title, db.places(where, *args), filters=filters, current=current)

    async def town(request: Request) -> Response:
        found = db.town(request.path_params["slug"])
        if found is None:
            return not_found("town")
        counts = db.category_counts(found["slug"])
        return page("town.html", town=found, streets=db.streets(found["slug"]), counts=counts)

    async def street(request: Request) -> Response:
        found_town = db.town(request.path_params["town"])
        found = db.street(found_town["slug"], request.path_params["slug"]) if found_town else None
        if found is None:
            return not_found("street")
        places = db.places("street = ?", found["id"], order="number")
        return page("street.html", town=found_town, street=found, places=places)

    async def missing(request: Request, exc: Exception) -> Response:
        return not_found("page")

    routes = [
        Route("/", home),
        Route("/search", search),
        Route("/place/{id}", place),
        Route("/nearby", nearby),
        Route("/directions", directions),
        Route("/whats-here", whats_here),
        Route("/categories", categories),
        Route("/category/{slug}", category),
        Route("/town/{slug}", town),
        Route("/town/{town}/street/{slug}", street),
    ]
    return Starlette(routes=routes, exception_handlers={404: missing, 405: missing})
