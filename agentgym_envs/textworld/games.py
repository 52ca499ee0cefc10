"""TextWorld games on disk and in memory: the compile cache, building missing games, loading them.

Games are generated and compiled once per machine and kept in the cache,
`$AGENTGYM_CACHE_DIR/textworld/textworld-<version>/<challenge>/<settings>/<seed>/` (default
`~/.cache/agentgym/...`), shared by every env and process: `ensure` builds the missing ones in
`generate.py` worker processes (each entry under its own file lock, published by a rename, so
parallel envs and processes never build a game twice and never see half of one). `load` parses a
game once per process (`LoadedGame`, kept in a bounded LRU shared by the envs of the process).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from agentgym_envs.textworld import tasks as T
from agentgym_envs.textworld.generate import entry_ready

_GENERATE = Path(__file__).with_name("generate.py")
#: Parsed games kept per process (about 0.7 MB each; more than the test split, so an evaluation
#: cycling through it parses each game once).
MAX_LOADED_GAMES = 320
#: How long one worker may take per game it builds before it is killed (hard games take ~15 s).
BUILD_TIMEOUT_PER_GAME_S = 300.0


class GameBuildError(RuntimeError):
    """textworld could not generate or compile a game; the message names the games and the cause."""


def textworld_version() -> str:
    return version("textworld")


def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The folder of compiled games for the installed textworld version."""
    base = Path(cache_dir or os.environ.get("AGENTGYM_CACHE_DIR") or Path.home() / ".cache" / "agentgym")
    return base.expanduser() / "textworld" / f"textworld-{textworld_version()}"


def entry_path(root: Path, task_id: str) -> Path:
    parsed = T.parse_task_id(task_id)
    if parsed is None:
        raise ValueError(f"unknown TextWorld task id {task_id!r:.100}")
    challenge, settings, seed = parsed
    return root / challenge / settings / str(seed)


def _job(root: Path, task_id: str) -> dict[str, Any]:
    challenge, settings, seed = T.parse_task_id(task_id)  # type: ignore[misc]
    split = T.split_of_seed(seed) or "train"
    name, generator_settings = T.generator_settings(challenge, settings, split)
    return {"challenge": name, "settings": generator_settings, "seed": seed, "target": str(entry_path(root, task_id))}


def _run_worker(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Build `jobs` in one `generate.py` process; its records."""
    try:
        done = subprocess.run(
            [sys.executable, str(_GENERATE)],
            input=json.dumps(jobs),
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            timeout=BUILD_TIMEOUT_PER_GAME_S * len(jobs),
        )
    except subprocess.TimeoutExpired as error:  # subprocess.run has killed the worker
        raise GameBuildError(f"building {len(jobs)} TextWorld games took over {error.timeout:.0f} s") from error
    if done.returncode:
        raise GameBuildError(
            f"textworld could not build the TextWorld games {[job['target'] for job in jobs][:3]} "
            f"(exit status {done.returncode}): {done.stderr[-2000:]}"
        )
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def ensure(
    task_ids: Sequence[str],
    root: Path,
    workers: int = 1,
    chunk: int = 8,
    progress: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Build every game of `task_ids` that is not in the cache yet; return one record per game built.

    Args:
        task_ids: The games to have.
        root: The cache folder (`cache_root()`).
        workers: How many worker processes build at once.
        chunk: How many games one worker process builds (each process imports textworld once, ~1 s).
        progress: Called with the records of each finished chunk.

    Raises:
        GameBuildError: A worker failed or ran out of time (the message names the cause).
    """
    jobs = [_job(root, task) for task in task_ids if not entry_ready(entry_path(root, task))]
    chunks = [jobs[i : i + chunk] for i in range(0, len(jobs), max(1, chunk))]
    built: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max(1, workers)) as pool:
        for records in pool.map(_run_worker, chunks):
            records = [record for record in records if record["built"]]
            built += records
            if progress is not None:
                progress(records)
    missing = [job["target"] for job in jobs if not entry_ready(Path(job["target"]))]
    if missing:
        raise GameBuildError(f"textworld's worker did not build {len(missing)} TextWorld games: {missing[:3]}")
    return built


@dataclass
class LoadedGame:
    """A compiled game parsed once per process; shared, never changed (episodes copy `start`)."""

    task_id: str
    story: Path
    game: Any  # textworld.Game
    inform7: Any  # textworld's Inform7Game
    meta: dict[str, Any]
    start: Any  # the GameProgression of the initial state (no quest tracking)
    start_commands: list[str]
    #: Filled by the first session that starts the game: its intro text and the Z-machine state after set-up.
    intro: str | None = None
    snapshot: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def max_score(self) -> int:
        return int(self.game.max_score)

    @property
    def objective(self) -> str:
        return str(self.game.objective or "")


_LOADED: OrderedDict[str, LoadedGame] = OrderedDict()
_LOADED_LOCK = threading.Lock()
#: textworld's logic parser (tatsu) is not thread-safe: envs reset in parallel threads (the rollout
#: engine's) failed with TypeError/IndexError inside `Game.load`, so games are parsed one at a time.
_PARSE_LOCK = threading.Lock()


def load(task_id: str, root: Path) -> LoadedGame:
    """The parsed game of `task_id` (built first if it is not in the cache)."""
    folder = entry_path(root, task_id)
    key = str(folder)
    with _LOADED_LOCK:
        found = _LOADED.get(key)
        if found is not None:
            _LOADED.move_to_end(key)
            return found
    if not entry_ready(folder):
        ensure([task_id], root)
    from textworld.generator.game import Game, GameProgression
    from textworld.generator.inform7 import Inform7Game

    with _PARSE_LOCK:
        game = Game.load(str(folder / "game.json"))
        inform7 = Inform7Game(game)
        start = GameProgression(game, track_quests=False)
        commands = sorted(set(inform7.gen_commands_from_actions(start.valid_actions)))
    meta = json.loads((folder / "meta.json").read_text())
    loaded = LoadedGame(task_id, folder / "game.z8", game, inform7, meta, start, commands)
    with _LOADED_LOCK:
        loaded = _LOADED.setdefault(key, loaded)
        while len(_LOADED) > MAX_LOADED_GAMES:
            _LOADED.popitem(last=False)
    return loaded
