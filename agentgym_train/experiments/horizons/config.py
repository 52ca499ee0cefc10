"""The horizon experiment's configuration: its rules, the experiment read from YAML, each run's settings."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: The experiment's default config (packaged): the CPU miniature.
DEFAULT_CONFIG = Path(__file__).parents[2] / "configs" / "experiments" / "horizons.yaml"
#: Keys of the config that describe the experiment; every other key is a `PipelineConfig` or GRPO setting.
EXPERIMENT_KEYS = (
    "task_mix",
    "train_tasks_per_level",
    "seeds",
    "rules",
    "eval_max_turns",
    "parallel_runs",
    "work_dir",
    "smooth",
    "compare",
)
DONE = "done"


# ---- configuration ---------------------------------------------------------------------------------


@dataclass
class Rule:
    """A max-turn rule: fixed (`max_turns: [12]`), staged (`max_turns: [4, 8, 12], every: 50`) or adaptive
    (`adaptive: [4, 8, 12]` plus `AdaptiveMaxTurnScheduler` keyword arguments). `settings: {key: value}` gives
    the rule's runs trainer settings of their own on top of the shared ones (`advantage_estimator: gigpo`), so
    that one experiment compares methods as well as horizons; the shared start, the evaluation and the budget
    stay common to every rule (`check_settings`)."""

    name: str
    spec: dict[str, Any]

    def __post_init__(self) -> None:
        if not isinstance(self.spec.get("settings", {}), dict):
            raise ValueError(f"rule {self.name!r}: settings must map trainer settings to values, got {self.spec}")
        if ("max_turns" in self.spec) == ("adaptive" in self.spec):
            raise ValueError(
                f"rule {self.name!r}: give either max_turns: [..] (with every: N for stages) or adaptive: [..]; "
                f"got {self.spec}"
            )
        horizons = self.spec.get("max_turns") or self.spec.get("adaptive")
        if not isinstance(horizons, list) or not horizons or sorted(horizons) != horizons:
            raise ValueError(f"rule {self.name!r}: horizons must be a non-empty increasing list, got {horizons!r}")
        if "max_turns" in self.spec and len(horizons) > 1 and int(self.spec.get("every", 0)) < 1:
            raise ValueError(f"rule {self.name!r}: staged horizons {horizons} need every: N >= 1 (steps per stage)")

    @property
    def settings(self) -> dict[str, Any]:
        return dict(self.spec.get("settings") or {})

    @property
    def horizons(self) -> list[int]:
        return [int(h) for h in self.spec.get("max_turns") or self.spec["adaptive"]]

    def scheduler(self) -> Any:
        """The rule's `MaxTurnScheduler` (a fresh one per run)."""
        from agentgym_train.scheduler import AdaptiveMaxTurnScheduler, MaxTurnScheduler

        if "adaptive" in self.spec:
            options = {k: v for k, v in self.spec.items() if k not in ("adaptive", "settings")}
            return AdaptiveMaxTurnScheduler(self.horizons, **options)
        return MaxTurnScheduler.stages(self.horizons, int(self.spec.get("every", 1)))

    def label(self) -> str:
        if "adaptive" in self.spec:
            label = "adaptive " + "/".join(map(str, self.horizons))
        elif len(self.horizons) == 1:
            label = f"fixed {self.horizons[0]}"
        else:
            label = "→".join(map(str, self.horizons)) + f" every {self.spec['every']} steps"
        return ", ".join([label, *(f"{key}={value}" for key, value in self.settings.items())])


@dataclass
class Experiment:
    """The experiment's settings (the config's experiment keys) and the settings every run shares."""

    task_mix: list[str]
    seeds: list[int]
    rules: list[Rule]
    settings: dict[str, Any]
    output_dir: Path
    work_dir: Path
    eval_max_turns: int
    parallel_runs: int = 1
    smooth: int = 10
    train_tasks_per_level: int | None = None
    #: Pairs of rules [a, b] whose held-out success the summary compares task by task (b - a, paired).
    compare: list[tuple[str, str]] = field(default_factory=list)

    def seed_dir(self, seed: int) -> Path:
        return self.output_dir / f"seed-{seed}"

    def run_dir(self, rule: Rule, seed: int) -> Path:
        return self.output_dir / rule.name / f"seed-{seed}"


