"""Task templates: WebArena task configs instantiated from an embedded site's seeded data.

A `TaskTemplate` is one of WebArena's `intent_template`s with what it takes to make tasks of it:
`instances(seed)` lists every `instantiation_dict` the site's seed data allows (in a fixed order), and
`build(seed, values)` gives the rest of the config for one of them: `start_url`, `eval` (WebArena's
`eval_types`, `reference_answers`, `reference_url`, `program_html`) and the expert's plan (steps a
user would take on the site: see `agentgym_envs.webarena.expert`). Both read the seed data through a
`sqlite3.Connection` (`EmbeddedSite.seed`), so the answer of every task comes from the data the site
serves, never from a hand-written list.

Every site declares its templates in one vocabulary: a `SiteTasks` names the site and where its
plans start, and makes its templates (`template(slug, kind, intent, instances, build)`) and their
built configs (`built(plan, evaluation)`); the helpers below build the pieces, e.g. a price question
on the shop:

>>> from agentgym_envs.webarena.tasks.templates import click, exact, stop, type_text
>>> plan = [type_text("searchbox", "Search products", "Aurora Desk Lamp"), click("link", "Aurora Desk Lamp"),
...         stop("$34.99")]
>>> exact("$34.99")["reference_answers"]
{'exact_match': '$34.99'}
>>> plan[0]
{'do': 'type', 'role': 'searchbox', 'name': 'Search products', 'text': 'Aurora Desk Lamp', 'enter': True}
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: Task kinds, as in WebArena's analysis: information seeking, navigation, state change, unachievable.
KINDS = ("info", "nav", "state", "na")
#: The answer of an unachievable task (WebArena's "N/A"), scored by exact match: bundled tasks need no judge.
NOT_ACHIEVABLE = "N/A"
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

Values = dict[str, str]
#: One step of the expert's plan (`click`, `type_text`, `goto`, `stop`).
Step = dict[str, Any]
#: Seed data -> every instance's values.
Instances = Callable[[sqlite3.Connection], list[Values]]
#: Seed data, values -> the instance's `start_url`, `eval` and `agentgym_expert` (see `SiteTasks.built`).
Build = Callable[[sqlite3.Connection, Values], dict[str, Any]]


@dataclass(frozen=True)
class TaskTemplate:
    """One intent template of an embedded site.

    Attributes:
        template_id: Unique and stable, `"<site>.<slug>"`; it becomes WebArena's `intent_template_id`
            and names the tasks made from it.
        site: The WebArena site name of the task (`EmbeddedSite.name`).
        kind: One of `KINDS`.
        intent_template: The intent with `{{name}}` placeholders, filled from an instance's values.
        instances: Seed data -> every instance's values (strings), in a fixed order.
        build: Seed data, values -> `start_url`, `eval` and `agentgym_expert` of the config (and
            `require_login`, `sites` where they differ from the defaults).
        held_out: Only in the test split, so that test success on it measures generalisation to an
            intent never trained on.
    """

    template_id: str
    site: str
    kind: str
    intent_template: str
    instances: Instances
    build: Build
    held_out: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"template {self.template_id}: kind must be one of {KINDS}, not {self.kind!r}")
        if not self.template_id.startswith(f"{self.site}."):
            raise ValueError(f"template id {self.template_id!r} must start with its site name {self.site!r} and '.'")

    def intent(self, values: Values) -> str:
        """The intent of one instance (every placeholder must have a value)."""
        missing = sorted(set(_PLACEHOLDER.findall(self.intent_template)) - set(values))
        if missing:
            raise KeyError(f"template {self.template_id}: no value for {missing}")
        return _PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), self.intent_template)

    def config(self, seed: sqlite3.Connection, values: Values, task_id: str) -> dict[str, Any]:
        """The WebArena config of one instance."""
        built = self.build(seed, values)
        return {
            "sites": built.get("sites", [self.site]),
            "task_id": task_id,
            "require_login": built.get("require_login", False),
            "storage_state": None,
            "start_url": built["start_url"],
            "geolocation": None,
            "intent_template": self.intent_template,
            "instantiation_dict": dict(values),
            "intent": self.intent(values),
            "require_reset": self.kind == "state",
            "eval": built["eval"],
            "intent_template_id": self.template_id,
            "agentgym_kind": self.kind,
            "agentgym_expert": built["agentgym_expert"],
        }


@dataclass(frozen=True)
class SiteTasks:
    """How one embedded site declares its task templates, the same on every site.

    Attributes:
        site: The WebArena site name; a template's id is `"<site>.<slug>"`.
        start_url: Where the expert's plans start unless a build says otherwise.
        limit: The most instances a template lists (None: all of them).

    >>> shop = SiteTasks("shopping", "__SHOPPING__")
    >>> shop.template("sku", "info", "What is the SKU of the {{product}}?", fixed("product", ("Lamp",)),
    ...               lambda seed, v: shop.built([stop("LA-1")], exact("LA-1"))).template_id
    'shopping.sku'
    >>> shop.built([stop()], url("__SHOPPING__/cart"))["start_url"]
    '__SHOPPING__'
    """

    site: str
    start_url: str
    limit: int | None = None

    def template(
        self, slug: str, kind: str, intent: str, instances: Instances, build: Build, held_out: bool = False
    ) -> TaskTemplate:
        """The site's template `slug` (see `TaskTemplate` for the other arguments)."""
        limit = self.limit
        listed = instances if limit is None else lambda seed: instances(seed)[:limit]
        return TaskTemplate(f"{self.site}.{slug}", self.site, kind, intent, listed, build, held_out)

    def built(self, plan: list[Step], evaluation: dict[str, Any], start_url: str | None = None) -> dict[str, Any]:
        """What a template's build gives for one instance: the plan, its evaluation and where it starts
        (`start_url`, by default the site's)."""
        start = self.start_url if start_url is None else start_url
        return {"start_url": start, "eval": evaluation, "agentgym_expert": plan}


