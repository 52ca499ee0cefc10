"""The map's data: an in-memory SQLite database of the generated gazetteer, and the queries its pages
make. The map has no accounts and nothing a user can change (like WebArena's OpenStreetMap), yet it
keeps the sites' contract: a pristine copy, a live copy and `restore()`."""

from __future__ import annotations

import sqlite3
from typing import Any

from agentgym_envs.webarena.sites.database import SiteDatabase
from agentgym_envs.webarena.sites.map.gazetteer import CATEGORIES, DAYS, generate, metres
from agentgym_envs.webarena.sites.map.routing import Graph

SCHEMA = """
CREATE TABLE towns (slug TEXT PRIMARY KEY, name TEXT NOT NULL, lat REAL, lon REAL, code TEXT);
CREATE TABLE streets (id INTEGER PRIMARY KEY, town TEXT REFERENCES towns(slug), name TEXT, slug TEXT,
                      road_type TEXT, postcode TEXT, UNIQUE (town, slug));
CREATE TABLE places (id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, category TEXT NOT NULL,
                     town TEXT REFERENCES towns(slug), street INTEGER REFERENCES streets(id), number INTEGER,
                     lat REAL, lon REAL, phone TEXT, cuisine TEXT, stars INTEGER);
CREATE TABLE hours (place INTEGER REFERENCES places(id), day INTEGER, opens TEXT, closes TEXT,
                    PRIMARY KEY (place, day));
CREATE TABLE nodes (id INTEGER PRIMARY KEY, lat REAL, lon REAL, place INTEGER UNIQUE REFERENCES places(id));
CREATE TABLE edges (a INTEGER REFERENCES nodes(id), b INTEGER REFERENCES nodes(id), road TEXT, road_type TEXT,
                    metres INTEGER);
CREATE VIEW place_view AS
  SELECT p.*, s.name AS street_name, s.slug AS street_slug, s.postcode, t.name AS town_name, n.id AS node
  FROM places p JOIN streets s ON s.id = p.street JOIN towns t ON t.slug = p.town JOIN nodes n ON n.place = p.id;
"""


def seed_connection() -> sqlite3.Connection:
    """A new connection on the seed data (rows as `sqlite3.Row`), for task templates to read."""
    data = generate()
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.executescript(SCHEMA)
    for table, rows in (
        ("towns", data.towns),
        ("streets", data.streets),
        ("places", data.places),
        ("hours", data.hours),
        ("nodes", data.nodes),
        ("edges", data.edges),
    ):
        marks = ", ".join("?" * len(rows[0]))
        connection.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
    connection.commit()
    connection.row_factory = sqlite3.Row
    return connection


def address(place: dict[str, Any] | sqlite3.Row) -> str:
    """`'12 Mill Street, AF1 2BQ Ashford'` (a `place_view` row)."""
    return f"{place['number']} {place['street_name']}, {place['postcode']} {place['town_name']}"


def coordinates(lat: float, lon: float) -> str:
    """`'51.52000, -1.24000'`: 5 decimals, as every page shows them."""
    return f"{lat:.5f}, {lon:.5f}"


def opening_hours(rows: list[dict[str, Any]] | list[sqlite3.Row]) -> list[tuple[str, str]]:
    """(day, hours) for each day of the week from a place's `hours` rows: `'08:00-18:00'`, `'Open 24
    hours'` or `'Closed'`."""
    by_day = {row["day"]: row for row in rows}
    shown = []
    for day, label in enumerate(DAYS):
        row = by_day.get(day)
        if row is None:
            shown.append((label, "Closed"))
        elif (row["opens"], row["closes"]) == ("00:00", "24:00"):
            shown.append((label, "Open 24 hours"))
        else:
            shown.append((label, f"{row['opens']}-{row['closes']}"))
    return shown


