"""One WebArena task config: its fields, its kind, and a copy with the sites' URLs filled in.

A config (see web-arena-x/webarena, `config_files/`) holds `task_id`, `sites`, `start_url` (several
URLs joined by `" |AND| "` open several tabs), `intent`, `require_login`, `storage_state`,
`geolocation` and `eval` (`eval_types`, `reference_answers`, `reference_url`, `url_note`,
`program_html`, `string_note`). Raw configs use placeholders such as `__SHOPPING__`; they are
resolved from the same environment variables WebArena uses (`SHOPPING`, `SHOPPING_ADMIN`, `REDDIT`,
`GITLAB`, `MAP`, `WIKIPEDIA`, `HOMEPAGE`), or from explicit site URLs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
