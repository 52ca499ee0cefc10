"""Task configs in WebArena's JSON format: loading a directory, splits, and `__SITE__` placeholders.

A config (see web-arena-x/webarena, `config_files/`) holds `task_id`, `sites`, `start_url` (several
URLs joined by `" |AND| "` open several tabs), `intent`, `require_login`, `storage_state`,
`geolocation` and `eval` (`eval_types`, `reference_answers`, `reference_url`, `url_note`,
`program_html`, `string_note`). Raw configs use placeholders such as `__SHOPPING__`; they are
resolved from the same environment variables WebArena uses (`SHOPPING`, `SHOPPING_ADMIN`, `REDDIT`,
`GITLAB`, `MAP`, `WIKIPEDIA`, `HOMEPAGE`), or from explicit site URLs.

A directory of configs is every `*.json` file in it (each one config or a list of them, as
`test.raw.json` is). Sub-directories named `train`, `dev` or `test` make splits; without them all
tasks form the split `test`.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

#: WebArena site name -> the environment variable holding its base URL.
SITE_ENV_VARS = {
    "shopping": "SHOPPING",
    "shopping_admin": "SHOPPING_ADMIN",
    "reddit": "REDDIT",
    "gitlab": "GITLAB",
    "map": "MAP",
    "wikipedia": "WIKIPEDIA",
    "homepage": "HOMEPAGE",
}
EVAL_TYPES = ("string_match", "url_match", "program_html")
SPLIT_DIRS = ("train", "dev", "test")
#: Key of the scripted plan in bundled configs (WebArena ignores keys it does not know).
EXPERT_KEY = "agentgym_expert"
#: Key of the task kind (info, nav, state, na) in bundled configs.
KIND_KEY = "agentgym_kind"


class TaskConfigError(ValueError):
    """A task config is malformed or needs something that is not there (a site URL, a login file)."""


@dataclass
class Task:
    """One task config, validated; `resolve()` gives a copy with site URLs filled in."""

    task_id: str
    split: str
    config: dict[str, Any]
    source: Path | None = None
    resolved: bool = False
    start_urls: list[str] = field(default_factory=list)

    @property
    def sites(self) -> list[str]:
        return list(self.config.get("sites") or [])

    @property
    def category(self) -> str:
        """The site (WebArena's `sites`, joined with `+` for multi-site tasks)."""
        return "+".join(self.sites) or "unknown"

    @property
    def kind(self) -> str:
        """The task kind (`tasks.templates.KINDS`): the config's `agentgym_kind`, else read off its
        evaluation: a state check is `state`, a URL alone `nav`, the answer "N/A" `na`, else `info`."""
        kind = self.config.get(KIND_KEY)
        if kind:
            return str(kind)
        evaluation = self.eval
        if "program_html" in evaluation["eval_types"]:
            return "state"
        if evaluation["eval_types"] == ["url_match"]:
            return "nav"
        answers = evaluation.get("reference_answers") or {}
        return "na" if "N/A" in (answers.get("exact_match"), answers.get("fuzzy_match")) else "info"

    @property
    def intent(self) -> str:
        return str(self.config["intent"])

    @property
    def eval(self) -> dict[str, Any]:
        return self.config["eval"]

    @property
    def expert_plan(self) -> list[dict[str, Any]] | None:
        return self.config.get(EXPERT_KEY)

    def resolve(self, site_urls: Mapping[str, str]) -> Task:
        """A copy with every `__SITE__` placeholder replaced by `site_urls[site]` (no trailing slash)."""
        tokens = {f"__{name.upper()}__": url.rstrip("/") for name, url in site_urls.items()}

        def fill(value: Any) -> Any:
            if isinstance(value, str):
                for token, url in tokens.items():
                    value = value.replace(token, url)
                if "__" in value:
                    for name, var in SITE_ENV_VARS.items():
                        if f"__{name.upper()}__" in value:
                            raise TaskConfigError(
                                f"task {self.task_id} needs the URL of WebArena's {name!r} site: set the "
                                f"{var} environment variable (e.g. {var}=http://localhost:7770) or pass "
                                f"site_urls={{{name!r}: ...}}"
                            )
                return value
            if isinstance(value, list):
                return [fill(item) for item in value]
            if isinstance(value, dict):
                return {key: fill(item) for key, item in value.items()}
            return value

        config = fill(self.config)
        urls = [url.strip() for url in str(config["start_url"]).split(" |AND| ") if url.strip()]
        return Task(self.task_id, self.split, config, self.source, resolved=True, start_urls=urls)

    def storage_state_path(self) -> Path | None:
        """The login state file of a `require_login` task, found next to the config or in the working dir."""
        state = self.config.get("storage_state")
        if not (self.config.get("require_login") and state):
            return None
        candidates = [Path(state)]
        if self.source is not None and not Path(state).is_absolute():
            candidates = [self.source.parent / state, self.source.parent.parent / state, Path.cwd() / state]
        for candidate in candidates:
            if candidate.is_file():
                return candidate
        raise TaskConfigError(
            f"task {self.task_id} requires login with the storage state {state!r}, which was not found "
            f"(looked at {', '.join(str(c) for c in candidates)}); WebArena's browser_env/auto_login.py writes it"
        )


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


def _load_file(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise TaskConfigError(f"{path}: not valid JSON ({error})") from error
    items = data if isinstance(data, list) else [data]
    return [_validate(item, f"{path} item {i}") for i, item in enumerate(items)]


class TaskCatalog:
    """The tasks of a config directory, by split and by id."""

    def __init__(self, tasks: list[Task]):
        self.by_id: dict[str, Task] = {}
        for task in tasks:
            if task.task_id in self.by_id:
                other = self.by_id[task.task_id].source
                raise TaskConfigError(
                    f"task_id {task.task_id} appears twice ({other} and {task.source}); keep either WebArena's "
                    "test.raw.json or the per-task files generated from it in the directory, not both"
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
        tasks = [
            Task(str(config["task_id"]), split, config, path)
            for split, folder in layout
            for path in sorted(folder.glob("*.json"))
            for config in _load_file(path)
        ]
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
