"""WebArena as a text environment: a real Chromium driven through Playwright, WebArena's task
configs, actions and evaluators, and an embedded offline shop so it works with no Docker and no network."""

from __future__ import annotations

import os
from concurrent.futures import Future
from typing import Any, ClassVar

from agentgym_envs.clientargs import ClientKwarg, IntRange, check_int, check_number
from agentgym_envs.core import TextEnv
from agentgym_envs.webarena import tools as webarena_tools
from agentgym_envs.webarena.browser.actions import ACTION_HELP, ActionError, parse_action
from agentgym_envs.webarena.browser.chromium import find_chromium, get_manager
from agentgym_envs.webarena.browser.observation import previous_window_start, window
from agentgym_envs.webarena.browser.safety import OriginPolicy, origin_of
from agentgym_envs.webarena.browser.session import (
    BrowserFailure,
    BrowserSession,
    InvalidAction,
    is_closed_error,
    unknown_element,
)
from agentgym_envs.webarena.scoring.evaluators import Evaluation, Helper, evaluate
from agentgym_envs.webarena.scoring.functions import site_helpers
from agentgym_envs.webarena.scoring.judge import Judge, judge_from_environment
from agentgym_envs.webarena.sites import EmbeddedSites
from agentgym_envs.webarena.tasks.catalog import Task, TaskCatalog, site_urls_from_environment

#: Observation parts other than the page are cut to these lengths.
_MAX_ACTION_ECHO = 200
_MAX_TITLE = 100
_MAX_URL = 300
_MAX_TABS = 20
_MAX_OBJECTIVE = 4000
_MAX_RESULT = 1000


