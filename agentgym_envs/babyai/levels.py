"""BabyAI levels: which minigrid levels we serve, their families, and the task splits.

A task is one level generated from one seed, named `"<Level>/<seed>"` (e.g. `"GoToLocal/7"`).
Splits are disjoint seed ranges, the same for every level:

- `test`: seeds 0 .. 99 (100 tasks per level), fixed forever;
- `train`: seeds 1000 .. 10999 (10,000 tasks per level).
"""

from __future__ import annotations

import re

import gymnasium as gym
import minigrid  # noqa: F401  (registers the BabyAI-* ids)

#: The 40 levels of AgentGym's BabyAI server, in its order (GoToObjS6 is `-v1` in minigrid 3).
AGENTGYM_LEVELS: tuple[str, ...] = (
    "GoToRedBallGrey", "GoToRedBall", "GoToRedBallNoDists", "GoToObjS6", "GoToLocalS8N7",
    "GoToObjMazeS7", "GoToImpUnlock", "GoToSeqS5R2", "GoToRedBlueBall", "GoToDoor",
    "GoToObjDoor", "Open", "OpenRedDoor", "OpenDoorLoc", "OpenRedBlueDoorsDebug",
    "OpenDoorsOrderN4Debug", "Pickup", "UnblockPickup", "PickupLoc", "PickupDistDebug",
    "PickupAbove", "PutNextLocalS6N4", "PutNextS7N4Carrying", "Unlock", "UnlockLocalDist",
    "KeyInBox", "UnlockPickupDist", "BlockedUnlockPickup", "UnlockToUnlock", "ActionObjDoor",
    "FindObjS7", "KeyCorridorS6R3", "OneRoomS20", "MoveTwoAcrossS8N9", "SynthS5R2",
    "SynthLoc", "SynthSeq", "MiniBossLevel", "BossLevel", "BossLevelNoUnlock",
)  # fmt: skip

#: Levels that minigrid's BabyAIBot cannot solve: the four its docstring names, and the two
#: `OpenDoorsOrder*Debug` levels, where its exploration opens doors out of order and the mission
#: fails at once (measured with raw minigrid, seeds 0-19: N2Debug 7/20, N4Debug 2/20).
BOT_UNSUPPORTED: frozenset[str] = frozenset(
    {
        "PutNextS5N2Carrying",
        "PutNextS6N3Carrying",
        "PutNextS7N4Carrying",
        "KeyInBox",
        "OpenDoorsOrderN2Debug",
        "OpenDoorsOrderN4Debug",
    }
)

TEST_SEEDS = range(0, 100)
TRAIN_SEEDS = range(1000, 11000)
SPLIT_SEEDS: dict[str, range] = {"train": TRAIN_SEEDS, "test": TEST_SEEDS}

_ID = re.compile(r"^BabyAI-(?P<level>\w+)-v(?P<version>\d+)$")

#: Level name -> minigrid id, for every BabyAI level minigrid registers (newest version wins).
MINIGRID_IDS: dict[str, str] = {}
for _env_id in sorted(gym.registry, key=lambda i: (i, gym.registry[i].version or 0)):
    _match = _ID.match(_env_id)
    if _match:
        MINIGRID_IDS[_match["level"]] = _env_id

_FAMILIES = (
    ("Synth/Boss", ("Synth", "MiniBoss", "Boss")),
    ("PutNext", ("PutNext", "MoveTwoAcross")),
    ("Unlock", ("Unlock", "KeyInBox", "BlockedUnlock")),
    ("Pickup", ("Pickup", "UnblockPickup")),
    ("Open", ("Open",)),
    ("GoTo", ("GoTo",)),
    ("Find", ("FindObj", "KeyCorridor", "OneRoom")),
    ("ActionObjDoor", ("ActionObjDoor",)),
)


def family(level: str) -> str:
    """The level family used as `category`: GoTo, Open, Pickup, PutNext, Unlock, Find, Synth/Boss, ..."""
    for name, prefixes in _FAMILIES:
        if level.startswith(prefixes):
            return name
    raise ValueError(f"no family for BabyAI level {level!r}")


def task_id(level: str, seed: int) -> str:
    return f"{level}/{seed}"


def parse_task_id(task: str) -> tuple[str, int] | None:
    """`"GoToLocal/7"` -> `("GoToLocal", 7)`; None when malformed."""
    level, _, seed = task.partition("/")
    # ASCII digits only, and few: int() would take other scripts' digits, and refuse 4,300 of them.
    if not (seed.isascii() and seed.isdigit()) or len(seed) > 12 or level not in MINIGRID_IDS:
        return None
    return level, int(seed)


def split_of_seed(seed: int) -> str | None:
    for split, seeds in SPLIT_SEEDS.items():
        if seed in seeds:
            return split
    return None
