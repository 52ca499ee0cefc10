"""WebArena's evaluators, reimplemented: `string_match`, `url_match` and `program_html`.

The score of a task is the product of the scores of its `eval_types`, each in [0, 1]:

- `string_match` compares the answer of `stop [answer]` with `reference_answers`: `exact_match`
  (equal after trimming quotes and lower-casing), `must_include` (every phrase is a substring; a
  single one-character reference must be a whole token, so "0" does not match "10"), `fuzzy_match`
  (a judge decides; the reference "N/A" marks an impossible task: the answer "N/A" scores, otherwise
  the judge checks the answer against `string_note`).
- `url_match` ("GOLD in PRED"): some reference's host+path (no trailing slash) is a substring of the
  final page's host+path, and for every query parameter of the references (pooled over the
  `" |OR| "` alternatives) the page's URL carries one of the reference values.
- `program_html`: for each target, load its `url` (`"last"`: the final page as it is; `"func:..."`:
  a helper computes it), evaluate its `locator` (JavaScript starting with `document.` or
  `[...document.`, a `func:` helper, or empty for the page's HTML), and check `required_contents`
  (`exact_match`, or `must_include` where `" |OR| "` separates alternatives).

A check that cannot be decided here (a `fuzzy_match` without a judge, a helper that needs
WebArena's REST APIs) makes the evaluation unscorable: score 0 and the reason, never a guess.
"""

from __future__ import annotations

import ast
import html
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from agentgym_envs.webarena.judge import Judge, JudgeError

_TOKEN = re.compile(r"\w+(?:[.,']\w+)*|[^\w\s]")


class Unscorable(Exception):
    """The evaluation cannot be decided here; the message says why."""


class PageProbe(Protocol):
    """What the evaluators need from the browser."""

    def current_url(self) -> str:
        """The URL of the page the agent ended on."""
        ...

    def select(self, url: str | None, locator: str, prep_actions: list[str]) -> str:
        """Load `url` (None: the final page as it is) and return what `locator` selects ('' on failure).

        An empty locator selects the page's HTML; otherwise it is a JavaScript expression.
        """
        ...


@dataclass
class Evaluation:
    """The score of an episode, one entry per evaluator, and why it is unscorable (if it is)."""

    score: float
    details: list[dict[str, Any]] = field(default_factory=list)
    unscorable: str | None = None


# ---- string_match -------------------------------------------------------------------------------
def clean_answer(answer: str) -> str:
    """Trim whitespace and one pair of surrounding quotes, lower-case."""
    answer = answer.strip()
    if len(answer) >= 2 and answer[0] == answer[-1] and answer[0] in "'\"":
        answer = answer[1:-1]
    return answer.lower()


def exact_match(reference: str, answer: str) -> float:
    """1.0 when the cleaned answer equals the cleaned reference.

    >>> exact_match("$34.99", " '$34.99' ")
    1.0
    """
    return float(clean_answer(answer) == clean_answer(reference))


def must_include(reference: str, answer: str, tokenize: bool = False) -> float:
    """1.0 when the cleaned reference occurs in the cleaned answer (as a token, for one-character
    references when `tokenize`).

    >>> must_include("0", "10 orders", tokenize=True), must_include("0", "0 orders", tokenize=True)
    (0.0, 1.0)
    """
    ref, pred = clean_answer(reference), clean_answer(answer)
    if tokenize and len(ref) == 1:
        return float(ref in _TOKEN.findall(pred))
    return float(ref in pred)


def string_match(config: dict[str, Any], answer: str, judge: Judge | None) -> float:
    evaluation = config["eval"]
    pred = clean_answer(answer)
    score = 1.0
    for approach, value in (evaluation.get("reference_answers") or {}).items():
        if approach == "exact_match":
            score *= exact_match(str(value), pred)
        elif approach == "must_include":
            values = value if isinstance(value, list) else [value]
            for phrase in values:
                score *= must_include(str(phrase), pred, tokenize=len(values) == 1)
        elif approach == "fuzzy_match":
            score *= _fuzzy(config, value, pred, judge)
        else:
            raise Unscorable(f"unknown reference_answers kind {approach!r}")
    return score


