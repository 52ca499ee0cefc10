"""`agentgym eval` (a policy over a split: Avg@k, Pass@K, success against max turns, per category) and
`agentgym report` (one static HTML page from eval and train results).

Importing this module is light: torch and transformers are imported only when a model is evaluated.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentgym_train.cli.base import ACTION_FORMAT_HELP, CONTEXT_HELP, Command, context_spec
from agentgym_train.cli.cluster import add_ray_arguments, ray_pool, ray_resource_without_ray
from agentgym_train.evaluation import report


def int_list(text: str) -> list[int]:
    """A comma list of positive integers ("2,4,6"), sorted and without repeats."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma list of positive integers, e.g. 2,4,6")
    return sorted(set(values))


def _figure(args: argparse.Namespace, curve: Any, name: str, detail: str) -> None:
    """Draw `curve` into DIR/name.png (--figures DIR), else beside --json (out.json: out-name.png), else nowhere."""
    from agentgym_train.evaluation.curves import plot

    if args.figures:
        path = Path(args.figures) / f"{name}.png"
    elif args.json:
        path = Path(args.json).with_name(f"{Path(args.json).stem}-{name}.png")
    else:
        return
    print("figure:", plot(curve, path, f"{args.model} on {args.env_id.split('/')[-1]}, {detail}"))


def _policy(args: argparse.Namespace) -> Callable[[int | None], Any] | int:
    """`evaluate(max_turns) -> EvalResult` for the policy `args` name (an exit code where it cannot be made):
    the same tasks and seeds at every call."""
    common = {
        "split": args.split,
        "num_tasks": 100 if args.tasks is None else (args.tasks or None),
        "episodes_per_task": args.episodes_per_task,
        "env_kwargs": json.loads(args.env_kwargs) if args.env_kwargs else None,
        "seed": args.seed,
    }
    if ray_resource_without_ray(args, "eval"):
        return 2
    if args.ray and (args.base_url or args.model in ("random", "expert")):
        print("agentgym eval: --ray runs a model's envs on Ray; other policies play in this process", file=sys.stderr)
        return 2
    if args.context is not None and not args.base_url and args.model in ("random", "expert"):
        print(
            f"agentgym eval: --context shapes a model's prompt; {args.model} reads only the observation",
            file=sys.stderr,
        )
        return 2
    if args.action_format is not None and not args.base_url and args.model in ("random", "expert"):
        print(
            f"agentgym eval: --action-format shapes a model's replies; {args.model} plays the scenario's actions "
            "(agentgym collect expert --action-format tools writes them as tool calls)",
            file=sys.stderr,
        )
        return 2
    if args.action_format is not None and args.ray:
        print("agentgym eval: --action-format tools plays envs in this process; drop --ray", file=sys.stderr)
        return 2
    if args.base_url:
        from agentgym_train.evaluation.endpoint import ChatEndpoint, evaluate_endpoint

        endpoint = ChatEndpoint(args.base_url, args.model, args.api_key, args.temperature, args.max_tokens)
        return lambda turns: evaluate_endpoint(
            endpoint,
            args.env_id,
            workers=args.workers,
            max_turns=turns,
            context=args.context,
            action_format=args.action_format,
            **common,
        )
    if args.model == "random":
        from agentgym_train.evaluation.evaluate import evaluate_random

        actions = [a.strip() for a in args.actions.split(",")] if args.actions else None
        return lambda turns: evaluate_random(args.env_id, actions=actions, max_turns=turns, **common)
    if args.model == "expert":
        from agentgym_train.evaluation.evaluate import evaluate_expert

        return lambda turns: evaluate_expert(args.env_id, max_turns=turns, **common)
    from agentgym_train.evaluation.evaluate import evaluate_model
    from agentgym_train.models.tiny import load_model

    model, tokenizer = load_model(args.model)
    env_pool = ray_pool(args.ray, args.ray_resource)
    return lambda turns: evaluate_model(
        model,
        tokenizer,
        args.env_id,
        max_turns=turns,
        max_turn_tokens=args.max_turn_tokens,
        max_completion_length=args.max_completion_length,
        temperature=args.temperature,
        env_pool=env_pool,
        context=args.context,
        action_format=args.action_format,
        **common,
    )


