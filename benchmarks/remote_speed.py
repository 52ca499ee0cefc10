"""Env server speed: steps/s and p50/p99 step latency with 1, 8 and 32 clients, single and batched.

Measured the way AgentGym's own servers were (../shared/BASELINES.md): the server pinned to one core
(`taskset`), the load on another, one keep-alive client per session. `single`: each client is its own
process with a `RemoteEnv`, one request per step. `batched`: one `RemoteVectorEnv` of N sessions, one
`POST /batch` per turn for all N (its latency is the turn's). Beside them, the env's in-process step
rate on the server core (the physical limit) and the server's CPU time per step (robust to other
load on a shared machine: `1000 / cpu_ms_per_step` is what one free core would sustain).

Workloads repeat one cheap valid action, as the baselines did: BabyAI `turn left` (always steps
minigrid and rewrites the observation), TextCraft `inventory`. TextCraft is included when
`AgentGym/TextCraft-v0` is registered.

Targets (issue 7): >= 3x AgentGym's 32-client figures (~222 steps/s BabyAI, ~2,100 TextCraft;
batching allowed) and p99 <= 5 ms for single TextCraft steps with 8 clients.

    python benchmarks/remote_speed.py [--seconds 4] [--clients 1 8 32] [--server-core 0 --client-core 1]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import agentgym_envs  # noqa: F401
from agentgym_envs.remote import RemoteEnv, RemoteVectorEnv

#: AgentGym's servers on this kind of machine (BASELINES.md): clients -> (steps/s, p50 ms, p99 ms).
AGENTGYM = {
    "AgentGym/BabyAI-v0": {1: (105, 6.5, 21), 8: (240, 30, 86), 32: (222, 136, 261)},
    "AgentGym/TextCraft-v0": {1: (970, 1.0, 1.7), 8: (2100, 3.5, 9.4), 32: (2100, 13, 51)},
}
ACTIONS = {"AgentGym/BabyAI-v0": "turn left", "AgentGym/TextCraft-v0": "inventory"}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def in_process_rate(env_id: str, seconds: float) -> float:
    env = gym.make(env_id)
    env.reset(seed=0)
    action, steps, start = ACTIONS[env_id], 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(100):
            _, _, terminated, truncated, _ = env.step(action)
            steps += 1
            if terminated or truncated:
                env.reset(seed=steps)
    rate = steps / (time.perf_counter() - start)
    env.close()
    return rate


def _client(url: str, env_id: str, seed: int, seconds: float, start: float, out: Any) -> None:
    try:
        env = RemoteEnv(url, env_id, retries=0)
        env.reset(seed=seed)
        action, latencies = ACTIONS[env_id], []
        while time.time() < start:  # every client starts the clock together
            time.sleep(0.001)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            _, _, terminated, truncated, _ = env.step(action)
            latencies.append(time.perf_counter() - t0)
            if terminated or truncated:
                env.reset()
        env.close()
        out.put(latencies)
    except BaseException as error:
        out.put(f"client {seed}: {type(error).__name__}: {error}")


def run_single(url: str, env_id: str, clients: int, seconds: float) -> tuple[np.ndarray, int]:
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    start = time.time() + 0.5 + 0.05 * clients
    procs = [ctx.Process(target=_client, args=(url, env_id, i, seconds, start, out)) for i in range(clients)]
    for proc in procs:
        proc.start()
    latencies = [out.get(timeout=seconds + 120) for _ in procs]
    for proc in procs:
        proc.join()
    failed = [result for result in latencies if isinstance(result, str)]
    if failed:
        raise RuntimeError(f"{len(failed)} clients failed, e.g. {failed[0]}")
    flat = np.concatenate([np.asarray(lat) for lat in latencies])
    return flat, len(flat)


def run_batched(url: str, env_id: str, clients: int, seconds: float) -> tuple[np.ndarray, int]:
    envs = RemoteVectorEnv(clients, url, env_id, retries=0)
    envs.reset(seed=0)
    actions, latencies = [ACTIONS[env_id]] * clients, []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        envs.step(actions)
        latencies.append(time.perf_counter() - t0)
    envs.close()
    return np.asarray(latencies), len(latencies) * clients


def start_server(env_ids: list[str], core: int | None) -> tuple[subprocess.Popen, str]:
    command = [sys.executable, "-m", "agentgym_train.cli", "serve", *env_ids, "--port", "0", "--max-sessions", "4096"]
    if core is not None:
        command = ["taskset", "-c", str(core), *command]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert server.stdout is not None
    line = server.stdout.readline()
    match = re.search(r"http://[\d.]+:\d+", line)
    if match is None:
        server.kill()
        raise RuntimeError(f"the server did not start: {line!r}")
    return server, match.group(0)


def measure(url: str, pid: int, env_id: str, mode: str, clients: int, seconds: float) -> dict[str, Any]:
    """One load run; the server's CPU time is read around it."""
    run = run_single if mode == "single" else run_batched
    cpu0 = cpu_seconds(pid)
    latencies, steps = run(url, env_id, clients, seconds)
    cpu = cpu_seconds(pid) - cpu0
    with urllib.request.urlopen(f"{url}/health") as reply:
        rss = json.load(reply)["rss_bytes"]
    ms = 1000 * latencies
    result = {
        "mode": mode,
        "clients": clients,
        "steps_per_s": steps / seconds,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "server_cpu_ms_per_step": 1000 * cpu / steps,
        "server_rss_mib": rss / 2**20,
    }
    baseline = AGENTGYM[env_id].get(clients)
    if baseline:
        result["agentgym_steps_per_s"] = baseline[0]
        result["ratio_vs_agentgym"] = result["steps_per_s"] / baseline[0]
    return result


