"""Differential test: our WebArena evaluators score hand-made cases as WebArena's own harness does.

Each case is a task config's `eval`, an answer, the agent's final page and the pages a check may
load (a stand-in for the browser: per URL, what each locator gives), and a stand-in judge. The
`expected` scores are literal values that WebArena's `evaluation_harness/evaluators.py` returned
for these cases (run once outside this repository against the same stand-in pages, with NLTK's
tokenizers); "crash" marks a config WebArena's code raises on, which must be unscorable here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import pytest

from agentgym_envs.webarena.scoring.evaluators import evaluate

#: A locator value that throws in the page.
THROWS = "<throws>"
#: The key of a stand-in page's GitLab members table: [[account, role], ...].
MEMBERS = "<members>"


@dataclass(frozen=True)
class Case:
    name: str
    eval: dict[str, Any]
    expected: float | str
    answer: str = ""
    url: str = "http://site.test/start"
    pages: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The stand-in judge says yes when the answer it is shown contains one of these (None: no judge).
    judge: tuple[str, ...] | None = None


class StandInBrowser:
    """A stand-in for the browser (PageProbe): pages are dicts, the evaluation moves between them."""

    def __init__(self, url: str, pages: dict[str, dict[str, Any]]):
        self.url, self.pages, self.loads = url, pages, []

    def current_url(self) -> str:
        return self.url

    def select(self, url: str | None, locator: str, prep_actions: list[str]) -> Any:
        if url is not None:
            self.url = url
            self.loads.append(url)
        page = self.pages.get(self.url, {})
        if not locator.strip():
            return page.get("", "<html></html>")
        if "gl-avatar-labeled-sublabel" in locator:
            account = re.search(r'indexOf\("(.*?)"\)', locator).group(1)
            roles = dict(page.get(MEMBERS, []))
            return roles.get(account, "")
        value = page.get(locator, THROWS)
        return "" if value == THROWS else value


class StandInJudge:
    def __init__(self, accepts: tuple[str, ...]):
        self.accepts = accepts

    def fuzzy_match(self, question: str, reference: str, answer: str) -> bool:
        return any(word in answer for word in self.accepts)

    def unachievable_match(self, question: str, reason: str, answer: str) -> bool:
        return any(word in answer for word in self.accepts)


def S(expected: float | str, answer: str, references: dict[str, Any], **kw: Any) -> Case:
    note = kw.pop("string_note", "")
    evaluation = {"eval_types": ["string_match"], "reference_answers": references, "string_note": note}
    return Case(kw.pop("name", answer), evaluation, expected, answer=answer, **kw)


def U(expected: float | str, reference: str, url: str, **kw: Any) -> Case:
    evaluation = {"eval_types": ["url_match"], "reference_url": reference, "url_note": "GOLD in PRED", **kw}
    return Case(f"{reference} vs {url}", evaluation, expected, url=url)


def H(expected: float | str, name: str, checks: list[dict[str, Any]], pages: dict, url: str = "", **kw: Any) -> Case:
    evaluation = {"eval_types": kw.pop("eval_types", ["program_html"]), "program_html": checks, **kw}
    return Case(name, evaluation, expected, url=url or "http://site.test/start", pages=pages)


def check(url: str, locator: str, **required: Any) -> dict[str, Any]:
    return {"url": url, "locator": locator, "required_contents": required}


JS = "document.querySelector('.status').outerText"
POST = "http://forum.test/f/pics/12/"
MEMBERS_URL = "http://git.test/team/site/-/project_members"

STRING_CASES = [
    # exact_match: cleaning (strip, one pair of quotes, lower-case), the answer cleaned twice
    S(1.0, "Quest Lumaflex Band", {"exact_match": "quest lumaflex band"}),
    S(1.0, ' "Quest Lumaflex Band" ', {"exact_match": "Quest Lumaflex Band"}),
    S(1.0, "\"'yes'\"", {"exact_match": "yes"}),
    S(0.0, "\"'yes'\"", {"exact_match": "\"'yes'\""}),
    S(1.0, "'yes'", {"exact_match": '"yes"'}),
    S(1.0, '" yes "', {"exact_match": "yes"}),
    S(0.0, "'yes\"", {"exact_match": "yes"}),
    S(1.0, "'", {"exact_match": ""}),
    S(1.0, "", {"exact_match": '""'}),
    S(0.0, "Yes.", {"exact_match": "yes"}),
    S(0.0, "It is yes", {"exact_match": "yes"}),
    S(1.0, "  $34.99\n", {"exact_match": " $34.99 "}),
    # must_include: substrings, except a single one-character phrase, which must be a word token
    S(1.0, "Overnight Duffle, then Impulse Duffle", {"must_include": ["impulse duffle", "overnight duffle"]}),
    S(0.0, "Impulse Duffle only", {"must_include": ["impulse duffle", "overnight duffle"]}),
    S(1.0, "There are 0 reviews", {"must_include": ["0"]}),
    S(0.0, "There are 10 reviews", {"must_include": ["0"]}),
    S(0.0, "The score was 1/0", {"must_include": ["0"]}),
    S(0.0, "It ended 1-0", {"must_include": ["0"]}),
    S(1.0, "The count is 0.", {"must_include": ["0"]}),
    S(0.0, "The count is 0. that is all", {"must_include": ["0"]}),
    S(1.0, "The count is 5. 6 were returned", {"must_include": ["5"]}),
    S(1.0, "Canceled orders (0) shown", {"must_include": ["0"]}),
    S(1.0, "It costs $0 today", {"must_include": ["0"]}),
    S(0.0, "About 2,000 people", {"must_include": ["2"]}),
    S(1.0, "Answers: 2, 3", {"must_include": ["2"]}),
    S(0.0, "Opens at 5:30", {"must_include": ["5"]}),
    S(1.0, "Rated 5: great", {"must_include": ["5"]}),
    S(1.0, "A 5% discount", {"must_include": ["5"]}),
    S(1.0, "Item #1 it is", {"must_include": ["1"]}),
    S(0.0, "The 2nd one", {"must_include": ["2"]}),
    S(0.0, "About 0.5 kg", {"must_include": ["0"]}),
    S(1.0, "I count 5!", {"must_include": ["5"]}),
    S(1.0, "Answer: '5'", {"must_include": ["5"]}),
    S(1.0, 'She said "5"', {"must_include": ["5"]}),
    S(1.0, "grade a", {"must_include": ["A"]}),
    S(0.0, "grade a+", {"must_include": ["a"]}),
    S(1.0, "10", {"must_include": ["0", "1"]}),  # two phrases: substrings, no tokens
    S(1.0, "100", {"must_include": ["10"]}),
    S(1.0, "'0'", {"must_include": ["0"]}),
    S(0.0, "", {"must_include": ["0"]}),
    S("crash", "0", {"must_include": "0"}),
    # fuzzy_match with a judge, N/A (unachievable) tasks, several approaches
    S(1.0, "About two minutes by car", {"fuzzy_match": ["driving takes 2 minutes"]}, judge=("two minutes",)),
    S(0.0, "An hour", {"fuzzy_match": ["driving takes 2 minutes"]}, judge=("two minutes",)),
    S(0.0, "two minutes", {"fuzzy_match": ["2 minutes", "by car"]}, judge=("by car",)),
    S(0.0, "", {"fuzzy_match": ["2 minutes"]}, judge=("2 minutes",)),
    S(1.0, "N/A", {"fuzzy_match": "N/A"}, string_note="not sold", judge=()),
    S(1.0, " 'n/a' ", {"fuzzy_match": "N/A"}, string_note="not sold", judge=()),
    S(1.0, "N/A: the shop does not sell it", {"fuzzy_match": "N/A"}, string_note="not sold", judge=("not sell",)),
    S(0.0, "N/A: the page did not load", {"fuzzy_match": "N/A"}, string_note="not sold", judge=("not sell",)),
    S(0.0, "", {"fuzzy_match": "N/A"}, string_note="not sold", judge=("not sell",)),
    S(
        1.0,
        "Hyatt Regency, 3h 30min",
        {"must_include": ["Hyatt Regency"], "fuzzy_match": ["Time: 3h 30min"]},
        judge=("3h 30min",),
    ),
    S(0.0, "Marriott, 3h 30min", {"must_include": ["Hyatt Regency"], "fuzzy_match": ["3h 30min"]}, judge=("3h",)),
    S(1.0, "N/A: it does not sell it", {"exact_match": "foo", "fuzzy_match": "N/A"}, judge=("not sell",)),
    S(0.0, "N/A: it does not sell it", {"fuzzy_match": "N/A", "exact_match": "foo"}, judge=("not sell",)),
    S(1.0, "yes", {"exact_match": "yes", "regex_match": "^no$"}),
]

URL_CASES = [
    U(1.0, "http://shop.test/cart", "http://shop.test/cart"),
    U(1.0, "http://shop.test/cart", "http://shop.test/cart/"),
    U(1.0, "http://shop.test/cart/", "http://shop.test/cart"),
    U(1.0, "http://shop.test/result?q=x", "http://shop.test/result/?q=x"),
    U(0.0, "http://shop.test/result/?q=x", "http://shop.test/result?q=x"),
    U(1.0, "http://shop.test/result/?q=x", "http://shop.test/result/?q=x&page=2"),
    U(1.0, "http://shop.test/cart", "https://shop.test/cart"),
    U(1.0, "http://shop.test/dashboard", "http://shop.test/dashboard/todos"),
    U(0.0, "http://shop.test/board", "http://shop.test/dashboard"),
    U(0.0, "http://shop.test/dashboard/todos", "http://shop.test/dashboard"),
    U(0.0, "http://shop.test/Cart", "http://shop.test/cart"),
    U(1.0, "http://shop.test/search?q=usb+wifi", "http://shop.test/search?q=usb%20wifi&sort=price"),
    U(0.0, "http://shop.test/search?q=usb+wifi", "http://shop.test/search?q=usb"),
    U(1.0, "http://shop.test/search?q=usb&cat=2", "http://shop.test/search?cat=2&q=usb"),
    U(0.0, "http://shop.test/search?q=usb&cat=2", "http://shop.test/search?q=usb"),
    U(1.0, "http://map.test/s?query=parking |OR| http://map.test/s?query=garage", "http://map.test/s?query=garage"),
    U(0.0, "http://shop.test/a?q=x |OR| http://shop.test/b", "http://shop.test/b"),
    U(1.0, "http://shop.test/a?q=x |OR| http://shop.test/b", "http://shop.test/b?q=x"),
    U(1.0, "http://shop.test/search?q=", "http://shop.test/search"),
    U(1.0, "http://shop.test/search?a=1&a=2", "http://shop.test/search?a=2"),
    U(1.0, "http://shop.test/page#reviews", "http://shop.test/page"),
    U(1.0, "http://shop.test/x", "http://shop.test/x#top"),
    U(1.0, "http://shop.test/x?q=1", "http://shop.test/x?q=1/"),
    Case("an unknown url_note", {"eval_types": ["url_match"], "reference_url": "http://a.test/", "url_note": ""},
         "crash"),
    Case("no url_note: GOLD in PRED", {"eval_types": ["url_match"], "reference_url": "http://a.test/"}, 1.0,
         url="http://a.test/x"),
]  # fmt: skip

HTML_CASES = [
    H(1.0, "a URL's element, exact", [check("http://shop.test/o/7", JS, exact_match="Canceled")],
      {"http://shop.test/o/7": {JS: "canceled"}}),
    H(0.0, "a URL's element differs", [check("http://shop.test/o/7", JS, exact_match="Canceled")],
      {"http://shop.test/o/7": {JS: "Pending"}}),
    H(1.0, "last: the agent's page, alternatives", [check("last", "", must_include=["Canceled |OR| Cancelled", "#7"])],
      {"http://site.test/start": {"": "<h1>Order #7</h1> Cancelled"}}),
    H(0.0, "last after a check loaded a URL runs on that page",
      [check("http://shop.test/o/7", JS, exact_match="Canceled"), check("last", "", must_include=["Agent page"])],
      {"http://shop.test/o/7": {JS: "Canceled", "": "order page"}, "http://site.test/start": {"": "Agent page"}}),
    H(1.0, "last after a check loaded a URL: that page's content",
      [check("http://shop.test/o/7", JS, exact_match="Canceled"), check("last", "", must_include=["order page"])],
      {"http://shop.test/o/7": {JS: "Canceled", "": "order page"}, "http://site.test/start": {"": "Agent page"}}),
    H(1.0, "func: reddit post URL of a comment",
      [check("func:reddit_get_post_url('__last_url__')", JS, must_include=["Posted"])],
      {POST: {JS: "Posted in /f/pics"}}, url="http://forum.test/f/pics/12/-/comment/5"),
    H(1.0, "func: twice, the second from the page the first loaded",
      [check("func:reddit_get_post_url('__last_url__')", JS, must_include=["posted"]),
       check("func:reddit_get_post_url('__last_url__')", "", must_include=["body"])],
      {POST: {JS: "Posted", "": "the body"}}, url="http://forum.test/f/pics/12/-/comment/5"),
    H(0.0, "func: a URL that is no post stays",
      [check("func:reddit_get_post_url('__last_url__')", JS, must_include=["Posted"])],
      {POST: {JS: "Posted"}}, url="http://forum.test/user/bob"),
    H(1.0, "url_match after program_html sees the page it loaded",
      [check("http://shop.test/o/7", JS, exact_match="Canceled")],
      {"http://shop.test/o/7": {JS: "Canceled"}}, eval_types=["program_html", "url_match"],
      reference_url="http://shop.test/o/7", url="http://site.test/elsewhere"),
    H(0.0, "url_match before program_html sees the agent's page",
      [check("http://shop.test/o/7", JS, exact_match="Canceled")],
      {"http://shop.test/o/7": {JS: "Canceled"}}, eval_types=["url_match", "program_html"],
      reference_url="http://shop.test/o/7", url="http://site.test/elsewhere"),
    H(1.0, "JS null reads 'None'", [check("last", JS, exact_match="None")], {"http://site.test/start": {JS: None}}),
    H(0.0, "JS null is not empty", [check("last", JS, exact_match="")], {"http://site.test/start": {JS: None}}),
    H(1.0, "JS true reads 'True'", [check("last", JS, exact_match="true")], {"http://site.test/start": {JS: True}}),
    H(1.0, "JS number", [check("last", JS, exact_match="3")], {"http://site.test/start": {JS: 3}}),
    H(1.0, "JS array as Python writes it", [check("last", JS, must_include=["['a', 'b']"])],
      {"http://site.test/start": {JS: ["a", "b"]}}),
    H(0.0, "JS array is no comma list", [check("last", JS, exact_match="a, b")],
      {"http://site.test/start": {JS: ["a", "b"]}}),
    H(1.0, "JS that throws reads ''", [check("last", JS, exact_match="")], {"http://site.test/start": {}}),
    H(0.0, "JS that throws includes nothing", [check("last", JS, must_include=["x"])], {"http://site.test/start": {}}),
    H(1.0, "entities unescaped", [check("last", JS, must_include=["Tom & Jerry"])],
      {"http://site.test/start": {JS: "Tom &amp; Jerry"}}),
    H(1.0, "exact_match cleans quotes", [check("last", JS, exact_match="canceled")],
      {"http://site.test/start": {JS: " 'Canceled' "}}),
    H(1.0, "must_include never tokenises", [check("last", JS, must_include=["0"])],
      {"http://site.test/start": {JS: "10 items"}}),
    H(0.0, "every must_include item", [check("last", JS, must_include=["a", "z"])],
      {"http://site.test/start": {JS: "abc"}}),
    H(1.0, "exact_match wins over must_include", [check("last", JS, exact_match="abc", must_include=["z"])],
      {"http://site.test/start": {JS: "abc"}}),
    H(1.0, "gitlab member role", [check(MEMBERS_URL, "func:gitlab_get_project_memeber_role(__page__, 'byteblaze')",
                                        exact_match="Maintainer")],
      {MEMBERS_URL: {MEMBERS: [["@abisubramanya27", "Owner"], ["@byteblaze", "Maintainer"]]}}),
    H(0.0, "gitlab member role of someone absent",
      [check(MEMBERS_URL, "func:gitlab_get_project_memeber_role(__page__, 'primer')", exact_match="Developer")],
      {MEMBERS_URL: {MEMBERS: [["@byteblaze", "Maintainer"]]}}),
    H(1.0, "gitlab role of someone absent is ''",
      [check(MEMBERS_URL, "func:gitlab_get_project_memeber_role(__page__, 'primer')", exact_match="")],
      {MEMBERS_URL: {MEMBERS: [["@byteblaze", "Maintainer"]]}}),
    H("crash", "an unknown locator", [check("last", "  document.title", exact_match="x")], {}),
    H("crash", "unknown required contents", [check("last", "", regex="x")], {}),
]  # fmt: skip

COMBINED_CASES = [
    Case("string and url both hold",
         {"eval_types": ["string_match", "url_match"], "reference_answers": {"exact_match": "yes"},
          "reference_url": "http://shop.test/cart"}, 1.0, answer="yes", url="http://shop.test/cart"),
    Case("string holds, url does not",
         {"eval_types": ["string_match", "url_match"], "reference_answers": {"exact_match": "yes"},
          "reference_url": "http://shop.test/cart"}, 0.0, answer="yes", url="http://shop.test/"),
    Case("string_match listed twice", {"eval_types": ["string_match", "string_match"],
                                       "reference_answers": {"must_include": ["a"]}}, 1.0, answer="a bc"),
]  # fmt: skip

CASES = STRING_CASES + URL_CASES + HTML_CASES + COMBINED_CASES


def config_of(case: Case) -> dict[str, Any]:
    return {"task_id": 1, "intent": "What is it?", "eval": case.eval}


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name[:60])
def test_scores_as_webarena_does(case: Case) -> None:
    judge = StandInJudge(case.judge) if case.judge is not None else None
    result = evaluate(config_of(case), case.answer, StandInBrowser(case.url, case.pages), judge)
    if case.expected == "crash":
        assert result.unscorable is not None and result.score == 0.0
    else:
        assert result.unscorable is None, result.unscorable
        assert result.score == case.expected


def test_every_evaluator_has_many_cases() -> None:
    assert len(STRING_CASES) >= 40 and len(URL_CASES) >= 20 and len(HTML_CASES) >= 20
