"""Task configs in WebArena's JSON format: loading a directory, splits, and the bundled tasks.

A directory of configs is every `*.json` file in it (each one config or a list of them, as
`test.raw.json` is). Sub-directories named `train`, `dev` or `test` make splits; without them all
tasks form the split `test`. Each config is a `task.Task`.

WebArena's own `config_files/` loads as WebArena reads it: its `generate_test_data.py` writes every
task of `test.raw.json` (with `__SITE__` placeholders) to `test.json` and to `<task_id>.json` (URLs
filled in), and WebArena runs the per-task files. So a task id found in several files is taken from
its one-config file, else from a list file, else from a `*.raw.json` list; the same id twice in files
of one kind is an error.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from agentgym_envs.webarena.tasks.task import SITE_ENV_VARS, Task, TaskConfigError

EVAL_TYPES = ("string_match", "url_match", "program_html")
SPLIT_DIRS = ("train", "dev", "test")


def _validate(config: Any, where: str) -> dict[str, Any]:
    if not isinstance(config, dict):
        raise TaskConfigError(f"{where}: a task config must be a JSON object, got {type(config).__name__}")
    missing = [key for key in ("task_id", "intent", "start_url", "eval") if key not in config]
    if missing:
        raise TaskConfigError(f"{where}: task config lacks {missing} (WebArena configs have task_id, intent, ...)")
    evaluation = config["eval"]
    types = evaluation.get("eval_types") if isinstance(evaluation, dict) else None
    if not isinstance(types, list) or not types or any(t not in EVAL_TYPES for t in types):
        raise TaskConfigError(
            f"{where}: task {config['task_id']}: eval.eval_types must be a non-empty list of {list(EVAL_TYPES)}, "
            f"got {types!r}"
        )
    return config


def _sort_key(task_id: str) -> tuple[int, str, int]:
    """Numbers in order, then other ids, `<name>/<n>` by name and then by number."""
    if task_id.isascii() and task_id.isdigit():
        return (0, "", int(task_id))
    head, _, tail = task_id.rpartition("/")
    return (1, head, int(tail)) if head and tail.isascii() and tail.isdigit() else (1, task_id, -1)


def _load_file(path: Path) -> tuple[list[dict[str, Any]], int]:
    """The configs of a file and its precedence (0: one config, 1: a list, 2: a `*.raw.json` list)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TaskConfigError(f"{path}: not valid JSON ({error})") from error
    items = data if isinstance(data, list) else [data]
    rank = 0 if not isinstance(data, list) else 2 if path.name.endswith(".raw.json") else 1
    return [_validate(item, f"{path} item {i}") for i, item in enumerate(items)], rank


def _folder_tasks(split: str, folder: Path) -> list[Task]:
    """The tasks of one folder's files, an id found in files of several kinds taken from the first kind
    (see the module docstring); ids repeated within one kind are all returned, for `TaskCatalog` to refuse."""
    ranked = [
        (rank, Task(str(config["task_id"]), split, config, path))
        for path in sorted(folder.glob("*.json"))
        for configs, rank in [_load_file(path)]
        for config in configs
    ]
    best: dict[str, int] = {}
    for rank, task in ranked:
        best[task.task_id] = min(rank, best.get(task.task_id, rank))
    return [task for rank, task in ranked if rank == best[task.task_id]]


class TaskCatalog:
    """The tasks of a config directory, by split and by id."""

    def __init__(self, tasks: list[Task]):
        self.by_id: dict[str, Task] = {}
        for task in tasks:
            if task.task_id in self.by_id:
                other = self.by_id[task.task_id].source
                raise TaskConfigError(
                    f"task_id {task.task_id} appears twice ({other} and {task.source}); task ids must be unique "
                    "(only a one-config file may repeat a task of a list file such as test.json, which it replaces)"
                )
            self.by_id[task.task_id] = task
        self.by_split: dict[str, list[Task]] = {}
        for task in sorted(tasks, key=lambda t: _sort_key(t.task_id)):
            self.by_split.setdefault(task.split, []).append(task)
        self.splits = tuple(split for split in SPLIT_DIRS if split in self.by_split)

    @classmethod
    def from_directory(cls, directory: str | os.PathLike[str]) -> TaskCatalog:
        """Load every config under `directory` (see the module docstring for the layout)."""
        root = Path(directory)
        if not root.is_dir():
            raise TaskConfigError(f"task config directory {str(root)!r} does not exist or is not a directory")
        split_dirs = [root / split for split in SPLIT_DIRS if (root / split).is_dir()]
        layout = [(d.name, d) for d in split_dirs] if split_dirs else [("test", root)]
        tasks = [task for split, folder in layout for task in _folder_tasks(split, folder)]
        if not tasks:
            raise TaskConfigError(f"no WebArena task configs (*.json) found in {str(root)!r}")
        return cls(tasks)

    @classmethod
    def bundled(cls) -> TaskCatalog:
        """The tasks shipped with the package, for the embedded sites: the splits made from every
        embedded site's task templates (`tasks.splits`) and the hand-written configs under `tasks/configs/`.

        Made once per process and shared (read-only) by every env.
        """
        return _bundled()


@functools.lru_cache(maxsize=1)
def _bundled() -> TaskCatalog:
    from agentgym_envs.webarena.tasks.splits import bundled_template_tasks

    tasks: list[Task] = list(bundled_template_tasks())
    with resources.as_file(resources.files(__package__).joinpath("configs")) as folder:
        if any(folder.rglob("*.json")):
            tasks += TaskCatalog.from_directory(folder).by_id.values()
    return TaskCatalog(tasks)


def site_urls_from_environment(overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """Site name -> base URL from WebArena's environment variables, updated with `overrides`."""
    urls = {name: os.environ[var] for name, var in SITE_ENV_VARS.items() if os.environ.get(var)}
    urls.update(overrides or {})
    return urls
