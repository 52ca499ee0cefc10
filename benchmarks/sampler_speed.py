"""The multi-turn sampler against transformers' `generate`: tokens/s and peak memory of one rollout.

Both arms play the same 16-episode multi-turn BabyAI rollout through `RolloutEngine` (same tasks,
seeds, turn limit and reply length): `CachedSampler` keeps each episode's KV cache between turns;
the baseline, `hf_generate_fn`, calls `model.generate` on every episode's whole history each turn
(what a rollout without a multi-turn sampler does). A third arm, `cached-cat`, is the same sampler
on transformers' `DynamicCache`, which copies the whole cache at every appended token (what the
sampler used before `GrowingLayer`). Replies never stop early (no end token), so every arm
generates the same number of tokens per turn. Each arm runs in its own process; its peak
memory is the process's peak RSS above what it held with the model loaded.

    python benchmarks/sampler_speed.py               # the tiny model and SmolLM2-135M-Instruct
    python benchmarks/sampler_speed.py --quick       # the tiny model, fewer turns
    python benchmarks/sampler_speed.py --models smollm2 --arms cached,cached-cat --turn-tokens 128 \
        --out benchmarks/results/kv_cache_growth.json   # long replies: the cost of copying the cache
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ENV_ID = "AgentGym/BabyAI-GoToLocal-v0"
ENV_KWARGS = {"show_actions": False}
ARMS = ("cached", "cached-cat", "generate")
SPEED_TARGET = 1.0  # the sampler's tokens/s at least generate's
MEMORY_TARGET = 1.0  # and its peak memory at most generate's


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def model_path(name: str, workdir: Path) -> Path:
    if name == "smollm2":
        from agentgym_train.models.smollm2 import smollm2_checkpoint

        return smollm2_checkpoint()
    from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model

    config = TinyModelConfig(  # the CPU demo's size
        env_ids=[ENV_ID],
        env_kwargs=ENV_KWARGS,
        hidden_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=384,
    )
    return build_tiny_model(workdir / "tiny", config)


def run_arm(path: str, arm: str, episodes: int, turns: int, turn_tokens: int, threads: int) -> dict[str, Any]:
    """One rollout with one sampler (called in a child process)."""
    import torch

    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout import RolloutEngine, Task
    from agentgym_train.rollout.backends import hf_generate_fn
    from agentgym_train.rollout.backends.cached import CachedSampler

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model, tokenizer = load_model(path)
    model.eval()
    engine = RolloutEngine(
        tokenizer,
        max_turns=turns,
        max_turn_tokens=turn_tokens,
        max_completion_length=32768,
        env_kwargs=ENV_KWARGS,
        num_env_workers=4,
    )
    never = [len(tokenizer)]  # an id no model samples: every reply runs to turn_tokens
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    if arm == "cached-cat":
        from transformers import DynamicCache

        from agentgym_train.rollout.backends import cached

        cached.growing_cache = lambda config: DynamicCache(config=config)  # the copying cache
    if arm.startswith("cached"):
        generate = CachedSampler(model, pad, never, temperature=1.0)
    else:
        generate = hf_generate_fn(model, pad, never, temperature=1.0)
    tasks = [Task(ENV_ID, task_id=i // 2, split="test", seed=i // 2) for i in range(episodes)]
    before = _rss_mib()
    start = time.perf_counter()
    with torch.no_grad():
        played = engine.run(tasks, generate)
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    engine.close()
    sampled = sum(sum(e.env_mask) for e in played)
    seconds = engine.timing["generation"]
    return {
        "arm": arm,
        "episodes": len(played),
        "turns": sum(e.turns for e in played),
        "sampled_tokens": sampled,
        "generation_seconds": round(seconds, 3),
        "tokens_per_s": sampled / seconds,
        "wall_seconds": round(wall, 3),
        "peak_mib_over_model": round(max(0.0, peak - before), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default="tiny,smollm2", help="comma-separated: tiny, smollm2")
    parser.add_argument("--episodes", type=int, default=16)
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--turn-tokens", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--arms", default="cached,generate", help=f"comma-separated, of {', '.join(ARMS)}")
    parser.add_argument("--quick", action="store_true", help="the tiny model, 4 turns")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sampler_speed.json"))
    parser.add_argument("--child", nargs=2, metavar=("PATH", "ARM"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.models, args.turns = "tiny", 4
    if args.child:
        result = run_arm(args.child[0], args.child[1], args.episodes, args.turns, args.turn_tokens, args.threads)
        print(json.dumps(result))
        return

    results: dict[str, Any] = {"env_id": ENV_ID, "settings": vars(args) | {"child": None}, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            path = model_path(name, Path(tmp))
            arms = {}
            for arm in args.arms.split(","):  # each arm in a fresh process: peak RSS is per process
                argv = [sys.executable, __file__, "--child", str(path), arm]
                argv += ["--episodes", str(args.episodes), "--turns", str(args.turns)]
                argv += ["--turn-tokens", str(args.turn_tokens), "--threads", str(args.threads)]
                out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
                arms[arm] = json.loads(out.strip().splitlines()[-1])
            results["models"][name] = {"arms": arms}
            for other in ("generate", "cached-cat"):
                if "cached" in arms and other in arms:
                    results["models"][name][f"vs_{other}"] = {
                        "speedup": arms["cached"]["tokens_per_s"] / arms[other]["tokens_per_s"],
                        "memory_ratio": arms[other]["peak_mib_over_model"]
                        / max(arms["cached"]["peak_mib_over_model"], 1.0),
                    }

    print(f"{'model':<10}{'arm':<12}{'tokens':>8}{'tokens/s':>11}{'peak MiB':>10}")
    for name, entry in results["models"].items():
        for arm, row in entry["arms"].items():
            print(
                f"{name:<10}{arm:<12}{row['sampled_tokens']:>8}{row['tokens_per_s']:>11.0f}"
                f"{row['peak_mib_over_model']:>10.0f}"
            )
        for other in ("generate", "cached-cat"):
            if f"vs_{other}" in entry:
                ratio = entry[f"vs_{other}"]
                speed, memory = ratio["speedup"], ratio["memory_ratio"]
                print(f"{name:<10}cached/{other}: {speed:.2f}x tokens/s, {memory:.2f}x less memory")
    results["summary"] = summary(results)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The headlines for `agentgym bench`: tokens/s and peak memory against `generate`, per model."""
    rows = []
    for name, entry in results["models"].items():
        if "vs_generate" not in entry:
            continue
        entry = {**entry, **entry["vs_generate"]}
        rows.append(
            {
                "measure": f"{name} rollout tokens/s ({entry['arms']['cached']['tokens_per_s']:,.0f})",
                "ratio": entry["speedup"],
                "baseline": "transformers generate",
                "target": f">= {SPEED_TARGET}x",
                "met": entry["speedup"] >= SPEED_TARGET,
            }
        )
        rows.append(
            {
                "measure": f"{name} rollout peak MiB ({entry['arms']['cached']['peak_mib_over_model']:,.0f})",
                "ratio": entry["memory_ratio"],
                "baseline": "transformers generate",
                "target": f"<= generate's ({MEMORY_TARGET}x)",
                "met": entry["memory_ratio"] >= MEMORY_TARGET,
            }
        )
    return rows


if __name__ == "__main__":
    main()
