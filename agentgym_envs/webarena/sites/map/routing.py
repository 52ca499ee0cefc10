"""Routes on the map's road graph: the fastest path by travel mode (Dijkstra with a heap), turned into
the steps a directions page shows, and the formats of distances and times shared by the pages and the
task templates (so an answer is what the page says).

>>> graph = Graph([(1, 2, "Elm Street", "residential", 300), (2, 3, "M4", "motorway", 5000),
...                (2, 4, "B4068", "country", 4000), (4, 3, "B4068", "country", 3000)])
>>> route = graph.route(1, 3, "car")
>>> [step.road for step in route.steps], route.metres, format_duration(route.seconds)
(['Elm Street', 'M4'], 5300, '4 min')
>>> [step.road for step in graph.route(1, 3, "bike").steps], format_distance(graph.route(1, 3, "bike").metres)
(['Elm Street', 'B4068'], '7.3 km')
"""

from __future__ import annotations

import heapq
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass

from agentgym_envs.webarena.sites.map.gazetteer import MODES, ROAD_TYPES


def format_distance(metres: float) -> str:
    """`640` -> `'640 m'` (to 10 m), `2449` -> `'2.4 km'` (to 100 m from 1 km on)."""
    if metres < 995:
        return f"{round(metres / 10) * 10} m"
    return f"{round(metres / 100) / 10:.1f} km"


def format_duration(seconds: float) -> str:
    """`400` -> `'7 min'`, `4000` -> `'1 h 7 min'` (whole minutes, at least 1)."""
    minutes = max(1, round(seconds / 60))
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def minutes(seconds: float) -> int:
    """The whole minutes `format_duration` shows."""
    return max(1, round(seconds / 60))


def edge_seconds(metres: int, road_type: str, mode: str) -> float | None:
    """Seconds to travel a road of this type and length in `mode`, or None where the mode may not go."""
    _, car_speed, bikes_and_walkers = ROAD_TYPES[road_type]
    speed = car_speed if mode == "car" else (MODES[mode][1] if bikes_and_walkers else None)
    return None if speed is None else metres * 3.6 / speed


@dataclass(frozen=True)
class Step:
    """One instruction: follow `road` for `metres` taking `seconds`."""

    road: str
    road_type: str
    metres: int
    seconds: float


@dataclass(frozen=True)
class Route:
    """The fastest route between two nodes: its steps and totals."""

    steps: list[Step]
    metres: int
    seconds: float


class Graph:
    """An undirected road graph: edges `(node, node, road name, road type, metres)`."""

    def __init__(self, edges: Iterable[tuple]):
        self.adjacent: dict[int, list[tuple[int, str, str, int]]] = {}
        for a, b, road, road_type, metres in edges:
            self.adjacent.setdefault(a, []).append((b, road, road_type, metres))
            self.adjacent.setdefault(b, []).append((a, road, road_type, metres))

    @classmethod
    def from_connection(cls, connection: sqlite3.Connection) -> Graph:
        """The graph of the map's `edges` table."""
        return cls(tuple(row) for row in connection.execute("SELECT a, b, road, road_type, metres FROM edges"))

    def route(self, start: int, end: int, mode: str) -> Route | None:
        """The fastest route from `start` to `end` in `mode` (ties broken by node ids, so it is
        deterministic), or None when the mode cannot get there."""
        if mode not in MODES:
            raise ValueError(f"unknown travel mode {mode!r}; modes: {sorted(MODES)}")
        best = {start: 0.0}
        came_from: dict[int, tuple[int, str, str, int, float]] = {}
        heap = [(0.0, start)]
        while heap:
            cost, node = heapq.heappop(heap)
            if node == end:
                break
            if cost > best[node]:
                continue
            for neighbour, road, road_type, metres in self.adjacent.get(node, ()):
                seconds = edge_seconds(metres, road_type, mode)
                if seconds is None:
                    continue
                new_cost = cost + seconds
                if new_cost < best.get(neighbour, float("inf")):
                    best[neighbour] = new_cost
                    came_from[neighbour] = (node, road, road_type, metres, seconds)
                    heapq.heappush(heap, (new_cost, neighbour))
        if end not in best:
            return None
        legs = []
        node = end
        while node != start:
            previous, road, road_type, metres, seconds = came_from[node]
            legs.append(Step(road, road_type, metres, seconds))
            node = previous
        steps: list[Step] = []
        for leg in reversed(legs):  # consecutive legs on one road make one step
            if steps and steps[-1].road == leg.road:
                last = steps.pop()
                leg = Step(leg.road, leg.road_type, last.metres + leg.metres, last.seconds + leg.seconds)
            steps.append(leg)
        return Route(steps, sum(step.metres for step in steps), sum(step.seconds for step in steps))