def verdicts(results: dict[str, Any]) -> list[str]:
    """The issue's targets, each with the measured figure."""
    lines = []
    for env_id, r in results["envs"].items():
        at_32 = [run for run in r["runs"] if run["clients"] == 32]
        if at_32:
            best = max(at_32, key=lambda run: run["steps_per_s"])
            verdict = "PASS" if best["ratio_vs_agentgym"] >= 3 else "FAIL"
            lines.append(
                f"{verdict} {env_id} at 32 clients: {best['steps_per_s']:,.0f} steps/s ({best['mode']}), "
                f"{best['ratio_vs_agentgym']:.1f}x AgentGym's {best['agentgym_steps_per_s']:,} (target >= 3x)"
            )
    for run in results["envs"].get("AgentGym/TextCraft-v0", {}).get("runs", []):
        if run["mode"] == "single" and run["clients"] == 8:
            verdict = "PASS" if run["p99_ms"] <= 5 else "FAIL"
            lines.append(f"{verdict} TextCraft single steps at 8 clients: p99 {run['p99_ms']:.2f} ms (target <= 5)")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 8, 32])
    parser.add_argument("--server-core", type=int, default=0)
    parser.add_argument("--client-core", type=int, default=1)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "remote_speed.json"))
    parser.add_argument("--quick", action="store_true", help="1 and 8 clients, 0.5 s each (agentgym bench --quick)")
    args = parser.parse_args()
    if args.quick:
        args.seconds, args.clients = 0.5, [1, 8]
    env_ids = [env_id for env_id in ACTIONS if env_id in gym.registry]
    missing = sorted(set(ACTIONS) - set(env_ids))
    if missing:
        print(f"not registered, skipped: {missing}")

    results: dict[str, Any] = {"seconds": args.seconds, "cpus": os.cpu_count(), "envs": {}}
    for env_id in env_ids:
        os.sched_setaffinity(0, {args.server_core})
        rate = in_process_rate(env_id, args.seconds)
        server, url = start_server([env_id], args.server_core)
        os.sched_setaffinity(0, {args.client_core})
        try:
            runs = [
                measure(url, server.pid, env_id, mode, clients, args.seconds)
                for mode in ("single", "batched")
                for clients in args.clients
            ]
        finally:
            server.terminate()
            server.wait(timeout=30)
        results["envs"][env_id] = {"in_process_steps_per_s": rate, "runs": runs}
    results["verdicts"] = verdicts(results)

    header = ("mode", "clients", "steps/s", "p50 ms", "p99 ms", "cpu ms/step", "vs AgentGym")
    print(f"{'env':<24}" + "".join(f"{h:>12}" for h in header))
    for env_id, r in results["envs"].items():
        name = env_id.removeprefix("AgentGym/")
        print(f"{name:<24}{'in-process':>12}{'':>12}{r['in_process_steps_per_s']:>12,.0f}")
        for run in r["runs"]:
            ratio = f"{run['ratio_vs_agentgym']:.1f}x" if "ratio_vs_agentgym" in run else ""
            print(
                f"{name:<24}{run['mode']:>12}{run['clients']:>12}{run['steps_per_s']:>12,.0f}{run['p50_ms']:>12.2f}"
                f"{run['p99_ms']:>12.2f}{run['server_cpu_ms_per_step']:>12.3f}{ratio:>12}"
            )
    print("\n".join(results["verdicts"]))
    results["summary"] = summary(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The headlines for `agentgym bench`: per env and client count, the better mode's steps/s over AgentGym's."""
    rows = []
    for env_id, r in results["envs"].items():
        for clients in sorted({run["clients"] for run in r["runs"] if "ratio_vs_agentgym" in run}):
            best = max((run for run in r["runs"] if run["clients"] == clients), key=lambda run: run["steps_per_s"])
            rows.append(
                {
                    "measure": f"{env_id.removeprefix('AgentGym/')} steps/s, clients={clients} ({best['mode']})",
                    "ratio": best["ratio_vs_agentgym"],
                    "baseline": "AgentGym's server (BASELINES.md)",
                    "target": ">= 3x" if clients == 32 else None,
                    "met": best["ratio_vs_agentgym"] >= 3 if clients == 32 else None,
                }
            )
    return rows


if __name__ == "__main__":
    main()
