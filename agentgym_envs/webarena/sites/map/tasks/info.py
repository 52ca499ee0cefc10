"""The map's task templates of information seeking."""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Callable
from typing import Any

from agentgym_envs.webarena.sites.map.db import address, coordinates, opening_hours
from agentgym_envs.webarena.sites.map.gazetteer import CATEGORIES, metres
from agentgym_envs.webarena.sites.map.routing import Graph, Route, format_distance, format_duration, minutes
from agentgym_envs.webarena.sites.map.tasks.common import (
    PAIRS,
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
    _rng,
    _street_steps,
    _streets,
    _towns_and_categories,
    _whats_here,
)
from agentgym_envs.webarena.tasks.templates import TaskTemplate, Values, click, exact, must_include, stop, type_text


@functools.lru_cache(maxsize=8)
def _graph(seed: sqlite3.Connection) -> Graph:
    return Graph.from_connection(seed)


def _route(seed: sqlite3.Connection, origin: str, destination: str, mode: str) -> Route:
    route = _graph(seed).route(_place(seed, origin)["node"], _place(seed, destination)["node"], mode)
    if route is None:
        raise ValueError(f"no {mode} route from {origin!r} to {destination!r}")
    return route


def _place_fact(answer: Callable[[sqlite3.Row], tuple[str, dict[str, Any]]]) -> Callable:
    """A build that opens the place's page and answers `answer(place)` = (said, eval)."""

    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        said, evaluation = answer(_place(seed, values["place"]))
        return TASKS.built([*_open_place(values["place"]), stop(said)], evaluation)

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
        return TASKS.built([*_open_place(values["place"]), stop(time)], exact(time))

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
    return TASKS.built([*_open_place(values["place"]), stop(answer)], exact(answer))


