"""WebArena in a real Chromium: each action kind, evaluators on hand-made configs, the bundled tasks and
their expert, database restore, safety routing, shared browser with isolated contexts."""

from __future__ import annotations

import http.client
import json
import re
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.sites.server import SECRET_COOKIE, EmbeddedServer
from agentgym_envs.webarena.sites.shop.app import create_app
from agentgym_envs.webarena.sites.shop.db import ShopDB
from agentgym_wrappers import MultiTurnWrapper


@pytest.fixture(scope="module")
def env() -> WebArenaEnv:
    env = gym.make("AgentGym/WebArena-v0").unwrapped
    yield env
    env.close()


def element(env: WebArenaEnv, role: str, name: str) -> int:
    found = env.find_element(role, name)
    assert found is not None, f"no {role} {name!r} on {env._view.url}"
    return found


def page_eval(env: WebArenaEnv, script: str) -> Any:
    """Run JavaScript in the agent's current page (test-only peek behind the observation)."""
    return env._manager.call(lambda: env._session.page.evaluate(script))


def step(env: WebArenaEnv, action: str) -> tuple[str, dict[str, Any]]:
    observation, _, _, _, info = env.step(action)
    return observation, info


def test_observation_has_tabs_tree_url_objective_and_previous_action(env: WebArenaEnv) -> None:
    observation, info = env.reset(options={"task_id": "0"})
    lines = observation.splitlines()
    assert lines[:2] == ["OBSERVATION:", "Tab 0 (current): Home | Loopback Market"]
    assert re.search(r"^\s*\[\d+\] searchbox 'Search products'$", observation, re.MULTILINE)
    assert lines[-3:] == [
        "URL: http://shop.test/",
        "OBJECTIVE: What is the price of the Aurora Desk Lamp?",
        "PREVIOUS ACTION: None",
    ]
    assert info["category"] == "shopping" and info["instruction"].startswith("What is the price")
    assert info["available_actions"] is None and info["eval_types"] == ["string_match"]
    ids = [int(i) for i in re.findall(r"^\s*\[(\d+)\]", observation, re.MULTILINE)]
    assert ids == list(range(1, len(ids) + 1))


