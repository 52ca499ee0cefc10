"""`agentgym collect POLICY ENV_ID --out FILE`: episodes of any policy to JSONL (`agentgym_train.collect`).

Importing this module is light: torch and transformers are imported only when a model plays.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from agentgym_train import collect
from agentgym_train.cli.base import ACTION_FORMAT_HELP, CONTEXT_HELP, Command, context_spec
from agentgym_train.cli.cluster import add_ray_arguments, ray_pool, ray_resource_without_ray


class CollectCommand(Command):
    """`agentgym collect`: play and append episodes (resumable); prints what was written."""

    name = "collect"
    help = "episodes of a model, an endpoint, 'expert' or 'random' to JSONL (for SFT, RFT, DPO)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        p = parser
        p.add_argument(
            "policy", help="model path or hub id; with --base-url the endpoint's model name; 'expert'; 'random'"
        )
        p.add_argument("env_id")
        p.add_argument("--out", required=True, help="JSONL file (appended to; finished episodes are skipped)")
        p.add_argument("--split", default="train")
        p.add_argument("--tasks", type=int, default=0, help="first N tasks of the split (0: all)")
        p.add_argument("--episodes-per-task", "-k", type=int, default=1, help="episodes per task")
        p.add_argument("--max-turns", type=int, default=None, help="turn limit (default: the env's)")
        p.add_argument("--max-turn-tokens", type=int, default=64, help="most tokens per reply of a model")
        p.add_argument("--max-completion-length", type=int, default=4096, help="token budget of a model's episode")
        p.add_argument("--temperature", type=float, default=1.0, help="0: greedy")
        p.add_argument("--batch-size", type=int, default=64, help="episodes a model plays at once")
        p.add_argument("--env-kwargs", default=None, help="JSON keyword arguments for gym.make")
        p.add_argument("--actions", default=None, help="comma-separated action set of the random policy")
        p.add_argument("--base-url", default=None, help="an OpenAI-compatible API root, e.g. http://127.0.0.1:8000/v1")
        p.add_argument("--api-key", default=None, help="bearer token for --base-url (default: $OPENAI_API_KEY)")
        p.add_argument("--max-tokens", type=int, default=512, help="most tokens per reply from --base-url")
        p.add_argument("--workers", type=int, default=8, help="episodes played at once by expert, random or endpoint")
        p.add_argument("--seed", type=int, default=0, help="episode k of a task resets with seed + k")
        p.add_argument("--context", type=context_spec, default=None, help=CONTEXT_HELP)
        p.add_argument(
            "--action-format",
            choices=["tools"],
            default=None,
            help=ACTION_FORMAT_HELP + "; with expert or random, their actions are written as tool calls "
            "(SFT demonstrations for action_format: tools)",
        )
        p.add_argument("--no-progress", action="store_true", help="no progress bar")
        add_ray_arguments(p)

    def run(self, args: argparse.Namespace) -> int:
        env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else None
        name = args.policy
        if ray_resource_without_ray(args, "collect"):
            return 2
        if args.ray and (args.base_url or name in ("expert", "random")):
            print("agentgym collect: --ray runs a model's envs on Ray; other policies play here", file=sys.stderr)
            return 2
        if args.context is not None and not args.base_url and name in ("expert", "random"):
            print(
                f"agentgym collect: --context shapes a model's prompt; {name} reads only the observation",
                file=sys.stderr,
            )
            return 2
        if args.action_format is not None and args.ray:
            print("agentgym collect: --action-format tools plays envs in this process; drop --ray", file=sys.stderr)
            return 2
        if args.base_url:
            from agentgym_train.evaluation.endpoint import ChatEndpoint

            actor: Any = collect.endpoint_actor(
                ChatEndpoint(args.base_url, name, args.api_key, args.temperature, args.max_tokens)
            )
        elif name == "expert":
            actor = collect.expert_actor
        elif name == "random":
            actor = collect.random_actor([a.strip() for a in args.actions.split(",")] if args.actions else None)
        else:
            from agentgym_train.models.tiny import load_model

            model, tokenizer = load_model(name)
            actor = collect.ModelPolicy(
                model,
                tokenizer,
                max_turn_tokens=args.max_turn_tokens,
                max_completion_length=args.max_completion_length,
                temperature=args.temperature,
                batch_size=args.batch_size,
                env_pool=ray_pool(args.ray, args.ray_resource),
                context=args.context,
                action_format=args.action_format,
            )
        try:
            result = collect.collect(
                actor,
                args.env_id,
                args.out,
                split=args.split,
                num_tasks=args.tasks or None,
                episodes_per_task=args.episodes_per_task,
                max_turns=args.max_turns,
                env_kwargs=env_kwargs,
                seed=args.seed,
                workers=args.workers,
                policy_name=name,
                progress=not args.no_progress,
                context=args.context if args.base_url else None,
                action_format=None if isinstance(actor, collect.ModelPolicy) else args.action_format,
            )
        except ValueError as error:  # an unknown env id, a file of another env, a broken line
            print(f"agentgym collect: {error}", file=sys.stderr)
            return 2
        print(result)
        return 0
