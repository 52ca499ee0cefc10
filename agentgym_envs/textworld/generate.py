"""Generate and compile TextWorld games into cache entries; run as a script, in its own process.

textworld's generator iterates over sets of strings, so the game a seed gives depends on Python's
string-hash seed: the same settings and seed made two different games in two processes. This
script is therefore run by path (`python generate.py`, so that it imports nothing but the standard
library and textworld) with `PYTHONHASHSEED=0`, and reseeds textworld's global generator before
each game, so a task id names one game on every machine and in every order of building.

Input (stdin): a JSON list of jobs `{"challenge", "settings", "seed", "target"}`. For each job whose
entry is missing, it takes the entry's file lock (`.<seed>.lock` beside it, `flock`), checks again,
builds the game into a temporary sibling folder and renames it into place, so that no process
sees half an entry and concurrent builders build it once. Output (stdout): one JSON line per job,
`{"target", "built", "generate_s", "compile_s"}` (CPU seconds; the compiler's child processes
included).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path

#: Files of a finished entry; `meta.json` is written last.
ENTRY_FILES = ("game.z8", "game.json", "meta.json")


def entry_ready(target: Path) -> bool:
    return all((target / name).is_file() for name in ENTRY_FILES)


@contextlib.contextmanager
def entry_lock(target: Path) -> Iterator[None]:
    """Hold the exclusive build lock of the cache entry `target` (a `flock` on a file beside it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f".{target.name}.lock", "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def build(challenge: str, settings: dict, seed: int, folder: Path) -> tuple[float, float, dict]:
    """Make and compile one game into `folder`; return (generate CPU s, compile CPU s, metadata)."""
    import textworld
    import textworld.challenges
    from textworld.generator import compile_game

    textworld.g_rng.set_seed(seed)  # generator code that falls back on the global RNG
    options = textworld.GameOptions()
    options.seeds = seed
    options.path = str(folder / "game.z8")
    options.force_recompile = True
    start = time.process_time()
    game = textworld.challenges.CHALLENGES[challenge][1](dict(settings), options)
    generated = time.process_time()
    children = _children_cpu()
    compile_game(game, options)
    compiled = time.process_time() - generated + _children_cpu() - children
    (folder / "game.ni").unlink(missing_ok=True)  # the Inform 7 source the compiler leaves beside the game
    meta = {
        "challenge": challenge,
        "settings": settings,
        "seed": seed,
        "textworld": textworld.__version__,
        "walkthrough": list(game.metadata.get("walkthrough") or game.walkthrough or []),
        "max_score": game.max_score,
        "objective": game.objective,
        "generate_cpu_s": round(generated - start, 4),
        "compile_cpu_s": round(compiled, 4),
    }
    return generated - start, compiled, meta


def run_job(job: dict) -> dict:
    target = Path(job["target"])
    result = {"target": str(target), "built": False, "generate_s": 0.0, "compile_s": 0.0}
    if entry_ready(target):
        return result
    with entry_lock(target):
        if entry_ready(target):  # another process built it while this one waited
            return result
        if target.exists():  # a damaged entry: rebuilt
            shutil.rmtree(target)
        for stale in target.parent.glob(f".{target.name}.tmp-*"):  # left by a killed builder (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = target.parent / f".{target.name}.tmp-{os.getpid()}"
        tmp.mkdir()
        try:
            generate_s, compile_s, meta = build(job["challenge"], job["settings"], job["seed"], tmp)
            (tmp / "meta.json").write_text(json.dumps(meta, indent=1))
            os.rename(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {**result, "built": True, "generate_s": round(generate_s, 4), "compile_s": round(compile_s, 4)}


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        print("generate.py needs PYTHONHASHSEED=0 (textworld's generator depends on the hash seed)", file=sys.stderr)
        return 2
    for job in json.load(sys.stdin):
        print(json.dumps(run_job(job)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
