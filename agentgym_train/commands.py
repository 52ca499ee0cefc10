"""`agentgym train` and `agentgym eval`. Importing this module is light: torch, transformers and TRL
are imported only when a command runs, so `agentgym list/play` work without the [train] extra."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: The CPU demo's config, what `agentgym train` runs without arguments.
DEFAULT_CONFIG = Path(__file__).parent / "configs" / "babyai_demo.yaml"
_NEEDS_TRAIN = "agentgym {} needs the training extra ({}): pip install 'agentgym-rl[train]'"


def add_subcommands(sub: Any) -> None:
    """Register `train` and `eval` on the `agentgym` parser's subparsers."""
    p = sub.add_parser(
        "train",
        help="SFT + multi-turn GRPO + evaluation from a TRL-style YAML config ([train] extra)",
        description="Run a training config: a YAML file, or the name of a packaged one "
        f"({', '.join(packaged_configs())}). Without CONFIG: the CPU demo (tiny model, BabyAI). "
        "Any key can be overridden after CONFIG: agentgym train babyai_demo --max_steps 10. "
        "--resume_from_checkpoint [PATH|true] continues a run from a checkpoint (true or no value: the last "
        "checkpoint-N in output_dir): model, optimiser, LR scheduler, max-turn schedule, critic, data order.",
    )
    p.add_argument("config", nargs="?", default=DEFAULT_CONFIG.stem, help="YAML file or packaged config name")
    p.add_argument("overrides", nargs=argparse.REMAINDER, help="--key value pairs that override the config")
    p.set_defaults(func=cmd_train)

    p = sub.add_parser(
        "eval", help="success / return / turns of a model, an OpenAI-compatible endpoint or a random policy on a split"
    )
    p.add_argument(
        "model",
        help="model path or hub id; with --base-url the endpoint's model name; 'random': a random policy; "
        "'expert': the scenario's scripted expert",
    )
    p.add_argument("env_id")
    p.add_argument("--split", default="test")
    p.add_argument("--tasks", type=int, default=100, help="first N tasks of the split (0: all)")
    p.add_argument("--episodes-per-task", "-k", type=int, default=1, help="k of Avg@k / Pass@k")
    p.add_argument("--max-turns", type=int, default=None, help="turn limit (default: the env's)")
    p.add_argument("--max-turn-tokens", type=int, help="most tokens per reply (default: the scenario's)")
    p.add_argument("--max-completion-length", type=int, default=4096)
    p.add_argument("--temperature", type=float, default=1.0, help="0: greedy")
    p.add_argument(
        "--env-kwargs", default=None, help="JSON keyword arguments for gym.make, e.g. '{\"show_actions\": false}'"
    )
    p.add_argument("--actions", default=None, help="comma-separated action set of the random policy")
    p.add_argument("--base-url", default=None, help="an OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
    p.add_argument("--api-key", default=None, help="bearer token for --base-url (default: $OPENAI_API_KEY)")
    p.add_argument("--max-tokens", type=int, help="most tokens per reply from --base-url (default: the scenario's)")
    p.add_argument("--workers", type=int, default=8, help="episodes played at once against --base-url")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--json", default=None, help="also write the results here, with every episode's transcript (agentgym report)"
    )
    p.add_argument("--transcripts", type=int, default=0, metavar="N", help="print the first N episodes' transcripts")
    p.set_defaults(func=cmd_eval)


def packaged_configs() -> list[str]:
    """Names of the configs that ship with the package (`agentgym train NAME`)."""
    return sorted(p.stem for p in DEFAULT_CONFIG.parent.glob("*.yaml"))


