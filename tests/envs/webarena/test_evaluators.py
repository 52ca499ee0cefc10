"""WebArena evaluators on hand-made configs: string_match, url_match, program_html, the judge."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs

import pytest

from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.scoring.evaluators import Unscorable, evaluate, must_include, string_match, url_match
from agentgym_envs.webarena.scoring.functions import EmbeddedShop, MagentoShop, shop_helpers, site_helpers
from agentgym_envs.webarena.scoring.judge import OpenAIJudge, judge_from_environment
from agentgym_envs.webarena.scoring.tokens import word_tokens
from agentgym_envs.webarena.sites.shop.db import ShopDB
from agentgym_envs.webarena.tasks.catalog import Task


def config(**evaluation: Any) -> dict[str, Any]:
    return {"task_id": 1, "intent": "What is it?", "eval": {"string_note": "", **evaluation}}


class FakeProbe:
    """A stand-in for the browser: pages as a dict url -> {locator: value}; a load moves the
    evaluation to the loaded page, as the real session does."""

    def __init__(self, url: str, pages: dict[str, dict[str, Any]]):
        self.url, self.pages, self.loaded = url, pages, []

    def current_url(self) -> str:
        return self.url

    def select(self, url: str | None, locator: str, prep_actions: list[str]) -> Any:
        if url is not None:
            self.url = url
            self.loaded.append(url)
        return self.pages.get(self.url, {}).get(locator, "")


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


def test_program_html_loads_each_url_and_last_stays_on_the_page_loaded() -> None:
    order = "document.querySelector('.order-status').outerText"
    cfg = config(
        eval_types=["program_html"],
        program_html=[
            {"url": "http://shop.test/orders/7", "locator": order, "required_contents": {"exact_match": "Canceled"}},
            {"url": "last", "locator": "", "required_contents": {"must_include": ["Canceled |OR| Cancelled", "#7"]}},
        ],
    )
    pages = {
        "http://shop.test/orders/7": {order: "canceled", "": "<h1>Order #7</h1> Cancelled &amp; gone"},
        "http://shop.test/": {"": "the agent's page: Order #7 Canceled"},
    }
    probe = FakeProbe("http://shop.test/", pages)
    assert evaluate(cfg, "", probe).score == 1.0
    assert probe.loaded == ["http://shop.test/orders/7"]  # "last" read the order page, without reloading it
    pages["http://shop.test/orders/7"][""] = "<h1>Order #7</h1> Pending"
    assert evaluate(cfg, "", FakeProbe("http://shop.test/", pages)).score == 0.0  # not the agent's page


def test_program_html_on_an_origin_the_task_does_not_list_is_unscorable() -> None:
    """The browser may not load it, so the check is neither passed nor failed (was a plain 0)."""
    from agentgym_envs.webarena.browser.safety import OriginPolicy
    from agentgym_envs.webarena.browser.session import BrowserSession

    session = object.__new__(BrowserSession)  # the origin check comes before any page is opened
    session.policy = OriginPolicy(["http://shop.test"])
    check = {"url": "http://elsewhere.test/admin", "locator": "", "required_contents": {"must_include": ["x"]}}
    result = evaluate(config(eval_types=["program_html"], program_html=[check]), "", session)
    assert result.score == 0.0 and result.details == [
        {"eval_type": "program_html", "score": None, "unscorable": result.details[0]["unscorable"]}
    ]
    assert "http://elsewhere.test/admin" in result.unscorable and "does not list" in result.unscorable


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
    hostile = FakeProbe("http://forum.test/f/pics/12/-/x'),__import__('os').system('x", pages)
    assert evaluate(cfg, "", hostile).score == 1.0  # the agent's URL is an argument, never code
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


# ---- what we do without a judge, and how undecided evaluators combine ------------------------------
def test_without_a_judge_an_empty_answer_scores_zero_and_a_reason_is_unscorable() -> None:
    na = config(eval_types=["string_match"], reference_answers={"fuzzy_match": "N/A"}, string_note="Not sold here")
    empty = evaluate(na, "", FakeProbe("x", {}))
    assert empty.score == 0.0 and empty.unscorable is None
    reason = evaluate(na, "N/A: the shop does not sell it", FakeProbe("x", {}))
    assert reason.score == 0.0 and "needs a judge" in reason.unscorable
    fuzzy = config(eval_types=["string_match"], reference_answers={"fuzzy_match": ["3h 30min"]})
    assert evaluate(fuzzy, "  ", FakeProbe("x", {})).unscorable is None  # blank is empty


def test_an_undecided_evaluator_does_not_matter_once_another_scored_zero() -> None:
    cfg = config(
        eval_types=["string_match", "url_match"],
        reference_answers={"fuzzy_match": ["two minutes"]},
        reference_url="http://map.test/directions",
    )
    wrong_page = evaluate(cfg, "2 minutes", FakeProbe("http://map.test/search", {}))
    assert wrong_page.score == 0.0 and wrong_page.unscorable is None
    assert wrong_page.details == [
        {"eval_type": "string_match", "score": None, "unscorable": wrong_page.details[0]["unscorable"]},
        {"eval_type": "url_match", "score": 0.0},
    ]
    right_page = evaluate(cfg, "2 minutes", FakeProbe("http://map.test/directions", {}))
    assert right_page.score == 0.0 and "needs a judge" in right_page.unscorable
    # a fuzzy_match after a failed exact_match asks no judge: the product is 0 whatever it says
    both = config(eval_types=["string_match"], reference_answers={"exact_match": "x", "fuzzy_match": ["y"]})
    judge = FakeJudge(True)
    assert evaluate(both, "z", FakeProbe("u", {}), judge).score == 0.0 and judge.questions == []


def test_word_tokens_split_as_nltk_does() -> None:
    # Expected lists are NLTK 3.9's word_tokenize (Punkt without trained parameters) on the same texts.
    assert word_tokens("there are 10 orders, (0 canceled) and 1/2 shipped.") == [
        "there", "are", "10", "orders", ",", "(", "0", "canceled", ")", "and", "1/2", "shipped", ".",
    ]  # fmt: skip
    assert word_tokens('she said "it\'s 5:30" -- then left...') == [
        "she", "said", "``", "it", "'s", "5:30", "''", "--", "then", "left", "...",
    ]  # fmt: skip
    assert word_tokens("it is 5. the end") == ["it", "is", "5.", "the", "end"]
    assert word_tokens("it is 5. 6 more") == ["it", "is", "5", ".", "6", "more"]
    assert word_tokens("$5, 50% off; a+b #1!") == ["$", "5", ",", "50", "%", "off", ";", "a+b", "#", "1", "!"]


# ---- func: helpers over the shop's data ------------------------------------------------------------
class _MagentoStandIn(BaseHTTPRequestHandler):
    """A stand-in for Magento's REST API (the real one is not available here): the three calls
    WebArena's helpers make, with the response shapes Magento documents."""

    requests: list[tuple[str, str, str | None, Any]] = []
    reviews: dict[str, list[dict[str, Any]]] = {}

    def _reply(self, status: int, payload: Any) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(("POST", self.path, None, body))
        if self.path == "/rest/default/V1/integration/admin/token" and body == {"username": "admin", "password": "pw"}:
            self._reply(200, "tok123")
        else:
            self._reply(401, {"message": "The account sign-in was incorrect"})

    def do_GET(self) -> None:
        auth = self.headers.get("Authorization")
        type(self).requests.append(("GET", self.path, auth, None))
        if auth != "Bearer tok123":
            return self._reply(401, {"message": "not authorized"})
        path = self.path.partition("?")[0]
        if path == "/rest/V1/orders":
            return self._reply(200, {"items": [{"increment_id": "000000190", "entity_id": 12}], "total_count": 300})
        sku = path.removeprefix("/rest/V1/products/").removesuffix("/reviews")
        if sku in type(self).reviews:
            return self._reply(200, type(self).reviews[sku])
        self._reply(404, {"message": "The product that was requested doesn't exist."})

    def log_message(self, *args: Any) -> None:
        pass