def load_experiment(path: str | Path, overrides: list[str] | None = None, output_dir: str | None = None) -> Experiment:
    """Read the experiment's YAML with `--key value` overrides (values parse as YAML: `--seeds [0]`)."""
    import yaml  # the [train] extra's, as everything an experiment runs

    config = yaml.safe_load(Path(path).read_text())
    if not isinstance(config, dict):
        raise ValueError(f"{path}: the config must be a YAML mapping")
    items = list(overrides or [])
    if len(items) % 2 or any(not key.startswith("--") for key in items[::2]):
        raise ValueError(f"overrides must be --key value pairs, got {items}")
    for key, value in zip(items[::2], items[1::2], strict=True):
        config[key[2:].replace("-", "_")] = yaml.safe_load(value)
    missing = [key for key in ("task_mix", "rules") if key not in config]
    if missing:
        raise ValueError(f"{path}: the experiment needs {missing} (see configs/experiments/horizons.yaml)")
    settings = {k: v for k, v in config.items() if k not in EXPERIMENT_KEYS}
    rules_spec = config["rules"]
    if not isinstance(rules_spec, dict) or not rules_spec:
        raise ValueError(f"rules must map rule names to specs, got {rules_spec!r}")
    rules = [Rule(str(name), dict(spec)) for name, spec in rules_spec.items()]
    seeds = config.get("seeds", 3)
    seeds = list(range(seeds)) if isinstance(seeds, int) else [int(s) for s in seeds]
    out = Path(output_dir or settings.get("output_dir") or "runs/horizons")
    compare = config.get("compare") or []
    names = [rule.name for rule in rules]
    if not isinstance(compare, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(name in names for name in pair) for pair in compare
    ):
        raise ValueError(
            f"compare must list pairs of rule names [a, b] among {names}, got {compare!r} (with other rules, give "
            "--compare too: '[]' for none)"
        )
    return Experiment(
        task_mix=list(config["task_mix"]),
        seeds=seeds,
        rules=rules,
        settings=settings,
        output_dir=out,
        work_dir=Path(config.get("work_dir") or out / "work"),
        eval_max_turns=int(config.get("eval_max_turns") or max(max(r.horizons) for r in rules)),
        parallel_runs=int(config.get("parallel_runs", 1)),
        smooth=int(config.get("smooth", 10)),
        train_tasks_per_level=config.get("train_tasks_per_level"),
        compare=[(str(a), str(b)) for a, b in compare],
    )


def parse_settings(settings: dict[str, Any]) -> tuple[Any, Any]:
    """`PipelineConfig` and `MultiTurnGRPOConfig` from a flat dict of settings (unknown keys: ValueError)."""
    from trl import TrlParser

    from agentgym_train.pipeline import PipelineConfig
    from agentgym_train.trainers.grpo_config import MultiTurnGRPOConfig

    parser = TrlParser((PipelineConfig, MultiTurnGRPOConfig), exit_on_error=False)
    unknown = parser.set_defaults_with_config(**settings)
    if unknown:
        raise ValueError(f"unknown settings {unknown}: not PipelineConfig or MultiTurnGRPOConfig fields")
    try:
        return parser.parse_args_into_dataclasses(args=[])
    except argparse.ArgumentError as error:  # a value of the wrong type: argparse would print its usage and exit
        raise ValueError(str(error)) from None


def seed_settings(experiment: Experiment, seed: int, **extra: Any) -> dict[str, Any]:
    """The pipeline and GRPO settings of `seed`'s runs (`extra` on top: an output_dir, a rule's max turns)."""
    return {**experiment.settings, "env_id": experiment.task_mix[0], "seed": seed, "disable_tqdm": True, **extra}


#: Trainer settings a rule may not set for itself: every rule trains the same number of episodes.
SHARED_BUDGET = ("max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "seed", "output_dir")


def check_settings(experiment: Experiment) -> None:
    """Parse every run's settings, so that a bad value raises ValueError before anything runs. A rule's own
    settings may not touch the shared start and evaluation (`PipelineConfig`) or the budget (`SHARED_BUDGET`)."""
    from dataclasses import fields

    from agentgym_train.pipeline import PipelineConfig

    shared = {f.name for f in fields(PipelineConfig)} | set(SHARED_BUDGET)
    for rule in experiment.rules:
        common = sorted(shared & set(rule.settings))
        if common:
            raise ValueError(
                f"rule {rule.name!r}: {common} are shared by every rule (the start, the evaluation, the budget); "
                "set them for the whole experiment"
            )
    for seed in experiment.seeds:
        parse_settings(seed_settings(experiment, seed))
        for rule in experiment.rules:
            if rule.settings:
                parse_settings(seed_settings(experiment, seed, **rule.settings))
