"""Shortest primitive-action paths over the cells the agent has seen (for the high-level actions)."""

from __future__ import annotations

from collections import deque

import numpy as np
from minigrid.core.actions import Actions
from minigrid.core.constants import DIR_TO_VEC
from minigrid.core.grid import Grid


def _passable(grid: Grid, seen: np.ndarray, x: int, y: int) -> bool:
    if not (0 <= x < grid.width and 0 <= y < grid.height) or not seen[x, y]:
        return False
    cell = grid.get(x, y)
    return cell is None or (cell.can_overlap() and cell.type != "lava")


def path_to_face(
    grid: Grid, seen: np.ndarray, start: tuple[int, int], direction: int, target: tuple[int, int]
) -> list[Actions] | None:
    """Primitive actions that bring the agent from `start` (facing `direction`) to face `target`.

    Only seen, walkable cells are used (closed doors and objects block). Breadth-first search over
    (x, y, direction) states, so the path is shortest in actions. None when no such path is known.
    """
    origin = (int(start[0]), int(start[1]), int(direction))
    parents: dict[tuple[int, int, int], tuple[tuple[int, int, int], Actions] | None] = {origin: None}
    queue = deque([origin])
    while queue:
        state = queue.popleft()
        x, y, d = state
        fx, fy = DIR_TO_VEC[d]
        if (x + fx, y + fy) == target:
            actions: list[Actions] = []
            while parents[state] is not None:
                state, action = parents[state]
                actions.append(action)
            return actions[::-1]
        moves = [((x, y, (d - 1) % 4), Actions.left), ((x, y, (d + 1) % 4), Actions.right)]
        if _passable(grid, seen, x + fx, y + fy):
            moves.insert(0, ((x + fx, y + fy, d), Actions.forward))
        for nxt, action in moves:
            if nxt not in parents:
                parents[nxt] = (state, action)
                queue.append(nxt)
    return None
