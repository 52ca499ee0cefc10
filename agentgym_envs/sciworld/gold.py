"""Gold action sequences: ScienceWorld's own solver, run outside the env's JVM, cached on disk.

Generating a gold path slows every later load in that JVM about 8x, so an env never generates
one in its own JVM. Gold paths come, in this order, from:

1. the packaged sample (`data/gold_test_sample.json.gz`): the first five test variations of each
   of the 30 task types (149 tasks; `identify-life-stages-2` has only four), generated once by
   `agentgym prepare sciworld --sample` (`build_sample`);
2. the disk cache, one JSON file per task under `$AGENTGYM_CACHE_DIR` (default
   `~/.cache/agentgym`), `sciworld-<scienceworld version>/gold/`;
3. a separate, deterministic JVM that `GoldPaths` starts on first need and ends on `close()`;
   what it generates goes to the disk cache.

`agentgym prepare sciworld --split train` (`fill_cache`) fills the cache for a whole split (e.g.
before SFT on expert demonstrations).
"""

from __future__ import annotations

import functools
import gzip
import json
import os
import tempfile
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from agentgym_envs.sciworld.backend import ScienceWorldJVM
from agentgym_envs.sciworld.tasks import TASK_TYPES, parse_task_id, split_ranges, split_tasks

SAMPLE_FILE = "gold_test_sample.json.gz"
SAMPLE_PER_TYPE = 5


def sample_tasks() -> list[str]:
    """The fixed sample of test tasks with packaged gold paths: five test variations per task type."""
    return [
        f"{name}/{variation}"
        for name, (_, count) in TASK_TYPES.items()
        for variation in split_ranges(count)["test"][:SAMPLE_PER_TYPE]
    ]


@functools.cache
def packaged() -> dict[str, list[str]]:
    """The packaged gold paths (task id -> actions)."""
    path = resources.files("agentgym_envs.sciworld") / "data" / SAMPLE_FILE
    if not path.is_file():
        return {}
    with path.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        return json.load(text)["gold"]


def cache_dir() -> Path:
    """Where generated gold paths are kept (`$AGENTGYM_CACHE_DIR` or `~/.cache/agentgym`)."""
    from scienceworld import __version__

    root = (
        os.environ.get("AGENTGYM_CACHE_DIR")
        or Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "agentgym"
    )
    return Path(root) / f"sciworld-{__version__}" / "gold"


class GoldPaths:
    """Gold action sequences by task id, generated (when not packaged or cached) in a JVM of their own.

    Args:
        heap: The generator JVM's maximum heap.
        java: The `java` executable (see `ScienceWorldJVM`).
    """

    def __init__(self, heap: str | None = "512m", java: str | None = None):
        self._jvm = ScienceWorldJVM(heap=heap, deterministic=True, java=java, timeout_s=600.0)

    def get(self, task_id: str) -> list[str]:
        """The gold actions of `task_id`, from the package, the disk cache, or the generator."""
        found = packaged().get(task_id)
        if found is not None:
            return list(found)
        path = cache_dir() / f"{task_id.replace('/', '-')}.json"
        if path.is_file():
            return json.loads(path.read_text())
        actions = self.generate(task_id)
        path.parent.mkdir(parents=True, exist_ok=True)
        # write-then-rename: parallel workers may generate the same task; readers never see half a file
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as tmp:
            json.dump(actions, tmp)
        os.replace(tmp.name, path)
        return actions

    def generate(self, task_id: str) -> list[str]:
        """Run ScienceWorld's gold agent for `task_id` in this object's JVM."""
        parsed = parse_task_id(task_id)
        if parsed is None:
            raise ValueError(f"unknown ScienceWorld task id {task_id!r}; expected '<task type>/<variation>'")
        self._jvm.call("load", parsed[0], parsed[1], "", True)
        return self._jvm.call_list("getGoldActionSequence")

    def close(self) -> None:
        """End the generator JVM (if one was started)."""
        self._jvm.close()


def _replay(jvm: ScienceWorldJVM, task_id: str, actions: list[str]) -> dict:
    """Replay `actions` from a fresh load of `task_id`; the outcome as ScienceWorld scores it."""
    name, variation = parse_task_id(task_id)  # type: ignore[misc]
    jvm.call("load", name, variation, "", False)
    for action in actions:
        jvm.call("step", action)
    score = jvm.call("getScore")
    return {"score": round(100 * score), "completed": bool(jvm.call("getCompleted")), "steps": len(actions)}


def build_sample(out: Path | None = None) -> dict:
    """Generate the gold paths of `sample_tasks()` in one JVM and replay each in another; write them to `out`
    (default: the packaged `data/gold_test_sample.json.gz`)."""
    out = Path(__file__).parent / "data" / SAMPLE_FILE if out is None else out
    gold, outcomes = {}, {}
    generator, player = GoldPaths(), ScienceWorldJVM()
    try:
        for task_id in sample_tasks():
            started = time.perf_counter()
            gold[task_id] = generator.generate(task_id)
            outcomes[task_id] = {**_replay(player, task_id, gold[task_id]), "seconds": time.perf_counter() - started}
            print(task_id, outcomes[task_id], flush=True)
    finally:
        generator.close()
        player.close()
    from scienceworld import __version__

    data = {"scienceworld": __version__, "gold": gold, "replay": outcomes}
    with gzip.open(out, "wt", encoding="utf-8") as f:
        json.dump(data, f, separators=(",", ":"))
    return data


def fill_cache(split: str, limit: int | None = None, progress: Callable[[str, int], None] | None = None) -> None:
    """Have the gold paths of `split`'s tasks (the first `limit`) packaged or in the disk cache.

    `progress` is called with each task id and the length of its gold path.
    """
    paths = GoldPaths()
    try:
        for task_id in split_tasks(split)[:limit]:
            actions = paths.get(task_id)
            if progress is not None:
                progress(task_id, len(actions))
    finally:
        paths.close()
