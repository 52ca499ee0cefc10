"""One episode in the browser: a fresh browser context, its tabs, the safety routing, the actions.

Every method here runs on the browser thread (see `browser.BrowserManager.call`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentgym_envs.webarena.browser.actions import Action
from agentgym_envs.webarena.browser.observation import Tree, parse_snapshot, render_tree
from agentgym_envs.webarena.browser.safety import OriginPolicy
from agentgym_envs.webarena.scoring.functions import Unscorable

_log = logging.getLogger(__name__)
VIEWPORT = {"width": 1280, "height": 720}
_CLOSED_MARKERS = ("has been closed", "Target closed", "Browser closed", "crashed", "Connection closed")


class InvalidAction(Exception):
    """The action could not be carried out; the message says why (shown to the agent)."""


class BrowserFailure(Exception):
    """The browser or the page died during the episode; the episode cannot go on."""


@dataclass
class PageView:
    """What the agent sees of the browser after a step."""

    url: str
    tabs: list[tuple[str, str]]  # (title, url) of each tab
    active: int
    tree: Tree


def is_closed_error(error: BaseException) -> bool:
    """Whether Playwright's `error` says that the page, the context or the browser is gone."""
    return any(marker in str(error) for marker in _CLOSED_MARKERS)


def unknown_element(tree: Tree, element_id: int) -> str:
    """Why `element_id` cannot be acted on: the page has no such id."""
    span = f"ids go from 1 to {len(tree.refs)}" if tree.refs else "this page has no elements with ids"
    return f"there is no element [{element_id}] on this page ({span})"


def _reason(error: Exception) -> str:
    """The first line of a Playwright error, without the API name prefix."""
    message = str(getattr(error, "message", None) or error).strip().splitlines()[0]
    if message.split(": ", 1)[0].count(".") == 1:  # "Locator.click: ..."
        message = message.split(": ", 1)[1]
    return message.removeprefix("Error: ").rstrip(".")


