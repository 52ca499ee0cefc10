"""TextCraft tasks and splits: one task per craftable item of crafting depth 1-4, named by the item.

The test split is fixed and stratified by depth: `TEST_PER_DEPTH` goals of each depth (100 in all,
about 18% of each depth, and 3 of the 11 depth-4 goals), the first ones of that depth when the item
names are ordered by their SHA-256 digest. The digest makes the choice look random yet independent
of the data's order and of Python's hash seed. Every other goal is in the train split (451).
"""

from __future__ import annotations

import functools
import hashlib

from agentgym_envs.textcraft.recipes import load_recipe_book

DEPTHS = (1, 2, 3, 4)
#: Test goals per depth (of 144, 280, 116 and 11 craftable items of depths 1-4).
TEST_PER_DEPTH = {1: 26, 2: 50, 3: 21, 4: 3}
SPLITS = ("train", "test")


def category(depth: int) -> str:
    """The task category of a goal of crafting depth `depth`: `depth-2`."""
    return f"depth-{depth}"


@functools.cache
def split_tasks() -> dict[str, dict[int, tuple[str, ...]]]:
    """Split -> depth -> goal items (sorted by name)."""
    book = load_recipe_book()
    out: dict[str, dict[int, tuple[str, ...]]] = {split: {} for split in SPLITS}
    for depth in DEPTHS:
        goals = [item for item in book.by_output if book.depth[item] == depth]
        goals.sort(key=lambda item: hashlib.sha256(item.encode()).hexdigest())
        test = goals[: TEST_PER_DEPTH[depth]]
        out["test"][depth] = tuple(sorted(test))
        out["train"][depth] = tuple(sorted(goals[len(test) :]))
    return out


def tasks(split: str, depths: tuple[int, ...] = DEPTHS) -> list[str]:
    """The goal items of `split` with a depth in `depths`, by depth then name."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; TextCraft has {list(SPLITS)}")
    by_depth = split_tasks()[split]
    return [item for depth in depths for item in by_depth[depth]]


def split_of(task_id: str) -> str | None:
    """The split holding the goal `task_id`, or None when it is no task."""
    return _split_index().get(task_id)


@functools.cache
def _split_index() -> dict[str, str]:
    return {item: split for split, by_depth in split_tasks().items() for goals in by_depth.values() for item in goals}
