"""ScienceWorld's 30 task types, their variations, and the official train/dev/test splits.

A task is one variation of one task type, named `"<task type>/<variation>"` (e.g. `"boil/21"`).
The splits are ScienceWorld's own (`get_variations_train/dev/test`): for each task type, the first
half of its variations are train, the next quarter dev, the rest test. They are computed here from
the variation counts, so listing tasks needs no JVM; `tests/envs/sciworld/test_sciworld.py` checks them
against the JVM.

Within a split, tasks are ordered round-robin over the task types (in ScienceWorld's task
numbering, 1-1 boil ... 10-2 mendelian genetics): index 0 is the first variation of `boil`, index 1
the first of `melt`, and so on, so any prefix of a split covers the task types evenly.

>>> split_tasks("test")[:3]
('boil/21', 'melt/21', 'freeze/21')
>>> split_of("boil/21"), split_of("boil/30")
('test', None)
"""

from __future__ import annotations

import functools
import re

#: Task type -> (ScienceWorld task number, number of variations), in task-number order.
TASK_TYPES: dict[str, tuple[str, int]] = {
    "boil": ("1-1", 30),
    "melt": ("1-2", 30),
    "freeze": ("1-3", 30),
    "change-the-state-of-matter-of": ("1-4", 30),
    "use-thermometer": ("2-1", 540),
    "measure-melting-point-known-substance": ("2-2", 436),
    "measure-melting-point-unknown-substance": ("2-3", 300),
    "power-component": ("3-1", 20),
    "power-component-renewable-vs-nonrenewable-energy": ("3-2", 20),
    "test-conductivity": ("3-3", 900),
    "test-conductivity-of-unknown-substances": ("3-4", 600),
    "find-living-thing": ("4-1", 300),
    "find-non-living-thing": ("4-2", 300),
    "find-plant": ("4-3", 300),
    "find-animal": ("4-4", 300),
    "grow-plant": ("5-1", 126),
    "grow-fruit": ("5-2", 126),
    "chemistry-mix": ("6-1", 32),
    "chemistry-mix-paint-secondary-color": ("6-2", 36),
    "chemistry-mix-paint-tertiary-color": ("6-3", 36),
    "lifespan-longest-lived": ("7-1", 125),
    "lifespan-shortest-lived": ("7-2", 125),
    "lifespan-longest-lived-then-shortest-lived": ("7-3", 125),
    "identify-life-stages-1": ("8-1", 14),
    "identify-life-stages-2": ("8-2", 10),
    "inclined-plane-determine-angle": ("9-1", 168),
    "inclined-plane-friction-named-surfaces": ("9-2", 1386),
    "inclined-plane-friction-unnamed-surfaces": ("9-3", 162),
    "mendelian-genetics-known-plant": ("10-1", 120),
    "mendelian-genetics-unknown-plant": ("10-2", 480),
}

SPLITS = ("train", "dev", "test")
_TASK_ID = re.compile(r"(?P<name>[a-z0-9-]{1,64})/(?P<variation>[0-9]{1,9})")  # ASCII digits only


def split_ranges(variations: int) -> dict[str, range]:
    """ScienceWorld's train/dev/test variation ranges for a task type with `variations` (>= 5) variations.

    As `PythonInterface.getSets` does: variations cut into quarters; two for train, one for dev, the
    rest (one quarter and any remainder) for test.
    """
    group = variations // 4
    return {"train": range(0, 2 * group), "dev": range(2 * group, 3 * group), "test": range(3 * group, variations)}


def task_id(name: str, variation: int) -> str:
    return f"{name}/{variation}"


def parse_task_id(task: str) -> tuple[str, int] | None:
    """`"boil/21"` -> `("boil", 21)`; None for anything that is not a ScienceWorld task id."""
    match = _TASK_ID.fullmatch(task)
    if match is None or match["name"] not in TASK_TYPES:
        return None
    variation = int(match["variation"])
    return (match["name"], variation) if variation < TASK_TYPES[match["name"]][1] else None


def split_of(task: str) -> str | None:
    """The split holding `task`, or None when it is not a ScienceWorld task."""
    parsed = parse_task_id(task)
    if parsed is None:
        return None
    ranges = split_ranges(TASK_TYPES[parsed[0]][1])
    return next((split for split in SPLITS if parsed[1] in ranges[split]), None)


@functools.cache
def split_tasks(split: str, names: tuple[str, ...] = tuple(TASK_TYPES)) -> tuple[str, ...]:
    """The task ids of `split` for the task types `names`, round-robin over the types."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; ScienceWorld has {list(SPLITS)}")
    columns = [[task_id(name, v) for v in split_ranges(TASK_TYPES[name][1])[split]] for name in names]
    longest = max((len(column) for column in columns), default=0)
    return tuple(column[i] for i in range(longest) for column in columns if i < len(column))
