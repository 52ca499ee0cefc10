"""The map's task templates of unachievable tasks."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.map.tasks.common import TASKS, _directions, _each_place, _open_place, _pairs, _places
from agentgym_envs.webarena.tasks.templates import NOT_ACHIEVABLE, TaskTemplate, Values, not_achievable, stop, type_text

#: Made-up places and categories the map does not have (for unachievable tasks).
MISSING_PLACES = ("Harbourview Aquarium", "Kingsbridge Ice Rink", "Elmstead Observatory", "Saltmarsh Lighthouse",
                  "Greyfriars Botanical Garden", "Northfield Velodrome")  # fmt: skip
MISSING_CATEGORIES = ("zoo", "airport", "casino", "ski resort", "golf course", "aquarium")
TRANSIT = ("bus", "tram", "train timetable", "ferry")


def _missing_place_pairs(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"origin": place["name"], "missing": MISSING_PLACES[i % len(MISSING_PLACES)]}
        for i, place in enumerate(_places(seed))
    ]


def _build_missing_place(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [type_text("searchbox", "Search the map", values["missing"]), stop(NOT_ACHIEVABLE)]
    return TASKS.built(plan, not_achievable())


def _missing_categories(seed: sqlite3.Connection) -> list[Values]:
    return [
        {"category": MISSING_CATEGORIES[i % len(MISSING_CATEGORIES)], "place": place["name"]}
        for i, place in enumerate(_places(seed))
    ]


def _build_missing_category(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([*_open_place(values["place"]), stop(NOT_ACHIEVABLE)], not_achievable())


def _transit_pairs(seed: sqlite3.Connection) -> list[Values]:
    return [{**pair, "transit": TRANSIT[i % len(TRANSIT)]} for i, pair in enumerate(_pairs(seed, "transit", None))]


def _build_directions_then_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    plan = [*_directions(values["origin"], values["destination"], "car"), stop(NOT_ACHIEVABLE)]
    return TASKS.built(plan, not_achievable())


def _build_open_then_na(seed: sqlite3.Connection, values: Values) -> dict[str, Any]:
    return TASKS.built([*_open_place(values["place"]), stop(NOT_ACHIEVABLE)], not_achievable())


TEMPLATES: list[TaskTemplate] = [
    TASKS.template(
        "na_missing_place",
        "na",
        "How long does it take to walk from {{origin}} to {{missing}}?",
        _missing_place_pairs,
        _build_missing_place,
    ),
    TASKS.template(
        "na_transit",
        "na",
        "Which {{transit}} should I take from {{origin}} to {{destination}}?",
        _transit_pairs,
        _build_directions_then_na,
    ),
    TASKS.template(
        "na_missing_category",
        "na",
        "What is the closest {{category}} to {{place}}?",
        _missing_categories,
        _build_missing_category,
    ),
    TASKS.template(
        "na_park_phone",
        "na",
        "What is the phone number of {{place}}?",
        _each_place("phone IS NULL"),
        _build_open_then_na,
    ),
    TASKS.template(
        "na_traffic",
        "na",
        "How long is the traffic delay right now between {{origin}} and {{destination}}?",
        lambda seed: _pairs(seed, "na_traffic", None),
        _build_directions_then_na,
        held_out=True,
    ),
]