class BrowserSession:
    """A browser context for one episode of one task.

    Args:
        browser: The shared Playwright `Browser`.
        policy: The origins this task may reach; everything else is blocked by routing.
        proxy: Route every request through this HTTP proxy (the embedded sites' server).
        cookies: Cookies to set on the context before any page opens (the embedded sites' secret).
        storage_state: Playwright storage state (cookies) to start logged in.
        geolocation: WebArena's `geolocation` (latitude, longitude) for the context.
        timeout_ms: Limit for one element action (click, type, ...).
        navigation_timeout_ms: Limit for loading a page.
        launch: Which launch of the shared browser `browser` is (`BrowserManager.launches`), so that a
            session of a browser that was since relaunched is known dead without touching it.
    """

    def __init__(
        self,
        browser: Any,
        policy: OriginPolicy,
        *,
        proxy: str | None = None,
        cookies: list[dict[str, Any]] | None = None,
        storage_state: Path | None = None,
        geolocation: dict[str, float] | None = None,
        timeout_ms: float = 3000,
        navigation_timeout_ms: float = 30000,
        launch: int = 0,
    ):
        options: dict[str, Any] = {"viewport": VIEWPORT, "accept_downloads": False, "service_workers": "block"}
        if proxy:
            options["proxy"] = {"server": proxy}
        if storage_state is not None:
            options["storage_state"] = str(storage_state)
        if geolocation:
            options["geolocation"] = geolocation
            options["permissions"] = ["geolocation"]
        self.policy = policy
        self.browser = browser
        self.launch = launch
        self.timeout_ms = timeout_ms
        self.navigation_timeout_ms = navigation_timeout_ms
        self.pages: list[Any] = []
        self.active = 0
        self.blocked_navigations = 0
        self.blocked_requests = 0
        self.blocked_downloads = 0
        self.blocked_this_step: list[str] = []
        self.failure: str | None = None
        self._internal_pages: set[Any] = set()
        self.context = browser.new_context(**options)
        if cookies:
            self.context.add_cookies(cookies)
        self.context.set_default_timeout(timeout_ms)
        self.context.set_default_navigation_timeout(navigation_timeout_ms)
        self.context.route(policy.blocked_pattern(), self._block_request)
        self.context.route_web_socket(policy.blocked_pattern(websocket=True), self._block_websocket)
        self.context.on("page", self._adopt)

    # ---- events ---------------------------------------------------------------------------------
    def _adopt(self, page: Any) -> None:
        """A new tab (ours or a popup of the site) becomes the active one, as in WebArena."""
        if page in self._internal_pages or page in self.pages:
            return
        page.on("crash", lambda _: self._fail("the page crashed"))
        page.on("download", self._block_download)
        page.on("close", self._forget)
        self.pages.append(page)
        self.active = len(self.pages) - 1

    def _forget(self, page: Any) -> None:
        if page in self.pages:
            index = self.pages.index(page)
            self.pages.remove(page)
            if self.active >= index:
                self.active = max(0, self.active - 1)

    def _fail(self, reason: str) -> None:
        self.failure = self.failure or reason

    def _block_request(self, route: Any) -> None:
        request = route.request
        self.blocked_requests += 1
        if request.is_navigation_request():
            # "204 No Content" ends a navigation without leaving the current page: no error page.
            self.blocked_navigations += 1
            self.blocked_this_step.append(request.url)
            route.fulfill(status=204)
        else:
            route.abort("blockedbyclient")

    def _block_websocket(self, ws: Any) -> None:
        self.blocked_requests += 1
        ws.close()

    def _block_download(self, download: Any) -> None:
        self.blocked_downloads += 1
        self.blocked_this_step.append(f"download of {download.url}")

    # ---- tabs -----------------------------------------------------------------------------------
    @property
    def page(self) -> Any:
        return self.pages[self.active]

    def open(self, urls: list[str]) -> None:
        """Open one tab per start URL; the first one is active."""
        for url in urls:
            page = self.context.new_page()
            self._adopt(page)
            self._navigate(page, url)
        self.active = 0

    def _navigate(self, page: Any, url: str) -> None:
        if not self.policy.allows(url):
            self.blocked_navigations += 1
            raise InvalidAction(
                f"{url[:200]} is outside this task's websites ({self.policy.describe()}); the browser may not go there"
            )
        try:
            page.goto(url, wait_until="load")
        except Exception as error:
            self._check_alive(error)
            if self.blocked_this_step:
                raise InvalidAction(f"navigation to {self.blocked_this_step[0][:200]} was blocked") from None
            raise InvalidAction(f"could not load {url[:200]}: {_reason(error)}") from None

    def _check_alive(self, error: Exception) -> None:
        reason = self.failure_reason(error)
        if reason is not None:
            raise BrowserFailure(reason) from error

    def failure_reason(self, error: BaseException | None = None) -> str | None:
        """Why this session cannot go on (its page crashed, the browser is gone, `error` says it is
        closed), or None while it is usable."""
        if self.failure:
            return self.failure
        if not self.browser.is_connected():
            return "the browser exited (crash or kill)"
        if error is not None and is_closed_error(error):
            return _reason(error)
        return None

    # ---- observation ----------------------------------------------------------------------------
    def settle(self) -> None:
        """After an action: wait for the active page to load; leave a page outside the allowed origins."""
        if self.failure:
            raise BrowserFailure(self.failure)
        if not self.pages:
            self._adopt(self.context.new_page())
        page = self.page
        try:
            page.wait_for_load_state("load", timeout=self.navigation_timeout_ms)
        except Exception as error:
            self._check_alive(error)
        if not (self.policy.allows(page.url) or page.url.startswith("chrome-error://")):
            # Defense in depth: a page outside the allowed origins that routing did not stop.
            self.blocked_navigations += 1
            self.blocked_this_step.append(page.url)
            page.goto("about:blank")

    def view(self) -> PageView:
        """The accessibility tree of the active tab, its URL and the tabs."""
        if self.failure:
            raise BrowserFailure(self.failure)
        page = self.page
        try:
            snapshot = page.aria_snapshot(mode="ai", timeout=self.navigation_timeout_ms)
        except Exception as error:
            self._check_alive(error)
            raise BrowserFailure(f"could not read the page: {_reason(error)}") from error
        tabs = []
        for tab in self.pages:
            try:
                title = tab.title()
            except Exception:
                title = ""
            tabs.append((title, tab.url))
        # Keep acting on the page the agent sees, even if a popup opened while we looked.
        self.active = self.pages.index(page) if page in self.pages else self.active
        return PageView(url=page.url, tabs=tabs, active=self.active, tree=render_tree(parse_snapshot(snapshot)))

    # ---- actions --------------------------------------------------------------------------------
    def run(self, action: Action, tree: Tree) -> str:
        """Carry out `action` against the elements of `tree`; return what happened, in words.

        Raises `InvalidAction` when it cannot be done and `BrowserFailure` when the browser died.
        """
        self.blocked_this_step = []
        try:
            return self._run(action, tree)
        except (InvalidAction, BrowserFailure):
            raise
        except Exception as error:
            self._check_alive(error)
            raise InvalidAction(f"{action.kind} failed: {_reason(error)}") from None

    def blocked_message(self) -> str | None:
        """Why the last action was blocked (a navigation or a download), or None."""
        if not self.blocked_this_step:
            return None
        what = self.blocked_this_step[0][:200]
        if what.startswith("download of "):
            return f"blocked: {what}; downloads are not allowed"
        return f"blocked: {what} is outside this task's websites ({self.policy.describe()}); you stay where you were"

    def _element(self, tree: Tree, element_id: int | None) -> Any:
        assert element_id is not None
        ref = tree.refs.get(element_id)
        if ref is None:
            raise InvalidAction(unknown_element(tree, element_id))
        return self.page.locator(f"aria-ref={ref}")

    def _run(self, action: Action, tree: Tree) -> str:
        kind = action.kind
        # Like WebArena, which clicks at the element's centre, skip Playwright's actionability checks
        # (visible, stable, enabled, not covered): they cost tens of ms per action and turn a covered
        # element into a wait for the full timeout.
        if kind == "click":
            self._element(tree, action.element_id).click(force=True)
            return f"clicked [{action.element_id}]"
        if kind == "hover":
            self._element(tree, action.element_id).hover(force=True)
            return f"hovered over [{action.element_id}]"
        if kind == "type":
            return self._type(tree, action)
        if kind == "press":
            key = action.text.replace("Ctrl", "Control").replace("ctrl", "Control").replace("Cmd", "Meta")
            # Pressing through a locator (the focused element, else the body) waits for a navigation
            # the key starts, as the keyboard API does not.
            focused = self.page.locator("*:focus")
            (focused.first if focused.count() else self.page.locator("body")).press(key)
            return f"pressed {key}"
        if kind == "scroll":
            self.page.mouse.wheel(0, VIEWPORT["height"] * (1 if action.flag else -1))
            return f"scrolled {'down' if action.flag else 'up'}"
        if kind == "new_tab":
            page = self.context.new_page()
            self._adopt(page)
            self.active = self.pages.index(page)
            return "opened a new tab"
        if kind == "tab_focus":
            index = action.element_id
            if index is None or not 0 <= index < len(self.pages):
                raise InvalidAction(f"there is no tab {index}; tabs are numbered 0 to {len(self.pages) - 1}")
            self.active = index
            self.page.bring_to_front()
            return f"switched to tab {index}"
        if kind == "close_tab":
            page = self.page
            page.close()
            self._forget(page)
            if not self.pages:
                self._adopt(self.context.new_page())
            self.active = len(self.pages) - 1
            return "closed the tab"
        if kind == "goto":
            self._navigate(self.page, action.text)
            return f"went to {action.text[:200]}"
        if kind in ("go_back", "go_forward"):
            page, before = self.page, self.page.url
            move = page.go_back if kind == "go_back" else page.go_forward
            # None means "no such page" -- or a page without a response (about:blank): look at the URL.
            if move(wait_until="load") is None and page.url == before:
                direction = "previous" if kind == "go_back" else "next"
                raise InvalidAction(f"there is no {direction} page in this tab's history")
            return "went back" if kind == "go_back" else "went forward"
        raise InvalidAction(f"{kind} cannot be carried out here")

    def _type(self, tree: Tree, action: Action) -> str:
        element = self._element(tree, action.element_id)
        node = tree.nodes[action.element_id]  # type: ignore[index]
        if element.evaluate("e => e.tagName") == "SELECT":
            labels = element.evaluate("e => [...e.options].map(o => o.label)")
            if action.text not in labels:
                raise InvalidAction(
                    f"[{action.element_id}] is a drop-down list without the option {action.text[:80]!r}; "
                    f"its options: {', '.join(repr(label) for label in labels)}"
                )
            element.select_option(label=action.text, force=True)
            done = f"chose {action.text!r} in [{action.element_id}]"
        else:
            try:
                element.fill(action.text, force=True)
            except Exception as error:
                self._check_alive(error)
                raise InvalidAction(f"cannot type into [{action.element_id}] ({node.role}): {_reason(error)}") from None
            done = f"typed {action.text[:80]!r} into [{action.element_id}]"
        if action.flag:
            element.press("Enter")  # unlike keyboard.press, this waits for the navigation it starts
            done += " and pressed Enter"
        return done

    # ---- evaluation -----------------------------------------------------------------------------
    def current_url(self) -> str:
        """The URL of the page the evaluators are on (the agent's active tab until `select` loads one)."""
        if self._internal_pages:
            return next(iter(self._internal_pages)).url
        return self.page.url if self.pages else "about:blank"

    def select(self, url: str | None, locator: str, prep_actions: list[str]) -> Any:
        """`PageProbe.select` for the evaluators: `url` loads in a tab of their own (the agent's tabs
        stay), which is the page they are on from then on; None stays on that page as it is."""
        if url is None:
            page = next(iter(self._internal_pages)) if self._internal_pages else self.page
        else:
            if not self.policy.allows(url):  # a check the browser may not run: no score either way
                allowed = ", ".join(sorted(self.policy.origins))
                raise Unscorable(f"a check loads {url[:200]!r}, an origin the task does not list (it lists {allowed})")
            page = self._evaluation_page()
            try:
                page.goto(url, wait_until="load")
            except Exception as error:
                self._check_alive(error)
                return ""
        if not locator.strip():
            return page.content()
        for prep in prep_actions:
            try:
                page.evaluate(f"() => {prep}")
            except Exception as error:
                _log.debug("a failed prep action ends the prep actions: %r", error)
                break
        try:
            return page.evaluate(f"() => {locator}")
        except Exception as error:
            self._check_alive(error)
            return ""

    def _evaluation_page(self) -> Any:
        """A tab of the evaluators' own, kept out of the agent's tabs."""
        if not self._internal_pages:
            active = self.active
            page = self.context.new_page()
            self._internal_pages.add(page)
            if page in self.pages:
                self.pages.remove(page)
            self.active = active
        return next(iter(self._internal_pages))

    def close(self) -> None:
        try:
            self.context.close()
        except Exception as error:  # the browser may already be gone
            _log.debug("ignoring error while closing a context: %r", error)
