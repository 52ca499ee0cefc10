"""The `agentgym` command line: `list` and `play` (more subcommands come with the trainer and server).

Imports stay light here (no torch): `agentgym list` and `agentgym play` work on the core install.
"""

from __future__ import annotations

import argparse
import fnmatch
import sys
import time
from typing import Any

import gymnasium as gym

import agentgym_envs

REMOTE_ID = "AgentGym/Remote-v0"


def _sizes(env: Any) -> str:
    base = env.unwrapped
    return ", ".join(f"{split} {base.num_tasks(split):,}" for split in base.splits)


def cmd_list(args: argparse.Namespace) -> int:
    ids = [i for i in agentgym_envs.registered_ids if fnmatch.fnmatch(i, args.pattern)]
    if not ids:
        print(f"no registered id matches {args.pattern!r}", file=sys.stderr)
        return 1
    rows = []
    for env_id in ids:
        if env_id == REMOTE_ID:  # its tasks are those of whatever env a server serves
            rows.append((env_id, "those of the served env", "-", "-"))
            continue
        env = gym.make(env_id)
        base = env.unwrapped
        rows.append((env_id, _sizes(env), str(base.default_max_turns), base.action_format))
        env.close()
    header = ("id", "splits (tasks)", "max turns", "action format")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _episode(env: gym.Env, args: argparse.Namespace, seed: int | None) -> dict[str, Any]:
    options = {key: value for key, value in (("split", args.split), ("task_id", args.task_id)) if value is not None}
    observation, info = env.reset(seed=seed, options=options or None)
    print(f"--- {info['task_id']} ({info['split']}, {info['category']}) ---")
    print(observation)
    expert = env.unwrapped.make_expert() if args.expert else None
    turns, total = 0, 0.0
    while True:
        if expert is not None:
            action = expert.act(observation, info)
            print(f"\nexpert> {action}")
            if args.delay:
                time.sleep(args.delay)
        else:
            try:
                action = input("\n> ")
            except EOFError:
                print()
                return {"turns": turns, "return": total, "success": False, "quit": True}
            if action.strip().lower() in {"quit", "exit"}:
                return {"turns": turns, "return": total, "success": False, "quit": True}
        observation, reward, terminated, truncated, info = env.step(action)
        turns += 1
        total += reward
        print(observation)
        flag = "" if info.get("valid_action", True) else "  [invalid action]"
        print(f"[reward {reward:+.3f}  score {info['score']:.3f}  turn {turns}]{flag}")
        if terminated or truncated or (args.max_turns and turns >= args.max_turns):
            outcome = "success" if info["success"] else "terminated" if terminated else "truncated"
            print(f"--- episode over: {outcome}, return {total:.3f} in {turns} turns ---")
            return {"turns": turns, "return": total, "success": bool(info["success"]), "quit": False}