def test_type_press_and_click(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    search = element(env, "searchbox", "Search products")
    observation, info = step(env, f"type [{search}] [desk lamp] [0]")
    assert info["valid_action"] and info["url"] == "http://shop.test/"  # no Enter: still home
    assert f"[{search}] searchbox 'Search products' focused: desk lamp" in observation
    observation, info = step(env, "press [Enter]")
    assert info["valid_action"] and info["url"] == "http://shop.test/search?q=desk+lamp"
    observation, info = step(env, f"click [{element(env, 'link', 'Aurora Desk Lamp')}]")
    assert info["url"] == "http://shop.test/product/OF-4001" and "paragraph: Price: $34.99" in observation
    assert "PREVIOUS ACTION: click [" in observation and "RESULT: Clicked [" in observation
    observation, info = step(env, f"type [{element(env, 'searchbox', 'Search products')}] [tent]")  # Enter by default
    assert info["url"] == "http://shop.test/search?q=tent" and "Trailhead 2-Person Tent" in observation


def test_type_chooses_drop_down_options_and_refuses_non_fields(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    step(env, "goto [http://shop.test/product/OU-3001]")
    rating = element(env, "combobox", "Rating")
    observation, info = step(env, f"type [{rating}] [5 stars] [0]")
    assert info["valid_action"] and "option '5 stars' selected" in observation
    observation, info = step(env, f"type [{rating}] [7 stars] [0]")
    assert not info["valid_action"] and "without the option '7 stars'" in observation and "'1 star'" in observation
    observation, info = step(env, f"type [{element(env, 'link', 'Outdoor')}] [hello]")
    assert not info["valid_action"] and "cannot type into" in observation
    assert info["url"] == "http://shop.test/product/OU-3001"


def test_hover_moves_the_mouse_over_the_element(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    _, info = step(env, f"hover [{element(env, 'link', 'My Orders')}]")
    assert info["valid_action"] and info["url"] == "http://shop.test/"
    assert page_eval(env, "document.querySelector('a:hover').textContent") == "My Orders"


def test_scroll_pages_through_a_long_observation(env: WebArenaEnv) -> None:
    small = WebArenaEnv(max_tree_chars=400)
    try:
        first, _ = small.reset(options={"task_id": "0"})
        assert "more lines of this page are not shown" in first and "[1] banner" in first
        down, info = step(small, "scroll [down]")
        assert info["valid_action"] and "lines above; scroll [up]" in down and "[1] banner" not in down
        up, _ = step(small, "scroll [up]")
        assert up.split("URL:")[0] == first.split("URL:")[0]
        assert len(first.split("\nURL:")[0]) < 400 + 300  # the page part is bounded (plus its note)
    finally:
        small.close()


def test_tabs_new_focus_close(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    observation, info = step(env, "new_tab")
    assert info["valid_action"] and "Tab 1 (current): (untitled)" in observation and info["url"] == "about:blank"
    observation, info = step(env, "goto [http://shop.test/cart]")
    assert "Tab 1 (current): Shopping Cart | Loopback Market" in observation
    observation, info = step(env, "tab_focus [0]")
    assert info["url"] == "http://shop.test/" and "Tab 0 (current): Home" in observation
    observation, info = step(env, "tab_focus [2]")
    assert not info["valid_action"] and "there is no tab 2" in observation
    observation, info = step(env, "close_tab")
    assert info["valid_action"] and info["url"] == "http://shop.test/cart" and "Tab 1" not in observation


def test_goto_back_and_forward(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    assert step(env, "goto [http://shop.test/orders]")[1]["url"] == "http://shop.test/orders"
    assert step(env, "go_back")[1]["url"] == "http://shop.test/"
    assert step(env, "go_forward")[1]["url"] == "http://shop.test/orders"
    observation, info = step(env, "go_forward")
    assert not info["valid_action"] and "no next page" in observation


def test_bad_ids_and_malformed_actions_are_invalid_cheap_and_harmless(env: WebArenaEnv) -> None:
    first, _ = env.reset(options={"task_id": "0"})
    started = time.perf_counter()
    for action in ["click [999]", "hover [0]", "type [999] [x]", "clikc [3]", "click 3", "stop now", "goto []"]:
        observation, reward, terminated, truncated, info = env.step(action)
        assert not info["valid_action"] and reward == 0 and not terminated and not truncated
        assert observation.split("\nURL:")[0] == first.split("\nURL:")[0]  # the page is as it was
        assert f"PREVIOUS ACTION: {action}" in observation and "RESULT: invalid action:" in observation
    assert time.perf_counter() - started < 1.0  # answered without touching the browser
    assert "there is no element [999] on this page (ids go from 1 to" in env.step("click [999]")[0]


def test_stop_ends_the_episode_with_the_evaluation(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    observation, reward, terminated, truncated, info = env.step("stop [$35]")
    assert terminated and not truncated and reward == 0 and not info["success"]
    assert info["answer"] == "$35" and info["evaluation"] == [{"eval_type": "string_match", "score": 0.0}]
    assert "The episode is over. Score: 0." in observation


@pytest.mark.slow
@pytest.mark.parametrize("split", ["train", "test"])
def test_expert_solves_every_bundled_task_and_doing_nothing_scores_zero(env: WebArenaEnv, split: str) -> None:
    # The hand-written configs; the template tasks (thousands) are sampled in test_world.py.
    for task_id in [t for t in env.tasks(split) if env.catalog.by_id[t].source is not None]:
        env.reset(options={"task_id": task_id})
        _, reward, terminated, _, info = env.step("stop []")
        assert terminated and reward == 0 and info["score"] == 0, f"task {task_id} scores without doing anything"
        rollout = expert_rollout(env, options={"task_id": task_id})
        info = rollout["info"]
        assert info["success"] and info["score"] == 1 and rollout["terminated"], f"task {task_id}: {info}"
        assert sum(rollout["rewards"]) == 1 and all(i for i in rollout["actions"])


def test_database_is_restored_on_every_reset(env: WebArenaEnv) -> None:
    rollout = expert_rollout(env, options={"task_id": "14"})  # cancel order #1007
    assert rollout["info"]["success"]
    env.reset(options={"task_id": "14"})
    step(env, "goto [http://shop.test/orders/1007]")
    assert page_eval(env, "document.querySelector('.order-status').textContent") == "Pending"
    assert env.step("stop []")[1] == 0


def test_hostile_input_gets_a_page_that_says_what_was_wrong(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    observation, info = step(env, f"goto [http://shop.test/orders/{'9' * 5000}]")
    assert info["valid_action"] and "Page not found" in observation and "There is no such order" in observation
    step(env, "goto [http://shop.test/product/EL-1001]")
    observation, info = step(env, f"type [{element(env, 'spinbutton', 'Quantity')}] [{2**64}] [0]")
    observation, info = step(env, f"click [{element(env, 'button', 'Add to Cart')}]")
    assert "The quantity must be from 1 to 999." in observation and "Cart (1)" in observation
    observation, _ = step(env, f"type [{element(env, 'searchbox', 'Search products')}] [%]")
    assert "No products match your search." in observation


def test_only_the_episodes_own_browser_context_reaches_the_shop(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "14"})  # cancel order #1007
    shop = env._embedded
    old = shop.cookies()[0]  # one per embedded site, all with the episode's secret
    cookies = env._manager.call(lambda: env._session.context.cookies())
    assert {(c["name"], c["value"], c["httpOnly"]) for c in cookies} == {(SECRET_COOKIE, old["value"], True)}
    assert page_eval(env, "document.cookie") == ""  # the page's scripts cannot read the secret
    host, port = shop.proxy.removeprefix("http://").split(":")
    for target in ("http://shop.test/orders/1007/cancel", "/orders/1007/cancel"):  # as a proxy, as a server
        for cookie in ("", f"{SECRET_COOKIE}=guess"):
            conn = http.client.HTTPConnection(host, int(port), timeout=5)
            conn.request("POST", target, headers={"Host": "shop.test", "Cookie": cookie})
            assert conn.getresponse().status == 403
            conn.close()
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"http": shop.proxy}))
    with pytest.raises(urllib.error.HTTPError, match="403"):
        opener.open("http://shop.test/cart/add", data=b"sku=EL-1001&qty=3", timeout=5)
    assert shop.database("shopping").order(1007)["status"] == "Pending" and len(shop.database("shopping").cart()) == 1
    rollout = expert_rollout(env, options={"task_id": "14"})  # a new episode, a new secret
    assert rollout["info"]["success"]
    new = shop.cookies()[0]
    assert new["value"] != old["value"]
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("GET", "/cart", headers={"Host": "shop.test", "Cookie": f"{SECRET_COOKIE}={old['value']}"})
    assert conn.getresponse().status == 403  # the previous episode's secret is void
    conn.close()


def test_max_steps_truncates_and_evaluates_the_final_page() -> None:
    short = WebArenaEnv(max_steps=2)
    try:
        short.reset(options={"task_id": "10"})  # show my pending orders (url_match)
        step(short, "click [999]")  # invalid actions do not count
        step(short, f"click [{element(short, 'link', 'My Orders')}]")
        observation, reward, terminated, truncated, info = short.step(f"click [{element(short, 'link', 'Pending')}]")
        assert truncated and not terminated and reward == 1 and info["success"]
        assert "That was the last of 2 steps" in observation
    finally:
        short.close()


def test_blocked_hosts_files_browser_pages_and_downloads(env: WebArenaEnv) -> None:
    env.reset(options={"task_id": "0"})
    links = (
        "<a href='http://evil.test/x'>Evil link</a> <a href='data:application/octet-stream,abc' download='x.bin'>"
        "Get file</a>"
    )
    for name, counter, reason in [
        ("Evil link", "blocked_navigations", "blocked: http://evil.test/x is outside this task's websites"),
        ("Get file", "blocked_downloads", "downloads are not allowed"),
    ]:
        page_eval(env, f"document.querySelector('main').insertAdjacentHTML('beforeend', {json.dumps(links)})")
        step(env, "hover [1]")  # look at the page again
        before = env._counters()[counter]
        observation, info = step(env, f"click [{element(env, 'link', name)}]")
        assert not info["valid_action"] and reason in observation
        assert info[counter] == before + 1 and info["url"] == "http://shop.test/"
    page_eval(env, "fetch('http://other.test/api').catch(() => null); new WebSocket('ws://other.test/socket')")
    time.sleep(0.2)
    requests = step(env, "hover [1]")[1]["blocked_requests"]
    assert requests >= 3  # the navigation, the fetch and the websocket
    for url in ["file:///etc/passwd", "chrome://version", "http://shop.test.evil.test/", "https://shop.test/"]:
        navigations = env._counters()["blocked_navigations"]
        observation, info = step(env, f"goto [{url}]")
        assert not info["valid_action"]
        assert re.search(r"outside this task's websites \([^)]*http://shop\.test\b", observation)
        assert info["blocked_navigations"] == navigations + 1 and info["url"] == "http://shop.test/"
    assert "other sites, local files, browser pages and downloads are blocked" in env.system_prompt


def test_hand_made_configs_on_a_users_site(tmp_path: Path) -> None:
    db = ShopDB()
    server = EmbeddedServer(create_app(db))
    port = server.start()
    base = f"http://127.0.0.1:{port}"

    def cfg(task_id: int, intent: str, **evaluation: Any) -> dict[str, Any]:
        empty = {"reference_answers": None, "reference_url": "", "program_html": [], "string_note": ""}
        return {
            "sites": ["shopping"], "task_id": task_id, "require_login": False, "storage_state": None,
            "start_url": "__SHOPPING__", "geolocation": None, "intent": intent, "eval": {**empty, **evaluation},
        }  # fmt: skip

    configs = [
        cfg(1, "Price of the lamp?", eval_types=["string_match"], reference_answers={"exact_match": "$34.99"}),
        cfg(2, "Two outdoor items?", eval_types=["string_match"], reference_answers={"must_include": ["Tent", "Bag"]}),
        cfg(3, "Open my orders", eval_types=["url_match"], reference_url="__SHOPPING__/orders"),
        cfg(
            4, "Empty my cart", eval_types=["program_html"],
            program_html=[
                {"url": "__SHOPPING__/cart", "locator": "document.querySelector('main').outerText",
                 "required_contents": {"must_include": ["Your cart is empty"]}},
                {"url": "last", "locator": "", "required_contents": {"must_include": ["Shopping Cart"]}},
            ],
        ),
        cfg(5, "Describe the tent", eval_types=["string_match"], reference_answers={"fuzzy_match": ["a roomy tent"]}),
        {**cfg(6, "Two tabs", eval_types=["url_match"], reference_url="__SHOPPING__/cart"),
         "start_url": "__SHOPPING__/orders |AND| __SHOPPING__/cart"},
    ]  # fmt: skip
    (tmp_path / "test.raw.json").write_text(json.dumps(configs))

    class Judge:
        def fuzzy_match(self, question: str, reference: str, answer: str) -> bool:
            return "roomy" in answer

        def unachievable_match(self, question: str, reason: str, answer: str) -> bool:
            return False

    users = WebArenaEnv(config_dir=tmp_path, site_urls={"shopping": base}, judge=Judge())
    unjudged = WebArenaEnv(config_dir=tmp_path, site_urls={"shopping": base})
    try:
        assert users.splits == ("test",) and users.tasks("test") == ["1", "2", "3", "4", "5", "6"]
        observation, info = users.reset(options={"task_id": "1"})
        assert f"URL: {base}/" in observation and info["category"] == "shopping"
        assert users.step("stop [$34.99]")[1] == 1
        users.reset(options={"task_id": "2"})
        assert users.step("stop [the tent and the sleeping bag]")[1] == 1
        users.reset(options={"task_id": "2"})
        assert users.step("stop [the tent]")[1] == 0
        users.reset(options={"task_id": "3"})
        step(users, f"click [{element(users, 'link', 'My Orders')}]")
        assert users.step("stop []")[1] == 1
        users.reset(options={"task_id": "4"})
        step(users, f"click [{element(users, 'link', 'Cart (1)')}]")
        assert users.step("stop []")[1] == 0  # not emptied yet
        users.reset(options={"task_id": "4"})  # a user's site is not restored by the env: the state is as left
        step(users, f"click [{element(users, 'link', 'Cart (1)')}]")
        step(users, f"click [{element(users, 'button', 'Remove Bamboo Cutting Board')}]")
        assert users.step("stop []")[1] == 1
        users.reset(options={"task_id": "5"})
        assert users.step("stop [It is a roomy tent]")[1] == 1
        unjudged.reset(options={"task_id": "5"})
        _, reward, _, _, info = unjudged.step("stop [It is a roomy tent]")
        assert reward == 0 and "needs a judge" in info["unscorable"] and not info["success"]
        observation, _ = users.reset(options={"task_id": "6"})  # " |AND| " opens one tab per start URL
        assert "Tab 0 (current): My Orders" in observation and "Tab 1: Shopping Cart" in observation
        assert users.step("stop []")[1] == 0
        users.reset(options={"task_id": "6"})
        step(users, "tab_focus [1]")
        assert users.step("stop []")[1] == 1  # url_match looks at the current tab
        users.reset(options={"task_id": "1"})
        observation, info = step(users, f"goto [http://127.0.0.1:{port + 1}/]")  # another port, another origin
        assert not info["valid_action"] and info["blocked_navigations"] == 1
    finally:
        users.close()
        unjudged.close()
        server.stop()
        db.close()


def test_envs_share_one_browser_but_not_cookies_or_data() -> None:
    first, second = WebArenaEnv(), WebArenaEnv()
    try:
        first.reset(options={"task_id": "13"})
        second.reset(options={"task_id": "13"})
        assert first.browser_pid() == second.browser_pid() is not None
        page_eval(first, "document.cookie = 'who=first'")
        assert page_eval(first, "document.cookie") == "who=first"
        assert page_eval(second, "document.cookie") == ""
        assert expert_rollout(first, options={"task_id": "13"})["info"]["success"]  # empties first's cart
        observation, _ = step(second, f"click [{element(second, 'link', 'Cart (1)')}]")
        assert "Remove Bamboo Cutting Board" in observation  # second's shop has its own database
        first.reset(options={"task_id": "13"})
        assert page_eval(first, "document.cookie") == ""  # a fresh context per episode
    finally:
        first.close()
        second.close()


def test_env_works_from_any_thread_and_under_the_multi_turn_wrapper(env: WebArenaEnv) -> None:
    wrapped = MultiTurnWrapper(env)
    results: list[Any] = []

    def play() -> None:
        wrapped.reset(options={"task_id": "9"})
        reply = f"My orders are linked in the header.\n```click [{element(env, 'link', 'My Orders')}]```"
        results.append(wrapped.step(reply))

    worker = threading.Thread(target=play)
    worker.start()
    worker.join(60)
    observation, _, _, _, info = results[0]
    assert info["valid_action"] and info["url"] == "http://shop.test/orders" and "#1003" in observation
