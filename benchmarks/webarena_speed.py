"""WebArena env: step and reset time, and browser memory per extra env, for 1, 4 and 8 envs in one process;
the embedded sites' start, restore and memory with all of them running.

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

The sites, measured in a fresh process (`sites` in the results): each site's database build and app
(start), its restore, `EmbeddedSites.start()` and `restore()` of all of them together, the memory (RSS)
the sites add to the env's process beyond the browser, and building the bundled catalog (templates'
instances; configs are built on first use), `gym.make` and the first reset. The issue's targets: a site
starts in <= 1 s, a reset restores every site in <= 0.5 s, all sites take <= 150 MB.

Where the memory goes (`browser_processes` of each run): PSS and USS of Chromium's processes by kind
(browser, gpu-process, zygote, network and storage utilities, renderers) at the moment it is measured.

`--compare-before TREE` (issue 39) measures only the memory, in fresh processes that alternate between
this checkout and the package in `TREE` (e.g. a `git worktree` of an earlier commit): 1..N envs
mid-episode in one browser, the PSS after each env is added and the processes by kind.

    python benchmarks/webarena_speed.py [--envs 1 4 8] [--episodes 2]
    python benchmarks/webarena_speed.py --compare-before /tmp/webbefore --envs 4 --rounds 3 --out ...

The first reset of a process (cold, with the browser prelaunched, bare Playwright) is measured by
`webarena_first_reset_speed.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

from agentgym_envs.webarena.browser import chromium
from agentgym_envs.webarena.browser.chromium import find_chromium
from agentgym_envs.webarena.env import WebArenaEnv
from agentgym_envs.webarena.sites import SITES, EmbeddedSites, resolve

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


def browser_args() -> list[str]:
    """The switches the envs launch Chromium with (the baselines use the same browser)."""
    launch_args = getattr(chromium, "launch_args", None)  # absent before issue 39 (--compare-before)
    return launch_args() if launch_args else list(chromium.LAUNCH_ARGS)


def process_kind(pid: int) -> str:
    """Chromium's kind of process `pid` (its `--type`, the utility's service), `browser` for the main one."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").split()
    kind = next((arg.removeprefix("--type=") for arg in argv if arg.startswith("--type=")), "browser")
    service = next((arg.split("=", 1)[1] for arg in argv if arg.startswith("--utility-sub-type=")), None)
    return f"{kind}:{service.rsplit('.', 1)[-1]}" if service else kind


def processes_by_kind(pids: list[int]) -> dict[str, dict[str, float]]:
    """Count, PSS and USS (MB) of `pids` by `process_kind` (processes that vanished are left out)."""
    kinds: dict[str, dict[str, float]] = {}
    for pid in pids:
        try:
            kind = process_kind(pid)
            text = Path(f"/proc/{pid}/smaps_rollup").read_text()
        except (OSError, IndexError):
            continue
        if not text.strip():  # a zombie
            continue
        field = {k: int(v) / 1024 for k, v in re.findall(r"^(\w+):\s+(\d+) kB", text, re.MULTILINE)}
        entry = kinds.setdefault(kind, {"count": 0, "pss_mb": 0.0, "uss_mb": 0.0})
        entry["count"] += 1
        entry["pss_mb"] += field["Pss"]
        entry["uss_mb"] += field["Private_Clean"] + field["Private_Dirty"]
    return dict(sorted(kinds.items()))


def rss_mb() -> float:
    """This process's resident set size, in MB."""
    return int(re.search(r"^VmRSS:\s+(\d+) kB", Path("/proc/self/status").read_text(), re.MULTILINE).group(1)) / 1024


