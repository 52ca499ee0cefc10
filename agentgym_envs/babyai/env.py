"""BabyAI as a text environment, on minigrid's BabyAI levels."""

from __future__ import annotations

import logging
import re
from typing import Any

import gymnasium as gym
import numpy as np
from minigrid.core.actions import Actions
from minigrid.core.world_object import WorldObj
from minigrid.envs.babyai.core import roomgrid_level
from minigrid.minigrid_env import MiniGridEnv

from agentgym_envs.babyai import levels as L
from agentgym_envs.babyai import tools as babyai_tools
from agentgym_envs.babyai.planner import path_to_face
from agentgym_envs.babyai.sight import Sight
from agentgym_envs.babyai.view import _DIRS, KnownObject, ObjectMemory, door_state, object_label, relative_position
from agentgym_envs.clientargs import Flag, SubsetOf
from agentgym_envs.core import TextEnv, normalise_action

_log = logging.getLogger(__name__)


def _quiet_print(*args: Any, **kwargs: Any) -> None:
    _log.debug(" ".join(str(a) for a in args))


# minigrid prints "Sampling rejected: ..." from level generation; send it to our debug log instead
# (module-level and thread-safe, unlike redirecting sys.stdout around reset).
roomgrid_level.print = _quiet_print

_PRIMITIVES: dict[str, Actions] = {
    "turn left": Actions.left,
    "left": Actions.left,
    "turn right": Actions.right,
    "right": Actions.right,
    "move forward": Actions.forward,
    "go forward": Actions.forward,
    "forward": Actions.forward,
    "pick up": Actions.pickup,
    "pickup": Actions.pickup,
    "drop": Actions.drop,
    "toggle": Actions.toggle,
}
#: The actions that may change the grid (everything else only moves or turns the agent).
_CHANGES_GRID = frozenset({Actions.pickup, Actions.drop, Actions.toggle})
_CHECK = frozenset({"check available actions", "check actions", "available actions"})
_HIGH_LEVEL = re.compile(
    r"^(?P<verb>go to|pick up|go through|toggle and go through) (?:the |a )?"
    r"(?P<color>[a-z]+) (?P<kind>[a-z]+)(?: (?P<n>\d+))?$"
)
_MAX_NUMBER_DIGITS = 6


def _shown(text: str) -> str:
    """`text` cut to 60 characters, for echoing an action back in an observation."""
    return text if len(text) <= 60 else text[:57] + "..."