class EvalCommand(Command):
    """`agentgym eval MODEL ENV_ID`: the evaluators of `agentgym_train.evaluation` over a split, as tables,
    JSON and curves."""

    name = "eval"
    help = "success / return / turns of a model, an OpenAI-compatible endpoint or a random policy on a split"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        p = parser
        p.add_argument(
            "model",
            help="model path or hub id; with --base-url the endpoint's model name; 'random': a random policy; "
            "'expert': the scenario's scripted expert",
        )
        p.add_argument("env_id", nargs="?", default=None, help="the env id (with --protocol: one of its scenarios)")
        p.add_argument("--split", default="test")
        p.add_argument(
            "--tasks",
            type=int,
            default=None,
            help="first N tasks of the split (0: all; default 100, with --protocol the whole test split)",
        )
        p.add_argument(
            "--protocol",
            choices=["paper"],
            default=None,
            help="the AgentGym-RL paper's evaluation of each of its scenarios (all five, or ENV_ID's): its turn "
            "limits, samples, sampling and reply budgets, each read from its scripts; prints its table with the "
            "paper's scores beside ours, per category too (docs/results/paper-protocol.md)",
        )
        p.add_argument("--episodes-per-task", "-k", type=int, default=1, help="k of Avg@k / Pass@k")
        p.add_argument(
            "--max-turns",
            type=int_list,
            default=None,
            help="turn limit (default: the env's); a comma list (2,4,6,8,10) plays the same tasks and seeds at "
            "each and draws success against max turns",
        )
        p.add_argument(
            "--pass-at",
            type=int_list,
            default=None,
            metavar="K,K,...",
            help="the Ks of Pass@K, each <= k, estimated without bias from the k episodes per task "
            "(default with k > 1: the powers of two below k, and k)",
        )
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
        p.add_argument("--context", type=context_spec, default=None, help=CONTEXT_HELP)
        p.add_argument("--action-format", choices=["tools"], default=None, help=ACTION_FORMAT_HELP)
        add_ray_arguments(p)
        p.add_argument(
            "--json",
            default=None,
            help="also write the results here, with every episode's transcript (agentgym report)",
        )
        p.add_argument(
            "--transcripts", type=int, default=0, metavar="N", help="print the first N episodes' transcripts"
        )
        p.add_argument(
            "--by",
            default="category",
            choices=["category", "kind"],
            help="group the table and curves by category (default) or by kind (WebArena's task kind)",
        )
        p.add_argument(
            "--figures",
            default=None,
            metavar="DIR",
            help="write the PNG curves (success against max turns, Pass@K against K) here (default: next to --json)",
        )

    def run(self, args: argparse.Namespace) -> int:
        if args.protocol is not None:
            return run_protocol_command(args)
        if args.env_id is None:
            print("agentgym eval: give an ENV_ID (or --protocol paper for the paper's scenarios)", file=sys.stderr)
            return 2
        k = args.episodes_per_task
        if args.pass_at and max(args.pass_at) > k:
            print(
                f"--pass-at {max(args.pass_at)}: Pass@K needs K <= the episodes per task (-k {k}); "
                f"give -k {max(args.pass_at)} or Ks up to {k}",
                file=sys.stderr,
            )
            return 2
        import gymnasium as gym

        import agentgym_envs  # noqa: F401

        if args.env_id not in gym.registry:
            print(f"unknown env id {args.env_id!r}; run `agentgym list`", file=sys.stderr)
            return 2
        evaluate = _policy(args)
        if isinstance(evaluate, int):
            return evaluate
        from agentgym_train.evaluation import curves
        from agentgym_train.evaluation.endpoint import EndpointError

        horizons = args.max_turns or [None]
        try:
            results = [evaluate(horizons[0])] if len(horizons) == 1 else curves.sweep_horizons(evaluate, horizons)
        except EndpointError as error:
            print(error, file=sys.stderr)
            return 1
        if args.by != "category":
            results = [result.grouped_by(args.by) for result in results]
        if args.transcripts:
            from agentgym_train.evaluation.transcripts import format_record

            for record in results[0].episodes[: args.transcripts]:
                print(format_record(record), end="\n\n")
        documents = []
        for result in results:
            turns = result.meta["max_turns"]
            at = f", max turns {turns}" if len(results) > 1 else ""
            print(f"{args.model} on {args.env_id} ({args.split}){at}, 95% intervals over tasks:")
            print(result.table())
            documents.append(result.to_dict())
            if k > 1:
                curve = curves.pass_at_k_curve(result.episodes, args.pass_at or curves.default_pass_ks(k))
                print(f"Pass@K from {k} episodes per task (unbiased estimator; Pass@1 = Avg@{k}):")
                print(curve.table())
                documents[-1]["pass_at_k_curve"] = curve.to_dict()
                _figure(args, curve, "pass-at-k" + (f"-turns{turns}" if len(results) > 1 else ""), f"max turns {turns}")
        if len(results) == 1:
            document = documents[0]
        else:
            curve = curves.horizon_curve(results)
            print(f"{args.model} on {args.env_id} ({args.split}): success against max turns, 95% intervals over tasks:")
            print(curve.table())
            _figure(args, curve, "max-turns", f"{k} episode(s) per task")
            document = {key: documents[0][key] for key in ("policy", "env_id", "split")}
            document |= {"episodes_per_task": k, "max_turns": horizons}
            document["max_turns_curve"] = curve.to_dict()
            # one key per horizon, each a whole `agentgym eval` result: `agentgym report` reads them as policies
            document |= {f"max_turns={r.meta['max_turns']}": d for r, d in zip(results, documents, strict=True)}
        if args.json:
            Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
        return 0


