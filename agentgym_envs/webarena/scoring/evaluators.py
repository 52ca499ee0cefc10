"""WebArena's evaluators, reimplemented to score as WebArena's `evaluation_harness` scores.

An episode's score is the product of its evaluators' scores, one per entry of `eval_types`, in
that order (an entry listed twice runs twice); each is 0 or 1. What each one does:

`string_match` compares the answer of `stop [answer]` ('' when the episode ended without one) with
`reference_answers`. *Cleaning* a text strips surrounding whitespace, then one pair of matching
quotes (`'...'` or `"..."`; a lone `'` or `"` counts as a pair and becomes ''), then lower-cases.
The answer is cleaned once up front and again in every comparison (so `"'Yes'"` equals `yes`); a
reference is cleaned once. The approaches run in the config's order and multiply:
- `exact_match`: the cleaned answer equals the cleaned reference.
- `must_include` (a list): each phrase occurs in the answer as a substring; when the list holds a
  single phrase of one character, that character must be a whole word token of the answer instead,
  with NLTK's `word_tokenize` (see `tokens`): "0" is in "0 orders" but not in "10 orders" or "1/0".
- `fuzzy_match` (a list): a judge says whether the answer means each reference. A judge is asked
  only while the product so far is 1 (a 0 cannot come back). An empty answer scores 0 without a
  judge (WebArena asks its judge, which cannot find an empty answer equivalent to a reference);
  with a judge it is asked like any other answer.
- `fuzzy_match: "N/A"` (an unachievable task): the product is multiplied by [answer == "n/a"];
  when the product is then not 1 it is *replaced* by the judge's verdict on whether the answer
  gives the task's reason (`string_note`), so an answer such as "N/A: the shop has no such order"
  needs a judge; without one it is unscorable, except an empty answer, which scores 0.
- Other approaches are ignored, as WebArena ignores them.

`url_match` (`url_note` "GOLD in PRED", the default when absent; any other rule is unscorable):
the URL of the page the evaluation is on and each reference (`reference_url`, alternatives joined
by `" |OR| "`) lose their trailing slashes; then some reference's host+path is a substring of the
page's host+path (scheme, fragment ignored: `.../result?q=x` matches `.../result/?q=x`, but
`.../result/?q=x` does not match `.../result?q=x`), and for each query parameter of the references
(pooled over the alternatives) the page's URL carries one of their values (blank values do not count).

`program_html` runs its checks in order on *the page the evaluation is on*: the agent's active tab
until a check loads a URL, then the page it loaded. For each check: `url` "last" keeps that page as
it is; a `func:` URL is a helper call (see `functions`) with `__last_url__` replaced by that page's
current URL; any other URL is loaded. Then the `locator`: empty takes the page's HTML; JavaScript
(starting with `document.` or `[...document.`) runs after the `prep_actions` (in order, up to the
first that fails), its value as Python's `str()` writes it (null and undefined give "None",
true "True", an array "['a', 'b']"; '' when it throws); `func:` calls a helper with `__page__`,
the page. HTML entities are unescaped, then `required_contents`: `exact_match` (cleaned equality)
or `must_include` (each item, alternatives joined by `" |OR| "`, a substring; no tokenising). A
page that cannot be loaded reads as empty.

Beyond WebArena: a check that cannot be decided here (a `fuzzy_match` without a judge, a judge that
fails, a helper whose site is not configured, a config WebArena's code would crash on) makes the
episode unscorable: score 0 and the reason, never a guess, unless an evaluator already scored 0
(the product is 0 whatever the undecided one says).
"""

from __future__ import annotations

import ast
import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import parse_qs, urlparse

from agentgym_envs.webarena.scoring.functions import HELPERS, PAGE, Helper, Unscorable
from agentgym_envs.webarena.scoring.judge import Judge, JudgeError
from agentgym_envs.webarena.scoring.tokens import word_tokens

__all__ = ["Evaluation", "Helper", "PageProbe", "Unscorable", "evaluate"]


class PageProbe(Protocol):
    """What the evaluators need from the browser: the page the evaluation is on (the agent's active
    tab until `select` loads a URL, then the page it loaded)."""

    def current_url(self) -> str:
        """The URL of the page the evaluation is on."""
        ...

    def select(self, url: str | None, locator: str, prep_actions: list[str]) -> Any:
        """Load `url` first (None: stay on the page as it is), then return the page's HTML for an
        empty `locator`, else the value of the JavaScript `locator` after the `prep_actions` (run in
        order up to the first that throws): a JSON-like Python value, None for null, '' when it throws."""
        ...


