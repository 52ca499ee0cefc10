"""RFT and DPO from the demo's SFT model on CPU: held-out success with 95% intervals, DPO's held-out log-ratio.

One run: the tiny model and SFT warm start of `configs/babyai_demo.yaml` (or `--sft-model DIR`, a saved
one), evaluated on the first `eval_tasks` test tasks; then two arms from that same SFT model, each
through the pipeline's own stage (`agentgym_train.pipeline.offline_stages`) with the settings of
`configs/babyai_rft.yaml` and `configs/babyai_dpo.yaml` (overridable with --rft/--dpo KEY=VALUE), each
evaluated on the same held-out episodes. Differences are paired per task (95% normal intervals).

    python benchmarks/auxiliary_methods.py --out benchmarks/results/auxiliary_methods.json
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

CONFIGS = Path(__file__).resolve().parents[1] / "agentgym_train" / "configs"


def _overrides(pairs: list[str]) -> list[str]:
    out: list[str] = []
    for pair in pairs:
        key, _, value = pair.partition("=")
        out += [f"--{key}", value]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="benchmarks/results/auxiliary_methods.json")
    parser.add_argument("--work", default="runs/auxiliary-methods", help="folder for models and collected episodes")
    parser.add_argument("--sft-model", default=None, help="a saved SFT model (default: build and train one)")
    parser.add_argument("--rft", nargs="*", default=[], help="KEY=VALUE overrides of babyai_rft.yaml")
    parser.add_argument("--dpo", nargs="*", default=[], help="KEY=VALUE overrides of babyai_dpo.yaml")
    parser.add_argument("--arms", nargs="*", default=["rft", "dpo"])
    parser.add_argument("--threads", type=int, default=2)
    cli = parser.parse_args()

    import torch

    from agentgym_train.evaluation.evaluate import paired_difference
    from agentgym_train.models.tiny import TINY_MARKER, load_model
    from agentgym_train.pipeline import load_configs, quiet_console
    from agentgym_train.pipeline.offline_stages import STAGES
    from agentgym_train.pipeline.stages import build_policy, evaluate_stage, sft_stage
    from agentgym_train.trainers.sft import expert_chats

    torch.set_num_threads(cli.threads)
    work = Path(cli.work)
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    configs = {arm: load_configs(CONFIGS / f"babyai_{arm}.yaml", _overrides(getattr(cli, arm))) for arm in cli.arms}
    pipeline, args = next(iter(configs.values()))
    horizon = max(pipeline.max_turn_schedule)
    results: dict[str, Any] = {"env_id": args.env_id, "max_turns": horizon, "arms": {}, "stages_s": {}}

    with quiet_console():
        sft_path = Path(cli.sft_model) if cli.sft_model else work / "sft-model"
        if not (sft_path / "config.json").is_file():
            t0 = time.perf_counter()
            base, model, tokenizer = build_policy(pipeline, [args.env_id], args.env_kwargs, args.seed, work)
            chats = expert_chats(args.env_id, pipeline.sft_episodes, max_turns=horizon, env_kwargs=args.env_kwargs,
                                 seed=args.seed)  # fmt: skip
            sft_stage(model, tokenizer, chats, pipeline, work / "sft", args.seed)
            model.save_pretrained(sft_path)
            tokenizer.save_pretrained(sft_path)
            (sft_path / TINY_MARKER).write_text((Path(base) / TINY_MARKER).read_text())
            results["stages_s"]["sft"] = round(time.perf_counter() - t0, 1)

        def evaluate(model: Any, tokenizer: Any, name: str) -> Any:
            t0 = time.perf_counter()
            result = evaluate_stage(model, tokenizer, args.env_id, pipeline, args, horizon, progress=False)
            results["stages_s"][f"eval {name}"] = round(time.perf_counter() - t0, 1)
            print(
                f"{name:<10} success {result.success}  return {result.episode_return}  turns {result.turns}", flush=True
            )
            return result

        model, tokenizer = load_model(sft_path)
        before = evaluate(model, tokenizer, "SFT")
        results["sft"] = {k: v for k, v in before.to_dict().items() if k != "episodes"}
        for arm, (arm_pipeline, arm_args) in configs.items():
            t0 = time.perf_counter()
            model, tokenizer = load_model(sft_path)  # every arm starts from the same SFT weights
            torch.manual_seed(arm_args.seed)
            trained, figures = STAGES[arm](arm_pipeline, arm_args, model, tokenizer, work / arm, horizon, [])
            results["stages_s"][arm] = round(time.perf_counter() - t0, 1)
            after = evaluate(trained, tokenizer, arm.upper())
            diff = paired_difference(before, after)
            print(f"{arm.upper()} - SFT: success {diff.mean:+.3f} (95% CI {diff.low:+.3f} .. {diff.high:+.3f})")
            results["arms"][arm] = {
                "after": {k: v for k, v in after.to_dict().items() if k != "episodes"},
                "success_difference": asdict(diff),
                "beyond_interval": diff.low > 0,
                **figures,
                "config": {k: v for k, v in asdict(arm_pipeline).items() if k.startswith(arm) or k == "lora_r"},
            }
    results["wall_time_s"] = round(time.perf_counter() - started, 1)
    Path(cli.out).parent.mkdir(parents=True, exist_ok=True)
    Path(cli.out).write_text(json.dumps(results, indent=2, default=str) + "\n")
    print(f"wrote {cli.out} ({results['wall_time_s']:.0f} s)")


if __name__ == "__main__":
    main()