def _fuzzy(config: dict[str, Any], value: Any, pred: str, judge: Judge | None) -> float:
    intent = str(config["intent"])
    if value == "N/A":
        if exact_match("N/A", pred):
            return 1.0
        if judge is None:
            raise Unscorable("fuzzy_match of an impossible task needs a judge (the answer is not exactly 'N/A')")
        return _ask(lambda: judge.unachievable_match(intent, str(config["eval"].get("string_note", "")), pred))
    score = 1.0
    for reference in value if isinstance(value, list) else [value]:
        if not pred:  # WebArena scores an empty answer without asking
            score *= float(not str(reference))
        elif judge is None:
            raise Unscorable("fuzzy_match needs a judge: pass judge=... or set AGENTGYM_JUDGE_BASE_URL")
        else:
            score *= _ask(lambda ref=reference: judge.fuzzy_match(intent, str(ref), pred))
    return score


def _ask(question: Callable[[], bool]) -> float:
    try:
        return float(bool(question()))
    except JudgeError as error:
        raise Unscorable(str(error)) from error


# ---- url_match ----------------------------------------------------------------------------------
def _base_and_query(url: str) -> tuple[str, dict[str, list[str]]]:
    parsed = urlparse(url.strip().rstrip("/"))
    return (parsed.netloc + parsed.path).rstrip("/"), parse_qs(parsed.query)


def url_match(config: dict[str, Any], url: str) -> float:
    """WebArena's "GOLD in PRED" rule (see the module docstring).

    >>> cfg = {"eval": {"reference_url": "http://shop.test/search?q=lamp |OR| http://shop.test/lamps"}}
    >>> url_match(cfg, "http://shop.test/search/?q=lamp&sort=price_asc")
    1.0
    >>> url_match(cfg, "http://shop.test/lamps")  # the references' query parameters are pooled
    0.0
    """
    evaluation = config["eval"]
    rule = evaluation.get("url_note") or "GOLD in PRED"
    if rule != "GOLD in PRED":
        raise Unscorable(f"unknown url_note matching rule {rule!r} (WebArena knows only 'GOLD in PRED')")
    references = [ref for ref in str(evaluation.get("reference_url") or "").split(" |OR| ") if ref.strip()]
    if not references:
        raise Unscorable("url_match without a reference_url")
    pred_base, pred_query = _base_and_query(url)
    ref_bases, ref_query = [], {}
    for ref in references:
        base, query = _base_and_query(ref)
        ref_bases.append(base)
        for key, values in query.items():
            ref_query.setdefault(key, set()).update(values)
    score = float(any(base in pred_base for base in ref_bases))
    for key, values in ref_query.items():
        score *= float(any(value in pred_query.get(key, []) for value in values))
    return score


# ---- program_html -------------------------------------------------------------------------------
#: A `func:` helper: called with the probe and the call's arguments, returns a URL or selected text.
Helper = Callable[..., str]


def _reddit_get_post_url(probe: PageProbe, url: str) -> str:
    """The post URL (`/f/<forum>/<id>/`) of a Postmill post or comment URL; other URLs unchanged."""
    parsed = urlparse(url)
    parts = parsed.path.split("/")
    if len(parts) < 4 or parts[1] != "f":
        return url
    return f"{parsed.scheme}://{parsed.netloc}/f/{parts[2]}/{parts[3]}/"


def _gitlab_member_role(probe: PageProbe, page: Any, account: str) -> str:
    """The role shown for `@account` on a GitLab project's members page (the current page)."""
    script = (
        "(() => { const names = [...document.querySelectorAll(\"td[data-label='Account'] "
        'span.gl-avatar-labeled-sublabel")].map(e => e.outerText);'
        f" const i = names.indexOf({json.dumps('@' + account)});"
        " const roles = document.querySelectorAll('td.col-max-role span');"
        " return i >= 0 && roles[i] ? roles[i].outerText : ''; })()"
    )
    return probe.select(None, script, [])


