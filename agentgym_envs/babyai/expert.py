"""The BabyAI expert: minigrid's `BabyAIBot`, with its actions written as our action text.

The expert reads its env through `BabyAIState` (what `BabyAIEnv` shows of an episode); the env makes it
in `make_expert`, so the import runs one way: env -> expert.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from minigrid.core.actions import Actions
from minigrid.utils.baby_ai_bot import BabyAIBot

if TYPE_CHECKING:
    import numpy as np
    from minigrid.minigrid_env import MiniGridEnv

    from agentgym_envs.babyai.view import KnownObject

ACTION_TEXT = {
    Actions.left: "turn left",
    Actions.right: "turn right",
    Actions.forward: "move forward",
    Actions.pickup: "pick up",
    Actions.drop: "drop",
    Actions.toggle: "toggle",
}

#: Subgoals the bot may push while planning one action; it can loop forever on rare layouts
#: (seen on UnlockToUnlock seed 4), so a plan that needs more is given up.
MAX_SUBGOALS_PER_ACTION = 500
#: Fresh plans the expert tries after the bot's plan went round in a circle.
MAX_DETOURS = 8


class BabyAIState(Protocol):
    """What the expert reads of a BabyAI episode (`BabyAIEnv` has it)."""

    @property
    def minigrid_env(self) -> MiniGridEnv | None: ...

    @property
    def seen_cells(self) -> np.ndarray: ...

    def known_objects(self) -> list[KnownObject]: ...


class ExpertStuckError(RuntimeError):
    """The bot found no next action (a planning loop, or an opened box hid what it needed)."""


class _BoundedStack(list):
    """The bot's subgoal stack, refusing to grow without bound during one `replan`."""

    pushes = 0

    def append(self, item: Any) -> None:
        self.pushes += 1
        if self.pushes > MAX_SUBGOALS_PER_ACTION:
            raise ExpertStuckError(f"BabyAIBot pushed over {MAX_SUBGOALS_PER_ACTION} subgoals for one action")
        super().append(item)


class BabyAIExpert:
    """Scripted solver for the current BabyAI episode (create it right after `reset`).

    minigrid's bot solves every level of the BabyAI paper; it cannot solve `KeyInBox` and the
    `PutNext*Carrying` levels (`levels.BOT_UNSUPPORTED`).
    """

    def __init__(self, env: BabyAIState):
        self._env = env
        self._bot = self._new_bot()
        self._detours = 0
        self._in_detour = False

    def _new_bot(self) -> BabyAIBot:
        bot = BabyAIBot(self._env.minigrid_env)
        bot.stack = _BoundedStack(bot.stack)
        return bot

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next action text (primitive actions; high-level ones during a detour)."""
        if self._in_detour:
            action = self._detour()
            if action is not None:
                return action
            self._in_detour = False
            seen = self._bot.vis_mask | self._env.seen_cells
            self._bot = self._new_bot()
            self._bot.vis_mask = seen
        self._bot.stack.pushes = 0
        try:
            action = self._bot.replan()
        except ExpertStuckError:
            # The bot's plan went round in a circle: it wants a key that lies behind another locked
            # door and keeps exploring the door it cannot open. Take one step of a key-and-door
            # detour, then let a fresh bot (knowing what was seen) plan again.
            self._detours += 1
            action = self._detour(start=True) if self._detours <= MAX_DETOURS else None
            if action is None:
                raise
            self._in_detour = True
            return action
        except Exception as error:  # the bot raises bare assertions and DisappearedBoxError
            raise ExpertStuckError(f"BabyAIBot cannot continue: {error!r}") from error
        if action not in ACTION_TEXT:
            raise ExpertStuckError("BabyAIBot believes the mission is done, but the episode goes on")
        return ACTION_TEXT[action]

    def _detour(self, start: bool = False) -> str | None:
        """Open a door whose key is carried, else fetch a key that opens a known door, else (when
        starting) go through the nearest closed unlocked door to see more. None: detour done."""
        known = self._env.known_objects()
        carrying = self._env.minigrid_env.carrying
        doors = [k for k in known if k.obj.type == "door" and not k.obj.is_open]
        if carrying is not None and carrying.type == "key":
            for door in doors:
                if door.obj.color == carrying.color:
                    return f"toggle and go through {door.name}"
        locked_colors = {door.obj.color for door in doors if door.obj.is_locked}
        wanted = next((k for k in known if k.obj.type == "key" and k.obj.color in locked_colors), None)
        if carrying is None:
            if wanted is not None:
                return f"pick up {wanted.name}"
            unlocked = next((d for d in doors if not d.obj.is_locked), None)
            return f"toggle and go through {unlocked.name}" if start and unlocked else None
        # A fresh bot starts empty-handed: put down what is carried before fetching or handing back.
        front = self._env.minigrid_env.grid.get(*self._env.minigrid_env.front_pos)
        return "drop" if front is None else "turn left"
