"""The TextCraft expert: a planner over the recipe tree that gets base items and crafts bottom-up.

The expert reads its env through `TextCraftState` (what `TextCraftEnv` shows of an episode); the env
makes it in `make_expert`, so the import runs one way: env -> expert.
"""

from __future__ import annotations

from typing import Any, Protocol

from agentgym_envs.textcraft.names import display_name
from agentgym_envs.textcraft.recipes import Recipe, RecipeBook


class TextCraftState(Protocol):
    """What the expert reads of a TextCraft episode (`TextCraftEnv` has it)."""

    book: RecipeBook

    @property
    def goal(self) -> str: ...

    @property
    def inventory(self) -> dict[str, int]: ...

    @property
    def needed_recipes(self) -> dict[str, Recipe]: ...


def plan_actions(
    book: RecipeBook, goal: str, inventory: dict[str, int], recipes: dict[str, Recipe] | None = None
) -> list[str]:
    """The actions that turn `inventory` into one holding `goal`.

    Every item is acquired depth-first: what the inventory holds and nothing else has claimed is
    used first; a base item is fetched with one `get` of the shortfall; a craftable item is crafted
    as many times as its shortfall needs, after acquiring all ingredients of those crafts. Items an
    ingredient's craft leaves over (4 sticks made, 2 needed) stay free for later steps. `recipes`
    chooses the variant per item (the ones the crafting commands list); other items use their
    first shallowest variant.
    """
    recipes = recipes or {}
    free = dict(inventory)
    actions: list[str] = []

    def acquire(item: str, n: int) -> None:
        taken = min(free.get(item, 0), n)
        free[item] = free.get(item, 0) - taken
        short = n - taken
        if short == 0:
            return
        if not book.is_craftable(item):
            actions.append(f"get {short} {display_name(item)}")
            return
        recipe = recipes.get(item) or book.shallowest[item][0]
        crafts = -(-short // recipe.count)
        for ingredient, k in recipe.ingredients:
            acquire(ingredient, k * crafts)
        actions.extend([recipe.command] * crafts)
        free[item] += crafts * recipe.count - short
        for leftover, k in recipe.leftovers:
            free[leftover] = free.get(leftover, 0) + k * crafts

    acquire(goal, 1)
    return actions


class TextCraftExpert:
    """Scripted solver for the current TextCraft episode.

    Each turn it plans from the env's current inventory (so it also finishes an episode that an
    agent started) with the recipe variants the crafting commands list, and returns the plan's
    first action.
    """

    def __init__(self, env: TextCraftState):
        self._env = env

    def act(self, observation: str, info: dict[str, Any]) -> str:
        """The next action text."""
        env = self._env
        actions = plan_actions(env.book, env.goal, env.inventory, env.needed_recipes)
        if not actions:
            raise RuntimeError(f"the inventory already holds the goal {env.goal!r}; the episode is over")
        return actions[0]
