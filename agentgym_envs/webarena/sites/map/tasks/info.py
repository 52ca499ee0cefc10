"""The map's task templates (WebArena site `map`): 45 intents in about WebArena's map proportions
(28 information seeking, 12 navigation, 5 unachievable; the map has no state to change; 5 held out of
train).

Every answer comes from the seed data (`seed_connection`) and, for routes, from the same routing code
the directions page runs (`routing.Graph`), formatted as the pages format it. The expert's plans use
the site as a user does: the search box, the town, street, category and "nearby" links, the
directions form (From, To, Travel mode, Get directions) and the "What's here?" form.
"""

from __future__ import annotations

import functools
import random
import sqlite3
from collections.abc import Callable
from typing import Any
from urllib.parse import urlencode

from agentgym_envs.webarena.sites.map.db import address, coordinates, opening_hours
from agentgym_envs.webarena.sites.map.gazetteer import CATEGORIES, MODES, metres, slugify
from agentgym_envs.webarena.sites.map.routing import Graph, Route, format_distance, format_duration, minutes
from agentgym_envs.webarena.tasks.templates import (
    NOT_ACHIEVABLE,
    TaskTemplate,
    Values,
    click,
    exact,
    must_include,
    not_achievable,
    stop,
    type_text,
    url,
)

SITE = "map"
HOME = "__MAP__"
#: Route pairs drawn per routing template.
PAIRS = 90
#: Categories the proximity templates ask about (each town has at least one of each).
NEAR_CATEGORIES = ("hospital", "pharmacy", "cafe", "station", "museum", "park", "supermarket", "library", "bank")
MODE_WORDS = {"car": "driving", "bike": "cycling", "foot": "walking"}
#: Made-up places and categories the map does not have (for unachievable tasks).
MISSING_PLACES = ("Harbourview Aquarium", "Kingsbridge Ice Rink", "Elmstead Observatory", "Saltmarsh Lighthouse",
                  "Greyfriars Botanical Garden", "Northfield Velodrome")  # fmt: skip
MISSING_CATEGORIES = ("zoo", "airport", "casino", "ski resort", "golf course", "aquarium")
TRANSIT = ("bus", "tram", "train timetable", "ferry")


# ---- reading the seed ---------------------------------------------------------------------------
def _places(seed: sqlite3.Connection, where: str = "1", *args: Any) -> list[sqlite3.Row]:
    return list(seed.execute(f"SELECT * FROM place_view WHERE {where} ORDER BY id", args))


def _place(seed: sqlite3.Connection, name: str) -> sqlite3.Row:
    return _places(seed, "name = ?", name)[0]


@functools.lru_cache(maxsize=8)
def _graph(seed: sqlite3.Connection) -> Graph:
    return Graph.from_connection(seed)


def _route(seed: sqlite3.Connection, origin: str, destination: str, mode: str) -> Route:
    route = _graph(seed).route(_place(seed, origin)["node"], _place(seed, destination)["node"], mode)
    if route is None:
        raise ValueError(f"no {mode} route from {origin!r} to {destination!r}")
    return route


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


def _directions_url(origin: str, destination: str, mode: str) -> str:
    return f"{HOME}/directions?{urlencode({'from': origin, 'to': destination, 'mode': mode})}"


def _built(plan: list[dict[str, Any]], evaluation: dict[str, Any]) -> dict[str, Any]:
    return {"start_url": HOME, "eval": evaluation, "agentgym_expert": plan}


def _template(slug: str, kind: str, intent: str, instances: Callable, build: Callable, held_out: bool = False):
    return TaskTemplate(f"{SITE}.{slug}", SITE, kind, intent, instances, build, held_out)


# ---- information seeking: facts on a place page -------------------------------------------------
def _each_place(where: str = "1") -> Callable[[sqlite3.Connection], list[Values]]:
    return lambda seed: [{"place": p["name"]} for p in _places(seed, where)]


