"""Minecraft 1.16.5 crafting recipes from the installed `minecraft-data` package, loaded once per process.

The data are the package's own files, found through package resources and its `dataPaths.json`
(the file that `minecraft_data("1.16.5")` itself reads; calling that would also load the protocol,
blocks and entities we do not need). minecraft-data already expands item tags, so a recipe that
takes "any planks" is one variant per kind of planks: 562 craftable items and 1,198 variants.

Two kinds of variant are left out of the recipe book, because they make a raw material craftable
from something crafted out of it, which would leave it no base to `get` from:

- unpacking a storage block: one `*_block` in, 9 items out (9 lapis lazuli from a lapis block;
  the original TextCraft drops these too);
- `CYCLE_BREAKS`: iron and gold ingots from 9 nuggets, and honey bottles from a honey block; the
  ingot and the bottle are the raw materials, the nugget and the block are crafted from them.

That leaves 551 craftable items, 1,183 variants and 114 base items (items some recipe takes that no
recipe makes). An item's crafting depth is the longest chain of crafts from base items along its
shortest recipe: 0 for a base item, else the minimum over its variants of 1 + the largest depth of
the variant's ingredients (sticks: 1, from bamboo; a wooden pickaxe: 2).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from typing import Any

from agentgym_envs.textcraft.names import ItemNames, display_name

DATA_VERSION = "1.16.5"

#: (output, ingredient) pairs whose variants are dropped to break crafting cycles (see the module doc).
CYCLE_BREAKS = frozenset(
    {("iron_ingot", "iron_nugget"), ("gold_ingot", "gold_nugget"), ("honey_bottle", "honey_block")}
)


@dataclass(frozen=True, slots=True)
class Recipe:
    """One crafting recipe variant.

    Attributes:
        output: The item made (a minecraft-data name such as `"stick"`).
        count: How many items one craft makes.
        ingredients: `(item, count)` pairs in the order they first appear in the crafting grid.
        leftovers: Items handed back by the craft (a cake returns its 3 empty buckets).
    """

    output: str
    count: int
    ingredients: tuple[tuple[str, int], ...]
    leftovers: tuple[tuple[str, int], ...] = ()

    @property
    def command(self) -> str:
        """The recipe as a crafting command: `craft 4 stick using 2 oak planks`."""
        using = ", ".join(f"{n} {display_name(item)}" for item, n in self.ingredients)
        return f"craft {self.count} {display_name(self.output)} using {using}"

    @property
    def key(self) -> frozenset[tuple[str, int]]:
        """The ingredients and their counts, as a set that a craft command must match exactly."""
        return frozenset(self.ingredients)


class RecipeBook:
    """Every crafting recipe of one Minecraft version, indexed for the environment.

    Attributes:
        recipes: All kept variants, in data order.
        excluded: The variants left out (see the module doc).
        by_output: Variants making each craftable item.
        uses: Indices into `recipes` of the variants that take each item.
        base_items: Items some variant takes and no variant makes (the items one can `get`).
        depth: Crafting depth of every base (0) and craftable item.
        names: The lenient item-name resolver.
    """

    def __init__(self, recipes: Iterable[Recipe], excluded: Iterable[Recipe], item_names: ItemNames):
        self.recipes: tuple[Recipe, ...] = tuple(recipes)
        self.excluded: tuple[Recipe, ...] = tuple(excluded)
        self.names = item_names
        self.by_output: dict[str, tuple[Recipe, ...]] = {}
        uses: dict[str, list[int]] = {}
        for index, recipe in enumerate(self.recipes):
            self.by_output[recipe.output] = (*self.by_output.get(recipe.output, ()), recipe)
            for item, _ in recipe.ingredients:
                uses.setdefault(item, []).append(index)
        self.uses: dict[str, tuple[int, ...]] = {item: tuple(found) for item, found in uses.items()}
        self.base_items = frozenset(item for item in self.uses if item not in self.by_output)
        self._exact = {(r.output, r.key): r for r in self.recipes}
        self.depth = self._depths()
        # The variants along which an item reaches its depth: what tasks show and the expert crafts.
        self.shallowest: dict[str, tuple[Recipe, ...]] = {
            item: tuple(r for r in variants if self.recipe_depth(r) == self.depth[item])
            for item, variants in self.by_output.items()
        }

    def _depths(self) -> dict[str, int]:
        depth = dict.fromkeys(sorted(self.base_items), 0)
        changed = True
        while changed:  # a fixpoint from below; cycles among kept variants never lower a depth
            changed = False
            for recipe in self.recipes:
                if all(item in depth for item, _ in recipe.ingredients):
                    found = 1 + max(depth[item] for item, _ in recipe.ingredients)
                    if found < depth.get(recipe.output, found + 1):
                        depth[recipe.output] = found
                        changed = True
        unreachable = sorted(set(self.by_output) - set(depth))
        if unreachable:
            raise ValueError(f"recipes that no chain from base items reaches: {unreachable}; add a cycle break")
        return depth

    def recipe_depth(self, recipe: Recipe) -> int:
        """1 + the largest depth of the recipe's ingredients."""
        return 1 + max(self.depth[item] for item, _ in recipe.ingredients)

    def is_base(self, item: str) -> bool:
        """Whether `item` is a base item (taken by some recipe, made by none)."""
        return item in self.base_items

    def is_craftable(self, item: str) -> bool:
        """Whether some recipe makes `item`."""
        return item in self.by_output

    def match(self, output: str, ingredients: dict[str, int]) -> Recipe | None:
        """The variant making `output` from exactly these ingredients and counts, if any."""
        return self._exact.get((output, frozenset(ingredients.items())))

    def same_items(self, output: str, ingredients: dict[str, int]) -> Recipe | None:
        """A variant making `output` from these ingredients with other counts, if any."""
        wanted = set(ingredients)
        return next((r for r in self.by_output.get(output, ()) if {i for i, _ in r.ingredients} == wanted), None)