class BabyAIEnv(TextEnv):
    """Grid-world instruction following (BabyAI) as text.

    ## Description
    The agent is in a grid of rooms with keys, balls, boxes and doors, and must carry out a
    mission in words ("pick up the blue key after you open the red door"). The backend is
    minigrid's BabyAI levels; the text is ours. A task is a level and a seed (`"GoToLocal/7"`).

    ## Actions
    Primitives: `turn left`, `turn right`, `move forward`, `pick up`, `drop`, `toggle`.
    High-level actions over the objects the agent has seen, each one turn, executed with a
    shortest-path planner over seen cells: `go to <color> <type> <n>`,
    `pick up <color> <type> <n>`, `go through <color> door <n>`,
    `toggle and go through <color> door <n>`. `check available actions` lists what is possible.
    Objects of one colour and type are numbered by distance, nearest first (`red ball 1`).
    An action that cannot be carried out (a wall ahead, an unknown object, no known path) changes
    nothing and is answered with the reason; `info["valid_action"]` is then False.

    ## Observation
    The mission (at reset), what the last action did, the objects in the 7x7 view and the
    remembered ones with their positions relative to the agent, a wall right ahead, what the
    agent carries, and (unless `show_actions=False`) the available actions.

    ## Rewards
    BabyAI's: `1 - 0.9 * steps / max_steps` on success (steps are minigrid's primitive steps), paid
    once, so the return is the final score; 0 otherwise.

    ## Termination
    Terminated when the mission succeeds or fails (e.g. the wrong object was picked up), truncated
    when minigrid's step budget for the level runs out.

    ## Registered ids
    `AgentGym/BabyAI-v0`: the 40 levels of AgentGym's BabyAI server (`levels.AGENTGYM_LEVELS`).
    `AgentGym/BabyAI-<Level>-v0`: one level, for each of minigrid's 96 BabyAI levels.
    """

    default_max_turns = 20
    action_format = "action_line"
    stop_strings = ("\nObservation:",)  # the env's part of a turn begins (agentgym_wrappers.stops)
    default_max_turn_tokens = 256  # a short thought and one action line
    action_tools = babyai_tools.TOOLS  # the actions as tools (action_format: tools)
    tool_instructions = babyai_tools.INSTRUCTIONS
    system_prompt = (
        "You are an agent in a grid world of rooms with keys, balls, boxes and doors. "
        "Each turn you read what you see and choose one action to carry out the mission.\n"
        "Actions: turn left, turn right, move forward, pick up, drop, toggle (open or close the door "
        "or box in front of you), go to <object>, pick up <object>, go through <door>, "
        "toggle and go through <door>, check available actions. Objects are named as listed, "
        "e.g. 'red ball 1' (the nearest red ball).\n"
        "Think briefly, then end your reply with one line 'Action: <action>'.\n"
        "Example:\n"
        "Mission: go to the red ball\n"
        "In view: red ball 1, 3 steps ahead and 1 step to your left.\n"
        "Your reply: The red ball is in view, so I can walk to it.\nAction: go to red ball 1"
    )

    #: A remote client may choose levels and whether actions are listed (agentgym_envs.clientargs).
    client_kwargs = {
        **TextEnv.client_kwargs,
        "levels": SubsetOf(sorted(L.MINIGRID_IDS)),
        "show_actions": Flag(),
    }

    def __init__(
        self,
        levels: tuple[str, ...] | list[str] | str = L.AGENTGYM_LEVELS,
        show_actions: bool = True,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if not isinstance(levels, (str, tuple, list)):
            raise TypeError(f"levels must be a level name or a list of them, got {type(levels).__name__}")
        self.levels = (levels,) if isinstance(levels, str) else tuple(levels)
        unknown = [level for level in self.levels if not isinstance(level, str) or level not in L.MINIGRID_IDS]
        if unknown or not self.levels:
            raise ValueError(f"unknown BabyAI levels {unknown}; choose from {sorted(L.MINIGRID_IDS)}")
        if not isinstance(show_actions, bool):
            raise TypeError(f"show_actions must be True or False, got {show_actions!r:.80}")
        self.show_actions = show_actions
        self._backends: dict[str, MiniGridEnv] = {}
        self._mg: MiniGridEnv | None = None
        self._memory: ObjectMemory | None = None
        self._sights: dict[str, Sight | None] = {}
        self._sight: Sight | None = None
        self._task_lists: dict[str, list[str]] = {}

    # ---- tasks ----------------------------------------------------------------------------------
    def tasks(self, split: str = "train") -> list[str]:
        if split not in L.SPLIT_SEEDS:
            raise ValueError(f"unknown split {split!r}; BabyAI has {list(L.SPLIT_SEEDS)}")
        if split not in self._task_lists:
            seeds = L.SPLIT_SEEDS[split]
            self._task_lists[split] = [L.task_id(level, seed) for level in self.levels for seed in seeds]
        return self._task_lists[split]

    def num_tasks(self, split: str) -> int:
        return len(self.levels) * len(L.SPLIT_SEEDS[split])

    def task_at(self, split: str, index: int) -> str:
        seeds = L.SPLIT_SEEDS[split]
        return L.task_id(self.levels[index // len(seeds)], seeds[index % len(seeds)])

    def split_of(self, task_id: str) -> str | None:
        parsed = L.parse_task_id(task_id)
        if parsed is None or parsed[0] not in self.levels:
            return None
        # Any seed is a task (AgentGym's server indexes seeds 0, 1, 2, ...); one outside the listed
        # ranges counts as train, never as test.
        return L.split_of_seed(parsed[1]) or "train"

    # ---- episode --------------------------------------------------------------------------------
    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        level, seed = L.parse_task_id(task_id)  # type: ignore[misc]
        if level not in self._backends:
            self._backends[level] = gym.make(L.MINIGRID_IDS[level]).unwrapped
            backend = self._backends[level]
            self._sights[level] = Sight(backend) if backend.agent_view_size == 7 else None
        self._mg = self._backends[level]
        obs, _ = self._mg.reset(seed=seed)
        self._sight = self._sights[level]
        if self._sight is not None:
            self._sight.invalidate()
        self._memory = ObjectMemory(self._mg)
        self._memory.observe(obs["image"])
        text, actions = self._describe(f"Mission: {self._mg.mission}", self._memory.known())
        info = {"category": L.family(level), "instruction": self._mg.mission, "level": level}
        return text, {**info, "available_actions": actions}

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self._mg is not None and self._memory is not None
        text = normalise_action(action)
        primitive = _PRIMITIVES.get(text)
        if primitive is not None:
            error = self._primitive_error(primitive)
            if error:
                return self._answer(f"You cannot {text}: {error}", self._memory.known(), False)
            return self._run([primitive], self._primitive_message(primitive))
        known = self._memory.known()
        if text in _CHECK:
            text, actions = self._describe("You look around.", known, list_actions=True)
            return text, 0.0, False, False, {"valid_action": True, "success": False, "available_actions": actions}
        match = _HIGH_LEVEL.match(text)
        if match is None:
            return self._answer(
                f"Invalid action {_shown(action)!r}: not a BabyAI action. Use one of the available actions.",
                known,
                False,
            )
        return self._high_level(match, known)

    def _high_level(self, match: re.Match[str], known: list[KnownObject]) -> tuple[str, float, bool, bool, dict]:
        verb, kind = match["verb"], match["kind"]
        # int() refuses numbers past Python's digit limit; no object is numbered anywhere near that.
        number = (match["n"] or "1").lstrip("0") or "0"
        name = f"{match['color']} {kind} {int(number) if len(number) <= _MAX_NUMBER_DIGITS else number}"
        target = next((k for k in known if k.name == name), None)
        if target is None:
            names = ", ".join(k.name for k in known) or "none yet"
            return self._answer(
                f"You cannot {verb} {_shown(name)}: you have not seen it. Known objects: {names}.", known, False
            )
        assert self._mg is not None and self._memory is not None
        door = target.obj.type == "door"
        if verb.endswith("go through") and not door:
            return self._answer(f"You cannot {verb} {name}: it is not a door.", known, False)
        if verb == "go through" and not target.obj.is_open:
            return self._answer(
                f"You cannot go through {name}: it is closed; use 'toggle and go through {name}'.", known, False
            )
        if verb == "toggle and go through":
            if target.obj.is_open:
                return self._answer(f"{name} is already open; use 'go through {name}'.", known, False)
            if target.obj.is_locked and not self._carrying_key(target.obj.color):
                return self._answer(
                    f"You cannot open {name}: it is locked and you do not carry the {target.obj.color} key.",
                    known,
                    False,
                )
        if verb == "pick up":
            if not target.obj.can_pickup():
                return self._answer(f"You cannot pick up {name}.", known, False)
            if self._mg.carrying is not None:
                return self._answer(
                    f"You cannot pick up {name}: you already carry a {object_label(self._mg.carrying)}; drop it first.",
                    known,
                    False,
                )
        path = path_to_face(self._mg.grid, self._memory.seen, self._mg.agent_pos, self._mg.agent_dir, target.pos)
        if path is None:
            return self._answer(
                f"You cannot {verb} {name}: no known path (blocked or unexplored); explore first.", known, False
            )
        if verb == "pick up":
            path.append(Actions.pickup)
            message = f"You picked up {name}."
        elif door and verb != "go to":
            path += [Actions.toggle, Actions.forward] if verb.startswith("toggle") else [Actions.forward]
            message = f"You went through {name}."
        else:
            message = f"You went to {name}." if path else f"You are already facing {name}."
        return self._run(path, message, through_door=door and verb != "go to")

    def _run(
        self, actions: list[Actions], message: str, through_door: bool = False
    ) -> tuple[str, float, bool, bool, dict]:
        assert self._mg is not None and self._memory is not None
        mg, memory, sight = self._mg, self._memory, self._sight
        reward, terminated, truncated = 0.0, False, False
        if through_door:
            actions = [*actions, Actions.forward]  # step out of the doorway where the way is free
        for i, act in enumerate(actions):
            if through_door and i == len(actions) - 1 and self._primitive_error(Actions.forward):
                break
            if act in _CHANGES_GRID or sight is None:
                obs, reward, terminated, truncated, _ = mg.step(act)
                if sight is not None:
                    sight.invalidate()
            else:
                # minigrid's own step, its observation computed from the cached grid encoding (sight.py):
                # the same image, without rebuilding the view object by object.
                mg.gen_obs = sight.gen_obs
                try:
                    obs, reward, terminated, truncated, _ = mg.step(act)
                finally:
                    del mg.gen_obs
            if act in _CHANGES_GRID:
                memory.rescan()
            memory.observe(obs["image"])
            if terminated or truncated:
                break
        success = terminated and reward > 0
        if success:
            message += " Mission complete!"
        elif terminated:
            message += " The mission failed."
        elif truncated:
            message += " You ran out of steps."
        score = float(reward) if success else 0.0
        text, actions = self._describe(message, memory.known())
        return (
            text,
            score,
            terminated,
            truncated,
            {"valid_action": True, "success": success, "available_actions": actions},
        )

    def _answer(self, message: str, known: list[KnownObject], valid: bool) -> tuple[str, float, bool, bool, dict]:
        """An observation for a turn that did not move the world (check, or an invalid action)."""
        text, actions = self._describe(message, known)
        return text, 0.0, False, False, {"valid_action": valid, "success": False, "available_actions": actions}

    # ---- text -----------------------------------------------------------------------------------
    def _describe(
        self, first_line: str, known: list[KnownObject], list_actions: bool | None = None
    ) -> tuple[str, list[str]]:
        """The observation text, and the available actions (listed in it unless `show_actions` is off)."""
        assert self._mg is not None
        lines = [first_line]
        in_view = [k for k in known if k.visible]
        remembered = [k for k in known if not k.visible]
        if in_view:
            lines.append("In view: " + "; ".join(self._phrase(k) for k in in_view) + ".")
        else:
            lines.append("In view: nothing but floor and walls.")
        if remembered:
            lines.append("Remembered, out of view: " + "; ".join(self._phrase(k) for k in remembered) + ".")
        front = self._front()
        if front is not None and front.type == "wall":
            lines.append("A wall is right in front of you.")
        carrying = self._mg.carrying
        lines.append(f"You carry a {object_label(carrying)}." if carrying is not None else "You carry nothing.")
        actions = self._available(known, front)
        if self.show_actions if list_actions is None else list_actions:
            lines.append("Available actions: " + ", ".join(actions) + ".")
        return "\n".join(lines), actions

    @staticmethod
    def _phrase(k: KnownObject) -> str:
        state = (
            f" ({'open' if k.obj.is_open else 'locked' if k.obj.is_locked else 'closed'})"
            if k.obj.type == "door"
            else ""
        )
        return f"{k.name}{state}, {relative_position(k.ahead, k.right)}"

    def _front(self) -> WorldObj | None:
        """What is right in front of the agent: `grid.get(*front_pos)` without numpy's per-call cost."""
        assert self._mg is not None
        mg = self._mg
        x, y = mg.agent_pos
        dx, dy = _DIRS[mg.agent_dir]
        return mg.grid.get(int(x) + dx, int(y) + dy)

    def _available(self, known: list[KnownObject], front: WorldObj | None) -> list[str]:
        assert self._mg is not None
        carrying = self._mg.carrying
        actions = ["turn left", "turn right"]
        if front is None or front.can_overlap():
            actions.append("move forward")
        if front is not None and front.can_pickup() and carrying is None:
            actions.append("pick up")
        if front is None and carrying is not None:
            actions.append("drop")
        if front is not None and front.type in ("door", "box"):
            actions.append("toggle")
        for k in known:
            actions.append(f"go to {k.name}")
            if k.obj.type == "door":
                if k.obj.is_open:
                    actions.append(f"go through {k.name}")
                elif not k.obj.is_locked or self._carrying_key(k.obj.color):
                    actions.append(f"toggle and go through {k.name}")
            elif carrying is None and k.obj.can_pickup():
                actions.append(f"pick up {k.name}")
        actions.append("check available actions")
        return actions

    def _carrying_key(self, color: str) -> bool:
        carrying = self._mg.carrying if self._mg is not None else None
        return carrying is not None and carrying.type == "key" and carrying.color == color

    def _primitive_error(self, action: Actions) -> str | None:
        assert self._mg is not None
        front, carrying = self._front(), self._mg.carrying
        if action == Actions.forward and front is not None and not front.can_overlap():
            return f"a {object_label(front) if front.type != 'wall' else 'wall'} is in the way."
        if action == Actions.pickup:
            if carrying is not None:
                return f"you already carry a {object_label(carrying)}; drop it first."
            if front is None or not front.can_pickup():
                return "there is nothing you can pick up right in front of you."
        if action == Actions.drop:
            if carrying is None:
                return "you are not carrying anything."
            if front is not None:
                return "the cell in front of you is not empty."
        if action == Actions.toggle:
            if front is None or front.type not in ("door", "box"):
                return "there is no door or box right in front of you."
            if front.type == "door" and front.is_locked and not self._carrying_key(front.color):
                return f"the door is locked; you need to carry the {front.color} key."
        return None

    def _primitive_message(self, action: Actions) -> str:
        assert self._mg is not None
        mg = self._mg
        front = self._front()
        if action == Actions.pickup:
            return f"You picked up the {object_label(front)}."
        if action == Actions.drop:
            return f"You dropped the {object_label(mg.carrying)}."
        if action == Actions.toggle:
            if front.type == "box":
                return f"You opened the {front.color} box."
            return f"You {'closed' if front.is_open else 'opened'} the {front.color} door."
        return {Actions.left: "You turned left.", Actions.right: "You turned right."}.get(action, "You moved forward.")

    # ---- expert, lifecycle ----------------------------------------------------------------------
    def make_expert(self) -> Any:
        from agentgym_envs.babyai.expert import BabyAIExpert

        if self._mg is None:
            raise RuntimeError("call reset() before make_expert()")
        return BabyAIExpert(self)

    @property
    def minigrid_env(self) -> MiniGridEnv | None:
        """The minigrid level of the current episode (None before the first reset)."""
        return self._mg

    @property
    def seen_cells(self) -> np.ndarray:
        """Boolean (width, height) map of the cells the agent has seen this episode."""
        assert self._memory is not None, "call reset() first"
        return self._memory.seen.copy()

    def known_objects(self) -> list[KnownObject]:
        """The objects the agent has seen, as the actions name them (nearest first)."""
        assert self._memory is not None, "call reset() first"
        return self._memory.known()

    def state_key(self) -> tuple[Any, ...]:
        """The level's state: the agent's cell and direction, what it carries, and every cell's object with
        its colour and door state (`Grid.encode`), so that turns reaching the same state by different
        paths match (GiGPO's anchor states) whatever the text says of them."""
        mg = self._mg
        if mg is None:
            raise RuntimeError("call reset() before state_key()")
        carrying = (mg.carrying.type, mg.carrying.color) if mg.carrying is not None else None
        return (tuple(int(c) for c in mg.agent_pos), int(mg.agent_dir), carrying, mg.grid.encode().tobytes())

    def context_summary(self) -> str:
        """What the agent carries and every object it has seen (doors with their state), for
        `agentgym_wrappers.SummaryContext`."""
        if self._mg is None or self._memory is None:
            raise RuntimeError("call reset() before context_summary()")
        carrying = self._mg.carrying
        held = f"You carry a {object_label(carrying)}." if carrying is not None else "You carry nothing."
        known = "; ".join(
            f"{k.name}{' (' + door_state(k.obj) + ')' if k.obj.type == 'door' else ''}" for k in self._memory.known()
        )
        return f"{held}\nKnown objects: {known or 'none yet'}."

    def close(self) -> None:
        for backend in self._backends.values():
            backend.close()
        self._backends.clear()
        self._sights.clear()
        self._mg = None
        self._memory = None
        self._sight = None
        super().close()