# ---- instances ----------------------------------------------------------------------------------
def seed_rows(seed: sqlite3.Connection, sql: str, *args: Any) -> list[sqlite3.Row]:
    """The rows of a query on the seed data (`sql` with `?` for each of `args`)."""
    return seed.execute(sql, args).fetchall()


def fixed(key: str, options: Sequence[str]) -> Instances:
    """Instances that set `key` to each of `options`, whatever the seed data."""
    return lambda seed: [{key: option} for option in options]


# ---- eval ---------------------------------------------------------------------------------------
def _eval(eval_types: Sequence[str], **fields: Any) -> dict[str, Any]:
    base = {"reference_answers": None, "reference_url": "", "program_html": [], "string_note": "", "url_note": ""}
    return {**base, **fields, "eval_types": list(eval_types)}


def exact(answer: str) -> dict[str, Any]:
    """Scored by the answer, compared exactly (after WebArena's normalisation)."""
    return _eval(["string_match"], reference_answers={"exact_match": answer})


def must_include(*phrases: str) -> dict[str, Any]:
    """Scored by the answer, which must contain every phrase."""
    return _eval(["string_match"], reference_answers={"must_include": list(phrases)})


def not_achievable() -> dict[str, Any]:
    """An unachievable task: the right answer is `NOT_ACHIEVABLE`."""
    return exact(NOT_ACHIEVABLE)


def url(reference_url: str, note: str = "GOLD in PRED") -> dict[str, Any]:
    """Scored by the URL the episode ends on (WebArena's `url_match`)."""
    return _eval(["url_match"], reference_url=reference_url, url_note=note)


def program(*checks: dict[str, Any]) -> dict[str, Any]:
    """Scored by page contents after the episode (WebArena's `program_html`), every check must pass."""
    return _eval(["program_html"], program_html=list(checks))


def check(page_url: str, locator: str = "", *, exact_match: str | None = None, must: Sequence[str] = ()) -> dict:
    """One `program_html` check: open `page_url` ("last" for the agent's page), select with `locator`
    (empty: the page's HTML; `document....` JavaScript; `func:helper(...)`), and require contents."""
    required: dict[str, Any] = {}
    if exact_match is not None:
        required["exact_match"] = exact_match
    if must:
        required["must_include"] = list(must)
    if not required:
        raise ValueError("a program_html check needs exact_match or must")
    return {"url": page_url, "locator": locator, "required_contents": required}


def text_of(selector: str) -> str:
    """A `check` locator: the visible text of the first element that the CSS `selector` selects."""
    return f"document.querySelector('{selector}').outerText"


# ---- the expert's plan --------------------------------------------------------------------------
def click(role: str, name: str, nth: int = 0) -> Step:
    """Click the `nth` element with this accessibility role and name on the current page."""
    return {"do": "click", "role": role, "name": name, "nth": nth}


def type_text(role: str, name: str, text: str, enter: bool = True, nth: int = 0) -> Step:
    """Type into the element with this role and name (and press Enter after it)."""
    step = {"do": "type", "role": role, "name": name, "text": text, "enter": enter}
    return {**step, "nth": nth} if nth else step


def goto(page_url: str) -> Step:
    """Open a URL (a user types what a visible link shows, e.g. a page's address)."""
    return {"do": "goto", "url": page_url}


def stop(answer: str = "") -> Step:
    """End the episode with this answer."""
    return {"do": "stop", "answer": answer}
