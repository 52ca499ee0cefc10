"""Async against lockstep rollouts: episodes/s and the generator's idle share on SciWorld and WebArena.

Real backends (SciWorld's JVMs, WebArena's shared Chromium and embedded sites) and a fixed scripted
policy: each reply is the env's expert action (`make_expert()`, created right after each reset), as
"Action: <command>" and an end token, returned after a simulated generation latency per call (each of
`--latencies` seconds in turn) plus `--per-context` seconds per context (a batched decode costs about the
same for one context as for many). The engine is `RolloutEngine` as the trainer builds it (in-process
envs on `--workers` threads), in `rollout_mode="lockstep"` and `"async"`; both play the same tasks.
Two unmeasured runs (one per mode) first start every env (JVM and browser starts) and warm the JVMs'
JIT; the pooled envs are reused by every measured run. The arms then alternate in `--rounds` rounds,
ABBA (lockstep first in even rounds, async first in odd ones), so that the load's drift falls on both.

Reported per latency and arm: episodes/s (episodes over the run's wall time), the generator's idle
share (the share of wall time outside generator calls), generator calls and contexts per call, mean
turns, success; the ratio async/lockstep of the mean episodes/s and per round (measured in one run).
The load average is recorded before, after each run and after each scenario: this machine's 2 cores
are shared with other work. SciWorld runs `--sciworld-episodes` episodes, a JVM each (the JVMs'
resident memory is recorded).

    python benchmarks/async_rollout.py [--scenarios sciworld webarena] [--episodes 64] [--sciworld-episodes 32]

`--policy model` measures continuous batching: the replies come from the HF cached sampler over a tiny
random-init model (no simulated latency; the decode is the generator's time) in three arms, lockstep, async
by whole generator calls and async-continuous (rows join and leave the sampler's decode between decode
steps); with `babyai-remote` every turn waits 50-600 ms, replies that do not parse too:

    python benchmarks/async_rollout.py --policy model --scenarios babyai-remote --episodes 32 --rounds 3 \
        --out benchmarks/results/async_rollout_continuous.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentgym_envs  # noqa: F401
from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model, load_model
from agentgym_train.rollout import RolloutEngine, Task
from agentgym_train.rollout.backends.cached import CachedSampler

SCENARIOS = {
    # env id, env kwargs, reply when the expert has nothing left, turn limit
    "sciworld": ("AgentGym/SciWorld-v0", {}, "look around", 30),
    "webarena": ("AgentGym/WebArena-v0", {}, "stop [N/A]", 15),
    # BabyAI behind a simulated remote step (a wait, not CPU work: a server or actor elsewhere)
    "babyai-remote": ("AgentGymBench/RemoteBabyAI-v0", {}, "done", 20),
}


class RemoteStep(gym.Wrapper):
    """Each step first waits 50-600 ms, as a remote call would: uniform, from a generator of this env's own
    (seeded by the order envs are made; not the env's `np_random`, which every episode's seed 0 resets to
    the same state, so every env would wait alike and no episode would ever hold the others up)."""

    made = itertools.count()

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.delays = random.Random(next(self.made))

    #: Off where the whole turn waits instead (`ExpertEngine.remote_turns`).
    enabled = True

    def step(self, action: str) -> Any:
        if self.enabled:
            time.sleep(self.delays.uniform(0.05, 0.6))
        return self.env.step(action)


def _remote_babyai(**kwargs: Any) -> gym.Env:
    return RemoteStep(gym.make("AgentGym/BabyAI-GoToLocal-v0", **kwargs))


gym.register(id="AgentGymBench/RemoteBabyAI-v0", entry_point=_remote_babyai)


class ExpertEngine(RolloutEngine):
    """The rollout engine, keeping each episode's expert and latest observation for `ExpertPolicy`."""

    def __init__(self, *args: Any, remote_turns: bool = False, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.experts: dict[tuple[int, ...], list[Any]] = {}  # prompt ids -> [expert, observation, info]
        #: Every turn waits as `RemoteStep` does, replies that do not parse too (the whole turn is remote): a
        #: random-init model's replies seldom parse, and the wrapper answers those without stepping the env.
        self.remote_turns = remote_turns

    def _make(self, env_id: str) -> Any:
        env = super()._make(env_id)
        if self.remote_turns:
            step, delays = env.step, random.Random(next(RemoteStep.made))
            env.step = lambda reply: time.sleep(delays.uniform(0.05, 0.6)) or step(reply)
        return env

    def _episode(self, env: Any, task: Task, observation: str, info: dict[str, Any]) -> Any:
        episode = super()._episode(env, task, observation, info)
        try:
            expert = env.unwrapped.make_expert()
        except NotImplementedError:  # a task without a scripted plan: the fixed reply throughout
            expert = None
        self.experts[tuple(episode.prompt_ids)] = [expert, observation, info]
        return episode

    def _stepped(self, episode: Any, slot: Any, step: Any, end: Any, progress: Any) -> bool:
        if not isinstance(step, Exception):
            self.experts[tuple(episode.prompt_ids)][1:] = [step[0], step[4]]
        return super()._stepped(episode, slot, step, end, progress)


class ExpertPolicy:
    """A TurnGenerator that answers each context with its episode's expert action after a simulated latency."""

    def __init__(self, engine: ExpertEngine, tokenizer: Any, fallback: str, latency: float, per_context: float):
        self.engine, self.tokenizer, self.fallback = engine, tokenizer, fallback
        self.latency, self.per_context = latency, per_context
        self.calls: list[int] = []

    def __call__(self, contexts: list[list[int]], max_new_tokens: int, stop: Any = None) -> list[tuple]:
        started = time.perf_counter()
        self.calls.append(len(contexts))
        lengths = {len(k) for k in self.engine.experts}
        out = []
        for context in contexts:
            key = next(tuple(context[:n]) for n in lengths if tuple(context[:n]) in self.engine.experts)
            expert, observation, info = self.engine.experts[key]
            try:
                action = expert.act(observation, info) if expert is not None else self.fallback
            except Exception:  # the plan is used up or stuck: a fixed reply instead
                action = self.fallback
            text = self.tokenizer(f"Action: {action}", add_special_tokens=False)["input_ids"]
            ids = [*text, self.tokenizer.eos_token_id]
            out.append((ids, [0.0] * len(ids)))
        # the simulated decode: the rest of the call's latency (the expert's own work counts in it)
        time.sleep(max(0.0, self.latency + self.per_context * len(contexts) - (time.perf_counter() - started)))
        return out


class ModelPolicy(CachedSampler):
    """The HF cached sampler over a tiny random-init model (`--policy model`), logging each call's size
    (per-batch calls) and, in continuous mode, its stream's joins and decode steps."""

    def __init__(self, model: Any, tokenizer: Any, temperature: float):
        super().__init__(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=temperature)
        self.calls: list[int] = []

    def __call__(self, contexts: list[list[int]], max_new_tokens: int, stop: Any = None) -> Any:
        self.calls.append(len(contexts))
        return super().__call__(contexts, max_new_tokens, stop)


def tasks_for(name: str, env_id: str, count: int) -> list[Task]:
    if name == "sciworld":  # the packaged gold paths: spread over the 30 task types
        from agentgym_envs.sciworld.gold import sample_tasks

        sample = sample_tasks()
        picked = [sample[(k * len(sample)) // count] for k in range(count)]
        return [Task(env_id, t, "test", 0) for t in picked]
    env = gym.make(env_id)
    try:
        ids = env.unwrapped.tasks("test")[:count]
    finally:
        env.close()
    return [Task(env_id, t, "test", 0) for t in ids]


def play(engine: ExpertEngine, policy: Any, tasks: list[Task]) -> dict[str, Any]:
    policy.calls = []
    engine.experts.clear()
    started = time.perf_counter()
    episodes = engine.run(tasks, policy)
    wall = time.perf_counter() - started
    generation = engine.timing["generation"]
    stream = dict(getattr(policy, "stream_stats", {})) if engine.last_mode == "async" and not policy.calls else {}
    return {
        **{f"stream_{k}": v for k, v in stream.items()},
        "sampled_tokens": sum(sum(e.env_mask) for e in episodes),
        "wall_s": wall,
        "episodes_per_s": len(episodes) / wall,
        "generator_idle_share": 1.0 - generation / wall,
        "generation_s": generation,
        "generator_calls": len(policy.calls),
        "contexts_per_call": statistics.fmean(policy.calls) if policy.calls else 0.0,
        "mean_turns": statistics.fmean(e.turns for e in episodes),
        "success": statistics.fmean(e.success for e in episodes),
        "env_errors": sum(e.env_error is not None for e in episodes),
        "mode_played": engine.last_mode,
        "load_1min_after": os.getloadavg()[0],
    }


def jvm_memory(engine: ExpertEngine) -> dict[str, float] | None:
    """Resident memory of the pooled SciWorld envs' JVMs (MB), from /proc."""
    pids = [getattr(env.unwrapped, "jvm_pid", None) for envs in engine._pool.values() for env in envs]
    sizes = []
    for pid in filter(None, pids):
        status = Path(f"/proc/{pid}/status").read_text()
        sizes.append(int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS"))) / 1024)
    return {"jvms": len(sizes), "rss_mb_mean": statistics.fmean(sizes), "rss_mb_max": max(sizes)} if sizes else None


def set_arm(engine: RolloutEngine, policy: Any, arm: str) -> None:
    """Lockstep, async (a generator call per batch of ready episodes) or async-continuous (rows join and leave
    the cached sampler's decode between steps)."""
    engine.rollout_mode = "lockstep" if arm == "lockstep" else "async"
    if isinstance(policy, CachedSampler):
        policy.continuous = arm == "async-continuous"


def scenario(name: str, count: int, args: argparse.Namespace, tokenizer: Any, model: Any = None) -> dict[str, Any]:
    env_id, env_kwargs, fallback, max_turns = SCENARIOS[name]
    tasks = tasks_for(name, env_id, count)
    engine = ExpertEngine(
        tokenizer,
        max_turns=max_turns,
        max_completion_length=1 << 20,
        max_turn_tokens=args.reply_tokens if model is not None else 256,
        env_kwargs=env_kwargs,
        num_env_workers=args.workers,
        env_timeout=600,
        remote_turns=model is not None and name == "babyai-remote",
    )
    RemoteStep.enabled = not engine.remote_turns
    if model is not None:
        policy: Any = ModelPolicy(model, tokenizer, args.temperature)
        arms = ("lockstep", "async", "async-continuous")
        latencies = [0.0]  # no simulated latency: the model's own decode is the generator's time
    else:
        policy = ExpertPolicy(engine, tokenizer, fallback, args.latencies[0], args.per_context)
        arms = ("lockstep", "async")
        latencies = args.webarena_latencies if name == "webarena" else args.latencies
    result: dict[str, Any] = {"env_id": env_id, "episodes": count, "max_turns": max_turns, "latencies": {}}
    try:
        for mode in reversed(arms):  # starts every env (JVMs, browser contexts), warms the JIT; not measured
            started = time.perf_counter()
            set_arm(engine, policy, mode)
            warm = play(engine, policy, tasks)
            print(f"{name}: warm-up ({mode}) {time.perf_counter() - started:.1f} s, success {warm['success']:.2f}")
        for latency in latencies:
            policy.latency = latency
            runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in arms}
            for k in range(args.rounds):  # ABBA: lockstep first in even rounds, last in odd ones
                for mode in arms if k % 2 == 0 else tuple(reversed(arms)):
                    set_arm(engine, policy, mode)
                    runs[mode].append(play(engine, policy, tasks))
                    run = runs[mode][-1]
                    print(
                        f"{name} latency {latency} {mode:16s} {run['episodes_per_s']:.3f} episodes/s, idle "
                        f"{run['generator_idle_share']:.2f}, {run['generator_calls']} calls x "
                        f"{run['contexts_per_call']:.1f}, load {run['load_1min_after']:.1f}",
                        flush=True,
                    )
            means = {mode: _mean(rows) for mode, rows in runs.items()}
            ratios = [
                a["episodes_per_s"] / b["episodes_per_s"] for a, b in zip(runs["async"], runs["lockstep"], strict=True)
            ]
            result["latencies"][str(latency)] = {
                "arms": means,
                "runs": runs,
                "speedup_episodes_per_s": means["async"]["episodes_per_s"] / means["lockstep"]["episodes_per_s"],
                "speedup_per_round": ratios,
                "speedup_median_of_rounds": statistics.median(ratios),
            }
            if "async-continuous" in runs:
                at = result["latencies"][str(latency)]
                for base in ("lockstep", "async"):
                    per_round = [
                        a["episodes_per_s"] / b["episodes_per_s"]
                        for a, b in zip(runs["async-continuous"], runs[base], strict=True)
                    ]
                    at[f"continuous_over_{base}"] = (
                        means["async-continuous"]["episodes_per_s"] / means[base]["episodes_per_s"]
                    )
                    at[f"continuous_over_{base}_per_round"] = per_round
        result["jvm_memory"] = jvm_memory(engine)
    finally:
        engine.close()
    return result


def _mean(rows: list[dict[str, Any]]) -> dict[str, Any]:
    return {k: statistics.fmean(r[k] for r in rows) for k in rows[0] if isinstance(rows[0][k], int | float)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--episodes", type=int, default=64, help="episodes per rollout (WebArena)")
    parser.add_argument("--sciworld-episodes", type=int, default=32, help="episodes per SciWorld rollout (a JVM each)")
    parser.add_argument(
        "--latencies", type=float, nargs="+", default=[0.1, 0.5], help="simulated seconds per generator call"
    )
    parser.add_argument(
        "--webarena-latencies", type=float, nargs="+", default=[0.1], help="--latencies for WebArena (slow runs)"
    )
    parser.add_argument("--per-context", type=float, default=0.002, help="simulated seconds per context in a call")
    parser.add_argument("--workers", type=int, default=64, help="env calls at once (num_env_workers)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--policy",
        choices=["expert", "model"],
        default="expert",
        help="expert replies after a simulated latency, or the HF cached sampler over a tiny random-init model "
        "(arms lockstep, async and async-continuous)",
    )
    parser.add_argument("--model-size", type=int, nargs=2, default=[64, 2], help="--policy model: hidden size, layers")
    parser.add_argument("--reply-tokens", type=int, default=24, help="--policy model: reply budget (max_turn_tokens)")
    parser.add_argument("--temperature", type=float, default=1.0, help="--policy model: sampling temperature")
    parser.add_argument("--load-note", default="", help="what else ran on the machine (recorded in the JSON)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "async_rollout.json"))
    args = parser.parse_args()

    model = None
    with tempfile.TemporaryDirectory() as tmp:  # a byte-level tokenizer with a chat template
        if args.policy == "model":  # weights used too: a tiny random-init model, on one torch thread
            import torch

            torch.set_num_threads(1)
            torch.manual_seed(0)
            hidden, layers = args.model_size
            shape = {"hidden_size": hidden, "num_hidden_layers": layers, "intermediate_size": 2 * hidden}
            config = TinyModelConfig(vocab_size=512, num_attention_heads=4, num_key_value_heads=2, **shape)
        else:
            config = TinyModelConfig(vocab_size=512, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                     num_key_value_heads=1, intermediate_size=32)  # fmt: skip
        model, tokenizer = load_model(build_tiny_model(tmp, config, texts=["Action: look around", "click [12]"]))
        if args.policy == "expert":
            model = None
    result: dict[str, Any] = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_before": os.getloadavg(),
            "load_note": args.load_note,
        },
        "policy": {
            "kind": "expert replies" if model is None else "HF cached sampler, tiny random-init model",
            "model": None
            if model is None
            else {
                "hidden_size": args.model_size[0],
                "layers": args.model_size[1],
                "reply_tokens": args.reply_tokens,
                "temperature": args.temperature,
                "torch_threads": 1,
            },
            "latencies_s": args.latencies,
            "webarena_latencies_s": args.webarena_latencies,
            "per_context_s": args.per_context,
        },
        "workers": args.workers,
        "rounds": args.rounds,
        "scenarios": {},
    }
    for name in args.scenarios:
        count = args.sciworld_episodes if name == "sciworld" else args.episodes
        result["scenarios"][name] = scenario(name, count, args, tokenizer, model)
        result["scenarios"][name]["load_after"] = os.getloadavg()
    result["machine"]["load_after"] = os.getloadavg()
    print(
        f"{'scenario':10s} {'latency':>7s} {'arm':9s} {'episodes/s':>10s} {'idle':>6s} {'calls':>6s} {'ctx/call':>8s}"
    )
    for name, res in result["scenarios"].items():
        for latency, at in res["latencies"].items():
            for mode, arm in at["arms"].items():
                print(
                    f"{name:10s} {latency:>5s} s {mode:16s} {arm['episodes_per_s']:10.3f} "
                    f"{arm['generator_idle_share']:6.2f} {arm['generator_calls']:6.0f} {arm['contexts_per_call']:8.1f}"
                )
            print(f"{name:10s} {latency:>5s} s async/lockstep: {at['speedup_episodes_per_s']:.2f}x")
            for base in ("lockstep", "async"):
                if f"continuous_over_{base}" in at:
                    print(f"{name:10s} {latency:>5s} s async-continuous/{base}: {at[f'continuous_over_{base}']:.2f}x")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
