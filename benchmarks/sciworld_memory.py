"""SciWorld memory: the JVM's and Python's resident memory over 1,000 episodes of one env.

The issue's target: with a bounded heap (`-Xmx512m`, our default) the JVM's RSS stays flat over
1,000 episodes; the stock JVM's default heap lets it grow to 1.6-2.6 GB (`--heap none --g1`
reproduces the JVM's defaults: no -Xmx, the G1 collector). Episodes cycle through the
packaged sample of test tasks (149 tasks, all 30 task types) and replay the first `--steps` gold
actions of each (all of them with `--steps 0`). RSS is sampled every `--every` episodes.

    python benchmarks/sciworld_memory.py [--episodes 1000] [--steps 10] [--heap 512m|none] [--g1]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import gymnasium as gym

import agentgym_envs  # noqa: F401
from agentgym_envs.sciworld.gold import packaged, sample_tasks


def rss_mb(pid: int | str = "self") -> float:
    """Resident memory of process `pid`, from /proc."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=10, help="gold actions per episode (0: the whole path)")
    parser.add_argument("--every", type=int, default=50)
    parser.add_argument("--heap", default="512m", help="the JVM's -Xmx, or 'none' for the JVM's default")
    parser.add_argument("--g1", action="store_true", help="the G1 collector (the JVM's default) instead of ours")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    heap = None if args.heap == "none" else args.heap
    label = f"{args.heap}{'_g1' if args.g1 else ''}"
    out = Path(args.out or Path(__file__).parent / "results" / f"sciworld_memory_{label}.json")

    env = gym.make("AgentGym/SciWorld-v0", heap=heap, java_options=["-XX:+UseG1GC"] if args.g1 else []).unwrapped
    tasks, gold = sample_tasks(), packaged()
    samples, steps, started = [], 0, time.perf_counter()
    try:
        for episode in range(1, args.episodes + 1):
            task_id = tasks[(episode - 1) % len(tasks)]
            env.reset(options={"task_id": task_id})
            actions = gold[task_id] if args.steps == 0 else gold[task_id][: args.steps]
            for action in actions:
                _, _, terminated, truncated, _ = env.step(action)
                steps += 1
                if terminated or truncated:
                    break
            if episode % args.every == 0 or episode == 1:
                jvm_mb = rss_mb(env.jvm_pid)
                samples.append({"episode": episode, "jvm_rss_mb": jvm_mb, "python_rss_mb": rss_mb()})
                print(f"episode {episode:>5}: JVM {jvm_mb:7.1f} MB, Python {rss_mb():6.1f} MB", flush=True)
    finally:
        env.close()
    half = [s["jvm_rss_mb"] for s in samples if s["episode"] > args.episodes // 2]
    result = {
        "heap": args.heap,
        "gc": "G1" if args.g1 else "Serial",
        "episodes": args.episodes,
        "steps": steps,
        "seconds": time.perf_counter() - started,
        "jvm_rss_mb_max": max(s["jvm_rss_mb"] for s in samples),
        "jvm_rss_mb_second_half_min": min(half),
        "jvm_rss_mb_second_half_max": max(half),
        "python_rss_mb_first": samples[0]["python_rss_mb"],
        "python_rss_mb_last": samples[-1]["python_rss_mb"],
        "python_max_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "samples": samples,
    }
    print(
        f"{args.episodes} episodes, {steps} steps in {result['seconds']:.0f} s; "
        f"JVM RSS max {result['jvm_rss_mb_max']:.0f} MB, "
        f"second half {result['jvm_rss_mb_second_half_min']:.0f}-{result['jvm_rss_mb_second_half_max']:.0f} MB; "
        f"Python {result['python_rss_mb_first']:.0f} -> {result['python_rss_mb_last']:.0f} MB"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
