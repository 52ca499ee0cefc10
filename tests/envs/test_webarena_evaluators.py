"""WebArena evaluators on hand-made configs: string_match, url_match, program_html, the judge."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

from agentgym_envs.webarena.evaluators import evaluate, must_include, string_match, url_match
from agentgym_envs.webarena.judge import OpenAIJudge, judge_from_environment


def config(**evaluation: Any) -> dict[str, Any]:
    return {"task_id": 1, "intent": "What is it?", "eval": {"string_note": "", **evaluation}}


class FakeProbe:
    """Pages as a dict: url -> {locator: value}; 'last' is the final page."""

    def __init__(self, url: str, pages: dict[str, dict[str, str]]):
        self.url, self.pages, self.loaded = url, pages, []

    def current_url(self) -> str:
        return self.url

    def select(self, url: str | None, locator: str, prep_actions: list[str]) -> str:
        self.loaded.append(url)
        return self.pages.get(url or "last", {}).get(locator, "")


class FakeJudge:
    def __init__(self, verdict: bool):
        self.verdict, self.questions = verdict, []

    def fuzzy_match(self, question: str, reference: str, answer: str) -> bool:
        self.questions.append(("fuzzy", reference, answer))
        return self.verdict

    def unachievable_match(self, question: str, reason: str, answer: str) -> bool:
        self.questions.append(("ua", reason, answer))
        return self.verdict


def test_exact_match_ignores_case_quotes_and_spaces_only() -> None:
    cfg = config(eval_types=["string_match"], reference_answers={"exact_match": "Quest Lumaflex Band"})
    assert string_match(cfg, ' "quest lumaflex band" ', None) == 1.0
    assert string_match(cfg, "Quest Lumaflex Band.", None) == 0.0
    assert string_match(cfg, "It is the Quest Lumaflex Band", None) == 0.0


def test_must_include_needs_every_phrase_and_tokenizes_single_characters() -> None:
    references = {"must_include": ["Impulse Duffle", "Overnight Duffle"]}
    cfg = config(eval_types=["string_match"], reference_answers=references)
    assert string_match(cfg, "overnight duffle, then impulse duffle", None) == 1.0
    assert string_match(cfg, "Impulse Duffle only", None) == 0.0
    count = config(eval_types=["string_match"], reference_answers={"must_include": ["0"]})
    assert string_match(count, "There are 0 reviews.", None) == 1.0
    assert string_match(count, "There are 10 reviews.", None) == 0.0  # "0" must be a token of its own
    assert must_include("0", "10")  # ... but only for a single one-character reference


def test_fuzzy_match_asks_the_judge_or_is_unscorable() -> None:
    cfg = config(eval_types=["string_match"], reference_answers={"fuzzy_match": ["driving takes 2 minutes"]})
    judge = FakeJudge(True)
    result = evaluate(cfg, "About two minutes by car", FakeProbe("x", {}), judge)
    assert result.score == 1.0 and result.unscorable is None
    assert judge.questions == [("fuzzy", "driving takes 2 minutes", "about two minutes by car")]
    assert evaluate(cfg, "an hour", FakeProbe("x", {}), FakeJudge(False)).score == 0.0
    unjudged = evaluate(cfg, "About two minutes", FakeProbe("x", {}), None)
    assert unjudged.score == 0.0 and "needs a judge" in unjudged.unscorable
    assert evaluate(cfg, "", FakeProbe("x", {}), None).unscorable is None  # an empty answer needs no judge


def test_impossible_task_n_a_scores_without_a_judge_and_checks_the_reason_with_one() -> None:
    cfg = config(eval_types=["string_match"], reference_answers={"fuzzy_match": "N/A"}, string_note="Not sold here")
    assert evaluate(cfg, "N/A", FakeProbe("x", {}), None).score == 1.0
    assert evaluate(cfg, "They do not sell it", FakeProbe("x", {}), None).unscorable is not None
    judge = FakeJudge(True)
    assert evaluate(cfg, "They do not sell it", FakeProbe("x", {}), judge).score == 1.0
    assert judge.questions == [("ua", "Not sold here", "they do not sell it")]


@pytest.mark.parametrize(
    ("reference", "final_url", "score"),
    [
        ("http://gitlab.test/dashboard/todos", "http://gitlab.test/dashboard/todos/", 1.0),
        ("http://gitlab.test/dashboard/todos", "https://gitlab.test/dashboard/todos?sort=new", 1.0),  # scheme ignored
        ("http://gitlab.test/dashboard", "http://gitlab.test/dashboard/todos", 1.0),  # GOLD is a substring of PRED
        ("http://gitlab.test/dashboard/todos", "http://gitlab.test/dashboard", 0.0),
        ("http://shop.test/search?q=usb+wifi", "http://shop.test/search?q=usb+wifi&sort=price", 1.0),
        ("http://shop.test/search?q=usb+wifi", "http://shop.test/search?q=usb", 0.0),
        ("http://shop.test/search?q=usb&cat=2", "http://shop.test/search?cat=2&q=usb", 1.0),
        ("http://map.test/search?query=parking |OR| http://map.test/search?query=garage",
         "http://map.test/search?query=garage", 1.0),
        ("http://shop.test/a?q=x |OR| http://shop.test/b", "http://shop.test/b", 0.0),  # queries are pooled
    ],
)  # fmt: skip
def test_url_match_follows_webarena_gold_in_pred(reference: str, final_url: str, score: float) -> None:
    cfg = config(eval_types=["url_match"], reference_url=reference, url_note="GOLD in PRED")
    assert url_match(cfg, final_url) == score


def test_url_match_with_an_unknown_rule_is_unscorable() -> None:
    cfg = config(eval_types=["url_match"], reference_url="http://a.test/", url_note="EXACT")
    assert "unknown url_note" in evaluate(cfg, "", FakeProbe("http://a.test/", {})).unscorable


def test_program_html_loads_each_url_and_checks_its_contents() -> None:
    order = "document.querySelector('.order-status').outerText"
    cfg = config(
        eval_types=["program_html"],
        program_html=[
            {"url": "http://shop.test/orders/7", "locator": order, "required_contents": {"exact_match": "Canceled"}},
            {"url": "last", "locator": "", "required_contents": {"must_include": ["Canceled |OR| Cancelled", "#7"]}},
        ],
    )
    pages = {"http://shop.test/orders/7": {order: "canceled"}, "last": {"": "<h1>Order #7</h1> Cancelled &amp; gone"}}
    probe = FakeProbe("http://shop.test/orders/7", pages)
    assert evaluate(cfg, "", probe).score == 1.0
    assert probe.loaded == ["http://shop.test/orders/7", None]
    pages["http://shop.test/orders/7"][order] = "Pending"
    assert evaluate(cfg, "", FakeProbe("x", pages)).score == 0.0
    assert evaluate(cfg, "", FakeProbe("x", {"http://shop.test/orders/7": {order: "Canceled"}})).score == 0.0


def test_program_html_helpers_run_by_name_never_by_eval() -> None:
    cfg = config(
        eval_types=["program_html"],
        program_html=[
            {
                "url": "func:reddit_get_post_url('__last_url__')",
                "locator": "document.querySelector('.submission__inner').outerText",
                "required_contents": {"must_include": ["from /f/pics"]},
            }
        ],
    )
    pages = {"http://forum.test/f/pics/12/": {"document.querySelector('.submission__inner').outerText": "From /f/pics"}}
    probe = FakeProbe("http://forum.test/f/pics/12/-/comment/5", pages)
    assert evaluate(cfg, "", probe).score == 1.0 and probe.loaded == ["http://forum.test/f/pics/12/"]
    rest = config(
        eval_types=["program_html"],
        program_html=[{"url": "func:shopping_get_latest_order_url()", "locator": "", "required_contents": {}}],
    )
    assert "needs the shopping site" in evaluate(rest, "", probe).unscorable
    sneaky = config(
        eval_types=["program_html"],
        program_html=[{"url": "func:__import__('os').system('x')", "locator": "", "required_contents": {}}],
    )
    assert "not a plain helper call" in evaluate(sneaky, "", probe).unscorable
    custom = {"my_url": lambda probe, sku: f"http://shop.test/product/{sku}"}
    mine = config(
        eval_types=["program_html"],
        program_html=[{"url": "func:my_url('A-1')", "locator": "", "required_contents": {"must_include": ["ok"]}}],
    )
    assert evaluate(mine, "", FakeProbe("x", {"http://shop.test/product/A-1": {"": "ok"}}), helpers=custom).score == 1


def test_evaluators_combine_by_product() -> None:
    cfg = config(
        eval_types=["string_match", "url_match"],
        reference_answers={"exact_match": "yes"},
        reference_url="http://shop.test/cart",
    )
    assert evaluate(cfg, "yes", FakeProbe("http://shop.test/cart", {})).score == 1.0
    result = evaluate(cfg, "yes", FakeProbe("http://shop.test/", {}))
    assert result.score == 0.0 and [d["score"] for d in result.details] == [1.0, 0.0]


class _ChatHandler(BaseHTTPRequestHandler):
    replies: list[str] = []
    requests: list[dict] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), "body": body})
        payload = json.dumps({"choices": [{"message": {"content": type(self).replies.pop(0)}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        pass


def test_openai_compatible_judge_talks_to_the_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    server = HTTPServer(("127.0.0.1", 0), _ChatHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        base = f"http://127.0.0.1:{server.server_port}/v1"
        _ChatHandler.replies = ["The answer is Correct.", "Verdict: partially correct", "[same]"]
        judge = OpenAIJudge(base, model="judge-model", api_key="k")
        assert judge.fuzzy_match("q", "ref", "answer") is True
        assert judge.fuzzy_match("q", "ref", "answer") is False
        assert judge.unachievable_match("q", "reason", "report") is True
        request = _ChatHandler.requests[0]
        assert request["path"] == "/v1/chat/completions" and request["auth"] == "Bearer k"
        assert request["body"]["model"] == "judge-model" and request["body"]["temperature"] == 0
        assert "ref" in request["body"]["messages"][-1]["content"]
        monkeypatch.setenv("AGENTGYM_JUDGE_BASE_URL", base)
        monkeypatch.setenv("AGENTGYM_JUDGE_MODEL", "m2")
        assert judge_from_environment().model == "m2"
        _ChatHandler.replies = ["no verdict here"]
        cfg = config(eval_types=["string_match"], reference_answers={"fuzzy_match": ["x"]})
        assert "no verdict" in evaluate(cfg, "y", FakeProbe("u", {}), judge).unscorable
    finally:
        server.shutdown()
    unreachable = OpenAIJudge(base, model="m", timeout=2)
    assert "no usable reply" in evaluate(cfg, "y", FakeProbe("u", {}), unreachable).unscorable
    monkeypatch.delenv("AGENTGYM_JUDGE_BASE_URL")
    assert judge_from_environment() is None