def _raise_if_dead(session: BrowserSession, error: Exception) -> None:
    """`BrowserFailure` from `error` when the session's browser or page is gone; otherwise nothing."""
    reason = session.failure_reason(error)
    if reason is not None:
        raise BrowserFailure(reason) from error


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class WebArenaEnv(TextEnv):
    """Web tasks in a real browser (WebArena) as text.

    ## Description
    The agent uses a headless Chromium to carry out a task on a website ("Cancel my pending order
    #1007", "What is the price of the Aurora Desk Lamp?"). Tasks are WebArena JSON configs and are
    scored by WebArena's evaluators (answer string match, final URL match, and checks of page
    content after the episode, e.g. that the order really is canceled). By default the env serves
    its own offline sites (`agentgym_envs.webarena.sites`: the shop `http://shop.test`, a homepage
    `http://home.test` and every other embedded site, on one loopback port for this env, their
    databases restored at every reset) with the bundled tasks (`tasks.splits`: instances of each
    site's task templates, plus the shop's hand-written configs); with `config_dir` it runs a user's WebArena
    configs against the user's WebArena sites, whose URLs come from WebArena's environment
    variables (`SHOPPING`, `SHOPPING_ADMIN`, `REDDIT`, `GITLAB`, `MAP`, `WIKIPEDIA`, `HOMEPAGE`).
    All envs of a process share one browser; each episode gets a fresh browser context.

    ## Actions
    WebArena's, one per step, e.g. `click [12]`:
    `click [id]`, `type [id] [text] [press_enter_after=0|1]` (Enter by default; on a drop-down list
    it chooses the option with that label), `hover [id]`, `press [key_comb]`, `scroll [up|down]`,
    `new_tab`, `tab_focus [index]`, `close_tab`, `goto [url]`, `go_back`, `go_forward`,
    `stop [answer]`. An unknown id, a malformed action, an action the page refuses, or a navigation
    outside the task's websites changes nothing: the observation says why and
    `info["valid_action"]` is False.

    ## Observation
    The open tabs, the active page's accessibility tree with numeric ids for the elements one can
    act on (`[12] link 'Forums'`; ids hold for the current step), the URL, the objective, the
    previous action and what it did. The page part is cut to `max_tree_chars` with a note;
    `scroll [down]` shows the next part.

    ## Rewards
    The evaluation's score in [0, 1] (1 = solved), paid when the episode ends, so the return is
    the score. A `fuzzy_match` that needs a judge and has none is unscorable: score 0 and
    `info["unscorable"]` says why.

    ## Termination
    Terminated by `stop`. Truncated after `max_steps` carried-out (valid) actions, evaluated as if
    the agent stopped without an answer, or when the browser fails (`info["error"]`, score 0): a
    crash or kill of the browser, which all envs of the process share, ends the episode of every env
    using it, and the next reset of any of them relaunches it.

    ## Safety
    Only the task's own origins (with the embedded sites: all of them, which link to each other)
    and `allowed_origins` can be reached; other hosts, `file://`,
    `chrome://` and downloads are blocked by request routing, the agent is told, and the attempts
    are counted in `info["blocked_navigations"]`, `info["blocked_downloads"]` and
    `info["blocked_requests"]`. The embedded sites' loopback port answers only this env's browser
    context: each reset makes a new secret that the context carries as an HTTP-only cookie, and any
    other request (another local process, an earlier episode) gets 403.

    ## Registered ids
    `AgentGym/WebArena-v0`: the bundled tasks on the embedded sites (splits `train` and `test`;
    `info["category"]` is the site, `info["kind"]` the task kind: info, nav, state or na).

    Args:
        config_dir: A directory of WebArena task configs (see `tasks.catalog`); None for the bundled tasks.
        site_urls: Site name -> base URL, overriding WebArena's environment variables.
        allowed_origins: More origins the browser may reach (e.g. a map tile server).
        chromium_path: The Chromium executable (default: `$AGENTGYM_CHROMIUM`, Debian's chromium).
        judge: The `fuzzy_match` judge (default: one from `AGENTGYM_JUDGE_BASE_URL`, else none).
        max_steps: Valid actions before the episode is truncated.
        max_tree_chars: Characters of the page shown per observation.
        timeout_ms: Limit of one element action in milliseconds.
        navigation_timeout_ms: Limit of one page load in milliseconds.
        render_mode: None or "ansi".
        prelaunch: Get ready at `gym.make` rather than at the first reset: the process's shared browser
            starts launching in the background at once (with a throwaway first page) and this env's
            embedded sites start, so that the first reset waits only for what is left of the launch.
            Off by default: an env made and closed without a reset (listing tasks, describing the env,
            building a dataset) would launch a browser for nothing (about 400 MB while it runs: Chromium
            270 MB, Playwright's driver 125 MB) and its `make` and `close` would wait on the launch. Turn
            it on where an env is made a while before its first reset (a rollout worker or an env server
            at startup). A failed launch is raised by the first reset (the next one launches anew);
            `close` stops the browser as after a reset, when this env was its last user.
    """

    default_max_turns = 15
    action_format = "fenced_or_action_line"
    stop_strings = ("\nOBSERVATION:", "\nObservation:")  # the next page is the env's part
    default_max_turn_tokens = 512  # a thought over the page and one action (the paper's rollout.max_tokens)
    action_tools = webarena_tools.TOOLS  # the actions as tools (action_format: tools)
    tool_instructions = webarena_tools.INSTRUCTIONS
    system_prompt = (
        "You are an autonomous agent using a web browser to carry out a task. Each turn you see the open tabs, "
        "the current page as an accessibility tree in which each element you can act on has a numeric id in "
        "brackets such as [12], the page's URL, the objective, and your previous action with its result.\n"
        "Actions:\n" + ACTION_HELP + "\n"
        "Only the task's websites can be reached: other sites, local files, browser pages and downloads are "
        "blocked. Issue one action per turn. Think briefly, then put the action in a code block, e.g. "
        "```click [12]``` (or end with a line 'Action: click [12]'). When the task is done, issue stop; if "
        "it asks a question, put the answer in the brackets.\n"
        "Example:\n"
        "OBSERVATION:\nTab 0 (current): Aurora Desk Lamp | Loopback Market\n"
        "[14] heading 'Aurora Desk Lamp' level: 1\n[15] paragraph: Price: $34.99\n"
        "URL: http://shop.test/product/OF-4001\nOBJECTIVE: What is the price of the Aurora Desk Lamp?\n"
        "PREVIOUS ACTION: click [31]\n"
        "Your reply: The product page shows the price of the lamp, $34.99, so I can answer.\n```stop [$34.99]```"
    )
    splits: ClassVar[tuple[str, ...]] = ("train", "test")
    #: a Chromium (and the embedded sites) per env, so one env per Ray actor (agentgym_envs.cluster)
    ray_resources: ClassVar[dict[str, float]] = {"num_cpus": 1, "memory": 1024 * 2**20, "envs_per_actor": 1}

    #: A remote client may choose the episode length and the page budget; task configs, site URLs, origins,
    #: the browser, the judge and timeouts are the operator's (agentgym_envs.clientargs).
    client_kwargs: ClassVar[dict[str, ClientKwarg]] = {
        **TextEnv.client_kwargs,
        "max_steps": IntRange(1, 50),
        "max_tree_chars": IntRange(1000, 40_000),
    }

    def __init__(
        self,
        config_dir: str | os.PathLike[str] | None = None,
        site_urls: dict[str, str] | None = None,
        allowed_origins: tuple[str, ...] | list[str] = (),
        chromium_path: str | os.PathLike[str] | None = None,
        judge: Judge | None = None,
        helpers: dict[str, Helper] | None = None,
        max_steps: int = 30,
        max_tree_chars: int = 12000,
        timeout_ms: float = 3000,
        navigation_timeout_ms: float = 30000,
        render_mode: str | None = None,
        prelaunch: bool = False,
    ):
        # The page part is bounded by max_tree_chars, every other part by the _MAX_* limits above.
        super().__init__(render_mode=render_mode, max_observation_length=max(1 << 17, max_tree_chars + 12_000))
        check_int("max_steps", max_steps, 1, 10_000)
        check_int("max_tree_chars", max_tree_chars, 200, 1_000_000)
        check_number("timeout_ms", timeout_ms, 1, 600_000)
        check_number("navigation_timeout_ms", navigation_timeout_ms, 1, 600_000)
        bad_urls = {
            site: url for site, url in (site_urls or {}).items() if not isinstance(url, str) or origin_of(url) is None
        }
        if bad_urls:
            raise ValueError(
                f"site_urls must map site names to http(s) URLs such as 'http://127.0.0.1:7770', got {bad_urls}"
            )
        self.allowed_origins = tuple(allowed_origins)
        bad = [origin for origin in self.allowed_origins if origin_of(origin) is None]
        if bad:
            raise ValueError(f"allowed_origins must be http(s) URLs such as 'http://tiles.local:8080', got {bad}")
        self.chromium_path = chromium_path
        self._manager = get_manager()
        self._acquired = False  # whether this env counts as a user of the shared browser
        self._launching: Future | None = None  # the launch the next reset waits for (`prelaunch`, first reset)
        self._embedded: EmbeddedSites | None = None
        if prelaunch:
            self._launch_in_background()  # first: the launch runs while the catalog is built
        try:
            if config_dir is None:
                self.catalog = TaskCatalog.bundled()
                self._embedded = EmbeddedSites()
                if prelaunch:
                    self._embedded.start()
            else:
                self.catalog = TaskCatalog.from_directory(config_dir)
                self.splits = self.catalog.splits
        except BaseException:
            self._release_browser()
            if self._embedded is not None:
                self._embedded.stop()
            raise
        self._site_urls = dict(site_urls or {})
        self.judge = judge if judge is not None else judge_from_environment()
        self.helpers = dict(helpers or {})
        self._site_helpers: dict[str, Helper] = {}
        self.max_steps = max_steps
        self.max_tree_chars = max_tree_chars
        self.timeout_ms = timeout_ms
        self.navigation_timeout_ms = navigation_timeout_ms
        self._session: Any = None
        self._view: Any = None
        self._current: Task | None = None  # the episode's task, resolved (core's `_task` is its info)
        self._steps = 0
        self._offset = 0
        self._shown = 0
        self._previous = "None"
        self._visited: list[str] = []

    def _launch_in_background(self) -> None:
        """Hold the shared browser and start launching it on its thread (`BrowserManager.prelaunch`)."""
        try:
            executable = find_chromium(self.chromium_path)
        except FileNotFoundError:
            return  # nothing to launch: the first reset raises this error
        self._manager.acquire()
        self._acquired = True
        self._launching = self._manager.prelaunch(executable)

    def _release_browser(self) -> None:
        """No longer use the shared browser: a launch that has not begun is dropped, and the last user
        stops the browser (after a launch under way, which its thread finishes first)."""
        launching, self._launching = self._launching, None
        if launching is not None:
            launching.cancel()
        if self._acquired:
            self._acquired = False
            self._manager.release()

    # ---- tasks ----------------------------------------------------------------------------------
    def tasks(self, split: str = "train") -> list[str]:
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; this WebArena env has {list(self.splits)}")
        return [task.task_id for task in self.catalog.by_split.get(split, [])]

    def split_of(self, task_id: str) -> str | None:
        task = self.catalog.by_id.get(task_id)
        return task.split if task is not None else None

    @property
    def current_task(self) -> Task | None:
        """The current episode's task config, with site URLs filled in (None before a reset)."""
        return self._current

    # ---- episode --------------------------------------------------------------------------------
    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        task = self.catalog.by_id[task_id]
        executable = find_chromium(self.chromium_path)
        if not self._acquired:
            # The browser launches (or is found running) on its thread while the sites start here.
            self._manager.acquire()
            self._acquired = True
            self._launching = self._manager.submit(self._manager.browser, executable)
        if self._embedded is not None:
            self._embedded.start()
            self._embedded.restore()
            urls = self._embedded.urls
            self._site_helpers = site_helpers(urls, self._embedded.database("shopping"))
        else:
            urls = site_urls_from_environment(self._site_urls)
            self._site_helpers = site_helpers(urls)
        resolved = task.resolve(urls)
        # The embedded sites link to each other (the homepage, the shop's admin): all of them are open.
        site_origins = list(urls.values()) if self._embedded is not None else [urls[s] for s in task.sites if s in urls]
        policy = OriginPolicy([*resolved.start_urls, *site_origins, *self.allowed_origins])
        storage_state = resolved.storage_state_path()
        self._close_session()
        launching, self._launching = self._launching, None
        if launching is not None:
            launching.result()  # a failed launch raises its error here, once; the next reset launches anew
        cookies = self._embedded.cookies() if self._embedded is not None else None
        self._session, self._view = self._manager.call(self._open, executable, policy, resolved, storage_state, cookies)
        self._current = resolved
        self._steps, self._offset, self._previous = 0, 0, "None"
        self._visited = [self._view.url]  # distinct URLs in the order first seen (`context_summary`)
        info = {
            "category": task.category,
            "kind": task.kind,
            "instruction": task.intent,
            "available_actions": None,
            "sites": task.sites,
            "eval_types": list(task.eval["eval_types"]),
        }
        return self._render(""), info

    def _open(
        self, executable: str, policy: OriginPolicy, task: Task, storage_state: Any, cookies: list[dict] | None
    ) -> tuple[Any, Any]:
        """Browser thread: a fresh context with the task's start pages, and its first view.

        A browser that died while no call touched it still looks alive; the first attempt then fails,
        and the dead browser is discarded and relaunched for a second one.
        """
        retried = False
        while True:
            browser, _ = self._manager.browser(executable)
            session = None
            try:
                session = BrowserSession(
                    browser,
                    policy,
                    proxy=self._embedded.proxy if self._embedded is not None else None,
                    cookies=cookies,
                    storage_state=storage_state,
                    geolocation=task.config.get("geolocation"),
                    timeout_ms=self.timeout_ms,
                    navigation_timeout_ms=self.navigation_timeout_ms,
                    launch=self._manager.launches,
                )
                session.open(task.start_urls)
                session.settle()
                return session, session.view()
            except Exception as error:
                if session is not None:
                    session.close()
                if not retried and (not browser.is_connected() or is_closed_error(error)):
                    retried = True
                    self._manager.discard()
                    continue
                if isinstance(error, (InvalidAction, BrowserFailure)):
                    raise RuntimeError(f"task {task.task_id}: could not open its start page: {error}") from error
                raise

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._previous = _short(action, _MAX_ACTION_ECHO) or "(empty)"
        try:
            parsed = parse_action(action)
        except ActionError as error:
            return self._answer(f"invalid action: {str(error).rstrip('.')}.", valid=False)
        if parsed.kind == "stop":
            return self._finish(parsed.text, f"You stopped with the answer {parsed.text[:200]!r}.", truncated=False)
        tree = self._view.tree
        if parsed.kind != "tab_focus" and parsed.element_id is not None and parsed.element_id not in tree.refs:
            return self._answer(f"invalid action: {unknown_element(tree, parsed.element_id)}.", valid=False)
        previous_view = self._view
        try:
            message, valid, self._view = self._manager.call(self._act, parsed)
        except BrowserFailure as failure:
            return self._fail(str(failure))
        if self._view.url != previous_view.url or self._view.active != previous_view.active:
            self._offset = 0
            if self._view.url not in self._visited:
                self._visited.append(self._view.url)
        elif parsed.kind == "scroll" and valid:
            lines = self._view.tree.lines
            self._offset = (
                self._offset + self._shown
                if parsed.flag
                else previous_window_start(lines, self._offset, self.max_tree_chars)
            )
        if not valid:
            return self._answer(f"invalid action: {message.rstrip('.')}.", valid=False)
        self._steps += 1
        if self._steps >= self.max_steps:
            return self._finish("", f"{message}. That was the last of {self.max_steps} steps.", truncated=True)
        return self._answer(message[:1].upper() + message[1:] + ".", valid=True)

    def _act(self, parsed: Any) -> tuple[str, bool, Any]:
        """Browser thread: carry out the action, let the page settle, look at it again."""
        session = self._usable_session()
        try:
            try:
                message, valid = session.run(parsed, self._view.tree), True
            except InvalidAction as error:
                message, valid = str(error), False
            session.settle()
            view = session.view()
        except BrowserFailure:
            raise
        except Exception as error:
            _raise_if_dead(session, error)
            raise
        blocked = session.blocked_message()  # after the view: a download is reported late
        if blocked is not None:
            message, valid = blocked, False
        return message, valid, view

    def _evaluate(self, answer: str) -> Evaluation:
        """Browser thread: score the episode with its final state."""
        assert self._current is not None
        session = self._usable_session()
        try:
            helpers = {**self._site_helpers, **self.helpers}
            return evaluate(self._current.config, answer, session, self.judge, helpers)
        except BrowserFailure:
            raise
        except Exception as error:
            _raise_if_dead(session, error)
            raise

    def _usable_session(self) -> BrowserSession:
        """Browser thread: the episode's session, or `BrowserFailure` when its browser is gone.

        Every env of the process shares the browser: after it died, the first env to reset relaunches
        it, and the other envs' sessions still point at the dead one, which must not be touched.
        """
        session = self._session
        if session is None:
            raise BrowserFailure("the browser session is closed")
        if session.launch != self._manager.launches:
            raise BrowserFailure("the browser exited (crash or kill) and was relaunched for another episode")
        reason = session.failure_reason()
        if reason is not None:
            raise BrowserFailure(reason)
        return session

    def _counters(self) -> dict[str, Any]:
        session = self._session
        return {
            "url": self._view.url if self._view is not None else "",
            "steps": self._steps,
            "blocked_navigations": session.blocked_navigations if session else 0,
            "blocked_downloads": session.blocked_downloads if session else 0,
            "blocked_requests": session.blocked_requests if session else 0,
        }

    def _answer(self, result: str, valid: bool) -> tuple[str, float, bool, bool, dict[str, Any]]:
        info = {"valid_action": valid, "success": False, "available_actions": None, **self._counters()}
        return self._render(result), 0.0, False, False, info

    def _finish(self, answer: str, result: str, truncated: bool) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self._current is not None
        try:
            evaluation: Evaluation = self._manager.call(self._evaluate, answer)
        except BrowserFailure as failure:
            return self._fail(f"{failure} (while evaluating)")
        score = evaluation.score
        info = {
            "valid_action": True,
            "success": score >= 1.0,
            "available_actions": None,
            **self._counters(),
            "answer": answer,
            "evaluation": evaluation.details,
            "unscorable": evaluation.unscorable,
        }
        verdict = f"Score: {score:g}." if not evaluation.unscorable else f"Unscorable: {evaluation.unscorable}."
        return self._render(f"{result} The episode is over. {verdict}"), score, not truncated, truncated, info

    def _fail(self, reason: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """The browser failed: the episode ends (truncated, score 0) with the reason."""
        counters = self._counters()
        self._close_session()
        text = (
            f"PREVIOUS ACTION: {self._previous}\nRESULT: the browser failed ({reason}). This episode cannot "
            "continue and ends here with score 0; the next reset starts a new browser."
        )
        info = {
            "valid_action": False,
            "success": False,
            "available_actions": None,
            **counters,
            "error": f"browser failure: {reason}",
        }
        return text, 0.0, False, True, info

    def context_summary(self) -> str:
        """The task and the URLs visited so far (the last 20), for `agentgym_wrappers.SummaryContext`."""
        if self._current is None or self._view is None:
            raise RuntimeError("call reset() before context_summary()")
        urls = "\n".join(f"- {_short(url, _MAX_URL)}" for url in self._visited[-20:])
        return f"OBJECTIVE: {_short(self._current.intent, _MAX_OBJECTIVE)}\nVisited URLs:\n{urls}"

    # ---- text -----------------------------------------------------------------------------------
    def _render(self, result: str) -> str:
        view, task = self._view, self._current
        assert view is not None and task is not None
        page, self._offset, self._shown = window(view.tree.lines, self._offset, self.max_tree_chars)
        tabs = [
            f"Tab {i}{' (current)' if i == view.active else ''}: {_short(title, _MAX_TITLE) or '(untitled)'}"
            for i, (title, _) in enumerate(view.tabs[:_MAX_TABS])
        ]
        if len(view.tabs) > _MAX_TABS:
            tabs.append(f"(... {len(view.tabs) - _MAX_TABS} more tabs)")
        parts = [
            "OBSERVATION:",
            *tabs,
            "",
            page or "(the page is empty)",
            "",
            f"URL: {_short(view.url, _MAX_URL)}",
            f"OBJECTIVE: {_short(task.intent, _MAX_OBJECTIVE)}",
            f"PREVIOUS ACTION: {self._previous}",
        ]
        if result:
            parts.append(f"RESULT: {_short(result, _MAX_RESULT)}")
        return "\n".join(parts)

    # ---- expert, lifecycle ----------------------------------------------------------------------
    def find_element(self, role: str, name: str, nth: int = 0) -> int | None:
        """The id of the `nth` element of the current page with this role and exact name, or None."""
        if self._view is None:
            return None
        found = [i for i, node in self._view.tree.nodes.items() if node.role == role and node.name == name]
        return found[nth] if nth < len(found) else None

    def make_expert(self) -> Any:
        from agentgym_envs.webarena.expert import WebArenaExpert

        if self._current is None:
            raise RuntimeError("call reset() before make_expert()")
        return WebArenaExpert(self)

    def browser_pid(self) -> int | None:
        """The process id of the shared browser (None when it is not running)."""
        return self._manager.call(self._manager.browser_pid)

    def _close_session(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            self._manager.call(self._close_on_browser_thread, session)

    def _close_on_browser_thread(self, session: BrowserSession) -> None:
        # A session of a browser that was relaunched since went with it; its objects belong to a
        # stopped Playwright and are not touched.
        if session.launch == self._manager.launches:
            session.close()

    def close(self) -> None:
        self._close_session()
        self._release_browser()
        if self._embedded is not None:
            self._embedded.stop()
        self._view = None
        super().close()
