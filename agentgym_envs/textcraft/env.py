"""TextCraft as a text environment, on Minecraft 1.16.5's crafting recipes."""

from __future__ import annotations

import re
from typing import Any

from agentgym_envs.clientargs import IntRange, SubsetOf, check_int
from agentgym_envs.core import TextEnv, normalise_action
from agentgym_envs.textcraft import tasks as T
from agentgym_envs.textcraft import tools as textcraft_tools
from agentgym_envs.textcraft.commands import MAX_DISTRACTORS, commands_block
from agentgym_envs.textcraft.names import ItemNameError, display_name
from agentgym_envs.textcraft.recipes import Recipe, load_recipe_book

#: The most items one `get` hands out (far above what any task needs).
MAX_GET = 1000

_GET = re.compile(r"get (?:([0-9]+) )?(.+)")
_CRAFT = re.compile(r"craft (?:[0-9]+ )?(.+?) using (.+)")
_INGREDIENT = re.compile(r"([0-9]{1,6}) (.+)")
_INVENTORY = frozenset({"inventory", "check inventory", "look at inventory"})
_USAGE = "Use 'get <n> <item>', 'craft <n> <item> using <m> <ingredient>, ...' or 'inventory'."


def _shown(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


class TextCraftEnv(TextEnv):
    """Crafting Minecraft items from text commands (TextCraft, from ADaPT; used by AgentGym-RL).

    ## Description
    Each episode names a goal item and lists crafting commands: the recipes the goal needs (one
    variant per item, down to base items) mixed with up to 10 distractor recipes that use the same
    items, shuffled. The inventory starts empty; the agent gets base items and crafts intermediates
    until it holds the goal. Recipes are minecraft-data's for Minecraft 1.16.5 (`recipes.py`). A
    task is a goal item (`"wooden_pickaxe"`); its category is its crafting depth (`"depth-2"`).

    ## Actions
    - `get <n> <item>`: adds n (1 to 1000; 1 when left out) of a base item, one that no recipe makes.
    - `craft <n> <item> using <m> <ingredient>, <k> <ingredient>, ...`: one craft; valid when the
      ingredients and counts are exactly those of a recipe variant of the item (any variant, listed
      or not) and are in the inventory. It consumes them and yields the recipe's output count; the
      number before the item is not checked (one craft always makes one batch).
    - `inventory`: lists what the agent holds.
    Item names are matched leniently (case, a `minecraft:` prefix, underscores, singular/plural)
    but never to a wrong item. Any other text, or a command that cannot be carried out, changes
    nothing and is answered with the reason; `info["valid_action"]` is then False.

    ## Observation
    At reset: `Crafting commands:`, one command per line, then `Goal: craft <item>.` After a step:
    `Got 1 lapis lazuli`, `Crafted 1 minecraft:blue_dye`, `Inventory: [blue dye] (1)`, or the error.

    ## Rewards
    1 when the goal item is in the inventory, 0 otherwise (the return is the final score).

    ## Termination
    Terminated when the goal is crafted. The env never truncates: a wrapper's turn limit does
    (`default_max_turns` is 30, the paper's last horizon for TextCraft).

    ## Registered ids
    `AgentGym/TextCraft-v0`: goals of depths 1-4 (551 goals; test split of 100, stratified by depth).
    `AgentGym/TextCraft-Depth<d>-v0` for d in 1-4: goals of one depth.

    Args:
        depths: The crafting depths of the goals this env draws from.
        max_distractors: How many distractor recipes the commands list holds at most.
        render_mode: None or "ansi".
    """

    default_max_turns = 30
    action_format = "action_line"
    stop_strings = ("\nObservation:",)  # the env's part of a turn begins (agentgym_wrappers.stops)
    default_max_turn_tokens = 256  # a short thought and one craft command
    action_tools = textcraft_tools.TOOLS  # the actions as tools (action_format: tools)
    tool_instructions = textcraft_tools.INSTRUCTIONS
    splits = T.SPLITS
    #: A server runs every TextCraft session on one worker thread (`remote.server.sessions`): a call is a few
    #: microseconds of pure Python (no I/O, no other process, nothing bound to a thread), so more threads would
    #: add only thread switches, which cost more than the calls.
    shared_server_thread = True
    system_prompt = (
        "You are crafting an item in Minecraft. You start with an empty inventory and are given a list "
        "of crafting commands, some of which you will not need.\n"
        "Actions: 'get <n> <item>' takes base items (items no recipe makes); "
        "'craft <n> <item> using <m> <ingredient>, <k> <ingredient>, ...' crafts with exactly the ingredients "
        "and counts of a crafting command, if you hold them; 'inventory' shows what you hold.\n"
        "Think briefly, then end your reply with one line 'Action: <action>'.\n"
        "Example:\n"
        "Crafting commands:\ncraft 1 blue dye using 1 lapis lazuli\ncraft 4 oak planks using 1 oak log\n\n"
        "Goal: craft blue dye.\n"
        "Your reply: Lapis lazuli has no recipe, so it is a base item that I can get.\n"
        "Action: get 1 lapis lazuli\n"
        "Observation: Got 1 lapis lazuli\n"
        "Your reply: Now I can craft the blue dye.\n"
        "Action: craft 1 blue dye using 1 lapis lazuli"
    )

    #: A remote client may choose the goal depths and the number of distractors (agentgym_envs.clientargs).
    client_kwargs = {
        **TextEnv.client_kwargs,
        "depths": SubsetOf(T.DEPTHS),
        "max_distractors": IntRange(0, 50),
    }

    def __init__(
        self,
        depths: tuple[int, ...] | list[int] | int = T.DEPTHS,
        max_distractors: int = MAX_DISTRACTORS,
        render_mode: str | None = None,
    ):
        super().__init__(render_mode=render_mode)
        self.depths = (depths,) if isinstance(depths, int) else tuple(depths)
        if not self.depths or any(isinstance(d, bool) or d not in T.DEPTHS for d in self.depths):
            raise ValueError(f"depths must be a non-empty subset of {list(T.DEPTHS)}, got {depths!r:.80}")
        self.max_distractors = check_int("max_distractors", max_distractors, 0, 1000)
        self.book = load_recipe_book()
        self._task_lists = {split: T.tasks(split, self.depths) for split in self.splits}
        self._goal = ""
        self._plan: dict[str, Recipe] = {}
        self._inventory: dict[str, int] = {}
        self._inventory_text: str | None = None

    # ---- tasks ----------------------------------------------------------------------------------
    def tasks(self, split: str = "train") -> list[str]:
        if split not in self._task_lists:
            raise ValueError(f"unknown split {split!r}; TextCraft has {list(self.splits)}")
        return list(self._task_lists[split])

    def num_tasks(self, split: str) -> int:
        return len(self._task_lists[split])

    def task_at(self, split: str, index: int) -> str:
        return self._task_lists[split][index]

    def split_of(self, task_id: str) -> str | None:
        split = T.split_of(task_id)
        return split if split is not None and self.book.depth[task_id] in self.depths else None

    # ---- episode --------------------------------------------------------------------------------
    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._goal = task_id
        self._plan, lines = commands_block(self.book, task_id, self.np_random, self.max_distractors)
        self._inventory = {}
        self._inventory_text = None
        self._crafted: list[str] = []  # items crafted this episode, in order (`context_summary`)
        goal = display_name(task_id)
        observation = "Crafting commands:\n" + "\n".join(lines) + f"\n\nGoal: craft {goal}."
        depth = self.book.depth[task_id]
        info = {"category": T.category(depth), "instruction": f"craft {goal}", "goal": task_id, "depth": depth}
        return observation, info

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        text = action if action == "inventory" else normalise_action(action)
        if text in _INVENTORY:
            return self._answer(self._describe_inventory(), True)
        match = _GET.fullmatch(text)
        if match is not None:
            return self._get(match[1], match[2])
        match = _CRAFT.fullmatch(text)
        if match is not None:
            return self._craft(match[1], match[2])
        return self._answer(f"Could not execute {_shown(action.strip())!r}. {_USAGE}", False)

    def _get(self, count_text: str | None, item_text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        try:
            item = self.book.names.resolve(item_text)
        except ItemNameError as error:
            return self._answer(f"Could not find {_shown(item_text)!r}: it is {error}.", False)
        name = display_name(item)
        if self.book.is_craftable(item):
            return self._answer(f"Could not get {name}: it is not a base item; craft it instead.", False)
        if not self.book.is_base(item):
            return self._answer(f"Could not get {name}: no recipe uses it, so it is not available here.", False)
        count = 1 if count_text is None else int(count_text) if len(count_text) <= 6 else MAX_GET + 1
        if not 1 <= count <= MAX_GET:
            message = f"Could not get {_shown(count_text)} {name}: get between 1 and {MAX_GET} at a time."
            return self._answer(message, False)
        self._add(item, count)
        return self._answer(f"Got {count} {name}", True)

    def _craft(self, output_text: str, ingredients_text: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        book = self.book
        try:
            output = book.names.resolve(output_text)
        except ItemNameError as error:
            return self._answer(f"Could not craft {_shown(output_text)!r}: it is {error}.", False)
        name = display_name(output)
        if not book.is_craftable(output):
            if book.is_base(output):
                return self._answer(f"Could not craft {name}: it is a base item; use 'get 1 {name}'.", False)
            return self._answer(f"Could not craft {name}: no crafting recipe makes it.", False)
        wanted: dict[str, int] = {}
        for part in ingredients_text.split(","):
            match = _INGREDIENT.fullmatch(part.strip())
            if match is None:
                return self._answer(
                    f"Could not craft {name}: write each ingredient as '<count> <item>', e.g. '2 oak planks' "
                    f"(got {_shown(part.strip())!r}).",
                    False,
                )
            try:
                item = book.names.resolve(match[2])
            except ItemNameError as error:
                return self._answer(f"Could not craft {name}: ingredient {_shown(match[2])!r} is {error}.", False)
            wanted[item] = wanted.get(item, 0) + int(match[1])
        recipe = book.match(output, wanted)
        if recipe is None:
            return self._answer(self._no_recipe(name, book.same_items(output, wanted), wanted), False)
        missing = [(item, n, self._inventory.get(item, 0)) for item, n in recipe.ingredients]
        missing = [m for m in missing if m[2] < m[1]]
        if missing:
            lacks = ", ".join(f"{n - have} {display_name(item)} (you have {have})" for item, n, have in missing)
            return self._answer(f"Could not craft {name}: missing {lacks}.", False)
        for item, n in recipe.ingredients:
            left = self._inventory[item] - n
            if left:
                self._inventory[item] = left
            else:
                del self._inventory[item]
        self._add(output, recipe.count)
        self._crafted.append(f"{recipe.count} {display_name(output)}")
        for item, n in recipe.leftovers:
            self._add(item, n)
        message = f"Crafted {recipe.count} minecraft:{output}"
        if recipe.leftovers:
            message += " and got back " + ", ".join(f"{n} {display_name(i)}" for i, n in recipe.leftovers)
        success = self._goal in self._inventory
        info = {"valid_action": True, "success": success, "available_actions": None}
        return message, float(success), success, False, info

    @staticmethod
    def _no_recipe(name: str, same: Recipe | None, wanted: dict[str, int]) -> str:
        if same is not None:
            takes = ", ".join(f"{n} {display_name(i)}" for i, n in same.ingredients)
            gave = ", ".join(f"{wanted[i]} {display_name(i)}" for i, _ in same.ingredients)
            return f"Could not craft {name}: wrong ingredient counts; the recipe takes {takes}, not {gave}."
        return (
            f"Could not craft {name}: no recipe for {name} uses exactly these ingredients; "
            "use the ingredients and counts of a crafting command."
        )

    def _add(self, item: str, count: int) -> None:
        self._inventory[item] = self._inventory.get(item, 0) + count
        self._inventory_text = None

    def _describe_inventory(self) -> str:
        if self._inventory_text is None:
            held = " ".join(f"[{display_name(item)}] ({n})" for item, n in self._inventory.items())
            self._inventory_text = "Inventory: " + (held or "You are not carrying anything.")
        return self._inventory_text

    def _answer(self, message: str, valid: bool) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """A turn that did not craft: the score stays where it is (0, as the goal is not held yet)."""
        info = {"valid_action": valid, "success": False, "available_actions": None}
        return message, 0.0, False, False, info

    # ---- expert, state --------------------------------------------------------------------------
    @property
    def goal(self) -> str:
        """The goal item of the current episode (a minecraft-data name)."""
        return self._goal

    @property
    def inventory(self) -> dict[str, int]:
        """A copy of what the agent holds: item -> count."""
        return dict(self._inventory)

    @property
    def needed_recipes(self) -> dict[str, Recipe]:
        """The recipe variants the crafting commands list for the goal and its intermediates."""
        return dict(self._plan)

    def state_key(self) -> tuple[tuple[str, int], ...]:
        """The inventory (the only state a TextCraft episode has besides its fixed goal), sorted."""
        return tuple(sorted((item, count) for item, count in self._inventory.items() if count))

    def make_expert(self) -> Any:
        from agentgym_envs.textcraft.expert import TextCraftExpert

        if not self._goal:
            raise RuntimeError("call reset() before make_expert()")
        return TextCraftExpert(self)

    def context_summary(self) -> str:
        """The inventory and what was crafted so far, for `agentgym_wrappers.SummaryContext`."""
        if not self._goal:
            raise RuntimeError("call reset() before context_summary()")
        crafted = ", ".join(self._crafted) or "nothing yet"
        return f"{self._describe_inventory()}\nCrafted so far: {crafted}."

    def close(self) -> None:
        self._plan = {}
        self._inventory = {}
        super().close()
