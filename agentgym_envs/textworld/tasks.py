"""TextWorld tasks: the challenges, their difficulty settings, task ids and splits.

A task is one game made by one of textworld's challenge makers from one seed, named
`"<challenge>/<settings>/<seed>"`:

- `cooking/recipe2+take2+open+go6/17`: tw-cooking (First TextWorld Problems), its skills in
  textworld's order (`recipe N`, `take N`, `cook`, `cut`, `open`, `drop`, `go N`);
- `coin_collector/level110/3`: tw-coin_collector at a level (1-300);
- `treasure_hunter/level15/3`: tw-treasure_hunter at a level (1-30);
- `simple/dense+detailed/3`: tw-simple with its reward density and objective (`detailed`, `brief`, `none`).

Each challenge has three difficulties (`DIFFICULTIES`), one settings string each; `category` is
`"<challenge>/<difficulty>"`. Splits are disjoint seed ranges, the same for every setting:

- `test`: seeds 0 .. 24 (25 games per setting, 300 in all), fixed forever;
- `train`: seeds 1000 .. 10999 (10,000 games per setting).

Test games also draw on textworld's held-out content: cooking's `test` food split and simple's
test foods; train games use their `train` content.
"""

from __future__ import annotations

from typing import Any

#: challenge -> difficulty -> settings string (the middle part of a task id).
DIFFICULTIES: dict[str, dict[str, str]] = {
    "cooking": {"easy": "recipe1+take1", "medium": "recipe2+take2+open+go6", "hard": "recipe3+take3+cook+cut+open+go9"},
    "coin_collector": {"easy": "level5", "medium": "level110", "hard": "level215"},
    "treasure_hunter": {"easy": "level5", "medium": "level15", "hard": "level21"},
    "simple": {"easy": "dense+detailed", "medium": "balanced+brief", "hard": "sparse+none"},
}
CHALLENGES: tuple[str, ...] = tuple(DIFFICULTIES)
LEVELS: tuple[str, ...] = ("easy", "medium", "hard")

TEST_SEEDS = range(0, 25)
TRAIN_SEEDS = range(1000, 11000)
SPLIT_SEEDS: dict[str, range] = {"train": TRAIN_SEEDS, "test": TEST_SEEDS}
SPLITS: tuple[str, ...] = tuple(SPLIT_SEEDS)

_COOKING_SKILLS = ("recipe", "take", "cook", "cut", "open", "drop", "go")  # textworld's order
_MAX_SEED_DIGITS = 12


def difficulty_of(challenge: str, settings: str) -> str | None:
    """The difficulty whose settings string is `settings`, or None when it is not a standard one."""
    for level, known in DIFFICULTIES.get(challenge, {}).items():
        if known == settings:
            return level
    return None


def task_id(challenge: str, settings: str, seed: int) -> str:
    return f"{challenge}/{settings}/{seed}"


def parse_task_id(task: str) -> tuple[str, str, int] | None:
    """`"cooking/recipe1+take1/7"` -> `("cooking", "recipe1+take1", 7)`; None when it names no task."""
    parts = task.split("/", 3)
    if len(parts) != 3:
        return None
    challenge, settings, seed = parts
    # ASCII digits only, and few: int() would take other scripts' digits, and refuse 4,300 of them.
    if not (seed.isascii() and seed.isdigit()) or len(seed) > _MAX_SEED_DIGITS:
        return None
    if difficulty_of(challenge, settings) is None:
        return None
    return challenge, settings, int(seed)


def split_of_seed(seed: int) -> str | None:
    for split, seeds in SPLIT_SEEDS.items():
        if seed in seeds:
            return split
    return None


def generator_settings(challenge: str, settings: str, split: str) -> tuple[str, dict[str, Any]]:
    """textworld's challenge name and its `settings` mapping for a game of `split`.

    >>> generator_settings("cooking", "recipe2+take2+open", "test")
    ('tw-cooking', {'recipe': 2, 'take': 2, 'open': True, 'split': 'test', 'recipe_seed': 0})
    >>> generator_settings("simple", "sparse+none", "train")
    ('tw-simple', {'rewards': 'sparse', 'goal': 'none', 'test': False})
    """
    if challenge == "cooking":
        out: dict[str, Any] = {}
        for part in settings.split("+"):
            name = part.rstrip("0123456789")
            if name not in _COOKING_SKILLS:
                raise ValueError(f"unknown cooking skill {part!r} in {settings!r}; skills are {_COOKING_SKILLS}")
            out[name] = int(part[len(name) :]) if part != name else True
        return "tw-cooking", {**out, "split": "test" if split == "test" else "train", "recipe_seed": 0}
    if challenge in ("coin_collector", "treasure_hunter"):
        return f"tw-{challenge}", {"level": int(settings.removeprefix("level"))}
    if challenge == "simple":
        rewards, goal = settings.split("+")
        return "tw-simple", {"rewards": rewards, "goal": goal, "test": split == "test"}
    raise ValueError(f"unknown TextWorld challenge {challenge!r}; choose from {list(CHALLENGES)}")


def category(challenge: str, settings: str) -> str:
    """`"<challenge>/<difficulty>"`, e.g. `"cooking/medium"`."""
    return f"{challenge}/{difficulty_of(challenge, settings)}"


def ordered_settings(challenges: tuple[str, ...], difficulties: tuple[str, ...]) -> list[tuple[str, str]]:
    """(challenge, settings) pairs, round-robin over challenges within each difficulty, easy first."""
    return [(c, DIFFICULTIES[c][d]) for d in LEVELS if d in difficulties for c in CHALLENGES if c in challenges]