def _route_fact(mode: str, measure: str) -> Callable:
    """A build that asks the directions page and answers the route's time or distance."""

    def build(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
        route = _route(seed, values["origin"], values["destination"], mode)
        said = format_duration(route.seconds) if measure == "time" else format_distance(route.metres)
        return TASKS.built(
            [*_directions(values["origin"], values["destination"], mode), stop(said)], must_include(said)
        )

    return build


def _motorway_pairs(seed: sqlite3.Connection) -> list[Values]:
    """Pairs in two towns whose fastest driving route takes exactly one motorway."""
    return [values for values in _pairs(seed, "motorway", same_town=False) if len(_motorways(seed, values)) == 1]


def _motorways(seed: sqlite3.Connection, values: Values) -> list[str]:
    route = _route(seed, values["origin"], values["destination"], "car")
    return [step.road for step in route.steps if step.road_type == "motorway"]


def _build_motorway(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    road = _motorways(seed, values)[0]
    return TASKS.built([*_directions(values["origin"], values["destination"], "car"), stop(road)], exact(road))


def _build_walk_minus_bike(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    walk = _route(seed, values["origin"], values["destination"], "foot")
    bike = _route(seed, values["origin"], values["destination"], "bike")
    difference = str(minutes(walk.seconds) - minutes(bike.seconds))
    plan = [
        *_directions(values["origin"], values["destination"], "foot"),
        click("link", "Bicycle directions"),
        stop(difference),
    ]
    return TASKS.built(plan, must_include(difference))


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
    return TASKS.built([*plan, stop(answer)], exact(answer))


def _build_closest(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = _nearest(seed, _place(seed, values["place"]), _category_slug(values["category"]))[0][1]
    return TASKS.built([*_nearby_steps(values), stop(name)], exact(name))


def _build_nearest_distance(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    said = format_distance(_nearest(seed, _place(seed, values["place"]), _category_slug(values["category"]))[0][0])
    return TASKS.built([*_nearby_steps(values), stop(said)], must_include(said))


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
    return TASKS.built(
        [type_text("searchbox", "Search the map", query), stop(values["answer"])], exact(values["answer"])
    )


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


def _build_on_street(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = _places(
        seed,
        "category = ? AND street_name = ? AND town_name = ?",
        _category_slug(values["category"]),
        values["street"],
        values["town"],
    )[0]["name"]
    return TASKS.built([*_street_steps(values), stop(name)], exact(name))


def _build_street_count(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(len(_places(seed, "street_name = ? AND town_name = ?", values["street"], values["town"])))
    return TASKS.built([click("link", values["town"]), stop(count)], exact(count))


def _build_count_in_town(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    count = str(len(_places(seed, "category = ? AND town_name = ?", _plural_slug(values["category"]), values["town"])))
    return TASKS.built([click("link", values["town"]), stop(count)], exact(count))


def _build_whats_here(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    name = _places(seed, "printf('%.5f', lat) = ? AND printf('%.5f', lon) = ?", values["lat"], values["lon"])[0]["name"]
    return TASKS.built([*_whats_here(values["lat"], values["lon"]), stop(name)], exact(name))


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "category_of",
        "info",
        "What kind of place is {{place}}?",
        _each_place(),
        _place_fact(lambda p: _said_exactly(_label(p["category"]))),
    ),
    TASKS.template(
        "address_of",
        "info",
        "What is the street address of {{place}}?",
        _each_place(),
        _place_fact(lambda p: (address(p), must_include(f"{p['number']} {p['street_name']}"))),
    ),
    TASKS.template(
        "town_of",
        "info",
        "In which town is {{place}}?",
        _each_place(),
        _place_fact(lambda p: _said_exactly(p["town_name"])),
    ),
    TASKS.template(
        "street_of",
        "info",
        "On which street is {{place}}?",
        _each_place(),
        _place_fact(lambda p: _said_exactly(p["street_name"])),
    ),
    TASKS.template(
        "coordinates_of",
        "info",
        "What are the coordinates (latitude, longitude) of {{place}}?",
        _each_place(),
        _place_fact(lambda p: (coordinates(p["lat"], p["lon"]), must_include(f"{p['lat']:.5f}", f"{p['lon']:.5f}"))),
    ),
    TASKS.template(
        "postcode",
        "info",
        "What is the postcode of {{place}}?",
        _each_place(),
        _place_fact(lambda p: _said_exactly(p["postcode"])),
    ),
    TASKS.template(
        "phone",
        "info",
        "What is the phone number of {{place}}?",
        _each_place("phone IS NOT NULL"),
        _place_fact(lambda p: _said_exactly(p["phone"])),
    ),
    TASKS.template(
        "cuisine",
        "info",
        "What cuisine does the restaurant {{place}} serve?",
        _each_place("cuisine IS NOT NULL"),
        _place_fact(lambda p: _said_exactly(p["cuisine"])),
    ),
    TASKS.template(
        "hotel_stars",
        "info",
        "How many stars does {{place}} have?",
        _each_place("stars IS NOT NULL"),
        _place_fact(lambda p: _said_exactly(str(p["stars"]))),
        held_out=True,
    ),
    TASKS.template("opening_time", "info", "At what time does {{place}} open on {{day}}?", _timed_days, _hours_part(0)),
    TASKS.template(
        "closing_time", "info", "At what time does {{place}} close on {{day}}?", _timed_days, _hours_part(1)
    ),
    TASKS.template(
        "open_on_day", "info", "Is {{place}} open on {{day}}? Answer Yes or No.", _open_days, _build_open_on_day
    ),
    TASKS.template(
        "walk_time",
        "info",
        "How long does it take to walk from {{origin}} to {{destination}}?",
        lambda seed: _pairs(seed, "walk_time", True),
        _route_fact("foot", "time"),
    ),
    TASKS.template(
        "drive_time",
        "info",
        "How long does it take to drive from {{origin}} to {{destination}}?",
        lambda seed: _pairs(seed, "drive_time", False),
        _route_fact("car", "time"),
    ),
    TASKS.template(
        "bike_time",
        "info",
        "How long is the bike ride from {{origin}} to {{destination}}?",
        lambda seed: _pairs(seed, "bike_time", None),
        _route_fact("bike", "time"),
    ),
    TASKS.template(
        "walk_distance",
        "info",
        "How far is the walk from {{origin}} to {{destination}}?",
        lambda seed: _pairs(seed, "walk_distance", True),
        _route_fact("foot", "distance"),
    ),
    TASKS.template(
        "drive_distance",
        "info",
        "What is the driving distance from {{origin}} to {{destination}}?",
        lambda seed: _pairs(seed, "drive_distance", None),
        _route_fact("car", "distance"),
    ),
    TASKS.template(
        "bike_distance",
        "info",
        "How many kilometres is the cycling route from {{origin}} to {{destination}}?",
        lambda seed: _pairs(seed, "bike_distance", False),
        _route_fact("bike", "distance"),
    ),
    TASKS.template(
        "motorway",
        "info",
        "Which motorway does the fastest driving route from {{origin}} to {{destination}} take?",
        _motorway_pairs,
        _build_motorway,
        held_out=True,
    ),
    TASKS.template(
        "walk_minus_bike",
        "info",
        "How many minutes longer does it take to walk than to cycle from {{origin}} to {{destination}}?",
        lambda seed: _pairs(seed, "walk_minus_bike", True),
        _build_walk_minus_bike,
        held_out=True,
    ),
    TASKS.template(
        "closer_on_foot",
        "info",
        "Which is the shorter walk from {{origin}}: to {{first}} or to {{second}}?",
        _closer_triples,
        _build_closer,
    ),
    TASKS.template(
        "closest", "info", "What is the closest {{category}} to {{place}}?", _nearest_instances, _build_closest
    ),
    TASKS.template(
        "nearest_distance",
        "info",
        "How far, in a straight line, is the nearest {{category}} from {{place}}?",
        _nearest_instances,
        _build_nearest_distance,
    ),
    TASKS.template(
        "town_centre",
        "info",
        "Which {{category}} is nearest to the centre of {{town}}?",
        _town_centre_instances,
        _build_town_centre,
    ),
    TASKS.template(
        "on_street", "info", "Which {{category}} is on {{street}} in {{town}}?", _single_on_street, _build_on_street
    ),
    TASKS.template(
        "street_count",
        "info",
        "How many places does the map list on {{street}} in {{town}}?",
        _streets,
        _build_street_count,
    ),
    TASKS.template(
        "count_in_town",
        "info",
        "How many {{category}} are there in {{town}}?",
        _towns_and_categories,
        _build_count_in_town,
    ),
    TASKS.template(
        "whats_here", "info", "Which place is at latitude {{lat}}, longitude {{lon}}?", _points, _build_whats_here
    ),
]