def cmd_play(args: argparse.Namespace) -> int:
    if args.env_id not in gym.registry:
        print(f"unknown env id {args.env_id!r}; run `agentgym list`", file=sys.stderr)
        return 2
    env = gym.make(args.env_id)
    results = []
    try:
        for episode in range(args.episodes):
            seed = None if args.seed is None else args.seed + episode
            results.append(_episode(env, args, seed))
            if results[-1]["quit"]:
                break
    finally:
        env.close()
    if len(results) > 1:
        n = len(results)
        print(
            f"\n{n} episodes: success {sum(r['success'] for r in results) / n:.1%}, "
            f"mean return {sum(r['return'] for r in results) / n:.3f}, "
            f"mean turns {sum(r['turns'] for r in results) / n:.1f}"
        )
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    unknown = [env_id for env_id in args.env_ids if env_id not in gym.registry]
    if unknown:
        print(f"unknown env ids {unknown}; run `agentgym list`", file=sys.stderr)
        return 2
    try:  # FastAPI and uvicorn only here: the rest of the command line works on the core install
        from agentgym_envs.remote.server import serve
    except ImportError as error:
        print(f"agentgym serve needs FastAPI and uvicorn ({error}): pip install 'agentgym-rl[server]'", file=sys.stderr)
        return 1
    from agentgym_envs.remote.server.policy import load_env_kwargs

    try:
        options = {
            "token": args.token,
            "max_sessions": args.max_sessions,
            "ttl": args.ttl,
            "workers": args.workers,
            "env_kwargs": load_env_kwargs(args.env_kwargs, args.env_config, args.env_ids),
            "allowed_hosts": args.allowed_host,
            "allowed_origins": args.allowed_origin,
            "header_timeout": args.header_timeout,
            "keep_alive": args.keep_alive,
        }
        serve(args.env_ids, args.host, args.port, **options)
    except ValueError as error:
        print(f"agentgym serve: {error}", file=sys.stderr)
        return 2
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentgym", description="AgentGym-RL: text environments for LLM agents")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="registered env ids with their splits and sizes")
    p.add_argument("pattern", nargs="?", default="*", help="glob over ids, e.g. 'AgentGym/BabyAI-Go*'")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("play", help="play an env in the terminal (or watch the expert)")
    p.add_argument("env_id")
    p.add_argument("--expert", action="store_true", help="let the scripted expert play")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--split", default=None, help="train / test (default: the env's first split)")
    p.add_argument("--task-id", default=None)
    p.add_argument("--episodes", type=int, default=1)
    p.add_argument("--max-turns", type=int, default=None)
    p.add_argument("--delay", type=float, default=0.0, help="seconds between expert actions")
    p.set_defaults(func=cmd_play)

    p = sub.add_parser("serve", help="serve env ids over HTTP, one protocol for all ([server] extra)")
    p.add_argument("env_ids", nargs="+", metavar="ENV_ID", help="registered ids; the first is the default")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default: loopback only)")
    p.add_argument("--port", type=int, default=8000, help="port (0: a free one, printed)")
    p.add_argument("--token", default=None, help="bearer token every request must carry (default: $AGENTGYM_TOKEN)")
    p.add_argument("--max-sessions", type=int, default=1024, help="sessions at once (429 past it)")
    p.add_argument("--ttl", type=float, default=600.0, help="seconds before an idle session is closed (0: never)")
    p.add_argument("--workers", type=int, default=16, help="threads for blocking env calls")
    p.add_argument(
        "--env-kwargs",
        default=None,
        metavar="JSON",
        help='the envs\' configuration, fixed for every session: \'{"heap": "1g"}\' for every id, or '
        "'{\"ENV_ID\": {...}}' per id (clients may add only the kwargs each env lists as client-safe)",
    )
    p.add_argument(
        "--env-config", default=None, metavar="FILE", help="the same as --env-kwargs, from a YAML or JSON file"
    )
    p.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the server answers to besides the bound address (repeatable; '*': any, behind a proxy)",
    )
    p.add_argument(
        "--allowed-origin", action="append", default=[], metavar="URL", help="a web origin allowed to call (repeatable)"
    )
    p.add_argument("--header-timeout", type=float, default=10.0, help="seconds a request head may take to arrive")
    p.add_argument("--keep-alive", type=float, default=75.0, help="seconds an idle connection is kept open")
    p.set_defaults(func=cmd_serve)

    # Deep Search's retrieval server; fastapi/uvicorn are imported only when it runs ([server] extra).
    from agentgym_envs.deepsearch import server as retrieval_server

    p = sub.add_parser("retrieval-server", help="serve a Deep Search retriever over HTTP (Search-R1 protocol)")
    retrieval_server.add_arguments(p)
    p.set_defaults(func=retrieval_server.run)

    # Training and evaluation; torch and TRL are imported only when they run ([train] extra).
    from agentgym_train import commands

    commands.add_subcommands(sub)

    from agentgym_train import experiments

    experiments.add_subcommands(sub)

    from agentgym_train.evaluation import report

    p = sub.add_parser(
        "report", help="one static HTML page from eval/train results: table, curves, transcripts side by side"
    )
    report.add_arguments(p)
    p.set_defaults(func=report.run)

    from agentgym_train import bench, collect, doctor

    p = sub.add_parser(
        "collect", help="episodes of a model, an endpoint, 'expert' or 'random' to JSONL (for SFT, RFT, DPO)"
    )
    collect.add_arguments(p)
    p.set_defaults(func=collect.run)

    p = sub.add_parser(
        "doctor",
        help="what is installed (Java, Chromium, torch and its device, extras), what each scenario needs, the fixes",
    )
    doctor.add_arguments(p)
    p.set_defaults(func=doctor.run)

    p = sub.add_parser("bench", help="run the speed benchmarks under benchmarks/; one table of ratios to baselines")
    bench.add_arguments(p)
    p.set_defaults(func=bench.run)

    from agentgym_train import plan

    p = sub.add_parser("plan", help="per-GPU memory of a training config on N GPUs, part by part, and whether it fits")
    plan.add_arguments(p)
    p.set_defaults(func=plan.run)
    return parser


def config_first(argv: list[str]) -> list[str]:
    """`argv` with the default config's name put before `--key value` overrides that come without one.

    `train` and `experiment horizons` take [CONFIG] then overrides; given overrides alone, argparse
    would take the first override's value for CONFIG.
    """
    from agentgym_train.commands import DEFAULT_CONFIG
    from agentgym_train.experiments.horizons import DEFAULT_CONFIG as HORIZONS_CONFIG

    # command words -> (default config, the command's own options that take a value, its flags)
    commands = {
        ("train",): (DEFAULT_CONFIG.stem, set(), set()),
        ("experiment", "horizons"): (HORIZONS_CONFIG.stem, {"--output-dir"}, {"--summary-only"}),
    }
    for words, (default, valued, flags) in commands.items():
        if tuple(argv[: len(words)]) != words:
            continue
        i = len(words)
        while i < len(argv) and (argv[i] in valued | flags or argv[i].split("=")[0] in valued):
            i += 2 if argv[i] in valued else 1
        if i < len(argv) and argv[i].startswith("--") and argv[i] != "--help":
            return [*argv[:i], default, *argv[i:]]
    return argv


def main(argv: list[str] | None = None) -> int:
    argv = config_first(list(sys.argv[1:] if argv is None else argv))
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # output piped into `head` and the like
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())
