"""What the map's task templates share: the site's `TASKS` vocabulary, reading the seed data and
the expert's ways through the site."""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.map.gazetteer import CATEGORIES, MODES, metres
from agentgym_envs.webarena.tasks.templates import SiteTasks, Values, click, type_text

SITE = "map"
HOME = "__MAP__"
#: The vocabulary of the site's templates.
TASKS = SiteTasks(SITE, HOME)
#: Route pairs drawn per routing template.
PAIRS = 90
#: Categories the proximity templates ask about (each town has at least one of each).
NEAR_CATEGORIES = ("hospital", "pharmacy", "cafe", "station", "museum", "park", "supermarket", "library", "bank")


# ---- reading the seed ---------------------------------------------------------------------------
def _places(seed: sqlite3.Connection, where: str = "1", *args: Any) -> list[sqlite3.Row]:
    return list(seed.execute(f"SELECT * FROM place_view WHERE {where} ORDER BY id", args))


def _place(seed: sqlite3.Connection, name: str) -> sqlite3.Row:
    return _places(seed, "name = ?", name)[0]


def _nearest(seed: sqlite3.Connection, place: sqlite3.Row, category: str) -> list[tuple[int, str]]:
    """(metres, name) of the places of `category` by straight-line distance from `place` (the
    nearby page's order)."""
    others = _places(seed, "category = ? AND id != ?", category, place["id"])
    return sorted((metres(place["lat"], place["lon"], p["lat"], p["lon"]), p["name"]) for p in others)


def _rng(key: str) -> random.Random:
    return random.Random(f"map.{key}")


def _pairs(seed: sqlite3.Connection, key: str, same_town: bool | None) -> list[Values]:
    """`PAIRS` distinct (origin, destination) pairs of places, drawn deterministically; in one town,
    in two towns, or either (None)."""
    places, rng, pairs = _places(seed), _rng(key), {}
    while len(pairs) < PAIRS:
        a, b = rng.sample(places, 2)
        if same_town is None or (a["town"] == b["town"]) == same_town:
            pairs[a["name"], b["name"]] = None
    return [{"origin": a, "destination": b} for a, b in pairs]


def _label(category: str) -> str:
    return CATEGORIES[category][0]


def _plural(category: str) -> str:
    return CATEGORIES[category][1]


# ---- the expert's steps -------------------------------------------------------------------------
def _open_place(name: str) -> list[dict[str, Any]]:
    return [type_text("searchbox", "Search the map", name), click("link", name)]


def _directions(origin: str, destination: str, mode: str) -> list[dict[str, Any]]:
    return [
        click("link", "Directions"),
        type_text("textbox", "From", origin, enter=False),
        type_text("textbox", "To", destination, enter=False),
        type_text("combobox", "Travel mode", MODES[mode][0], enter=False),
        click("button", "Get directions"),
    ]


def _whats_here(lat: str, lon: str) -> list[dict[str, Any]]:
    return [
        click("link", "What's here?"),
        type_text("textbox", "Latitude", lat, enter=False),
        type_text("textbox", "Longitude", lon, enter=False),
        click("button", "Show what's here"),
    ]


def _each_place(where: str = "1") -> Callable[[sqlite3.Connection], list[Values]]:
    return lambda seed: [{"place": p["name"]} for p in _places(seed, where)]


def _nearest_instances(seed: sqlite3.Connection) -> list[Values]:
    """(category, place) where the nearest place of the category is at least 20 m nearer than the next."""
    found = []
    for index, place in enumerate(_places(seed)):
        category = NEAR_CATEGORIES[index % len(NEAR_CATEGORIES)]
        ranked = _nearest(seed, place, category)
        if place["category"] != category and len(ranked) > 1 and ranked[1][0] - ranked[0][0] >= 20:
            found.append({"category": _label(category).lower(), "place": place["name"]})
    return found


def _category_slug(label: str) -> str:
    return next(slug for slug, (name, _, _) in CATEGORIES.items() if name.lower() == label)


def _nearby_steps(values: Values) -> list[dict[str, Any]]:
    return [*_open_place(values["place"]), click("link", f"{_plural(_category_slug(values['category']))} nearby")]


def _street_steps(values: Values) -> list[dict[str, Any]]:
    return [click("link", values["town"]), click("link", values["street"])]


def _streets(seed: sqlite3.Connection) -> list[Values]:
    rows = seed.execute("SELECT s.name, t.name AS town FROM streets s JOIN towns t ON t.slug = s.town ORDER BY s.id")
    return [{"street": r["name"], "town": r["town"]} for r in rows]


def _towns_and_categories(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": _plural(category).lower(), "town": town["name"]}
        for town in seed.execute("SELECT name FROM towns ORDER BY name")
        for category in CATEGORIES
    ]


def _plural_slug(plural: str) -> str:
    return next(slug for slug, (_, name, _) in CATEGORIES.items() if name.lower() == plural)


def _points(seed: sqlite3.Connection) -> list[Values]:
    return [{"lat": f"{p['lat']:.5f}", "lon": f"{p['lon']:.5f}"} for p in _places(seed)]
