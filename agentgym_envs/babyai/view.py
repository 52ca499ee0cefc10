"""What the BabyAI agent sees and remembers, in words.

minigrid gives a 7x7 egocentric grid encoding and no text. `ObjectMemory` keeps the cells the agent
has seen, finds the objects among them, and numbers objects of the same colour and type by their
distance from the agent (`red ball 1` is the nearest known red ball), so that the high-level actions
can name them. Positions are described relative to the agent: "3 steps ahead and 1 step to your left".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from minigrid.core.constants import DIR_TO_VEC, OBJECT_TO_IDX
from minigrid.core.world_object import WorldObj
from minigrid.minigrid_env import MiniGridEnv

#: Object types the agent can name in actions ("wall", "floor" and "empty" are scenery).
NAMED_TYPES = frozenset({"key", "ball", "box", "door", "goal", "lava"})
_IS_NAMED = np.zeros(256, dtype=bool)
_IS_NAMED[[OBJECT_TO_IDX[t] for t in NAMED_TYPES]] = True
_UNSEEN = OBJECT_TO_IDX["unseen"]

_VIEW = 7
# For each agent direction: absolute (dx, dy) offsets of the 7x7 view cells, indexed [i, j] like
# minigrid's image (i = column left to right, j = row far to near; the agent is at [3, 6]).
_AHEAD = (_VIEW - 1) - np.arange(_VIEW)[None, :].repeat(_VIEW, 0)
_RIGHT = np.arange(_VIEW)[:, None].repeat(_VIEW, 1) - _VIEW // 2
_OFFSETS = []
#: DIR_TO_VEC as Python ints.
_DIRS = [(int(dx), int(dy)) for dx, dy in DIR_TO_VEC]
for _d in range(4):
    _f = DIR_TO_VEC[_d]
    _r = np.array((-_f[1], _f[0]))
    _OFFSETS.append((_AHEAD * _f[0] + _RIGHT * _r[0], _AHEAD * _f[1] + _RIGHT * _r[1]))


@dataclass(frozen=True)
class KnownObject:
    """An object the agent has seen, as the agent refers to it."""

    name: str  # "red ball 1", "grey door 2"
    obj: WorldObj
    pos: tuple[int, int]
    ahead: int
    right: int
    visible: bool


def door_state(obj: WorldObj) -> str:
    return "open" if obj.is_open else "locked" if obj.is_locked else "closed"


def object_label(obj: WorldObj) -> str:
    """A short description without the number: "red ball", "grey door (locked)"."""
    if obj.type == "door":
        return f"{obj.color} door ({door_state(obj)})"
    return f"{obj.color} {obj.type}"


def _steps(n: int, word: str) -> str:
    return f"{n} step{'s' if n != 1 else ''} {word}"


def relative_position(ahead: int, right: int) -> str:
    """Words for an offset: "3 steps ahead and 1 step to your left", "right in front of you"."""
    if ahead == 1 and right == 0:
        return "right in front of you"
    parts = []
    if ahead:
        parts.append(_steps(abs(ahead), "ahead" if ahead > 0 else "behind"))
    if right:
        parts.append(_steps(abs(right), "to your right" if right > 0 else "to your left"))
    return " and ".join(parts) or "where you stand"


def _row_order(row: tuple) -> tuple:
    return row[:3]  # distance, then x, then y


class ObjectMemory:
    """The seen cells of one episode and the objects in them."""

    def __init__(self, env: MiniGridEnv):
        self.env = env
        self.seen = np.zeros((env.width, env.height), dtype=bool)
        self.visible: set[tuple[int, int]] = set()
        self.objects: list[tuple[WorldObj, tuple[int, int]]] = []
        self.rescan()

    def rescan(self) -> None:
        """Re-read object positions from the grid (after a pick-up, drop or box opening)."""
        grid, width = self.env.grid.grid, self.env.width
        self.objects = [
            (obj, (k % width, k // width)) for k, obj in enumerate(grid) if obj is not None and obj.type in NAMED_TYPES
        ]

    def observe(self, image: np.ndarray) -> None:
        """Mark the cells of minigrid's egocentric `image` as seen and note the visible objects."""
        x0, y0 = self.env.agent_pos
        dx, dy = _OFFSETS[self.env.agent_dir]
        xs, ys = dx + x0, dy + y0
        codes = image[:, :, 0]
        inside = (codes != _UNSEEN) & (xs >= 0) & (ys >= 0) & (xs < self.env.width) & (ys < self.env.height)
        self.seen[xs[inside], ys[inside]] = True
        named = inside & _IS_NAMED[codes]
        self.visible = set(zip(xs[named].tolist(), ys[named].tolist(), strict=True))

    def known(self) -> list[KnownObject]:
        """Every seen object still on the grid, nearest first, numbered per colour and type."""
        x0, y0 = (int(v) for v in self.env.agent_pos)  # Python ints: numpy scalars are slow one at a time
        fx, fy = _DIRS[self.env.agent_dir]
        seen = self.seen
        rows = []
        for obj, (x, y) in self.objects:
            if seen[x, y]:
                ahead, right = (x - x0) * fx + (y - y0) * fy, (y - y0) * fx - (x - x0) * fy
                rows.append((abs(ahead) + abs(right), x, y, ahead, right, obj))
        rows.sort(key=_row_order)
        counts: dict[tuple[str, str], int] = {}
        known = []
        visible = self.visible
        for _, x, y, ahead, right, obj in rows:
            key = (obj.color, obj.type)
            count = counts[key] = counts.get(key, 0) + 1
            known.append(KnownObject(f"{obj.color} {obj.type} {count}", obj, (x, y), ahead, right, (x, y) in visible))
        return known
