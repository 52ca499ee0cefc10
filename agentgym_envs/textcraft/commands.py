"""The crafting commands an episode shows: the recipes its goal needs, plus seeded distractors."""

from __future__ import annotations

import numpy as np

from agentgym_envs.textcraft.recipes import Recipe, RecipeBook

MAX_DISTRACTORS = 10


def needed_recipes(book: RecipeBook, goal: str, rng: np.random.Generator) -> dict[str, Recipe]:
    """One variant for the goal and for every craftable item below it, keyed by item (goal first).

    Each item gets one of its shallowest variants (so the tree is as deep as the goal's depth says).
    Among those, a variant that reuses items already in the tree is preferred (oak planks for both
    the pickaxe's head and its sticks); remaining ties are broken by `rng`.
    """
    plan: dict[str, Recipe] = {}
    in_tree = {goal}
    stack = [goal]
    while stack:
        item = stack.pop()
        if item in plan or not book.is_craftable(item):
            continue
        options = book.shallowest[item]
        if len(options) > 1:
            reuse = [sum(i in in_tree for i, _ in r.ingredients) for r in options]
            best = max(reuse)
            options = tuple(r for r, n in zip(options, reuse, strict=True) if n == best)
        recipe = options[int(rng.integers(len(options)))] if len(options) > 1 else options[0]
        plan[item] = recipe
        in_tree.update(i for i, _ in recipe.ingredients)
        stack.extend(i for i, _ in reversed(recipe.ingredients))
    return plan


def distractor_recipes(
    book: RecipeBook, plan: dict[str, Recipe], rng: np.random.Generator, limit: int = MAX_DISTRACTORS
) -> list[Recipe]:
    """Up to `limit` recipes of other items that take an item of the plan, chosen by `rng`."""
    touched = set(plan)
    for recipe in plan.values():
        touched.update(item for item, _ in recipe.ingredients)
    candidates = sorted({i for item in touched for i in book.uses.get(item, ()) if book.recipes[i].output not in plan})
    if len(candidates) > limit:
        candidates = [candidates[i] for i in sorted(rng.choice(len(candidates), size=limit, replace=False))]
    return [book.recipes[i] for i in candidates]


def commands_block(
    book: RecipeBook, goal: str, rng: np.random.Generator, max_distractors: int = MAX_DISTRACTORS
) -> tuple[dict[str, Recipe], list[str]]:
    """The needed recipes, and the crafting command lines (needed + distractors, shuffled by `rng`)."""
    plan = needed_recipes(book, goal, rng)
    recipes = list(plan.values()) + distractor_recipes(book, plan, rng, max_distractors)
    order = rng.permutation(len(recipes))
    return plan, [recipes[i].command for i in order]