def _place_fact(answer: Callable[[sqlite3.Row], tuple[str, dict[str, Any]]]) -> Callable:
    """A build that opens the place's page and answers `answer(place)` = (said, eval)."""

    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        said, evaluation = answer(_place(seed, values["place"]))
        return _built([*_open_place(values["place"]), stop(said)], evaluation)

    return build


def _said_exactly(text: str) -> tuple[str, dict[str, Any]]:
    return text, exact(text)


def _day_hours(seed: sqlite3.Connection, place_id: int) -> dict[str, str]:
    return dict(opening_hours(list(seed.execute("SELECT * FROM hours WHERE place = ?", (place_id,)))))


def _timed_days(seed: sqlite3.Connection) -> list[Values]:
    """(place, day) where the place opens and closes that day (not closed, not open 24 hours)."""
    rng, found = _rng("timed_days"), []
    for place in _places(seed):
        days = [day for day, shown in _day_hours(seed, place["id"]).items() if "-" in shown]
        if days:
            found.append({"place": place["name"], "day": rng.choice(days)})
    return found


def _hours_part(part: int) -> Callable:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        shown = _day_hours(seed, _place(seed, values["place"])["id"])[values["day"]]
        time = shown.split("-")[part]
        return _built([*_open_place(values["place"]), stop(time)], exact(time))

    return build


def _open_days(seed: sqlite3.Connection) -> list[Values]:
    """(place, day) pairs, half of them days the place is closed."""
    rng, found = _rng("open_days"), []
    for place in _places(seed):
        hours = _day_hours(seed, place["id"])
        closed = [day for day, shown in hours.items() if shown == "Closed"]
        open_ = [day for day, shown in hours.items() if shown != "Closed"]
        if closed:
            found.append({"place": place["name"], "day": rng.choice(closed)})
            found.append({"place": place["name"], "day": rng.choice(open_)})
    return found


