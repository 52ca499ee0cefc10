"""minigrid's egocentric observation, computed from a cached encoding of the whole grid.

`MiniGridEnv.gen_obs` builds the agent's 7x7 view object by object every step: it slices the grid
into a new `Grid` (a `Wall()` per cell outside it), rotates it one to four times (a new `Grid` each
time), walks it for occlusion (`Grid.process_vis`) and encodes it cell by cell. That is about 85% of
a raw minigrid step. `Sight` gives the same dictionary (the same image, direction and mission) from
an encoding of the whole grid kept between steps: the view is two numpy look-ups, and the occlusion
mask, which depends only on which of the 49 cells block the view, is computed once per pattern.

The cached encoding is only valid while the grid is unchanged: `invalidate()` must be called after
anything that changes the grid (a reset, a pick-up, a drop, a toggle), and the next `gen_obs()`
re-reads it. The BabyAI env calls the fast path only for actions that leave the grid as it is (turns
and moves), and invalidates the cache after every other step and every reset (`BabyAIEnv._run`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from minigrid.core.constants import OBJECT_TO_IDX
from minigrid.minigrid_env import MiniGridEnv

from agentgym_envs.babyai.view import _OFFSETS, _VIEW

_WALL = np.array((OBJECT_TO_IDX["wall"], 5, 0), dtype=np.uint8)  # Wall().encode(): grey wall, outside the grid
_EMPTY = (OBJECT_TO_IDX["empty"], 0, 0)
_DOOR = OBJECT_TO_IDX["door"]
_PAD = _VIEW  # cells of wall around the grid, more than the view reaches past its edge
_AGENT = (_VIEW // 2, _VIEW - 1)  # the agent's cell in the view
#: The occlusion masks seen so far, by the view's blocking cells (bytes of a (7, 7) bool array).
_MASKS: dict[bytes, np.ndarray] = {}
_MAX_MASKS = 1 << 14


def visibility(opaque: np.ndarray) -> np.ndarray:
    """`Grid.process_vis` over a (7, 7) mask of the cells that block the view ([i, j], the agent at [3, 6])."""
    size = opaque.shape[0]
    mask = np.zeros((size, size), dtype=bool)
    mask[_AGENT] = True
    for j in reversed(range(size)):
        for i in range(size - 1):
            if mask[i, j] and not opaque[i, j]:
                mask[i + 1, j] = True
                if j > 0:
                    mask[i + 1, j - 1] = True
                    mask[i, j - 1] = True
        for i in reversed(range(1, size)):
            if mask[i, j] and not opaque[i, j]:
                mask[i - 1, j] = True
                if j > 0:
                    mask[i - 1, j - 1] = True
                    mask[i, j - 1] = True
    return mask


def _mask(opaque: np.ndarray) -> np.ndarray:
    key = opaque.tobytes()
    mask = _MASKS.get(key)
    if mask is None:
        if len(_MASKS) >= _MAX_MASKS:
            _MASKS.clear()
        mask = visibility(opaque)
        mask.flags.writeable = False  # shared by every env of the process (and their threads)
        _MASKS[key] = mask
    return mask


class Sight:
    """`env.gen_obs()` for one minigrid env, from a cached encoding of its grid (see the module docstring)."""

    def __init__(self, env: MiniGridEnv):
        if env.agent_view_size != _VIEW:
            raise ValueError(f"Sight supports minigrid's {_VIEW}x{_VIEW} view, not {env.agent_view_size}")
        self.env = env
        self._index = [(dx + _PAD, dy + _PAD) for dx, dy in _OFFSETS]
        self._stale = True

    def invalidate(self) -> None:
        """Say that the grid may have changed (a reset, a pick-up, a drop, a toggle): the next view re-reads it."""
        self._stale = True

    def refresh(self) -> None:
        """Re-read the grid's encoding."""
        env = self.env
        width, height = env.width, env.height
        cells = [_EMPTY if obj is None else obj.encode() for obj in env.grid.grid]
        codes = np.asarray(cells, dtype=np.uint8).reshape(height, width, 3).transpose(1, 0, 2)
        encoding = np.empty((width + 2 * _PAD, height + 2 * _PAD, 3), dtype=np.uint8)
        encoding[:] = _WALL
        encoding[_PAD : _PAD + width, _PAD : _PAD + height] = codes
        self._encoding = encoding
        kinds = encoding[:, :, 0]
        self._opaque = (kinds == _WALL[0]) | ((kinds == _DOOR) & (encoding[:, :, 2] != 0))
        self._stale = False

    def gen_obs(self) -> dict[str, Any]:
        """What `MiniGridEnv.gen_obs` returns for the env's current state (valid while the grid is unchanged)."""
        if self._stale:
            self.refresh()
        env = self.env
        x0, y0 = env.agent_pos
        dx, dy = self._index[env.agent_dir]
        xs, ys = dx + x0, dy + y0
        image = self._encoding[xs, ys]
        if not env.see_through_walls:
            image[~_mask(self._opaque[xs, ys])] = 0
        carrying = env.carrying
        image[_AGENT] = carrying.encode() if carrying else _EMPTY
        return {"image": image, "direction": env.agent_dir, "mission": env.mission}