#: What `--protocol` sets itself: these options must keep their defaults with it.
PROTOCOL_FIXES = {
    "split": "test",
    "episodes_per_task": 1,
    "max_turns": None,
    "pass_at": None,
    "temperature": 1.0,
    "max_turn_tokens": None,
    "max_tokens": None,
    "max_completion_length": 4096,
    "env_kwargs": None,
    "actions": None,
    "context": None,
    "action_format": None,
    "ray": None,
    "by": "category",
}


def run_protocol_command(args: argparse.Namespace) -> int:
    """`agentgym eval POLICY [ENV_ID] --protocol paper`: `evaluation.protocol.run_protocol`, printed as the
    paper's tables (and written as JSON with --json)."""
    from agentgym_train.evaluation import protocol

    changed = [name for name, default in PROTOCOL_FIXES.items() if getattr(args, name) != default]
    if changed:
        options = ", ".join("--" + name.replace("_", "-") for name in changed)
        print(
            f"agentgym eval --protocol {args.protocol} sets the split, samples, turns, sampling and budgets from "
            f"the paper's scripts; drop {options} (see `--protocol` in docs/results/paper-protocol.md)",
            file=sys.stderr,
        )
        return 2
    try:
        scenarios = protocol.scenarios_for([args.env_id] if args.env_id else None)
    except ValueError as error:
        print(f"agentgym eval: {error}", file=sys.stderr)
        return 2
    ids = [p.env_id for p in scenarios]
    run = {"env_ids": ids, "num_tasks": args.tasks or None, "seed": args.seed}
    if args.base_url:
        from agentgym_train.evaluation.endpoint import ChatEndpoint, EndpointError

        endpoint = ChatEndpoint(args.base_url, args.model, args.api_key)
        try:
            document = protocol.run_protocol(args.model, endpoint=endpoint, workers=args.workers, progress=True, **run)
        except EndpointError as error:
            print(error, file=sys.stderr)
            return 1
    elif args.model in ("expert", "random"):
        document = protocol.run_protocol(args.model, **run)
    else:
        from agentgym_train.models.tiny import load_model

        model, tokenizer = load_model(args.model)
        document = protocol.run_protocol(args.model, model=model, tokenizer=tokenizer, progress=True, **run)
    print(protocol.settings_table(scenarios), end="\n\n")
    print(protocol.paper_tables([document]))
    if args.json:
        Path(args.json).write_text(json.dumps(document, indent=2) + "\n")
    return 0


class ReportCommand(Command):
    """`agentgym report RESULTS.json...`: `evaluation.report.write_report` over eval and train results."""

    name = "report"
    help = "one static HTML page from eval/train results: table, curves, transcripts side by side"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        p = parser
        p.add_argument(
            "results", nargs="+", metavar="RESULTS.json", help="JSON of agentgym eval --json or agentgym train"
        )
        p.add_argument("--out", default="report.html", help="the HTML file to write (default: report.html)")
        p.add_argument(
            "--pair", nargs="+", default=None, metavar="LABEL", help="the one or two policies whose transcripts to show"
        )
        p.add_argument("--title", default=None)
        p.add_argument(
            "--max-episodes",
            type=int,
            default=report.DEFAULT_MAX_EPISODES,
            help=f"show at most N transcript rows, the first ones (default {report.DEFAULT_MAX_EPISODES}; 0: all)",
        )

    def run(self, args: argparse.Namespace) -> int:
        if args.pair is not None and len(args.pair) > 2:
            print(f"--pair takes one or two policy labels, got {len(args.pair)}", file=sys.stderr)
            return 2
        try:
            out = report.write_report(
                args.results, args.out, pair=args.pair, title=args.title, max_episodes=args.max_episodes
            )
        except ValueError as error:
            print(f"agentgym report: {error}", file=sys.stderr)
            return 2
        print(f"wrote {out} ({out.stat().st_size / 1024:.0f} KiB)")
        return 0