def cmd_train(args: argparse.Namespace) -> int:
    try:
        from agentgym_train.pipeline import load_configs, run
    except ImportError as error:
        print(_NEEDS_TRAIN.format("train", error), file=sys.stderr)
        return 1
    path = Path(args.config)
    if not path.is_file():
        path = DEFAULT_CONFIG.parent / f"{args.config}.yaml"
    if not path.is_file():
        print(
            f"no config file {args.config!r} and no packaged config of that name: {packaged_configs()}", file=sys.stderr
        )
        return 2
    try:
        pipeline, trainer_args = load_configs(path, resume_flag(args.overrides))
        resume_target(trainer_args.resume_from_checkpoint, trainer_args.output_dir)
    except ValueError as error:  # a bad value in the config or an override
        print(f"{path}: {error}", file=sys.stderr)
        return 2
    run(pipeline, trainer_args)
    return 0


def resume_flag(overrides: list[str]) -> list[str]:
    """`--resume_from_checkpoint` given without a value means `true`."""
    out = list(overrides)
    for i, item in enumerate(out):
        if item == "--resume_from_checkpoint" and (i + 1 == len(out) or out[i + 1].startswith("--")):
            out.insert(i + 1, "true")
    return out


def resume_target(value: str | None, output_dir: str) -> str | None:
    """The checkpoint folder to resume from: None (no resume), a checkpoint-N folder, or for `true` the
    last checkpoint in `output_dir`."""
    if value is None or value.lower() in ("", "false", "none"):
        return None
    if value.lower() == "true":
        from transformers.trainer_utils import get_last_checkpoint

        last = get_last_checkpoint(output_dir) if Path(output_dir).is_dir() else None
        if last is None:
            raise ValueError(f"resume_from_checkpoint: no checkpoint-N folder in output_dir {output_dir!r} to resume")
        return last
    if not (Path(value) / "trainer_state.json").is_file():
        raise ValueError(
            f"resume_from_checkpoint: {value!r} is no checkpoint (no trainer_state.json); give a checkpoint-N "
            "folder, or true for the last one in output_dir"
        )
    return value


def cmd_eval(args: argparse.Namespace) -> int:
    env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else None
    common = {
        "split": args.split,
        "num_tasks": args.tasks or None,
        "episodes_per_task": args.episodes_per_task,
        "max_turns": args.max_turns,
        "env_kwargs": env_kwargs,
        "seed": args.seed,
    }
    import gymnasium as gym

    import agentgym_envs  # noqa: F401

    if args.env_id not in gym.registry:
        print(f"unknown env id {args.env_id!r}; run `agentgym list`", file=sys.stderr)
        return 2
    if args.base_url:
        from agentgym_train.evaluation.endpoint import ChatEndpoint, EndpointError, evaluate_endpoint

        endpoint = ChatEndpoint(args.base_url, args.model, args.api_key, args.temperature, args.max_tokens)
        try:
            result = evaluate_endpoint(endpoint, args.env_id, workers=args.workers, **common)
        except EndpointError as error:
            print(error, file=sys.stderr)
            return 1
    elif args.model == "random":
        from agentgym_train.evaluation.evaluate import evaluate_random

        actions = [a.strip() for a in args.actions.split(",")] if args.actions else None
        result = evaluate_random(args.env_id, actions=actions, **common)
    elif args.model == "expert":
        from agentgym_train.evaluation.evaluate import evaluate_expert

        result = evaluate_expert(args.env_id, **common)
    else:
        try:
            from agentgym_train.evaluation.evaluate import evaluate_model
            from agentgym_train.tiny import load_model
        except ImportError as error:
            print(_NEEDS_TRAIN.format("eval", error), file=sys.stderr)
            return 1
        model, tokenizer = load_model(args.model)
        result = evaluate_model(
            model,
            tokenizer,
            args.env_id,
            max_turn_tokens=args.max_turn_tokens,
            max_completion_length=args.max_completion_length,
            temperature=args.temperature,
            **common,
        )
    if args.transcripts:
        from agentgym_train.evaluation.transcripts import format_record

        for record in result.episodes[: args.transcripts]:
            print(format_record(record), end="\n\n")
    print(f"{args.model} on {args.env_id} ({args.split}), 95% intervals over tasks:")
    print(result.table())
    if args.json:
        Path(args.json).write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return 0
