"""WebArena env: step and reset time, and browser memory per extra env, for 1, 4 and 8 envs in one process.

The issue's targets: a step (action + new observation) <= 0.25 s median, a reset <= 0.5 s median, and
<= 150 MB more browser memory (PSS of Chromium's processes) per additional env, as contexts share one
browser. Measured in the same run, as baselines:

- `raw`: bare Playwright on the same embedded shop and the same browser binary: a link click that
  navigates plus an accessibility snapshot (the work of one env step without the env).
- `browser-per-env`: AgentGym's way (one Chromium per env): N browsers with one page each, PSS summed.

The envs run interleaved like a vector env: each tick, every env takes one expert step; an env whose
episode ends is reset to the next bundled task. The first reset of each env (server start, browser
launch) is reported apart. BrowserGym's figures from BASELINES.md (click step 1.81 s, reset 2.74 s on
this kind of machine, another day) are quoted for reference only.

    python benchmarks/webarena_speed.py [--envs 1 4 8] [--episodes 2]
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from pathlib import Path

from agentgym_envs.webarena.browser import LAUNCH_ARGS, find_chromium
from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.sites import EmbeddedSites

BROWSERGYM = {"step_s": 1.81, "reset_s": 2.74}


def pss_mb(pids: list[int]) -> float:
    """Summed proportional set size of `pids`, in MB (processes that vanished count 0)."""
    total_kb = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except OSError:
            continue
        total_kb += int(re.search(r"^Pss:\s+(\d+) kB", text, re.MULTILINE).group(1))
    return total_kb / 1024


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        tree.append(todo.pop())
        todo.extend(children.get(tree[-1], []))
    return tree


def measure_envs(n: int, episodes: int) -> dict[str, float]:
    envs = [WebArenaEnv() for _ in range(n)]
    tasks = [t for split in ("train", "test") for t in envs[0].tasks(split)]
    steps: list[float] = []
    resets: list[float] = []
    first_resets: list[float] = []
    state = []
    try:
        for i, env in enumerate(envs):
            started = time.perf_counter()
            observation, info = env.reset(options={"task_id": tasks[i % len(tasks)]})
            first_resets.append(time.perf_counter() - started)
            state.append([observation, info, env.make_expert(), 1, i])
        memory = None
        while any(s[3] <= episodes for s in state):
            for env, s in zip(envs, state, strict=True):
                observation, info, expert, episode, task_index = s
                if episode > episodes:
                    continue
                action = expert.act(observation, info)
                started = time.perf_counter()
                observation, _, terminated, truncated, info = env.step(action)
                if not action.startswith("stop"):  # stop evaluates; a step is action + new observation
                    steps.append(time.perf_counter() - started)
                if not info["valid_action"] or ((terminated or truncated) and not info["success"]):
                    raise RuntimeError(f"the expert failed on task {info['task_id']}: {observation[-300:]}")
                if memory is None and len(steps) >= 2 * n:  # every env is mid-episode with a page open
                    memory = pss_mb(process_tree(env.browser_pid()))
                if terminated or truncated:
                    task_index += n
                    started = time.perf_counter()
                    observation, info = env.reset(options={"task_id": tasks[task_index % len(tasks)]})
                    resets.append(time.perf_counter() - started)
                    expert, episode = env.make_expert(), episode + 1
                s[:] = [observation, info, expert, episode, task_index]
        pid = envs[0].browser_pid()
    finally:
        for env in envs:
            env.close()
    return {
        "envs": n,
        "step_median_s": statistics.median(steps),
        "step_p90_s": statistics.quantiles(steps, n=10)[-1],
        "steps": len(steps),
        "reset_median_s": statistics.median(resets),
        "resets": len(resets),
        "first_reset_median_s": statistics.median(first_resets),
        "browser_pss_mb": memory,
        "browser_pid": pid,
    }


def measure_raw(clicks: int = 20) -> dict[str, float]:
    """Bare Playwright on the embedded shop: click a link that navigates, then snapshot."""
    from playwright.sync_api import sync_playwright

    sites = EmbeddedSites()
    sites.start()
    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), headless=True, args=list(LAUNCH_ARGS))
        context = browser.new_context(proxy={"server": sites.proxy})
        context.add_cookies(sites.cookies())  # the shop answers only a context with its secret
        page = context.new_page()
        for i in range(clicks):
            page.goto("http://shop.test/category/kitchen" if i % 2 else "http://shop.test/orders")
            snapshot = page.aria_snapshot(mode="ai")
            ref = re.search(r'link "(?:Price: low to high|#1002)" \[ref=(\w+)\]', snapshot).group(1)
            started = time.perf_counter()
            page.locator(f"aria-ref={ref}").click()
            page.wait_for_load_state("load")
            page.aria_snapshot(mode="ai")
            times.append(time.perf_counter() - started)
        browser.close()
    sites.stop()
    return {"click_and_snapshot_median_s": statistics.median(times)}


def measure_browser_per_env(n: int) -> float:
    """PSS of `n` separate browsers with one shop page each (one browser per env), in MB."""
    from playwright.sync_api import sync_playwright

    sites = EmbeddedSites()
    sites.start()
    with sync_playwright() as pw:
        browsers = []
        for _ in range(n):
            browser = pw.chromium.launch(executable_path=find_chromium(), headless=True, args=list(LAUNCH_ARGS))
            context = browser.new_context(proxy={"server": sites.proxy})
            context.add_cookies(sites.cookies())
            context.new_page().goto("http://shop.test/")
            browsers.append(browser)
        pids = []
        for browser in browsers:
            session = browser.new_browser_cdp_session()
            info = session.send("SystemInfo.getProcessInfo")["processInfo"]
            pids += process_tree(next(int(p["id"]) for p in info if p["type"] == "browser"))
        total = pss_mb(pids)
        for browser in browsers:
            browser.close()
    sites.stop()
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--episodes", type=int, default=2, help="episodes per env")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "webarena_speed.json"))
    parser.add_argument("--quick", action="store_true", help="1 and 2 envs, 1 episode (agentgym bench --quick)")
    args = parser.parse_args()
    if args.quick:
        args.envs, args.episodes = [1, 2], 1

    raw = measure_raw()
    runs = [measure_envs(n, args.episodes) for n in args.envs]
    base = runs[0]
    for run in runs:
        extra = run["envs"] - base["envs"]
        run["pss_per_extra_env_mb"] = (run["browser_pss_mb"] - base["browser_pss_mb"]) / extra if extra else None
        run["browser_per_env_pss_mb"] = measure_browser_per_env(run["envs"])
        run["memory_vs_browser_per_env"] = run["browser_pss_mb"] / run["browser_per_env_pss_mb"]
        run["step_vs_raw"] = run["step_median_s"] / raw["click_and_snapshot_median_s"]

    header = ("step med s", "step p90 s", "reset med s", "1st reset s", "PSS MB", "+MB/env", "1 browser/env MB")
    print(f"{'envs':<6}" + "".join(f"{h:>18}" for h in header))
    for r in runs:
        per_env = f"{r['pss_per_extra_env_mb']:.0f}" if r["pss_per_extra_env_mb"] is not None else "-"
        print(
            f"{r['envs']:<6}{r['step_median_s']:>18.3f}{r['step_p90_s']:>18.3f}{r['reset_median_s']:>18.3f}"
            f"{r['first_reset_median_s']:>18.3f}{r['browser_pss_mb']:>18.0f}{per_env:>18}"
            f"{r['browser_per_env_pss_mb']:>18.0f}"
        )
    print(f"raw Playwright click + snapshot: {raw['click_and_snapshot_median_s']:.3f} s median")
    print(
        f"targets: step <= 0.25 s, reset <= 0.5 s, <= 150 MB per extra env; BrowserGym (BASELINES.md, for "
        f"reference): step {BROWSERGYM['step_s']} s, reset {BROWSERGYM['reset_s']} s"
    )
    results = {"raw": raw, "runs": runs, "browsergym_reference": BROWSERGYM}
    results["summary"] = summary(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


def summary(results: dict) -> list[dict]:
    """The headlines for `agentgym bench`: step time against bare Playwright, browser memory against one
    browser per env, with the targets."""
    rows = []
    for run in results["runs"]:
        n = run["envs"]
        rows.append(
            {
                "measure": f"step, {n} envs ({run['step_median_s']:.3f} s median)",
                "ratio": 1 / run["step_vs_raw"],
                "baseline": "bare Playwright click + snapshot",
                "target": "<= 0.25 s",
                "met": run["step_median_s"] <= 0.25,
            }
        )
        per_env = run["pss_per_extra_env_mb"]
        rows.append(
            {
                "measure": f"browser memory, {n} envs" + (f" (+{per_env:.0f} MB/env)" if per_env is not None else ""),
                "ratio": 1 / run["memory_vs_browser_per_env"],
                "baseline": "one browser per env",
                "target": "<= 150 MB per extra env" if per_env is not None else None,
                "met": per_env <= 150 if per_env is not None else None,
            }
        )
    return rows


if __name__ == "__main__":
    main()