def measure_sites(restores: int = 20) -> dict:
    """In this (fresh) process: all sites started together (cold: modules imported then), their restore and
    memory; then each site's start (warm) and restore; the bundled catalog, `gym.make` and the first reset."""
    import gymnasium as gym

    import agentgym_envs  # noqa: F401  (registers the env ids)
    from agentgym_envs.webarena.tasks.catalog import TaskCatalog

    before = rss_mb()
    sites = EmbeddedSites()
    started = time.perf_counter()
    sites.start()
    start_s = time.perf_counter() - started
    times = []
    for _ in range(restores):
        started = time.perf_counter()
        sites.restore()
        times.append(time.perf_counter() - started)
    sites_rss = rss_mb() - before
    sites.stop()
    per_site = {}
    for site in SITES.values():
        started = time.perf_counter()
        db = resolve(site.database)()
        resolve(site.app)(db)
        site_start_s = time.perf_counter() - started
        site_times = []
        for _ in range(restores):
            started = time.perf_counter()
            db.restore()
            site_times.append(time.perf_counter() - started)
        db.close()
        per_site[site.name] = {"start_s": site_start_s, "restore_median_s": statistics.median(site_times)}
    before = rss_mb()
    started = time.perf_counter()
    catalog = TaskCatalog.bundled()
    catalog_s = time.perf_counter() - started
    catalog_rss = rss_mb() - before
    started = time.perf_counter()
    env = gym.make("AgentGym/WebArena-v0")
    make_s = time.perf_counter() - started
    first = catalog.by_split["test"][0].task_id
    started = time.perf_counter()
    env.reset(options={"task_id": first})
    first_reset_s = time.perf_counter() - started
    env.close()
    return {
        "per_site": per_site,
        "all_start_s": start_s,
        "all_restore_median_s": statistics.median(times),
        "all_restore_max_s": max(times),
        "sites_rss_mb": sites_rss,
        "catalog_s": catalog_s,
        "catalog_rss_mb": catalog_rss,
        "tasks": {split: len(tasks) for split, tasks in catalog.by_split.items()},
        "gym_make_s": make_s,
        "first_reset_s": first_reset_s,
    }


def spread_tasks(env: WebArenaEnv) -> list[str]:
    """The test tasks, taking each site in turn (so the envs visit every site)."""
    by_site: dict[str, list[str]] = {}
    for task in env.catalog.by_split["test"]:
        by_site.setdefault(task.category, []).append(task.task_id)
    rounds = max(len(ids) for ids in by_site.values())
    return [ids[i] for i in range(rounds) for ids in by_site.values() if i < len(ids)]


def measure_envs(n: int, episodes: int) -> dict[str, float]:
    envs = [WebArenaEnv() for _ in range(n)]
    tasks = spread_tasks(envs[0])
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
                    pids = process_tree(env.browser_pid())
                    memory, processes = pss_mb(pids), processes_by_kind(pids)
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
        "browser_processes": processes,
        "browser_pid": pid,
    }


def measure_raw(clicks: int = 20) -> dict[str, float]:
    """Bare Playwright on the embedded shop: click a link that navigates, then snapshot."""
    from playwright.sync_api import sync_playwright

    sites = EmbeddedSites()
    sites.start()
    times = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=find_chromium(), headless=True, args=browser_args())
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
            browser = pw.chromium.launch(executable_path=find_chromium(), headless=True, args=browser_args())
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


def measure_memory(n: int) -> dict:
    """Memory only: `n` envs added one by one, each reset on a task of the next site and two expert steps
    into it (so every env is mid-episode with a page open); the browser's PSS after each, and its processes
    by kind with all `n` open."""
    envs = [WebArenaEnv() for _ in range(n)]
    tasks = spread_tasks(envs[0])
    pss = []
    try:
        for i, env in enumerate(envs):
            observation, info = env.reset(options={"task_id": tasks[i % len(tasks)]})
            expert = env.make_expert()
            for _ in range(2):
                action = expert.act(observation, info)
                if action.startswith("stop"):
                    break
                observation, _, _, _, info = env.step(action)
            pids = process_tree(env.browser_pid())
            pss.append(pss_mb(pids))
        processes = processes_by_kind(pids)
    finally:
        for env in envs:
            env.close()
    return {
        "package": str(Path(chromium.__file__).parents[3]),
        "pss_mb_by_envs": pss,
        "pss_per_extra_env_mb": (pss[-1] - pss[0]) / (n - 1) if n > 1 else None,
        "processes": processes,
    }


