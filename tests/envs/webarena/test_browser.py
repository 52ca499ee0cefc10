"""The shared browser: crash detection and relaunch, and no Chromium process (or thread) left after close."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentgym_envs.webarena.browser.chromium import LAUNCH_ARGS, find_chromium
from agentgym_envs.webarena.env import WebArenaEnv


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie counts as gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def wait_until(condition, timeout: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def test_a_killed_browser_ends_the_episode_clearly_and_the_next_reset_relaunches_it() -> None:
    env = WebArenaEnv()
    try:
        env.reset(options={"task_id": "0"})
        pid = env.browser_pid()
        assert pid is not None and alive(pid)
        os.kill(pid, signal.SIGKILL)
        assert wait_until(lambda: not alive(pid))
        observation, reward, terminated, truncated, info = env.step("click [10]")
        assert truncated and not terminated and reward == 0 and not info["valid_action"]
        assert info["error"].startswith("browser failure") and "the next reset starts a new browser" in observation
        observation, info = env.reset(options={"task_id": "0"})
        assert "URL: http://shop.test/" in observation
        new_pid = env.browser_pid()
        assert new_pid is not None and new_pid != pid and alive(new_pid)
        assert env.step("stop [$34.99]")[1] == 1  # the env works as before
    finally:
        env.close()


def kill_browser(env: WebArenaEnv) -> int:
    pid = env.browser_pid()
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not alive(pid))
    return pid


def assert_failed(step: tuple) -> None:
    """The episode ended as documented for a browser failure: truncated, score 0, `info["error"]`."""
    observation, reward, terminated, truncated, info = step
    assert (reward, terminated, truncated, info["score"], info["success"]) == (0, False, True, 0, False)
    assert info["error"].startswith("browser failure") and "ends here with score 0" in observation


def test_every_env_sharing_a_killed_browser_ends_its_episode_cleanly_and_resets() -> None:
    a, b, c = WebArenaEnv(), WebArenaEnv(), WebArenaEnv()
    try:
        a.reset(options={"task_id": "0"})
        b.reset(options={"task_id": "0"})
        pid = kill_browser(a)
        # The first call after the kill is a fresh env's reset: it relaunches the browser while a and b
        # still hold contexts of the dead one.
        assert "URL: http://shop.test/" in c.reset(options={"task_id": "0"})[0]
        assert c.browser_pid() not in (None, pid)
        assert_failed(a.step("click [10]"))
        assert_failed(b.step("stop [$34.99]"))  # the evaluation needs the browser too
        a.reset(options={"task_id": "0"})
        kill_browser(c)  # now a and c step on the dead browser before anyone resets
        assert_failed(a.step("scroll [down]"))
        assert_failed(c.step("click [10]"))
        for env in (a, b, c):
            env.reset(options={"task_id": "0"})
            assert env.step("stop [$34.99]")[1] == 1
        assert a.browser_pid() == b.browser_pid() == c.browser_pid()  # still one shared browser
    finally:
        for env in (a, b, c):
            env.close()
            env.close()


CHILD = """
import sys, threading, time
sys.path.insert(0, {tests!r})
from envs.webarena.test_browser import browser_tree
from agentgym_envs.webarena.env import WebArenaEnv
envs = [WebArenaEnv(), WebArenaEnv()]
for env in envs:
    env.reset(options={{"task_id": "0"}})
print(" ".join(map(str, browser_tree(envs[0].browser_pid()))), flush=True)
for env in envs:
    env.close()
    env.close()  # idempotent
time.sleep(0.2)
print("closed", *sorted(t.name for t in threading.enumerate()), flush=True)
sys.stdin.readline()  # stay alive while the parent looks: close() itself must end Chromium
"""


def browser_tree(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def test_no_chromium_process_is_left_after_close() -> None:
    tests = str(Path(__file__).resolve().parents[2])
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(tests=tests)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(p) for p in child.stdout.readline().split()]
        assert len(pids) >= 3  # the browser and its helper processes (zygote, renderers, ...)
        assert child.stdout.readline().split() == ["closed", "MainThread"]  # no browser or server thread left
        assert wait_until(lambda: not any(alive(pid) for pid in pids)), [p for p in pids if alive(p)]
        assert child.poll() is None  # gone because of close(), not because the process ended
    finally:
        child.communicate("\n", timeout=30)


def test_chromium_is_found_and_launched_with_the_required_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    assert {"--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--no-first-run"} <= set(LAUNCH_ARGS)  # fmt: skip
    assert os.access(find_chromium(), os.X_OK)
    monkeypatch.setenv("AGENTGYM_CHROMIUM", "/nonexistent/chromium")
    with pytest.raises(FileNotFoundError, match="/nonexistent/chromium"):
        find_chromium()
    env = WebArenaEnv(chromium_path="/nonexistent/chrome")
    with pytest.raises(FileNotFoundError, match="not found"):
        env.reset(options={"task_id": "0"})
    env.close()
