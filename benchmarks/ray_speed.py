"""Ray env pool speed: per-step overhead against in-process envs, and steps/s with one node and two.

Runs a two-node Ray cluster on this machine inside a network namespace with only loopback (it re-runs
itself under `unshare -n`; `agentgym_envs.cluster.local.LoopbackCluster`), then measures:

- overhead: a batched step of 64 BabyAI envs on one node (`RayEnvPool.step`, one Ray call per actor),
  against the same 64 steps in this process. Ray's cost per batched step is the wall time minus the
  actors' own time inside the call (`EnvHost.busy_seconds`, the slowest actor's, since actors run in
  parallel). Goal (issue 26): <= 1 ms. Beside it, two floors that no batching in the pool can go under:
  the same number of calls to the same actors with nothing to do (`EnvHost.run([])`), and the same number
  of calls to bare actors that each spin for the time its pool actor just spent stepping (measured step by
  step, interleaved with the pool's). The second is Ray's floor for the same calls: where the actors' work
  fills the cores, Ray's own threads wait for them (on this 2-core machine empty calls cost ~2 ms, calls
  that work 3-6 ms cost ~8 ms above their work).
- throughput: BabyAI (`turn left`) and TextCraft (`inventory`) steps/s of a `RayVectorEnv` of 128 envs
  (autoreset), placed on the head only and spread over both nodes, beside the in-process rate. Both
  nodes share this machine's cores, so "two nodes" shows Ray's cost of spreading, not more compute.

Its `summary` (the `agentgym bench` contract, `agentgym_train/bench.py`): Ray's cost per batched step
against Ray's floor for calls doing the same work, and against empty calls (issue 39's target: the cost at
most 1.2x the floor, a ratio of at least 0.83), and each
workload's steps/s on one node and on two against the same envs in this process.

    python benchmarks/ray_speed.py [--envs 64] [--steps 200] [--quick] [--out benchmarks/results/ray_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

import agentgym_envs  # noqa: F401
from agentgym_envs.cluster.local import LoopbackCluster, only_loopback

#: Logical CPUs (what Ray schedules by): 4 actors of 32 light envs (1 CPU each) fit on either node alone.
NODES = [
    {"num_cpus": 4, "resources": {"envs": 16, "head_node": 16}},
    {"num_cpus": 4, "resources": {"envs": 16, "node2": 16}},
]
#: Issue 39's target: Ray's cost per batched step at most this many times Ray's floor for the same calls.
FLOOR_TARGET = 1.2
WORKLOADS = {
    "babyai": ("AgentGym/BabyAI-GoToLocal-v0", "turn left"),
    "textcraft": ("AgentGym/TextCraft-v0", "inventory"),
}


def local_steps(env_id: str, action: str, n: int, steps: int) -> dict[str, float]:
    envs = [gym.make(env_id) for _ in range(n)]
    for i, env in enumerate(envs):
        env.reset(seed=i)
    times = []
    for _ in range(steps):
        started = time.perf_counter()
        for i, env in enumerate(envs):
            _, _, terminated, truncated, _ = env.step(action)
            if terminated or truncated:
                env.reset(seed=i)
        times.append(time.perf_counter() - started)
    for env in envs:
        env.close()
    return {"ms_per_batch": 1000 * float(np.median(times)), "steps_per_s": n * steps / sum(times)}


def overhead(n: int, steps: int) -> dict[str, Any]:
    import ray

    from agentgym_envs.cluster import RayEnvPool

    env_id, action = WORKLOADS["babyai"]
    pool = RayEnvPool(resource="head_node", envs_per_actor=32)
    envs = [pool.acquire(env_id) for _ in range(n)]
    pool.reset(envs, list(range(n)), [None] * n)
    actors = list({id(e.actor): e.actor for e in envs}.values())
    for _ in range(5):  # warm up
        pool.step(envs, [action] * n)
    empty = []  # Ray's floor for calls that do nothing: one empty call per actor, all at once
    for _ in range(steps):
        started = time.perf_counter()
        ray.get([a.handle.run.remote([]) for a in actors])
        empty.append(time.perf_counter() - started)
    spinners = [ray.remote(Spinner).options(resources={"head_node": 1}).remote() for _ in actors]
    ray.get([s.spin.remote(0.0) for s in spinners])
    walls, ray_costs, floors = [], [], []
    for _ in range(steps):
        busy = ray.get([a.handle.busy_seconds.remote() for a in actors])
        started = time.perf_counter()
        results = pool.step(envs, [action] * n)
        wall = time.perf_counter() - started
        after = ray.get([a.handle.busy_seconds.remote() for a in actors])
        ended = [e for e, r in zip(envs, results, strict=True) if r[2] or r[3]]
        if ended:
            pool.reset(ended, [0] * len(ended), [None] * len(ended))
        worked = [b - a for a, b in zip(busy, after, strict=True)]
        walls.append(wall)
        ray_costs.append(wall - max(worked))
        # Ray's floor for the same calls: each spinner works as long as its pool actor just did
        started = time.perf_counter()
        spun = ray.get([s.spin.remote(w) for s, w in zip(spinners, worked, strict=True)])
        floors.append(time.perf_counter() - started - max(spun))
    pool.close()
    for spinner in spinners:
        ray.kill(spinner)
    local = local_steps(env_id, action, n, steps)
    return {
        "envs": n,
        "actors": len(actors),
        "ray_calls_per_batch": len(actors),
        "ray_ms_per_batch_p50": 1000 * float(np.median(walls)),
        "in_process_ms_per_batch_p50": local["ms_per_batch"],
        "ray_overhead_ms_per_batch_p50": 1000 * float(np.median(ray_costs)),
        "ray_overhead_ms_per_batch_p90": 1000 * float(np.percentile(ray_costs, 90)),
        "ray_empty_calls_ms_p50": 1000 * float(np.median(empty)),
        "ray_working_calls_ms_p50": 1000 * float(np.median(floors)),
        "actor_work_ms_p50": 1000 * float(np.median([w - c for w, c in zip(walls, ray_costs, strict=True)])),
        "goal_ms": 1.0,
    }


class Spinner:
    """A bare Ray actor that works (spins) for a given time: Ray's floor for calls that do work."""

    def spin(self, seconds: float) -> float:
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            pass
        return time.perf_counter() - started


