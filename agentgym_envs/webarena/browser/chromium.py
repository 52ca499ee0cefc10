"""One Chromium per Python process, shared by every WebArena env in it.

Playwright's sync API is bound to the thread that started it and refuses to start inside a running
asyncio loop (e.g. a notebook). So the manager owns a dedicated thread: Playwright and the browser
live there, and every browser call of every env runs on it (`BrowserManager.call`), whatever thread
the env is used from. Envs hold a reference while they have a browser context open; when the last
one is released, the browser and Playwright's driver stop, so no Chromium process outlives the envs.

A launch need not hold up the caller: `submit` queues a job and returns its future. The first reset of
an env queues the launch before it starts its sites, so both go on at once, and an env made with
`prelaunch=True` queues it (`prelaunch`) at `make`, so that its first reset finds the browser up.

A browser that died (crash, killed) is noticed through Playwright's `disconnected` event, or by a
call that fails on it, and relaunched by the next `browser()` call, i.e. the next reset of any env.
`launches` counts the launches: a session opened on an earlier launch belongs to a dead browser (and
a stopped Playwright), so its env ends the episode without touching it.
"""

from __future__ import annotations

import atexit
import logging
import os
import queue
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

_log = logging.getLogger(__name__)
T = TypeVar("T")
#: What the throwaway page of a prelaunched browser loads: no network, a link for the snapshot to show.
_WARM_UP_PAGE = "data:text/html,<title>warm-up</title><h1>warm-up</h1><a href='#'>link</a>"

#: Flags for a headless, quiet browser that does not call home.
LAUNCH_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
)
#: Playwright's own `--disable-features` list (1.65). Chromium honours only the last `--disable-features`
#: switch, and Playwright puts its own before ours, so ours repeats it to add to it rather than drop it
#: (HttpsUpgrades, ThirdPartyStoragePartitioning, ...). A Playwright with another list is noticed at
#: launch and the browser relaunched with both (`BrowserManager._launch`).
PLAYWRIGHT_DISABLED_FEATURES = (
    "AvoidUnnecessaryBeforeUnloadCheckSync",
    "DestroyProfileOnBrowserClose",
    "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable",
    "LensOverlay",
    "MediaRouter",
    "PaintHolding",
    "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect",
    "TcpPortRandomizationWin",
    "OptimizationHints",
    "NetworkTimeServiceQuerying",
    "AimEnabled",
    "PreconnectToSearch",
    "msForceBrowserSignIn",
    "msEdgeUpdateLaunchServicesPreferredVersion",
)
#: Browser UI that nobody sees in a headless browser: the address bar's drop-down (the omnibox popup, drawn
#: as a WebUI page) and the preloading of such top-chrome WebUI pages. Chromium builds them for every
#: window, and every browser context (one per env) gets a window of its own, so each env paid a renderer
#: process for an invisible drop-down (about 40 MB PSS). Safe to turn off: they are the browser's own
#: chrome, outside every page; no page, cookie, request, accessibility tree or action depends on them.
HEADLESS_UI_FEATURES = (
    "PreloadTopChromeWebUI",
    "WebUIOmniboxPopup",
    "WebUIOmniboxAimPopup",
    "WebUIOmniboxFullPopup",
)


def launch_args(playwright_features: tuple[str, ...] = PLAYWRIGHT_DISABLED_FEATURES) -> list[str]:
    """The switches we launch Chromium with: `LAUNCH_ARGS` and one `--disable-features` that keeps
    Playwright's `playwright_features` and adds `HEADLESS_UI_FEATURES`."""
    features = dict.fromkeys((*playwright_features, *HEADLESS_UI_FEATURES))
    return [*LAUNCH_ARGS, "--disable-features=" + ",".join(features)]


