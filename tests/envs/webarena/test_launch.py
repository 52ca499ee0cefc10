"""How the shared Chromium is launched (issue 39: memory per env): Playwright's disabled features are kept,
the invisible browser UI that cost each env a renderer is off, and envs sharing the browser stay isolated."""

from __future__ import annotations

from typing import Any

from agentgym_envs.webarena.browser.chromium import (
    HEADLESS_UI_FEATURES,
    PLAYWRIGHT_DISABLED_FEATURES,
    BrowserManager,
    disabled_features_of,
    find_chromium,
)
from agentgym_envs.webarena.env import WebArenaEnv


def page_eval(env: WebArenaEnv, script: str) -> Any:
    return env._manager.call(lambda: env._session.page.evaluate(script))


def browser_call(env: WebArenaEnv, method: str) -> dict[str, Any]:
    """A CDP call on the shared browser (not on a page)."""

    def send() -> dict[str, Any]:
        session = env._session.browser.new_browser_cdp_session()
        try:
            return session.send(method)
        finally:
            session.detach()

    return env._manager.call(send)


def test_two_envs_share_the_browser_with_one_renderer_each_and_nothing_else() -> None:
    first, second = WebArenaEnv(), WebArenaEnv()
    try:
        first.reset(options={"task_id": "13"})
        second.reset(options={"task_id": "13"})
        assert first.browser_pid() == second.browser_pid() is not None
        # The switches are on the launched browser: the last --disable-features (the one Chromium applies)
        # keeps every feature Playwright disables and adds ours.
        lists = disabled_features_of(first.browser_pid())
        assert lists is not None and len(lists) >= 2
        assert set(lists[0]) <= set(lists[-1])
        assert set(HEADLESS_UI_FEATURES) <= set(lists[-1])
        # No invisible omnibox drop-down page per context; one renderer per env (and at most a spare one).
        targets = browser_call(first, "Target.getTargets")["targetInfos"]
        assert [t["url"] for t in targets if t["type"] == "browser_ui"] == []
        assert sorted(t["url"] for t in targets if t["type"] == "page") == ["http://shop.test/"] * 2
        processes = browser_call(first, "SystemInfo.getProcessInfo")["processInfo"]
        assert sum(p["type"] == "renderer" for p in processes) <= 3
        # Isolation holds: storage, cookies and tabs are each env's own.
        page_eval(first, "localStorage.setItem('who', 'first'); sessionStorage.setItem('who', 'first')")
        page_eval(first, "document.cookie = 'who=first'")
        assert page_eval(first, "localStorage.getItem('who') + sessionStorage.getItem('who')") == "firstfirst"
        assert page_eval(second, "[localStorage.getItem('who'), sessionStorage.getItem('who'), document.cookie]") == [
            None,
            None,
            "",
        ]
        first_pages = first._manager.call(lambda: list(first._session.context.pages))
        second_pages = second._manager.call(lambda: list(second._session.context.pages))
        assert len(first_pages) == len(second_pages) == 1 and first_pages[0] != second_pages[0]
        first.reset(options={"task_id": "13"})  # a fresh context per episode
        assert page_eval(first, "localStorage.getItem('who')") is None
    finally:
        first.close()
        second.close()


def test_a_playwright_that_disables_more_features_gets_them_kept_by_a_relaunch() -> None:
    manager = BrowserManager()
    manager._playwright_features = tuple(f for f in PLAYWRIGHT_DISABLED_FEATURES if f != "HttpsUpgrades")
    manager.acquire()
    try:
        manager.call(manager.browser, find_chromium())
        assert "HttpsUpgrades" in manager._playwright_features
        lists = disabled_features_of(manager.call(manager.browser_pid))
        assert lists is not None and "HttpsUpgrades" in lists[-1] and set(lists[0]) <= set(lists[-1])
    finally:
        manager.release()