@dataclass
class Evaluation:
    """The score of an episode, one entry per evaluator, and why it is unscorable (if it is)."""

    score: float
    details: list[dict[str, Any]] = field(default_factory=list)
    unscorable: str | None = None


# ---- string_match -------------------------------------------------------------------------------
def clean_answer(answer: str) -> str:
    """Strip whitespace, then one pair of surrounding quotes, then lower-case (WebArena's cleaning).

    >>> clean_answer(' "Quest Lumaflex Band" '), clean_answer("'"), clean_answer("'a\\"")
    ('quest lumaflex band', '', '\\'a"')
    """
    answer = answer.strip()
    if answer[:1] in ("'", '"') and answer.endswith(answer[0]):
        answer = answer[1:-1]
    return answer.lower()


def exact_match(reference: str, answer: str) -> float:
    """1.0 when the cleaned answer equals the cleaned reference.

    >>> exact_match("$34.99", " '$34.99' ")
    1.0
    """
    return float(clean_answer(answer) == clean_answer(reference))


def must_include(reference: str, answer: str, tokenize: bool = False) -> float:
    """1.0 when the cleaned reference occurs in the cleaned answer; with `tokenize`, a one-character
    reference must be one of the answer's word tokens.

    >>> must_include("0", "10 orders", tokenize=True), must_include("0", "0 orders", tokenize=True)
    (0.0, 1.0)
    """
    ref, pred = clean_answer(reference), clean_answer(answer)
    if tokenize and len(ref) == 1 and len(word_tokens(ref)) == 1:
        return float(ref in word_tokens(pred))
    return float(ref in pred)


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise Unscorable(f"{what} must be a string, got {type(value).__name__} (WebArena's code would crash)")
    return value


def string_match(config: dict[str, Any], answer: str, judge: Judge | None) -> float:
    """WebArena's StringEvaluator (see the module docstring)."""
    evaluation = config["eval"]
    references = evaluation.get("reference_answers")
    if not isinstance(references, dict):
        raise Unscorable("string_match needs reference_answers (an object)")
    intent = str(config.get("intent", ""))
    pred = clean_answer(answer)
    score = 1.0
    for approach, value in references.items():
        if approach == "exact_match":
            score *= exact_match(_text(value, "reference_answers.exact_match"), pred)
        elif approach == "must_include":
            if not isinstance(value, list):
                raise Unscorable("reference_answers.must_include must be a list (WebArena's code asserts it)")
            for phrase in value:
                score *= must_include(_text(phrase, "a must_include phrase"), pred, tokenize=len(value) == 1)
        elif approach == "fuzzy_match" and value == "N/A":
            score *= exact_match("N/A", pred)
            if score != 1:
                note = str(evaluation.get("string_note", ""))
                score = _judged(judge, pred, lambda j, note=note: j.unachievable_match(intent, note, pred))
        elif approach == "fuzzy_match":
            if not isinstance(value, list):
                raise Unscorable("reference_answers.fuzzy_match must be a list or 'N/A' (WebArena's code asserts it)")
            for reference in value:
                if score == 0:
                    break
                ref = _text(reference, "a fuzzy_match reference")
                score *= _judged(judge, pred, lambda j, ref=ref: j.fuzzy_match(intent, ref, pred))
    return score


def _judged(judge: Judge | None, pred: str, question: Callable[[Judge], bool]) -> float:
    """The judge's verdict as 0/1; an empty answer scores 0 when there is no judge."""
    if judge is None:
        if not pred:
            return 0.0
        raise Unscorable("fuzzy_match needs a judge: pass judge=... or set AGENTGYM_JUDGE_BASE_URL")
    try:
        return float(bool(question(judge)))
    except JudgeError as error:
        raise Unscorable(str(error)) from error


# ---- url_match ----------------------------------------------------------------------------------
def _base_and_query(url: str) -> tuple[str, dict[str, list[str]]]:
    parsed = urlparse(url.rstrip("/"))
    return parsed.netloc + parsed.path, parse_qs(parsed.query)


