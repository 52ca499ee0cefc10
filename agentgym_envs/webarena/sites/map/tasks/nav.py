"""The map's task templates of navigation."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from agentgym_envs.webarena.sites.map.gazetteer import CATEGORIES, slugify
from agentgym_envs.webarena.sites.map.tasks.common import (
    HOME,
    NEAR_CATEGORIES,
    TASKS,
    _category_slug,
    _directions,
    _each_place,
    _label,
    _nearby_steps,
    _nearest,
    _nearest_instances,
    _open_place,
    _pairs,
    _place,
    _places,
    _plural,
    _plural_slug,
    _points,
    _street_steps,
    _streets,
    _towns_and_categories,
    _whats_here,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, stop, type_text, url


def _directions_url(origin: str, destination: str, mode: str) -> str:
    return f"{HOME}/directions?{urlencode({'from': origin, 'to': destination, 'mode': mode})}"


def _build_nav_place(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    place = _place(seed, values["place"])
    return TASKS.built([*_open_place(values["place"]), stop()], url(f"{HOME}/place/{place['id']}"))


def _nav_directions(mode: str) -> Callable:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        origin, destination = values["origin"], values["destination"]
        reference = url(_directions_url(origin, destination, mode))
        return TASKS.built([*_directions(origin, destination, mode), stop()], reference)

    return build


def _build_nav_reverse(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    origin, destination = values["origin"], values["destination"]
    plan = [*_directions(origin, destination, "foot"), click("link", "Reverse route"), stop()]
    return TASKS.built(plan, url(_directions_url(destination, origin, "foot")))


def _build_nav_category_town(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    slug, town = _plural_slug(values["category"]), slugify(values["town"])
    plan = [click("link", values["town"]), click("link", f"{_plural(slug)} in {values['town']}"), stop()]
    return TASKS.built(plan, url(f"{HOME}/category/{slug}?{urlencode({'town': town})}"))


def _categories(seed: sqlite3.Connection) -> list[Values]:
    return [{"category": plural.lower()} for _, plural, _ in CATEGORIES.values()]


def _build_nav_category(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    slug = _plural_slug(values["category"])
    return TASKS.built(
        [click("link", "Categories"), click("link", _plural(slug)), stop()], url(f"{HOME}/category/{slug}")
    )


def _nav_nearby_instances(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": _label(NEAR_CATEGORIES[i % len(NEAR_CATEGORIES)]).lower(), "place": p["name"]}
        for i, p in enumerate(_places(seed))
    ]


def _build_nav_nearby(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    query = urlencode({"place": _place(seed, values["place"])["id"], "category": _category_slug(values["category"])})
    return TASKS.built([*_nearby_steps(values), stop()], url(f"{HOME}/nearby?{query}"))


def _build_nav_whats_here(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    query = urlencode({"lat": values["lat"], "lon": values["lon"]})
    return TASKS.built([*_whats_here(values["lat"], values["lon"]), stop()], url(f"{HOME}/whats-here?{query}"))


def _search_queries(seed: sqlite3.Connection) -> list[Values]:
    return [{"query": f"{v['category']} in {v['town']}"} for v in _towns_and_categories(seed)]


def _build_nav_search(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [type_text("searchbox", "Search the map", values["query"]), stop()]
    return TASKS.built(plan, url(f"{HOME}/search?{urlencode({'q': values['query']})}"))


def _build_nav_street(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    path = f"{HOME}/town/{slugify(values['town'])}/street/{slugify(values['street'])}"
    return TASKS.built([*_street_steps(values), stop()], url(path))


def _build_nav_nearest_directions(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    target = _nearest(seed, _place(seed, values["place"]), _category_slug(values["category"]))[0][1]
    plan = [*_nearby_steps(values), *_directions(values["place"], target, "foot"), stop()]
    return TASKS.built(plan, url(_directions_url(values["place"], target, "foot")))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template("nav_place", "nav", "Open the map page of {{place}}.", _each_place(), _build_nav_place),
    TASKS.template(
        "nav_drive",
        "nav",
        "Show me the driving directions from {{origin}} to {{destination}}.",
        lambda seed: _pairs(seed, "nav_drive", None),
        _nav_directions("car"),
    ),
    TASKS.template(
        "nav_walk",
        "nav",
        "Show me how to walk from {{origin}} to {{destination}}.",
        lambda seed: _pairs(seed, "nav_walk", True),
        _nav_directions("foot"),
    ),
    TASKS.template(
        "nav_bike",
        "nav",
        "Show me the cycling route from {{origin}} to {{destination}}.",
        lambda seed: _pairs(seed, "nav_bike", None),
        _nav_directions("bike"),
    ),
    TASKS.template(
        "nav_reverse",
        "nav",
        "I walked from {{origin}} to {{destination}}; show me the walking route back.",
        lambda seed: _pairs(seed, "nav_reverse", True),
        _build_nav_reverse,
    ),
    TASKS.template(
        "nav_category_town",
        "nav",
        "Show me all the {{category}} in {{town}}.",
        _towns_and_categories,
        _build_nav_category_town,
    ),
    TASKS.template("nav_category", "nav", "Browse all the {{category}} on the map.", _categories, _build_nav_category),
    TASKS.template(
        "nav_nearby",
        "nav",
        "Show me the places of the category {{category}} near {{place}}.",
        _nav_nearby_instances,
        _build_nav_nearby,
    ),
    TASKS.template(
        "nav_whats_here",
        "nav",
        "Show me what is at latitude {{lat}}, longitude {{lon}}.",
        _points,
        _build_nav_whats_here,
    ),
    TASKS.template("nav_search", "nav", 'Search the map for "{{query}}".', _search_queries, _build_nav_search),
    TASKS.template("nav_street", "nav", "Show me the places on {{street}} in {{town}}.", _streets, _build_nav_street),
    TASKS.template(
        "nav_nearest_directions",
        "nav",
        "Show me the walking directions from {{place}} to the nearest {{category}}.",
        _nearest_instances,
        _build_nav_nearest_directions,
        held_out=True,
    ),
]