def compare_before(before: str, n: int, rounds: int) -> dict:
    """`measure_memory(n)` in fresh processes, alternating the package in `before` and this checkout."""
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    for _ in range(rounds):
        for label in ("before", "after"):
            env = dict(os.environ)
            if label == "before":
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [before, env.get("PYTHONPATH")]))
            child = subprocess.run(
                [sys.executable, __file__, "--memory-child", str(n)],
                capture_output=True,
                text=True,
                check=True,
                env=env,
            )
            runs[label].append(json.loads(child.stdout.strip().splitlines()[-1]))
    result: dict = {"envs": n, "rounds": rounds, "before_tree": before, "runs": runs}
    for label, measured in runs.items():
        result[f"{label}_pss_per_extra_env_mb"] = [run["pss_per_extra_env_mb"] for run in measured]
    before_mb = statistics.median(result["before_pss_per_extra_env_mb"])
    after_mb = statistics.median(result["after_pss_per_extra_env_mb"])
    result["summary"] = [
        {
            "measure": f"browser memory per extra env, {n} envs ({before_mb:.0f} -> {after_mb:.0f} MB PSS, medians)",
            "ratio": before_mb / after_mb,
            "baseline": f"the package in {before}",
            "target": "<= 60 MB per extra env",
            "met": after_mb <= 60,
        }
    ]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--episodes", type=int, default=2, help="episodes per env")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "webarena_speed.json"))
    parser.add_argument("--quick", action="store_true", help="1 and 2 envs, 1 episode (agentgym bench --quick)")
    parser.add_argument("--compare-before", metavar="TREE", help="memory only: this checkout against TREE")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of --compare-before")
    parser.add_argument("--sites-child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--memory-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.envs, args.episodes = [1, 2], 1

    if args.sites_child:
        print(json.dumps(measure_sites()))
        return
    if args.memory_child:
        print(json.dumps(measure_memory(args.memory_child)))
        return
    if args.compare_before:
        result = compare_before(args.compare_before, max(args.envs), args.rounds)
        print(json.dumps({key: value for key, value in result.items() if key != "runs"}, indent=2))
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2))
        return
    child = subprocess.run([sys.executable, __file__, "--sites-child"], capture_output=True, text=True, check=True)
    sites = json.loads(child.stdout.strip().splitlines()[-1])
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
    print_sites(sites)
    results = {"sites": sites, "raw": raw, "runs": runs, "browsergym_reference": BROWSERGYM}
    results["summary"] = summary(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


def print_sites(sites: dict) -> None:
    print(f"{'site':<16}{'start s':>10}{'restore s':>12}")
    for name, site in sites["per_site"].items():
        print(f"{name:<16}{site['start_s']:>10.3f}{site['restore_median_s']:>12.4f}")
    print(
        f"all {len(sites['per_site'])} sites: start {sites['all_start_s']:.3f} s, "
        f"restore {sites['all_restore_median_s']:.4f} s median ({sites['all_restore_max_s']:.4f} max), "
        f"+{sites['sites_rss_mb']:.0f} MB RSS; bundled catalog "
        f"{sites['tasks']} in {sites['catalog_s']:.2f} s (+{sites['catalog_rss_mb']:.0f} MB); gym.make "
        f"{sites['gym_make_s']:.2f} s, first reset {sites['first_reset_s']:.2f} s"
    )
    print("targets: a site starts in <= 1 s, a reset restores all in <= 0.5 s, all sites <= 150 MB")


def summary(results: dict) -> list[dict]:
    """The headlines for `agentgym bench`: step time against bare Playwright, browser memory against one
    browser per env, with the targets."""
    sites = results["sites"]
    slowest = max(site["start_s"] for site in sites["per_site"].values())
    rows = [
        {
            "measure": f"slowest site start ({slowest:.3f} s)",
            "ratio": None,
            "baseline": None,
            "target": "<= 1 s",
            "met": slowest <= 1,
        },
        {
            "measure": f"restore of all {len(sites['per_site'])} sites ({sites['all_restore_median_s']:.4f} s median)",
            "ratio": None,
            "baseline": None,
            "target": "<= 0.5 s",
            "met": sites["all_restore_max_s"] <= 0.5,
        },
        {
            "measure": f"memory of all sites (+{sites['sites_rss_mb']:.0f} MB RSS beyond the browser)",
            "ratio": None,
            "baseline": None,
            "target": "<= 150 MB",
            "met": sites["sites_rss_mb"] <= 150,
        },
    ]
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