def url_match(config: dict[str, Any], url: str) -> float:
    """WebArena's "GOLD in PRED" rule (see the module docstring).

    >>> cfg = {"eval": {"reference_url": "http://shop.test/search?q=lamp |OR| http://shop.test/lamps"}}
    >>> url_match(cfg, "http://shop.test/search/?q=lamp&sort=price_asc")
    1.0
    >>> url_match(cfg, "http://shop.test/lamps")  # the references' query parameters are pooled
    0.0
    """
    evaluation = config["eval"]
    rule = evaluation.get("url_note", "GOLD in PRED")
    if rule != "GOLD in PRED":
        raise Unscorable(f"unknown url_note matching rule {rule!r} (WebArena knows only 'GOLD in PRED')")
    reference = _text(evaluation.get("reference_url"), "reference_url")
    pred_base, pred_query = _base_and_query(url)
    ref_bases, ref_query = [], {}
    for ref in reference.split(" |OR| "):
        base, query = _base_and_query(ref)
        ref_bases.append(base)
        for key, values in query.items():
            ref_query.setdefault(key, set()).update(values)
    score = float(any(base in pred_base for base in ref_bases))
    for key, values in ref_query.items():
        score *= float(any(value in pred_query.get(key, []) for value in values))
    return score


# ---- program_html -------------------------------------------------------------------------------
def _call_helper(expression: str, probe: PageProbe, helpers: dict[str, Helper], last_url: str = "") -> Any:
    """Run `name('arg', __page__, ...)` by looking the name up, never by `eval`. `__last_url__` in a
    string argument becomes `last_url` after parsing, so a URL cannot change the call."""
    try:
        call = ast.parse(expression.strip(), mode="eval").body
    except SyntaxError as error:
        raise Unscorable(f"cannot read the helper call {expression[:200]!r}") from error
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and not call.keywords):
        raise Unscorable(f"not a plain helper call: {expression[:200]!r}")
    args: list[Any] = []
    for arg in call.args:
        if isinstance(arg, ast.Constant):
            value = arg.value
            args.append(value.replace("__last_url__", last_url) if isinstance(value, str) else value)
        elif isinstance(arg, ast.Name) and arg.id in ("__page__", "page"):
            args.append(PAGE)
        else:
            raise Unscorable(f"unsupported argument in helper call {expression[:200]!r}")
    helper = helpers.get(call.func.id)
    if helper is None:
        raise Unscorable(f"unknown evaluation helper {call.func.id!r}")
    try:
        return helper(probe, *args)
    except TypeError as error:
        raise Unscorable(f"wrong arguments in the helper call {expression[:200]!r}: {error}") from None


def program_html(config: dict[str, Any], probe: PageProbe, helpers: dict[str, Helper] | None = None) -> float:
    """WebArena's HTMLContentEvaluator (see the module docstring)."""
    helpers = {**HELPERS, **(helpers or {})}
    targets = config["eval"].get("program_html")
    if not isinstance(targets, list):
        raise Unscorable("program_html must be a list of checks")
    score = 1.0
    for target in targets:
        url = _text(target.get("url"), "a program_html url")
        if url.startswith("func"):
            found = _call_helper(url.split("func:", 1)[-1], probe, helpers, last_url=probe.current_url())
            url = _text(found, "a func: URL helper's result")
        load = None if url == "last" else url
        locator = _text(target.get("locator", ""), "a program_html locator")
        if not locator.strip():
            selected = probe.select(load, "", [])
        elif locator.startswith(("document.", "[...document.")):
            selected = str(probe.select(load, locator, [str(action) for action in target.get("prep_actions") or []]))
        elif locator.startswith("func:"):
            if load is not None:
                probe.select(load, "true", [])
            selected = _text(_call_helper(locator.split("func:", 1)[1], probe, helpers), "a func: helper's result")
        else:
            raise Unscorable(f"unknown program_html locator {locator[:80]!r}")
        selected = html.unescape(str(selected))
        required = target.get("required_contents")
        if not isinstance(required, dict):
            raise Unscorable("a program_html check needs required_contents (an object)")
        if "exact_match" in required:
            score *= exact_match(_text(required["exact_match"], "required_contents.exact_match"), selected)
        elif "must_include" in required:
            if not isinstance(required["must_include"], list):
                raise Unscorable("required_contents.must_include must be a list (WebArena's code asserts it)")
            for content in required["must_include"]:
                alternatives = _text(content, "a must_include item").split(" |OR| ")
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
    """Score an episode: `config` is a resolved task config, `answer` the text of `stop` ('' if none),
    `probe` the browser as the agent left it, `helpers` more (or other) `func:` helpers by name."""
    result = Evaluation(score=1.0)
    reasons = []
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
            reasons.append(f"{eval_type}: {reason}")
            continue
        result.details.append({"eval_type": eval_type, "score": score})
        result.score *= score
    if reasons and result.score != 0:
        result.score, result.unscorable = 0.0, "; ".join(reasons)
    return result