def category_of(text: str) -> str | None:
    """The category slug a word names (`'cafes'`, `'Train station'`, `'post_office'`), or None."""
    wanted = " ".join(text.lower().replace("_", " ").split())
    for slug, (label, plural, _) in CATEGORIES.items():
        if wanted in (slug.replace("_", " "), label.lower(), plural.lower()):
            return slug
    return None


class MapDB(SiteDatabase):
    """The live database of one map instance (the site only reads it) and the road graph."""

    seed = staticmethod(seed_connection)

    def __init__(self) -> None:
        super().__init__()
        self.graph = Graph.from_connection(self._pristine)

    # ---- towns and streets ----------------------------------------------------------------------
    def towns(self) -> list[dict[str, Any]]:
        return self._rows("SELECT * FROM towns ORDER BY name")

    def town(self, slug: str) -> dict[str, Any] | None:
        return self._row("SELECT * FROM towns WHERE slug = ?", slug)

    def town_named(self, name: str) -> dict[str, Any] | None:
        return self._row("SELECT * FROM towns WHERE LOWER(name) = ?", name.strip().lower())

    def streets(self, town: str) -> list[dict[str, Any]]:
        return self._rows(
            "SELECT s.*, COUNT(p.id) AS places FROM streets s LEFT JOIN places p ON p.street = s.id "
            "WHERE s.town = ? GROUP BY s.id ORDER BY s.name",
            town,
        )

    def street(self, town: str, slug: str) -> dict[str, Any] | None:
        return self._row("SELECT * FROM streets WHERE town = ? AND slug = ?", town, slug)

    # ---- places ---------------------------------------------------------------------------------
    def place(self, place_id: int) -> dict[str, Any] | None:
        return self._row("SELECT * FROM place_view WHERE id = ?", place_id)

    def place_named(self, name: str) -> dict[str, Any] | None:
        """The place with this name, letter case aside."""
        return self._row("SELECT * FROM place_view WHERE LOWER(name) = ?", " ".join(name.split()).lower())

    def hours(self, place_id: int) -> list[tuple[str, str]]:
        return opening_hours(self._rows("SELECT * FROM hours WHERE place = ?", place_id))

    def places(self, where: str = "1", *args: Any, order: str = "name") -> list[dict[str, Any]]:
        return self._rows(f"SELECT * FROM place_view WHERE {where} ORDER BY {order}", *args)

    def category_counts(self, town: str = "") -> dict[str, int]:
        where, args = ("WHERE town = ?", (town,)) if town else ("", ())
        rows = self._rows(f"SELECT category, COUNT(*) AS n FROM places {where} GROUP BY category", *args)
        return {row["category"]: row["n"] for row in rows}

    def search(self, query: str) -> list[dict[str, Any]]:
        """Places whose name, category, street or town holds every word of `query` (case-insensitive;
        `instr`, unlike `LIKE`, gives `%` and `_` no special meaning)."""
        words = list(dict.fromkeys(query.lower().split()))
        if not words:
            return []
        labels = " ".join(
            f"WHEN '{slug}' THEN '{label.lower()} {plural.lower()}'" for slug, (label, plural, _) in CATEGORIES.items()
        )
        haystack = f"LOWER(name || ' ' || street_name || ' ' || town_name) || ' ' || CASE category {labels} END"
        where = " AND ".join(f"instr({haystack}, ?) > 0" for _ in words)
        # A place named exactly as the query comes first, the rest by name.
        return self.places(where, *words, " ".join(words), order="LOWER(name) != ?, name")

    def nearest(self, lat: float, lon: float, category: str = "", exclude: int = 0) -> list[dict[str, Any]]:
        """Places (of `category`, if given) by straight-line distance from a point, nearest first; each
        with `metres`. Ties go by name."""
        where, args = ("category = ? AND id != ?", (category, exclude)) if category else ("id != ?", (exclude,))
        found = self.places(where, *args)
        for place in found:
            place["metres"] = metres(lat, lon, place["lat"], place["lon"])
        return sorted(found, key=lambda place: (place["metres"], place["name"]))