def _build_open_on_day(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    answer = "No" if _day_hours(seed, _place(seed, values["place"])["id"])[values["day"]] == "Closed" else "Yes"
    return _built([*_open_place(values["place"]), stop(answer)], exact(answer))


# ---- information seeking: routes ----------------------------------------------------------------
def _route_fact(mode: str, measure: str) -> Callable:
    """A build that asks the directions page and answers the route's time or distance."""

    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        route = _route(seed, values["origin"], values["destination"], mode)
        said = format_duration(route.seconds) if measure == "time" else format_distance(route.metres)
        return _built([*_directions(values["origin"], values["destination"], mode), stop(said)], must_include(said))

    return build


def _motorway_pairs(seed: sqlite3.Connection) -> list[Values]:
    """Pairs in two towns whose fastest driving route takes exactly one motorway."""
    return [values for values in _pairs(seed, "motorway", same_town=False) if len(_motorways(seed, values)) == 1]


def _motorways(seed: sqlite3.Connection, values: Values) -> list[str]:
    route = _route(seed, values["origin"], values["destination"], "car")
    return [step.road for step in route.steps if step.road_type == "motorway"]


def _build_motorway(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    road = _motorways(seed, values)[0]
    return _built([*_directions(values["origin"], values["destination"], "car"), stop(road)], exact(road))


def _build_walk_minus_bike(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    walk = _route(seed, values["origin"], values["destination"], "foot")
    bike = _route(seed, values["origin"], values["destination"], "bike")
    difference = str(minutes(walk.seconds) - minutes(bike.seconds))
    plan = [
        *_directions(values["origin"], values["destination"], "foot"),
        click("link", "Bicycle directions"),
        stop(difference),
    ]
    return _built(plan, must_include(difference))


def _closer_triples(seed: sqlite3.Connection) -> list[Values]:
    """(origin, first, second) in one town, the walks to the two differing by at least a minute."""
    rng, found, places = _rng("closer"), {}, _places(seed)
    while len(found) < PAIRS:
        origin = rng.choice(places)
        first, second = rng.sample([p for p in places if p["town"] == origin["town"] and p["id"] != origin["id"]], 2)
        times = [_route(seed, origin["name"], p["name"], "foot").seconds for p in (first, second)]
        if abs(times[0] - times[1]) >= 60:
            found[origin["name"], first["name"], second["name"]] = None
    return [{"origin": o, "first": a, "second": b} for o, a, b in found]


def _build_closer(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    first, second = (_route(seed, values["origin"], values[key], "foot") for key in ("first", "second"))
    answer = values["first"] if first.seconds < second.seconds else values["second"]
    plan = [step for key in ("first", "second") for step in _directions(values["origin"], values[key], "foot")]
    return _built([*plan, stop(answer)], exact(answer))


# ---- information seeking: places around --------------------------------------------------------
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


def _build_closest(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = _nearest(seed, _place(seed, values["place"]), _category_slug(values["category"]))[0][1]
    return _built([*_nearby_steps(values), stop(name)], exact(name))


def _build_nearest_distance(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    said = format_distance(_nearest(seed, _place(seed, values["place"]), _category_slug(values["category"]))[0][0])
    return _built([*_nearby_steps(values), stop(said)], must_include(said))


def _town_centre_instances(seed: sqlite3.Connection) -> list[Values]:
    found = []
    for town in seed.execute("SELECT * FROM towns ORDER BY name"):
        for category in CATEGORIES:
            ranked = sorted(
                (metres(town["lat"], town["lon"], p["lat"], p["lon"]), p["name"])
                for p in _places(seed, "category = ?", category)
            )
            if len(ranked) > 1 and ranked[1][0] - ranked[0][0] >= 20:
                found.append({"category": _label(category).lower(), "town": town["name"], "answer": ranked[0][1]})
    return found


def _build_town_centre(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    query = f"{_plural(_category_slug(values['category'])).lower()} near {values['town']}"
    return _built([type_text("searchbox", "Search the map", query), stop(values["answer"])], exact(values["answer"]))


def _single_on_street(seed: sqlite3.Connection) -> list[Values]:
    """(category, street, town) where exactly one place of the category is on the street."""
    rows = seed.execute(
        "SELECT category, street_name, town_name, COUNT(*) AS n FROM place_view "
        "GROUP BY category, street, town HAVING n = 1 ORDER BY town, street, category"
    )
    return [
        {"category": _label(row["category"]).lower(), "street": row["street_name"], "town": row["town_name"]}
        for row in rows
    ]


def _street_steps(values: Values) -> list[dict[str, Any]]:
    return [click("link", values["town"]), click("link", values["street"])]


def _build_on_street(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = _places(
        seed,
        "category = ? AND street_name = ? AND town_name = ?",
        _category_slug(values["category"]),
        values["street"],
        values["town"],
    )[0]["name"]
    return _built([*_street_steps(values), stop(name)], exact(name))


def _streets(seed: sqlite3.Connection) -> list[Values]:
    rows = seed.execute("SELECT s.name, t.name AS town FROM streets s JOIN towns t ON t.slug = s.town ORDER BY s.id")
    return [{"street": r["name"], "town": r["town"]} for r in rows]


def _build_street_count(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(len(_places(seed, "street_name = ? AND town_name = ?", values["street"], values["town"])))
    return _built([click("link", values["town"]), stop(count)], exact(count))


def _towns_and_categories(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": _plural(category).lower(), "town": town["name"]}
        for town in seed.execute("SELECT name FROM towns ORDER BY name")
        for category in CATEGORIES
    ]


def _plural_slug(plural: str) -> str:
    return next(slug for slug, (_, name, _) in CATEGORIES.items() if name.lower() == plural)


def _build_count_in_town(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(len(_places(seed, "category = ? AND town_name = ?", _plural_slug(values["category"]), values["town"])))
    return _built([click("link", values["town"]), stop(count)], exact(count))


def _points(seed: sqlite3.Connection) -> list[Values]:
    return [{"lat": f"{p['lat']:.5f}", "lon": f"{p['lon']:.5f}"} for p in _places(seed)]


def _build_whats_here(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = _places(seed, "printf('%.5f', lat) = ? AND printf('%.5f', lon) = ?", values["lat"], values["lon"])[0]["name"]
    return _built([*_whats_here(values["lat"], values["lon"]), stop(name)], exact(name))


# ---- navigation ---------------------------------------------------------------------------------
def _build_nav_place(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    place = _place(seed, values["place"])
    return _built([*_open_place(values["place"]), stop()], url(f"{HOME}/place/{place['id']}"))


def _nav_directions(mode: str) -> Callable:
    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        origin, destination = values["origin"], values["destination"]
        reference = url(_directions_url(origin, destination, mode))
        return _built([*_directions(origin, destination, mode), stop()], reference)

    return build


def _build_nav_reverse(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    origin, destination = values["origin"], values["destination"]
    plan = [*_directions(origin, destination, "foot"), click("link", "Reverse route"), stop()]
    return _built(plan, url(_directions_url(destination, origin, "foot")))


def _build_nav_category_town(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    slug, town = _plural_slug(values["category"]), slugify(values["town"])
    plan = [click("link", values["town"]), click("link", f"{_plural(slug)} in {values['town']}"), stop()]
    return _built(plan, url(f"{HOME}/category/{slug}?{urlencode({'town': town})}"))


def _categories(seed: sqlite3.Connection) -> list[Values]:
    return [{"category": plural.lower()} for _, plural, _ in CATEGORIES.values()]


def _build_nav_category(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    slug = _plural_slug(values["category"])
    return _built([click("link", "Categories"), click("link", _plural(slug)), stop()], url(f"{HOME}/category/{slug}"))


def _nav_nearby_instances(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": _label(NEAR_CATEGORIES[i % len(NEAR_CATEGORIES)]).lower(), "place": p["name"]}
        for i, p in enumerate(_places(seed))
    ]


def _build_nav_nearby(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    query = urlencode({"place": _place(seed, values["place"])["id"], "category": _category_slug(values["category"])})
    return _built([*_nearby_steps(values), stop()], url(f"{HOME}/nearby?{query}"))


def _build_nav_whats_here(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    query = urlencode({"lat": values["lat"], "lon": values["lon"]})
    return _built([*_whats_here(values["lat"], values["lon"]), stop()], url(f"{HOME}/whats-here?{query}"))


def _search_queries(seed: sqlite3.Connection) -> list[Values]:
    return [{"query": f"{v['category']} in {v['town']}"} for v in _towns_and_categories(seed)]


def _build_nav_search(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [type_text("searchbox", "Search the map", values["query"]), stop()]
    return _built(plan, url(f"{HOME}/search?{urlencode({'q': values['query']})}"))


def _build_nav_street(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    path = f"{HOME}/town/{slugify(values['town'])}/street/{slugify(values['street'])}"
    return _built([*_street_steps(values), stop()], url(path))


def _build_nav_nearest_directions(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    target = _nearest(seed, _place(seed, values["place"]), _category_slug(values["category"]))[0][1]
    plan = [*_nearby_steps(values), *_directions(values["place"], target, "foot"), stop()]
    return _built(plan, url(_directions_url(values["place"], target, "foot")))


# ---- unachievable -------------------------------------------------------------------------------
def _missing_place_pairs(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"origin": place["name"], "missing": MISSING_PLACES[i % len(MISSING_PLACES)]}
        for i, place in enumerate(_places(seed))
    ]


def _build_missing_place(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [type_text("searchbox", "Search the map", values["missing"]), stop(NOT_ACHIEVABLE)]
    return _built(plan, not_achievable())


def _missing_categories(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": MISSING_CATEGORIES[i % len(MISSING_CATEGORIES)], "place": place["name"]}
        for i, place in enumerate(_places(seed))
    ]


def _build_missing_category(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([*_open_place(values["place"]), stop(NOT_ACHIEVABLE)], not_achievable())


def _transit_pairs(seed: sqlite3.Connection) -> list[Values]:
    return [{**pair, "transit": TRANSIT[i % len(TRANSIT)]} for i, pair in enumerate(_pairs(seed, "transit", None))]


def _build_directions_then_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_directions(values["origin"], values["destination"], "car"), stop(NOT_ACHIEVABLE)]
    return _built(plan, not_achievable())


def _build_open_then_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return _built([*_open_place(values["place"]), stop(NOT_ACHIEVABLE)], not_achievable())


# fmt: off
TEMPLATES: list[TaskTemplate] = [
    # information seeking: a place's facts
    _template("category_of", "info", "What kind of place is {{place}}?", _each_place(),
              _place_fact(lambda p: _said_exactly(_label(p["category"])))),
    _template("address_of", "info", "What is the street address of {{place}}?", _each_place(),
              _place_fact(lambda p: (address(p), must_include(f"{p['number']} {p['street_name']}")))),
    _template("town_of", "info", "In which town is {{place}}?", _each_place(),
              _place_fact(lambda p: _said_exactly(p["town_name"]))),
    _template("street_of", "info", "On which street is {{place}}?", _each_place(),
              _place_fact(lambda p: _said_exactly(p["street_name"]))),
    _template("coordinates_of", "info", "What are the coordinates (latitude, longitude) of {{place}}?", _each_place(),
              _place_fact(lambda p: (coordinates(p["lat"], p["lon"]),
                                     must_include(f"{p['lat']:.5f}", f"{p['lon']:.5f}")))),
    _template("postcode", "info", "What is the postcode of {{place}}?", _each_place(),
              _place_fact(lambda p: _said_exactly(p["postcode"]))),
    _template("phone", "info", "What is the phone number of {{place}}?", _each_place("phone IS NOT NULL"),
              _place_fact(lambda p: _said_exactly(p["phone"]))),
    _template("cuisine", "info", "What cuisine does the restaurant {{place}} serve?",
              _each_place("cuisine IS NOT NULL"),
              _place_fact(lambda p: _said_exactly(p["cuisine"]))),
    _template("hotel_stars", "info", "How many stars does {{place}} have?", _each_place("stars IS NOT NULL"),
              _place_fact(lambda p: _said_exactly(str(p["stars"]))), held_out=True),
    _template("opening_time", "info", "At what time does {{place}} open on {{day}}?", _timed_days, _hours_part(0)),
    _template("closing_time", "info", "At what time does {{place}} close on {{day}}?", _timed_days, _hours_part(1)),
    _template("open_on_day", "info", "Is {{place}} open on {{day}}? Answer Yes or No.", _open_days,
              _build_open_on_day),
    # information seeking: routes
    _template("walk_time", "info", "How long does it take to walk from {{origin}} to {{destination}}?",
              lambda seed: _pairs(seed, "walk_time", True), _route_fact("foot", "time")),
    _template("drive_time", "info", "How long does it take to drive from {{origin}} to {{destination}}?",
              lambda seed: _pairs(seed, "drive_time", False), _route_fact("car", "time")),
    _template("bike_time", "info", "How long is the bike ride from {{origin}} to {{destination}}?",
              lambda seed: _pairs(seed, "bike_time", None), _route_fact("bike", "time")),
    _template("walk_distance", "info", "How far is the walk from {{origin}} to {{destination}}?",
              lambda seed: _pairs(seed, "walk_distance", True), _route_fact("foot", "distance")),
    _template("drive_distance", "info", "What is the driving distance from {{origin}} to {{destination}}?",
              lambda seed: _pairs(seed, "drive_distance", None), _route_fact("car", "distance")),
    _template("bike_distance", "info", "How many kilometres is the cycling route from {{origin}} to {{destination}}?",
              lambda seed: _pairs(seed, "bike_distance", False), _route_fact("bike", "distance")),
    _template("motorway", "info", "Which motorway does the fastest driving route from {{origin}} to {{destination}} "
              "take?", _motorway_pairs, _build_motorway, held_out=True),
    _template("walk_minus_bike", "info", "How many minutes longer does it take to walk than to cycle from "
              "{{origin}} to {{destination}}?", lambda seed: _pairs(seed, "walk_minus_bike", True),
              _build_walk_minus_bike, held_out=True),
    _template("closer_on_foot", "info", "Which is the shorter walk from {{origin}}: to {{first}} or to {{second}}?",
              _closer_triples, _build_closer),
    # information seeking: what is around
    _template("closest", "info", "What is the closest {{category}} to {{place}}?", _nearest_instances,
              _build_closest),
    _template("nearest_distance", "info", "How far, in a straight line, is the nearest {{category}} from {{place}}?",
              _nearest_instances, _build_nearest_distance),
    _template("town_centre", "info", "Which {{category}} is nearest to the centre of {{town}}?",
              _town_centre_instances, _build_town_centre),
    _template("on_street", "info", "Which {{category}} is on {{street}} in {{town}}?", _single_on_street,
              _build_on_street),
    _template("street_count", "info", "How many places does the map list on {{street}} in {{town}}?", _streets,
              _build_street_count),
    _template("count_in_town", "info", "How many {{category}} are there in {{town}}?", _towns_and_categories,
              _build_count_in_town),
    _template("whats_here", "info", "Which place is at latitude {{lat}}, longitude {{lon}}?", _points,
              _build_whats_here),
    # navigation
    _template("nav_place", "nav", "Open the map page of {{place}}.", _each_place(), _build_nav_place),
    _template("nav_drive", "nav", "Show me the driving directions from {{origin}} to {{destination}}.",
              lambda seed: _pairs(seed, "nav_drive", None), _nav_directions("car")),
    _template("nav_walk", "nav", "Show me how to walk from {{origin}} to {{destination}}.",
              lambda seed: _pairs(seed, "nav_walk", True), _nav_directions("foot")),
    _template("nav_bike", "nav", "Show me the cycling route from {{origin}} to {{destination}}.",
              lambda seed: _pairs(seed, "nav_bike", None), _nav_directions("bike")),
    _template("nav_reverse", "nav", "I walked from {{origin}} to {{destination}}; show me the walking route back.",
              lambda seed: _pairs(seed, "nav_reverse", True), _build_nav_reverse),
    _template("nav_category_town", "nav", "Show me all the {{category}} in {{town}}.", _towns_and_categories,
              _build_nav_category_town),
    _template("nav_category", "nav", "Browse all the {{category}} on the map.", _categories, _build_nav_category),
    _template("nav_nearby", "nav", "Show me the places of the category {{category}} near {{place}}.",
              _nav_nearby_instances, _build_nav_nearby),
    _template("nav_whats_here", "nav", "Show me what is at latitude {{lat}}, longitude {{lon}}.", _points,
              _build_nav_whats_here),
    _template("nav_search", "nav", "Search the map for \"{{query}}\".", _search_queries, _build_nav_search),
    _template("nav_street", "nav", "Show me the places on {{street}} in {{town}}.", _streets, _build_nav_street),
    _template("nav_nearest_directions", "nav", "Show me the walking directions from {{place}} to the nearest "
              "{{category}}.", _nearest_instances, _build_nav_nearest_directions, held_out=True),
    # unachievable
    _template("na_missing_place", "na", "How long does it take to walk from {{origin}} to {{missing}}?",
              _missing_place_pairs, _build_missing_place),
    _template("na_transit", "na", "Which {{transit}} should I take from {{origin}} to {{destination}}?",
              _transit_pairs, _build_directions_then_na),
    _template("na_missing_category", "na", "What is the closest {{category}} to {{place}}?", _missing_categories,
              _build_missing_category),
    _template("na_park_phone", "na", "What is the phone number of {{place}}?", _each_place("phone IS NULL"),
              _build_open_then_na),
    _template("na_traffic", "na", "How long is the traffic delay right now between {{origin}} and {{destination}}?",
              lambda seed: _pairs(seed, "na_traffic", None), _build_directions_then_na, held_out=True),
]
# fmt: on