def disabled_features_of(pid: int) -> list[list[str]] | None:
    """Each `--disable-features` list on the command line of process `pid`, in order (Chromium applies
    only the last), or None where the command line cannot be read."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return None
    prefix = "--disable-features="
    return [arg.removeprefix(prefix).split(",") for arg in argv if arg.startswith(prefix)]


#: Debian's `/usr/bin/chromium` is a shell script that sources /etc/chromium.d (API keys, extension
#: flags, a noisy /dev/shm check) before running this binary; we run the binary directly.
_DEBIAN_BINARY = "/usr/lib/chromium/chromium"
_CANDIDATES = (_DEBIAN_BINARY, "/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")


def find_chromium(path: str | os.PathLike[str] | None = None) -> str:
    """The Chromium executable: `path`, else `$AGENTGYM_CHROMIUM`, else Debian's Chromium or one on PATH."""
    if path is None:
        path = os.environ.get("AGENTGYM_CHROMIUM")
    if path is not None:
        path = str(path)
        if path == "/usr/bin/chromium" and os.access(_DEBIAN_BINARY, os.X_OK):
            return _DEBIAN_BINARY
        resolved = shutil.which(path)
        if resolved is None:
            raise FileNotFoundError(f"Chromium executable {path!r} not found or not executable")
        return resolved
    for candidate in _CANDIDATES:
        resolved = shutil.which(candidate) if not candidate.startswith("/") else candidate
        if resolved and os.access(resolved, os.X_OK) and Path(resolved).is_file():
            return resolved
    raise FileNotFoundError(
        "no Chromium found: install it (Debian/Ubuntu: apt-get install -y chromium) or pass "
        "chromium_path=... / set AGENTGYM_CHROMIUM (Playwright's own browser download is not needed)"
    )