def throughput(name: str, n: int, steps: int) -> dict[str, Any]:
    from agentgym_envs.cluster import RayEnvPool, RayVectorEnv

    env_id, action = WORKLOADS[name]
    out: dict[str, Any] = {
        "env_id": env_id,
        "envs": n,
        "in_process": local_steps(env_id, action, n, steps)["steps_per_s"],
    }
    for label, resource in (("one_node", "head_node"), ("two_nodes", "envs")):
        pool = RayEnvPool(resource=resource, envs_per_actor=32)
        vector = RayVectorEnv(env_id, n, pool=pool)
        vector.reset(seed=0)
        for _ in range(3):
            vector.step([action] * n)
        started = time.perf_counter()
        for _ in range(steps):
            vector.step([action] * n)
        elapsed = time.perf_counter() - started
        out[label] = {"steps_per_s": n * steps / elapsed, "placement": sorted(pool.placement().values())}
        vector.close()
        pool.close()
    return out


def summary(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The headlines for `agentgym bench`: ratio > 1 is better (floor over cost; Ray's over in-process steps/s)."""
    o = result["overhead"]
    cost = o["ray_overhead_ms_per_batch_p50"]
    floors = [("ray_working_calls_ms_p50", "calls doing the same work"), ("ray_empty_calls_ms_p50", "empty calls")]
    rows = [
        {
            "measure": f"Ray cost per batched step, {o['envs']} BabyAI envs",
            "ratio": o[key] / cost if cost > 0 else None,
            "baseline": f"Ray's floor ({o['actors']} {what})",
            "target": f">= {1 / FLOOR_TARGET:.2f}x (cost <= {FLOOR_TARGET}x the floor)",
            "met": cost <= FLOOR_TARGET * o[key],
        }
        for key, what in floors
        if key in o
    ]
    for name, t in result["throughput"].items():
        for label in ("one_node", "two_nodes"):
            rows.append(
                {
                    "measure": f"steps/s {name}, {t['envs']} envs, {label.replace('_', ' ')}",
                    "ratio": t[label]["steps_per_s"] / t["in_process"],
                    "baseline": "the same envs in process",
                    "target": None,
                    "met": None,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="8 envs, 10 steps (agentgym bench --quick)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "ray_speed.json"))
    args = parser.parse_args()
    if args.quick:
        args.envs, args.steps = 8, 10
    if not only_loopback():  # never a Ray port outside a namespace of our own
        os.execvp("unshare", ["unshare", "-n", sys.executable, *sys.argv])
    started = time.perf_counter()
    with LoopbackCluster(NODES) as cluster:
        import ray

        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        result: dict[str, Any] = {
            "cluster_start_s": time.perf_counter() - started,
            "overhead": overhead(args.envs, args.steps),
            "throughput": {name: throughput(name, 2 * args.envs, args.steps // 2) for name in WORKLOADS},
        }
        ray.shutdown()
        left = cluster.stop()
    import ray as ray_module

    result["left_processes"] = left
    result["machine"] = {"cpus": os.cpu_count(), "python": platform.python_version(), "ray": ray_module.__version__}
    result["command"] = "python benchmarks/ray_speed.py " + " ".join(sys.argv[1:])
    result["summary"] = summary(result)
    o = result["overhead"]
    print(
        f"{o['envs']} BabyAI envs, one node, {o['actors']} actors: "
        f"Ray {o['ray_ms_per_batch_p50']:.2f} ms per batched step, "
        f"in process {o['in_process_ms_per_batch_p50']:.2f} ms; Ray's own cost "
        f"{o['ray_overhead_ms_per_batch_p50']:.2f} ms (p90 {o['ray_overhead_ms_per_batch_p90']:.2f}; goal <= 1 ms), "
        f"against Ray's floor for {o['actors']} calls doing the same work {o['ray_working_calls_ms_p50']:.2f} ms "
        f"(empty calls {o['ray_empty_calls_ms_p50']:.2f} ms)"
    )
    print(f"{'workload':<10} {'in process':>12} {'one node':>12} {'two nodes':>12}  (steps/s)")
    for name, t in result["throughput"].items():
        one, two = t["one_node"]["steps_per_s"], t["two_nodes"]["steps_per_s"]
        print(f"{name:<10} {t['in_process']:>12.0f} {one:>12.0f} {two:>12.0f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
