"""`agentgym prepare sciworld|textworld|verl` and `agentgym tasks webarena`: what a scenario builds ahead of time
(ScienceWorld's gold paths, TextWorld's games, verl's dataset of tasks) and what it holds (WebArena's bundled tasks).

The commands call library functions (`agentgym_envs.sciworld.gold`, `agentgym_envs.textworld.prepare`,
`agentgym_envs.adapters.verl`, `agentgym_envs.webarena.tasks.splits`), imported when a command runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agentgym_train.cli.base import Command, Group


class SciWorldGoldCommand(Command):
    """`agentgym prepare sciworld (--sample | --split SPLIT [--limit N])`: gold paths outside any env's JVM."""

    name = "sciworld"
    help = "generate ScienceWorld gold paths outside any env's JVM (the packaged sample, or a split's disk cache)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        group = parser.add_mutually_exclusive_group(required=True)
        group.add_argument("--sample", action="store_true", help="rebuild the packaged gold_test_sample.json.gz")
        group.add_argument("--split", choices=("train", "dev", "test"), help="fill the disk cache for a split")
        parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of the split")

    def run(self, args: argparse.Namespace) -> int:
        from agentgym_envs.sciworld import gold

        if args.sample:
            gold.build_sample()
        else:
            gold.fill_cache(args.split, args.limit, lambda task_id, n: print(task_id, n, flush=True))
        return 0


class TextWorldGamesCommand(Command):
    """`agentgym prepare textworld [--split test] ...`: build a split's games into the cache."""

    name = "textworld"
    help = "build the TextWorld games of a split ahead of time, so that no env waits for the compiler"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from agentgym_envs.textworld import tasks as T

        parser.add_argument("--split", choices=T.SPLITS, default="test")
        parser.add_argument("--challenges", nargs="+", choices=T.CHALLENGES, default=list(T.CHALLENGES))
        parser.add_argument("--difficulties", nargs="+", choices=T.LEVELS, default=list(T.LEVELS))
        parser.add_argument(
            "--limit", type=int, default=None, help="only the first N games (the train split has 120,000)"
        )
        parser.add_argument("--workers", type=int, default=2, help="worker processes building at once")
        parser.add_argument("--cache-dir", default=None, help="default: $AGENTGYM_CACHE_DIR or ~/.cache/agentgym")
        parser.add_argument("--out", default=None, help="write the per-game build times here (JSON)")

    def run(self, args: argparse.Namespace) -> int:
        from agentgym_envs.textworld.prepare import prepare

        start, done = time.perf_counter(), [0]

        def progress(records: list[dict]) -> None:
            done[0] += len(records)
            print(f"\rbuilt {done[0]} games ({time.perf_counter() - start:.0f} s)", end="", file=sys.stderr, flush=True)

        try:
            summary, records = prepare(
                args.split,
                tuple(args.challenges),
                tuple(args.difficulties),
                args.limit,
                args.workers,
                args.cache_dir,
                progress,
            )
        except ValueError as error:
            print(f"agentgym prepare textworld: error: {error}", file=sys.stderr)
            return 2
        if records:
            print(file=sys.stderr)
        print(json.dumps(summary, indent=1))
        if args.out:
            Path(args.out).write_text(json.dumps({**summary, "records": records}, indent=1))
        return 0