def _review(nickname: str, percent: int) -> dict[str, Any]:
    return {"nickname": nickname, "ratings": [{"rating_name": "Rating", "percent": percent, "value": percent // 20}]}


def test_shopping_helpers_call_magentos_rest_api_as_webarena_does(monkeypatch: pytest.MonkeyPatch) -> None:
    server = HTTPServer(("127.0.0.1", 0), _MagentoStandIn)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _MagentoStandIn.reviews = {"B07X": [_review("Ann", 100), _review("Bob", 60)], "EMPTY": []}
    try:
        base = f"http://127.0.0.1:{server.server_port}"
        monkeypatch.setenv("AGENTGYM_SHOPPING_ADMIN_PASSWORD", "pw")
        helpers = site_helpers({"shopping": base + "/"})
        assert helpers["shopping_get_latest_order_url"](None) == f"{base}/sales/order/view/order_id/190/"
        token_call, orders_call = _MagentoStandIn.requests[:2]
        assert token_call == (
            "POST",
            "/rest/default/V1/integration/admin/token",
            None,
            {"username": "admin", "password": "pw"},
        )
        assert orders_call[2] == "Bearer tok123" and parse_qs(orders_call[1].partition("?")[2]) == {
            "searchCriteria[sortOrders][0][field]": ["created_at"],
            "searchCriteria[sortOrders][0][direction]": ["DESC"],
            "searchCriteria[pageSize]": ["1"],
        }
        assert helpers["shopping_get_sku_latest_review_author"](None, "B07X") == "Bob"  # the list's last
        assert helpers["shopping_get_sku_latest_review_rating"](None, "B07X") == "60"
        assert helpers["shopping_get_sku_latest_review_rating"](None, "EMPTY") == ""
        cfg = config(
            eval_types=["program_html"],
            program_html=[
                {"url": "last", "locator": "func:shopping_get_sku_latest_review_rating('B07X')",
                 "required_contents": {"exact_match": "60"}},
                {"url": "last", "locator": "func:shopping_get_sku_latest_review_author('NOPE')",
                 "required_contents": {"exact_match": ""}},
            ],
        )  # fmt: skip
        result = evaluate(cfg, "", FakeProbe("x", {}), helpers=helpers)
        assert result.score == 0.0 and "answered 404 to /rest/V1/products/NOPE/reviews" in result.unscorable
        monkeypatch.setenv("AGENTGYM_SHOPPING_ADMIN_PASSWORD", "wrong")
        with pytest.raises(Unscorable, match="answered 401 to /rest/default/V1/integration/admin/token"):
            site_helpers({"shopping": base})["shopping_get_latest_order_url"](None)
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(Unscorable, match="REST API at"):
        MagentoShop(base).latest_order_url()  # nothing listens there any more
    with pytest.raises(Unscorable, match="needs the shopping site"):
        site_helpers({})["shopping_get_latest_order_url"](None)


def test_shopping_helpers_read_the_embedded_shop() -> None:
    db = ShopDB()
    try:
        shop = EmbeddedShop(db, "http://shop.test")
        helpers = shop_helpers(shop)
        seeded = helpers["shopping_get_latest_order_url"](None)
        assert seeded == f"http://shop.test/orders/{db.latest_order_number()}"
        db.add_to_cart("OF-4001", 1)
        number = db.place_order("Standard", "Ada", "1 Road", "Town", "12345")
        assert helpers["shopping_get_latest_order_url"](None) == f"http://shop.test/orders/{number}" != seeded
        assert [r["nickname"] for r in shop.reviews("EL-1001")] == ["Priya Natarajan", "Tom Becker"]  # oldest first
        db.add_review("EL-1001", "Ada", 3, "Fine", "It works.")
        assert helpers["shopping_get_sku_latest_review_author"](None, "EL-1001") == "Ada"
        assert helpers["shopping_get_sku_latest_review_rating"](None, "EL-1001") == "60"
        assert helpers["shopping_get_sku_latest_review_rating"](None, "EL-1002") == ""  # no reviews
        with pytest.raises(Unscorable, match="no product with SKU 'NOPE'"):
            helpers["shopping_get_sku_latest_review_author"](None, "NOPE")
    finally:
        db.close()


# ---- in the browser, on the embedded shop ------------------------------------------------------------
@pytest.fixture(scope="module")
def shop_env() -> WebArenaEnv:
    env = WebArenaEnv()
    yield env
    env.close()


def run_checks(env: WebArenaEnv, task_id: str, before_stop: Any = None, **evaluation: Any) -> dict[str, Any]:
    """Reset a hand-made task on the embedded shop (added to the env's catalog, test-only), call
    `before_stop(db)`, stop without an answer, and return the info."""
    config = {
        "sites": ["shopping"], "task_id": task_id, "require_login": False, "storage_state": None,
        "start_url": "__SHOPPING__", "geolocation": None, "intent": "Check the evaluators", "eval": evaluation,
    }  # fmt: skip
    env.catalog.by_id[task_id] = Task(task_id, "test", config)
    env.reset(options={"task_id": task_id})
    if before_stop is not None:
        before_stop(env._embedded.database("shopping"))
    observation, reward, terminated, _, info = env.step("stop []")
    assert terminated and "URL: http://shop.test/" in observation  # the agent's tab stayed where it was
    info["reward"] = reward
    return info


def check(url: str, locator: str, prep: list[str] | None = None, **required: Any) -> dict[str, Any]:
    return {"url": url, "locator": locator, "required_contents": required, **({"prep_actions": prep} if prep else {})}


def test_program_html_in_the_browser_runs_on_the_page_the_evaluation_is_on(shop_env: WebArenaEnv) -> None:
    h1 = "document.querySelector('h1').outerText"
    checks = [
        check("__SHOPPING__/cart", h1, exact_match="Shopping Cart"),
        check("last", "", must_include=["<h1>Shopping Cart</h1>"]),  # the cart, not the agent's home page
        check("last", "document.querySelector('#nothing-here')", exact_match="None"),  # null reads 'None'
        check("last", "[...document.querySelectorAll('h1')].map(e => e.outerText)", exact_match="['Shopping Cart']"),
        check(
            "last",
            "document.body.dataset.mark",
            ["document.body.dataset.mark = 'first'", "no_such_name.x = 1", "document.body.dataset.mark = 'third'"],
            exact_match="first",  # the prep actions end at the first that throws
        ),
    ]
    info = run_checks(
        shop_env, "eval-page", eval_types=["program_html", "url_match"], program_html=checks,
        reference_url="__SHOPPING__/cart",  # url_match after program_html sees the page it loaded
    )  # fmt: skip
    assert info["success"], info["evaluation"]
    home = [check("__SHOPPING__/cart", h1, exact_match="Shopping Cart"), check("last", "", must_include=["Welcome"])]
    info = run_checks(shop_env, "eval-home", eval_types=["program_html"], program_html=home)
    assert info["evaluation"] == [{"eval_type": "program_html", "score": 0.0}]


def test_shopping_func_helpers_read_the_embedded_shop_in_an_episode(shop_env: WebArenaEnv) -> None:
    checks = [
        check("func:shopping_get_latest_order_url()", "", must_include=["Pending", "Bamboo Cutting Board"]),
        check("last", "func:shopping_get_sku_latest_review_author('EL-1002')", exact_match="Ada"),
        check("last", "func:shopping_get_sku_latest_review_rating('EL-1002')", exact_match="80"),
    ]

    def order_and_review(db: ShopDB) -> None:
        db.add_to_cart("KI-2001", 1)
        db.place_order("Standard", "Ada", "1 Road", "Town", "12345")
        db.add_review("EL-1002", "Ada", 4, "Nice", "Types well.")

    info = run_checks(shop_env, "eval-shop", order_and_review, eval_types=["program_html"], program_html=checks)
    assert info["success"], info["evaluation"]
    info = run_checks(shop_env, "eval-shop", eval_types=["program_html"], program_html=checks)  # restored: no review
    assert info["reward"] == 0 and info["unscorable"] is None
