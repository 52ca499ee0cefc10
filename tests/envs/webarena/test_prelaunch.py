"""`prelaunch=True` (issue 39, first reset): the shared browser launches at `make`, in the background on the
browser thread, so that the first reset does not launch it; an env closed without a reset leaves no browser,
and a launch that failed is raised by the first reset."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentgym_envs.webarena import env as env_module
from agentgym_envs.webarena.browser.chromium import BrowserManager
from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.tasks.catalog import TaskConfigError


@pytest.fixture
def manager(monkeypatch: pytest.MonkeyPatch) -> BrowserManager:
    """A browser manager of the test's own, so that no browser of another test is found running."""
    own = BrowserManager()
    monkeypatch.setattr(env_module, "get_manager", lambda: own)
    yield own
    own.shutdown()


def test_after_a_prelaunch_the_first_reset_launches_no_browser_and_sees_the_same_page(manager: BrowserManager) -> None:
    env = WebArenaEnv(prelaunch=True)
    try:
        assert env._embedded is not None and env._embedded._server is not None  # the sites started at make
        env._launching.result(timeout=120)
        assert manager.launches == 1
        assert manager.call(manager.connected)
        observation, _ = env.reset(options={"task_id": "13"})
        assert manager.launches == 1  # the reset found the browser up
        cold = WebArenaEnv()  # a second env, reset as usual, sees the same page
        try:
            assert cold.reset(options={"task_id": "13"})[0] == observation
        finally:
            cold.close()
    finally:
        env.close()
    assert manager.users == 0 and not manager.call(manager.connected)


def test_a_cold_first_reset_launches_the_browser_once(manager: BrowserManager) -> None:
    env = WebArenaEnv()
    try:
        assert env._launching is None and manager.launches == 0  # nothing launched at make by default
        env.reset(options={"task_id": "13"})
        env.reset(options={"task_id": "13"})
        assert manager.launches == 1
    finally:
        env.close()


def test_a_failed_prelaunch_is_raised_by_the_first_reset_and_the_next_reset_tries_again(
    manager: BrowserManager, tmp_path: Path
) -> None:
    fake = tmp_path / "chromium"
    fake.write_text("#!/bin/sh\nexit 3\n")
    fake.chmod(0o755)
    env = WebArenaEnv(chromium_path=fake, prelaunch=True)
    try:
        with pytest.raises(RuntimeError, match="could not launch Chromium"):
            env._launching.result(timeout=120)
        started = time.monotonic()
        with pytest.raises(RuntimeError, match=f"could not launch Chromium at {fake}"):
            env.reset(options={"task_id": "13"})
        assert time.monotonic() - started < 30  # raised, not waited for
        assert manager.launches == 0
        with pytest.raises(RuntimeError, match="could not launch Chromium"):  # a new launch, failing again
            env.reset(options={"task_id": "13"})
    finally:
        env.close()
    assert manager.users == 0


def test_a_prelaunch_without_chromium_leaves_the_error_to_the_first_reset(manager: BrowserManager) -> None:
    env = WebArenaEnv(chromium_path="/nonexistent/chrome", prelaunch=True)
    try:
        assert env._launching is None and manager.users == 0
        with pytest.raises(FileNotFoundError, match="not found"):
            env.reset(options={"task_id": "0"})
    finally:
        env.close()


def test_a_failed_make_releases_the_prelaunched_browser(manager: BrowserManager, tmp_path: Path) -> None:
    with pytest.raises(TaskConfigError, match="does not exist"):
        WebArenaEnv(config_dir=tmp_path / "missing", prelaunch=True)
    assert manager.users == 0
    assert not manager.call(manager.connected)


CHILD = """
import json, os, sys, threading, time
sys.path.insert(0, {tests!r})
from envs.webarena.test_browser import alive, browser_tree
from agentgym_envs.webarena.env import WebArenaEnv

def descendants():
    return [pid for pid in browser_tree(os.getpid()) if pid != os.getpid() and alive(pid)]

# Closed during the launch: close waits for it, then stops the browser and its driver.
env = WebArenaEnv(prelaunch=True)
started = time.monotonic()
env.close()
early = {{"close_s": time.monotonic() - started, "left": descendants()}}
# Closed after the launch, never reset.
env = WebArenaEnv(prelaunch=True)
env._launching.result(timeout=120)
running = descendants()
env.close()
time.sleep(0.2)
threads = sorted(t.name for t in threading.enumerate())
print(json.dumps({{"early": early, "running": running, "threads": threads}}), flush=True)
sys.stdin.readline()  # stay alive while the parent looks: close() itself must end Chromium
"""


def test_an_env_closed_without_a_reset_leaves_no_browser_process_or_thread() -> None:
    tests = str(Path(__file__).resolve().parents[2])
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(tests=tests)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        report = json.loads(child.stdout.readline())
        assert report["early"]["left"] == []
        assert report["early"]["close_s"] < 60
        assert len(report["running"]) >= 3  # Playwright's driver, the browser and its helper processes
        assert report["threads"] == ["MainThread"]  # no browser or site server thread left
        deadline = time.monotonic() + 15
        while any(_alive(pid) for pid in report["running"]):
            assert time.monotonic() < deadline, [pid for pid in report["running"] if _alive(pid)]
            time.sleep(0.05)
        assert child.poll() is None  # gone because of close(), not because the process ended
    finally:
        child.communicate("\n", timeout=30)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False