class VerlDatasetCommand(Command):
    """`agentgym prepare verl ENV_ID [--split train] [--limit N] [--out FILE]`: verl's parquet rows naming tasks,
    and the agent loop's entry for verl's `agent_loop_config_path`."""

    name = "verl"
    help = "write verl's dataset rows naming a scenario's tasks (parquet) and the agentgym agent loop's YAML entry"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument(
            "env_id", help="a registered id, e.g. AgentGym/BabyAI-v0 (AgentGym/Remote-v0 with --env-kwargs)"
        )
        parser.add_argument("--split", default="train", help="the split whose tasks the rows name (default: train)")
        parser.add_argument("--limit", type=int, default=None, help="only the first N tasks of the split")
        parser.add_argument("--out", default=None, help="the parquet file (default: verl_data/<env>_<split>.parquet)")
        parser.add_argument(
            "--env-kwargs", default=None, help="JSON keyword arguments for gym.make (also written to the loop's entry)"
        )
        parser.add_argument(
            "--max-turns", type=int, default=None, help="each row's turn limit (default: the scenario's)"
        )
        parser.add_argument("--seed", type=int, default=0, help="each row's reset seed")
        parser.add_argument(
            "--agent-name", default=None, help="the rows' agent_name and the entry's name (default: agentgym)"
        )
        parser.add_argument(
            "--agent-loop-config", default=None, help="where the loop's YAML entry goes (default: beside --out)"
        )

    def run(self, args: argparse.Namespace) -> int:
        try:
            import pyarrow  # noqa: F401  (the rows are parquet)
        except ImportError as error:
            raise ImportError(
                f"agentgym prepare verl writes parquet ({error}): pip install 'agentgym-rl[verl]'"
            ) from error
        from agentgym_envs.adapters import verl

        slug = args.env_id.removeprefix("AgentGym/").lower().replace("/", "_")
        out = Path(args.out or Path("verl_data") / f"{slug}_{args.split}.parquet")
        loop_config = Path(args.agent_loop_config or out.parent / "agent_loop.yaml")
        name = args.agent_name or verl.AGENT_NAME
        try:
            env_kwargs = json.loads(args.env_kwargs) if args.env_kwargs else None
            rows = verl.dataset_rows(
                args.env_id,
                args.split,
                args.limit,
                env_kwargs,
                agent_name=name,
                max_turns=args.max_turns,
                seed=args.seed,
            )
        except ImportError:  # a scenario's own extra (TextWorld's): the command line names it
            raise
        except Exception as error:  # an unknown id, split or kwargs: the user's to fix
            print(f"agentgym prepare verl: error: {type(error).__name__}: {error}", file=sys.stderr)
            return 2
        verl.write_parquet(rows, out)
        loop_config.parent.mkdir(parents=True, exist_ok=True)
        loop_config.write_text(_yaml(verl.agent_loop_config(name, env_kwargs=env_kwargs)))
        files = "data.train_files" if args.split == "train" else "data.val_files"
        summary = {
            "rows": len(rows),
            "parquet": str(out),
            "agent_loop_config": str(loop_config),
            "verl_overrides": [
                f"{files}={out}",
                f"actor_rollout_ref.rollout.agent.agent_loop_config_path={loop_config}",
                f"actor_rollout_ref.rollout.agent.default_agent_loop={name}",
            ],
        }
        print(json.dumps(summary, indent=1))
        return 0


def _yaml(data: object) -> str:
    """YAML text (JSON, itself YAML, where PyYAML is not installed)."""
    try:
        import yaml
    except ImportError:
        return json.dumps(data, indent=1) + "\n"
    return yaml.safe_dump(data, sort_keys=False)


class PrepareCommand(Group):
    """`agentgym prepare`: a group, one subcommand per scenario that can build its data ahead of time."""

    name = "prepare"
    help = "build a scenario's data ahead of time (ScienceWorld's gold paths, TextWorld's games, verl's rows)"
    subcommands = (SciWorldGoldCommand(), TextWorldGamesCommand(), VerlDatasetCommand())


class WebArenaTasksCommand(Command):
    """`agentgym tasks webarena [--table] [--held-out]`: the bundled tasks' table and the held-out templates."""

    name = "webarena"
    help = "the Markdown table of the bundled WebArena tasks (per site, templates and train/test tasks per kind)"

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--table", action="store_true", help="print the Markdown table (the default)")
        parser.add_argument("--held-out", action="store_true", help="list the held-out templates")

    def run(self, args: argparse.Namespace) -> int:
        from agentgym_envs.webarena.tasks.catalog import TaskCatalog
        from agentgym_envs.webarena.tasks.splits import site_templates, table

        templates = site_templates()
        if args.table or not args.held_out:
            print(table(list(TaskCatalog.bundled().by_id.values()), templates))
        if args.held_out:
            for site_list in templates.values():
                for template in site_list:
                    if template.held_out:
                        print(f"{template.template_id} ({template.kind}): {template.intent_template}")
        return 0


class TasksCommand(Group):
    """`agentgym tasks`: a group, one subcommand per scenario whose task set has a summary of its own."""

    name = "tasks"
    help = "what a scenario's bundled task set holds (WebArena: per site, templates and tasks per kind)"
    subcommands = (WebArenaTasksCommand(),)