def _ingredients(variant: dict[str, Any]) -> list[tuple[int, int]]:
    """(item id, count) pairs of a minecraft-data recipe, in order of first appearance."""
    cells = [c for row in variant["inShape"] for c in row] if "inShape" in variant else variant["ingredients"]
    counts: dict[int, int] = {}
    for cell in cells:
        if cell is not None:
            counts[cell] = counts.get(cell, 0) + 1
    return list(counts.items())


def _is_excluded(output: str, ingredients: list[tuple[str, int]], count: int) -> bool:
    unpacking = len(ingredients) == 1 and ingredients[0][1] == 1 and ingredients[0][0].endswith("_block") and count == 9
    return unpacking or any((output, item) in CYCLE_BREAKS for item, _ in ingredients)


def _load_json(folder: Any, name: str) -> Any:
    return json.loads((folder / name).read_text(encoding="utf-8"))


@functools.cache
def load_recipe_book(version: str = DATA_VERSION) -> RecipeBook:
    """The recipe book of `version` (PC edition), read from the `minecraft_data` package once per process."""
    try:
        root = resources.files("minecraft_data") / "data" / "data"
    except ModuleNotFoundError as error:
        raise ImportError("TextCraft needs the minecraft-data package: pip install 'minecraft-data>=3.20'") from error
    paths = _load_json(root, "dataPaths.json")["pc"].get(version)
    if paths is None or "recipes" not in paths:
        raise ValueError(f"minecraft-data has no PC recipes for version {version!r}; TextCraft uses {DATA_VERSION!r}")
    items = _load_json(root / paths["items"], "items.json")
    raw = _load_json(root / paths["recipes"], "recipes.json")
    name = {item["id"]: item["name"] for item in items}
    kept: list[Recipe] = []
    excluded: list[Recipe] = []
    seen: set[tuple[str, frozenset[tuple[str, int]]]] = set()
    for variants in raw.values():
        for variant in variants:
            output, count = name[variant["result"]["id"]], variant["result"]["count"]
            ingredients = [(name[i], n) for i, n in _ingredients(variant)]
            leftovers = _ingredients({"inShape": variant["outShape"]}) if "outShape" in variant else []
            recipe = Recipe(output, count, tuple(ingredients), tuple((name[i], n) for i, n in leftovers))
            if (output, recipe.key) in seen:
                continue
            seen.add((output, recipe.key))
            (excluded if _is_excluded(output, ingredients, count) else kept).append(recipe)
    display = {item["name"]: item["displayName"] for item in items}
    in_recipes = {r.output for r in kept} | {i for r in kept for i, _ in r.ingredients}
    return RecipeBook(kept, excluded, ItemNames(display, aliased=in_recipes))