class BrowserManager:
    """The process's browser: its thread, Playwright, the Chromium process and the users' count."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Callable[[], Any], Future] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._users = 0
        self._playwright: Any = None
        self._browser: Any = None
        self._executable: str | None = None
        self._playwright_features = PLAYWRIGHT_DISABLED_FEATURES
        self.launches = 0

    # ---- the browser thread ---------------------------------------------------------------------
    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run `fn(*args, **kwargs)` on the browser thread and return its result (or raise its error)."""
        if threading.current_thread() is self._thread:
            return fn(*args, **kwargs)
        return self.submit(fn, *args, **kwargs).result()

    def submit(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
        """Queue `fn(*args, **kwargs)` for the browser thread and return its future at once. The thread
        runs its jobs in order, so a later `call` waits for this one first."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._queue = queue.SimpleQueue()
                self._thread = threading.Thread(
                    target=self._serve, args=(self._queue,), name="agentgym-browser", daemon=True
                )
                self._thread.start()
            future: Future = Future()
            self._queue.put((lambda: fn(*args, **kwargs), future))  # under the lock: never after a stop sentinel
        return future

    @staticmethod
    def _serve(jobs: queue.SimpleQueue) -> None:
        while True:
            item = jobs.get()
            if item is None:
                return
            fn, future = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn())
            except BaseException as error:
                future.set_exception(error)

    # ---- users ----------------------------------------------------------------------------------
    def acquire(self) -> None:
        """Count one more user (an env with an open context)."""
        with self._lock:
            self._users += 1

    def release(self) -> None:
        """Count one user less; the last one out stops the browser, Playwright's driver and the thread."""
        with self._lock:
            self._users = max(0, self._users - 1)
            last = self._users == 0
        if last:
            self.call(self._stop)
            with self._lock:
                if self._users == 0 and self._thread is not None:  # nobody came back meanwhile
                    self._queue.put(None)
                    self._thread = None

    @property
    def users(self) -> int:
        return self._users

    # ---- the browser (call these on the browser thread) -----------------------------------------
    def browser(self, executable: str) -> tuple[Any, bool]:
        """The running browser, launched or relaunched as needed; also whether it was relaunched
        after a crash. Browser thread only."""
        self._check_thread()
        if self._browser is not None and self._executable != executable:
            raise ValueError(
                f"this process's browser runs {self._executable}; all envs of one process share it, so "
                f"chromium_path={executable!r} cannot differ"
            )
        relaunched = False
        if self._browser is not None and not self._browser.is_connected():
            _log.warning("Chromium exited unexpectedly (crash or kill); relaunching it")
            self._stop()
            relaunched = True
        if self._browser is None:
            self._launch(executable)
        return self._browser, relaunched

    def prelaunch(self, executable: str) -> Future[None]:
        """Start launching the browser now, on the browser thread, and return at once (`_prelaunch`).

        The caller holds a user (`acquire`) from before this call until it is done with the browser, so
        that its `release` stops what this started (after the launch, which the thread finishes first).
        The future raises the launch's error, if any.
        """
        return self.submit(self._prelaunch, executable)

    def _prelaunch(self, executable: str) -> None:
        """Browser thread: the browser as `browser()` gives it; when this launched it, one throwaway page
        in a throwaway context too. The first page of a new browser costs more than later ones (the
        first renderer, the first run of Playwright's code for a page, a navigation and a snapshot);
        paid here, it is off the first reset (0.36 -> 0.29 s median on the loaded test machine). The
        warm-up is best effort: a failure of it is only logged, as the first reset opens its page anyway."""
        launches = self.launches
        browser, _ = self.browser(executable)
        if self.launches == launches:
            return
        try:
            context = browser.new_context()
            try:
                page = context.new_page()
                page.goto(_WARM_UP_PAGE)
                page.aria_snapshot(mode="ai")
            finally:
                context.close()
        except Exception as error:
            _log.debug("ignoring a failed warm-up of the prelaunched browser: %r", error)

    def discard(self) -> None:
        """Stop the browser (found dead though it looked alive); the next `browser()` relaunches it.
        Browser thread only."""
        self._check_thread()
        _log.warning("Chromium exited unexpectedly (crash or kill); relaunching it")
        self._stop()

    def connected(self) -> bool:
        """Whether the browser is up. Browser thread only."""
        return self._browser is not None and self._browser.is_connected()

    def browser_pid(self) -> int | None:
        """The process id of the browser's main process, or None when none runs. Browser thread only."""
        if not self.connected():
            return None
        session = self._browser.new_browser_cdp_session()
        try:
            infos = session.send("SystemInfo.getProcessInfo")["processInfo"]
        finally:
            session.detach()
        return next((int(p["id"]) for p in infos if p.get("type") == "browser"), None)

    def _launch(self, executable: str) -> None:
        try:
            from playwright.sync_api import Error as PlaywrightError
            from playwright.sync_api import sync_playwright
        except ImportError as error:
            raise ImportError(
                "AgentGym/WebArena-v0 needs Playwright: pip install 'agentgym-rl[web]' (and Chromium, e.g. "
                "apt-get install -y chromium)"
            ) from error
        if self._playwright is None:
            self._playwright = sync_playwright().start()
        try:
            self._browser = self._playwright.chromium.launch(
                executable_path=executable, headless=True, args=launch_args(self._playwright_features)
            )
        except PlaywrightError:
            # The driver itself may be gone (it dies with the browser it was killed with): start afresh.
            self._stop()
            self._playwright = sync_playwright().start()
            try:
                self._browser = self._playwright.chromium.launch(
                    executable_path=executable, headless=True, args=launch_args(self._playwright_features)
                )
            except PlaywrightError as error:
                self._stop()
                raise RuntimeError(f"could not launch Chromium at {executable}: {error.message}") from error
        self._executable = executable
        self.launches += 1
        missing = self._features_dropped()
        if missing:
            # Another Playwright disables features that our list lacks: keep them too, once and for all.
            _log.info("Playwright also disables %s; relaunching Chromium with them kept", ", ".join(missing))
            self._playwright_features = (*self._playwright_features, *missing)
            self._browser.close()
            self._browser = None
            self._launch(executable)

    def _features_dropped(self) -> list[str]:
        """The features that Playwright's own `--disable-features` names and ours (the last, so the one
        Chromium applies) does not; empty where the command line cannot be read."""
        pid = self.browser_pid()
        lists = disabled_features_of(pid) if pid is not None else None
        if not lists or len(lists) < 2:
            return []
        applied = set(lists[-1])
        return [feature for feature in lists[0] if feature and feature not in applied]

    def _stop(self) -> None:
        browser, playwright = self._browser, self._playwright
        self._browser = self._playwright = None
        self._executable = None
        for close in (browser and browser.close, playwright and playwright.stop):
            if close:
                try:
                    close()
                except Exception as error:  # already dead: nothing left to close
                    _log.debug("ignoring error while closing the browser: %r", error)

    def _check_thread(self) -> None:
        if threading.current_thread() is not self._thread:
            raise RuntimeError("browser objects may only be used on the browser thread; use BrowserManager.call")

    def shutdown(self) -> None:
        """Stop the browser and Playwright now (at exit, or in tests)."""
        if self._thread is not None and self._thread.is_alive():
            self.call(self._stop)


_MANAGER = BrowserManager()
atexit.register(_MANAGER.shutdown)


def _forget_in_child() -> None:
    # A forked child (e.g. a vector-env worker) must not touch the parent's browser or thread.
    _MANAGER.__init__()


os.register_at_fork(after_in_child=_forget_in_child)


def get_manager() -> BrowserManager:
    """The browser manager of this process."""
    return _MANAGER