def _needs_rest_api(name: str) -> Helper:
    def helper(probe: PageProbe, *args: Any) -> str:
        raise Unscorable(f"{name} needs the REST API of WebArena's shopping site, which this env does not call")

    return helper


#: The helpers of WebArena's evaluation_harness that `func:` may name.
HELPERS: dict[str, Helper] = {
    "reddit_get_post_url": _reddit_get_post_url,
    "gitlab_get_project_memeber_role": _gitlab_member_role,
    "shopping_get_latest_order_url": _needs_rest_api("shopping_get_latest_order_url"),
    "shopping_get_sku_latest_review_author": _needs_rest_api("shopping_get_sku_latest_review_author"),
    "shopping_get_sku_latest_review_rating": _needs_rest_api("shopping_get_sku_latest_review_rating"),
}

_PAGE = object()


def _call_helper(expression: str, probe: PageProbe, helpers: dict[str, Helper]) -> str:
    """Run `name('arg', __page__, ...)` by looking the name up, never by `eval`."""
    try:
        call = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError as error:
        raise Unscorable(f"cannot read the helper call {expression!r}") from error
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.keywords):
        raise Unscorable(f"not a plain helper call: {expression!r}")
    args: list[Any] = []
    for arg in call.args:
        if isinstance(arg, ast.Constant):
            args.append(arg.value)
        elif isinstance(arg, ast.Name) and arg.id in ("__page__", "page"):
            args.append(_PAGE)
        else:
            raise Unscorable(f"unsupported argument in helper call {expression!r}")
    helper = helpers.get(call.func.id)
    if helper is None:
        raise Unscorable(f"unknown evaluation helper {call.func.id!r}")
    return str(helper(probe, *args))


def program_html(config: dict[str, Any], probe: PageProbe, helpers: dict[str, Helper] | None = None) -> float:
    helpers = {**HELPERS, **(helpers or {})}
    score = 1.0
    for target in config["eval"].get("program_html") or []:
        url: str | None = str(target["url"])
        if url.startswith("func:"):
            url = _call_helper(url[5:].replace("__last_url__", probe.current_url()), probe, helpers)
        if url == "last":
            url = None
        locator = str(target.get("locator") or "")
        if locator.startswith("func:"):
            if url is not None:
                probe.select(url, "1", [])
            selected = _call_helper(locator[5:], probe, helpers)
        elif not locator.strip() or locator.startswith(("document.", "[...document.")):
            selected = probe.select(url, locator, list(target.get("prep_actions") or []))
        else:
            raise Unscorable(f"unknown program_html locator {locator[:80]!r}")
        selected = html.unescape(selected)
        required = target.get("required_contents") or {}
        if "exact_match" in required:
            score *= exact_match(str(required["exact_match"]), selected)
        elif "must_include" in required:
            for content in required["must_include"]:
                alternatives = str(content).split(" |OR| ")
                score *= float(any(must_include(alt, selected) for alt in alternatives))
        else:
            raise Unscorable(f"unknown required_contents {sorted(required)}")
    return score


def evaluate(
    config: dict[str, Any],
    answer: str,
    probe: PageProbe,
    judge: Judge | None = None,
    helpers: dict[str, Helper] | None = None,
) -> Evaluation:
    """Score an episode: `config` is a resolved task config, `answer` the text of `stop` ('' if none)."""
    result = Evaluation(score=1.0)
    for eval_type in config["eval"]["eval_types"]:
        try:
            if eval_type == "string_match":
                score = string_match(config, answer, judge)
            elif eval_type == "url_match":
                score = url_match(config, probe.current_url())
            elif eval_type == "program_html":
                score = program_html(config, probe, helpers)
            else:
                raise Unscorable(f"unknown eval_type {eval_type!r}")
        except Unscorable as reason:
            result.details.append({"eval_type": eval_type, "score": None, "unscorable": str(reason)})
            result.unscorable = result.unscorable or f"{eval_type}: {reason}"
            continue
        result.details.append({"eval_type": eval_type, "score": score})
        result.score *= score
    if result.unscorable:
        result.score = 0.0
    return result
