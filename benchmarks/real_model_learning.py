"""Does the trainer make a real instruct model better? SmolLM2-135M-Instruct on BabyAI, held-out before/after.

    python benchmarks/real_model_learning.py [--name NAME] [--model smollm2-135m-instruct] [--torch-threads 2]
        [--level GoToObj] [--max-turns 2] [--eval-tasks 100] [--sft-steps 6] [--rl-steps 20] [--lora-r 16] ...

A benchmark, not a test (tens of minutes on a CPU). One run is one *setting*:

1. zero-shot: the checkpoint plays `--eval-tasks` held-out test tasks (`--eval-episodes-per-task` each);
2. SFT warm start (`--sft-steps` > 0): a few steps of `run_sft` on episodes of a scripted
   high-level player (`go to <the mission's object> 1` when it is listed among the available
   actions, else `turn left`), short enough to teach the `Action:` line without solving the level;
3. multi-turn GRPO (`MultiTurnGRPOTrainer`, LoRA with `--lora-r` > 0, else full weights) on train
   tasks, the env's return as reward;
4. the same held-out tasks, seeds, turn limit, reply budget and temperature after SFT and after RL.

The scenario is BabyAI `--level` with its action list shown and a short system prompt (the
scenario's own is ~190 tokens, which on a shared 2-core CPU costs more than the rest of an
episode): the env class is the project's `BabyAIEnv`, registered here as
`AgentGym/BabyAI-<level>-Brief-v0` with only `system_prompt` replaced. The random policy (uniform
over the listed actions) and the scripted player are evaluated on the same tasks for reference.

Intervals are the project's (95% normal intervals over per-task means, `evaluate.estimate`); the
RL-minus-start differences are paired by task (`evaluate.paired_difference`). Every setting run
(learning or not) is kept in `--out` under its `--name`, with its arguments, wall times, commit,
per-step training log and a few replies of each stage. `--model PATH_OR_ID` repeats the run with
another causal LM (e.g. Qwen2.5-0.5B-Instruct on a GPU). The stages (`run`), the results file
(`Recorder`) and the shared arguments (`make_parser`) serve other scenarios too
(`real_model_textcraft.py`).
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import random
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch

import agentgym_envs  # noqa: F401  (registers the AgentGym ids)
from agentgym_envs.babyai.env import BabyAIEnv
from agentgym_train.evaluation.evaluate import (
    Estimate,
    EvalResult,
    estimate,
    evaluate_model,
    evaluate_random,
    paired_difference,
    split_tasks,
    summarize_episodes,
)
from agentgym_train.models.smollm2 import SMOLLM2_NAME
from agentgym_train.models.tiny import load_model
from agentgym_train.scheduler import MaxTurnScheduler
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer, task_dataset
from agentgym_train.trainers.sft import run_sft
from agentgym_wrappers import MultiTurnWrapper

BRIEF_PROMPT = (
    "You are an agent in a grid world. Each turn, read the observation and reply with one line "
    "'Action: <action>', one of the available actions.\nExample: Action: go to red ball 1"
)
DEFAULT_OUT = Path(__file__).parent / "results" / "real_model_learning.json"


class BriefBabyAIEnv(BabyAIEnv):
    """The project's BabyAI env with a short system prompt (everything else unchanged)."""

    system_prompt = BRIEF_PROMPT


def register_brief(level: str) -> str:
    """Register `AgentGym/BabyAI-<level>-Brief-v0` (once) and return its id."""
    env_id = f"AgentGym/BabyAI-{level}-Brief-v0"
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=BriefBabyAIEnv, kwargs={"levels": (level,)})
    return env_id


def scripted_action(mission: str, available: list[str]) -> str:
    """The high-level player: go to the mission's object when it is listed, else turn to look for it."""
    match = re.search(r"go to (?:the|a) (\w+) (\w+)", mission)
    wanted = f"go to {match.group(1)} {match.group(2)} 1" if match else ""
    return wanted if wanted in available else "turn left"


def play_scripted(
    env_id: str, split: str, task_ids: list[str], max_turns: int, seed: int, noise: float = 0.0
) -> list[dict[str, Any]]:
    """Play the scripted player on `task_ids` (each turn, with probability `noise`, a uniformly random
    listed action instead); return each episode's chat, success and task id."""
    rng = random.Random(seed)
    env = MultiTurnWrapper(gym.make(env_id), max_turns=max_turns)
    out = []
    try:
        for task_id in task_ids:
            observation, info = env.reset(seed=seed, options={"split": split, "task_id": task_id})
            mission = observation.splitlines()[0]
            while True:
                available = info["available_actions"]
                action = rng.choice(available) if rng.random() < noise else scripted_action(mission, available)
                observation, _, terminated, truncated, info = env.step(f"Action: {action}")
                if terminated or truncated:
                    break
            out.append({"task_id": task_id, "success": bool(info.get("success")), "chat": env.messages[:-1]})
    finally:
        env.close()
    return out


def summary(result: EvalResult, seconds: float, replies: int = 6) -> dict[str, Any]:
    """The figures of an evaluation, its per-episode outcomes, and a few of its replies."""
    said = [m["content"] for e in result.episodes for m in e["messages"] if m["role"] == "assistant"]
    return {
        "success": _estimate(result.success),
        "return": _estimate(result.episode_return),
        "turns": _estimate(result.turns),
        "replies_with_action_line": round(sum("Action:" in s for s in said) / max(1, len(said)), 3),
        "invalid_reply_rate": round(sum(e["invalid_replies"] for e in result.episodes) / max(1, len(said)), 3),
        "wall_s": round(seconds, 1),
        "episodes": [{k: e[k] for k in ("task_id", "success", "return", "turns")} for e in result.episodes],
        "sample_replies": said[:replies],
    }


def _estimate(e: Any) -> dict[str, float]:
    return {"mean": round(e.mean, 4), "low": round(e.low, 4), "high": round(e.high, 4), "n": e.n}


def _commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False)
    return head.stdout.strip() or "unknown"


def _row(label: str, block: dict[str, Any]) -> str:
    s = block["success"]
    return f"{label:<22} success {s['mean']:.3f}  [{s['low']:+.3f}, {s['high']:+.3f}]  ({block.get('wall_s', 0):.0f} s)"


class Recorder:
    """The results file: every setting under its name, written after each stage (a long run leaves partial results)."""

    def __init__(self, path: Path, name: str, settings: dict[str, Any]) -> None:
        self.path = path
        self.document = json.loads(path.read_text()) if path.is_file() else {"settings": {}}
        self.name = name
        self.entry: dict[str, Any] = {"args": settings, "commit": _commit(), "stages": {}, "status": "running"}
        self.document["settings"][name] = self.entry

    def stage(self, key: str, value: Any) -> None:
        self.entry["stages"][key] = value
        self.write()

    def write(self) -> None:
        # settings run side by side: each re-reads the file and writes only its own entry, under a lock,
        # replacing the file whole so that a reader never sees it half written
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path.with_suffix(".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.path.is_file():
                self.document = json.loads(self.path.read_text())
            self.document["settings"][self.name] = self.entry
            partial = self.path.with_suffix(".partial")
            partial.write_text(json.dumps(self.document, indent=1) + "\n")
            os.replace(partial, self.path)


def grpo_args(args: argparse.Namespace, env_id: str, output_dir: str) -> MultiTurnGRPOConfig:
    """The GRPO settings of a run: `--rl-tasks-per-step` tasks x `--num-generations` episodes a step."""
    episodes = args.num_generations * args.rl_tasks_per_step
    if episodes % args.rl_micro_batches:
        raise ValueError(f"--rl-micro-batches {args.rl_micro_batches} does not divide a step's {episodes} episodes")
    return MultiTurnGRPOConfig(
        output_dir=output_dir,
        env_id=env_id,
        max_turns=args.max_turns,
        max_turn_tokens=args.max_turn_tokens,
        max_completion_length=args.max_completion_length,
        num_generations=args.num_generations,
        per_device_train_batch_size=episodes // args.rl_micro_batches,
        gradient_accumulation_steps=args.rl_micro_batches,
        steps_per_generation=args.rl_micro_batches,  # one rollout batch, one optimiser step
        learning_rate=args.rl_lr,
        lr_scheduler_type="constant",
        warmup_steps=0,
        max_steps=args.rl_steps,
        beta=args.beta,
        temperature=args.temperature,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        activation_checkpointing=False,
        disable_tqdm=True,
        dataloader_pin_memory=False,
        num_env_workers=2,
        seed=args.seed,
        bf16=torch.cuda.is_available(),
    )


def make_parser(description: str, out: Path) -> argparse.ArgumentParser:
    """The arguments every scenario's run takes (`run`); a scenario adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--name", default="default", help="key of this setting in the results file")
    parser.add_argument("--model", default=SMOLLM2_NAME, help="checkpoint path or hub id (default: offline SmolLM2)")
    parser.add_argument(
        "--torch-threads", type=int, default=1, help="1: on a loaded 2-core CPU, 2 threads ran 4x slower"
    )
    parser.add_argument("--max-turns", type=int, default=2)
    parser.add_argument("--max-turn-tokens", type=int, default=12)
    parser.add_argument("--max-completion-length", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=1.0, help="training and evaluation")
    parser.add_argument("--eval-tasks", type=int, default=100, help="held-out test tasks")
    parser.add_argument("--eval-episodes-per-task", type=int, default=1, help="episodes of each held-out task")
    parser.add_argument(
        "--zero-shot-from",
        help="reuse the zero-shot stage of this earlier setting (same evaluation; its episodes per task may differ)",
    )
    parser.add_argument(
        "--sft-from",
        help="start RL from the SFT checkpoint of this earlier setting (saved under --work), reusing its zero-shot and"
        " SFT stages",
    )
    parser.add_argument("--sft-episodes", type=int, default=64, help="episodes of the demonstrator (all kept)")
    parser.add_argument(
        "--sft-noise", type=float, default=0.6, help="demonstrator: share of turns with a random listed action"
    )
    parser.add_argument("--sft-steps", type=int, default=2)
    parser.add_argument("--sft-batch-size", type=int, default=8)
    parser.add_argument("--sft-lr", type=float, default=5e-5)
    parser.add_argument("--rl-steps", type=int, default=12, help="0: stop after SFT (a start for --sft-from)")
    parser.add_argument("--rl-tasks-per-step", type=int, default=2)
    parser.add_argument(
        "--rl-micro-batches", type=int, default=1, help="a step's episodes in this many backward passes (memory)"
    )
    parser.add_argument(
        "--turn-stages",
        type=int,
        nargs="+",
        help="ScalingInter: the training horizons, in order (e.g. 4 6; evaluation keeps --max-turns)",
    )
    parser.add_argument("--turn-stage-every", type=int, default=4, help="RL steps of each --turn-stages horizon")
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--rl-lr", type=float, default=1e-5)
    parser.add_argument("--lora-r", type=int, default=0, help="LoRA rank on every linear layer (0: full weights)")
    parser.add_argument("--beta", type=float, default=0.0, help="KL coefficient (0: no reference model)")
    parser.add_argument("--seed", type=int, default=0, help="SFT data and training")
    parser.add_argument("--eval-seed", type=int, default=0, help="evaluation sampling (the same for every setting)")
    parser.add_argument("--work", default="/tmp/real_model_learning", help="scratch directory for trainer output")
    parser.add_argument("--out", default=str(out))
    return parser


def stored_result(block: dict[str, Any]) -> EvalResult:
    """An evaluation stage of the results file (its per-episode rows) read back for paired differences."""
    return summarize_episodes([{"return": 0.0, **row} for row in block["episodes"]])  # older rows: failures, 0


def reuse(rec: Recorder, name: str, same: tuple[str, ...]) -> dict[str, Any]:
    """The earlier setting `name` of the results file, checked to share this setting's `same` arguments."""
    earlier = rec.document["settings"].get(name)
    if earlier is None:
        raise ValueError(f"no setting {name!r} in {rec.path}")
    ran = {"eval_episodes_per_task": 1, **earlier["args"]}
    ran["eval_seed"] = ran.get("eval_seed", ran["seed"])
    differ = [key for key in same if ran[key] != rec.entry["args"][key]]
    if differ:
        raise ValueError(f"setting {name!r} differs from this one in {differ}")
    return earlier


#: plays the scripted player: (split, task ids, max turns, seed, noise) -> episodes (`play_scripted`'s)
Player = Callable[[str, list[str], int, int, float], list[dict[str, Any]]]


def run(
    args: argparse.Namespace,
    env_id: str,
    system_prompt: str,
    play: Player,
    random_policy: Callable[[list[str]], Estimate],
) -> None:
    """One setting: references, zero-shot, SFT on `play`'s noisy episodes, GRPO, and the held-out evaluations.

    `random_policy(held_out)`: the success of a random policy on the held-out task ids."""
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    rec = Recorder(Path(args.out), args.name, {**vars(args), "env_id": env_id, "system_prompt": system_prompt})
    work = Path(args.work) / args.name
    evaluation = {
        "num_tasks": args.eval_tasks,
        "episodes_per_task": args.eval_episodes_per_task,
        "max_turns": args.max_turns,
        "max_turn_tokens": args.max_turn_tokens,
        "max_completion_length": args.max_completion_length,
        "temperature": args.temperature,
        "seed": args.eval_seed,
        "progress": False,
    }

    # a stage reused from an earlier setting must have run under the same evaluation (zero-shot: any episodes per task)
    evaluation_keys = ("model", "env_id", "max_turns", "max_turn_tokens", "temperature", "eval_tasks", "eval_seed")

    # references on the same held-out tasks (one episode each): a random policy, and the scripted player
    held_out = [str(t) for t in split_tasks(env_id, "test", args.eval_tasks)]
    scripted = play("test", held_out, args.max_turns, args.eval_seed, 0.0)
    rec.stage("random", {"success": _estimate(random_policy(held_out))})
    rec.stage("scripted", {"success": _estimate(estimate([float(p["success"]) for p in scripted]))})
    print(_row("random policy", rec.entry["stages"]["random"]), flush=True)
    print(_row("scripted player", rec.entry["stages"]["scripted"]), flush=True)

    # --sft-from: the earlier setting's SFT checkpoint, with its zero-shot and SFT stages and SFT arguments
    earlier = reuse(rec, args.sft_from, (*evaluation_keys, "eval_episodes_per_task")) if args.sft_from else None
    model, tokenizer = load_model(work.parent / args.sft_from / "after_sft" if earlier else args.model)
    if torch.cuda.is_available():  # evaluation plays on the model's device; the trainers place it themselves
        model.to("cuda")
    results: dict[str, EvalResult] = {}

    def evaluate(stage: str) -> None:
        t0 = time.perf_counter()
        results[stage] = evaluate_model(model, tokenizer, env_id, **evaluation)
        rec.stage(stage, summary(results[stage], time.perf_counter() - t0))
        print(_row(stage, rec.entry["stages"][stage]), flush=True)

    if earlier:
        sft_keys = ("zero_shot_from", "sft_episodes", "sft_noise", "sft_steps", "sft_batch_size", "sft_lr", "seed")
        rec.entry["args"].update({key: earlier["args"][key] for key in sft_keys})
        for stage in ("zero_shot", "sft_training", "after_sft"):
            block = earlier["stages"][stage]
            rec.stage(stage, {**block, "from_setting": args.sft_from})
            if stage != "sft_training":  # an evaluation: its episodes
                results[stage] = stored_result(block)
        print(_row("after_sft (earlier)", earlier["stages"]["after_sft"]), flush=True)
    elif args.zero_shot_from:
        block = reuse(rec, args.zero_shot_from, evaluation_keys)["stages"]["zero_shot"]
        results["zero_shot"] = stored_result(block)
        rec.stage("zero_shot", {**block, "from_setting": args.zero_shot_from})
        print(_row("zero_shot (earlier)", block), flush=True)
    else:
        evaluate("zero_shot")

    if args.sft_steps > 0 and not earlier:
        t0 = time.perf_counter()
        train_ids = [str(t) for t in split_tasks(env_id, "train", args.sft_episodes)]
        played = play("train", train_ids, args.max_turns, args.seed, args.sft_noise)
        chats = [p["chat"] for p in played]  # the demonstrator as it is, failures included
        run_sft(
            model,
            tokenizer,
            chats,
            str(work / "sft"),
            max_steps=args.sft_steps,
            batch_size=args.sft_batch_size,
            learning_rate=args.sft_lr,
            seed=args.seed,
        )
        model.save_pretrained(work / "after_sft")  # a start for later settings' --sft-from
        tokenizer.save_pretrained(work / "after_sft")
        demo = estimate([float(p["success"]) for p in played])
        rec.stage(
            "sft_training",
            {
                "episodes": len(chats),
                "demonstrator_success": _estimate(demo),
                "wall_s": round(time.perf_counter() - t0, 1),
            },
        )
        evaluate("after_sft")
        if args.rl_steps == 0:
            rec.entry["status"] = "done: SFT start only"
            rec.entry["wall_s"] = round(time.perf_counter() - started, 1)
            rec.write()
            print(f"wrote {args.out}; SFT checkpoint {work / 'after_sft'} ({rec.entry['wall_s']:.0f} s)")
            return
    start = "after_sft" if "after_sft" in results else "zero_shot"

    t0 = time.perf_counter()
    peft_config = None
    if args.lora_r > 0:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=args.lora_r, lora_alpha=2 * args.lora_r, lora_dropout=0.0, target_modules="all-linear"
        )
    trainer = MultiTurnGRPOTrainer(
        model,
        grpo_args(args, env_id, str(work / "grpo")),
        train_dataset=task_dataset(env_id, "train", seed=args.seed),
        processing_class=tokenizer,
        peft_config=peft_config,
        callbacks=[MaxTurnScheduler.stages(args.turn_stages, args.turn_stage_every)] if args.turn_stages else None,
    )
    trainer.train()
    trainer.engine.close()
    model = trainer.model
    keys = ("step", "episode/success", "episode/return", "episode/turns", "rollout/max_turns")
    keys += ("episode/invalid_reply_rate", "grad_norm")
    log = [{k: row[k] for k in keys if k in row} for row in trainer.state.log_history if "episode/success" in row]
    training_success = estimate([row["episode/success"] for row in log])
    rec.stage(
        "rl_training",
        {
            "wall_s": round(time.perf_counter() - t0, 1),
            "mean_training_success": _estimate(training_success),
            "log": log,
        },
    )
    evaluate("after_rl")

    differences = {
        f"after_rl_minus_{base}": _estimate(paired_difference(results[base], results["after_rl"]))
        for base in ("zero_shot", "after_sft")
        if base in results
    }
    if "zero_shot" in results and "after_sft" in results:
        differences["after_sft_minus_zero_shot"] = _estimate(
            paired_difference(results["zero_shot"], results["after_sft"])
        )
    rec.stage("differences", differences)
    gain = differences[f"after_rl_minus_{start}"]
    rec.entry["learned"] = gain["low"] > 0
    rec.entry["status"] = "done"
    rec.entry["wall_s"] = round(time.perf_counter() - started, 1)
    rec.write()
    print(f"\nheld-out test tasks of {env_id}, {args.max_turns} turns, temperature {args.temperature}, 95% intervals:")
    for name in ("random", "scripted", "zero_shot", "after_sft", "after_rl"):
        if name in rec.entry["stages"]:
            print(_row(name, rec.entry["stages"][name]))
    for name, d in differences.items():
        print(f"{name:<28} {d['mean']:+.3f}  [{d['low']:+.3f}, {d['high']:+.3f}]")
    print(f"RL over its start: {'a gain beyond the interval' if rec.entry['learned'] else 'no significant gain'}")
    print(f"wrote {args.out} ({rec.entry['wall_s']:.0f} s)")


def main() -> None:
    parser = make_parser(__doc__.splitlines()[0], DEFAULT_OUT)
    parser.add_argument("--level", default="GoToObj", help="BabyAI level (GoToObj, GoToLocal, ...)")
    args = parser.parse_args()
    env_id = register_brief(args.level)

    def play(split: str, task_ids: list[str], max_turns: int, seed: int, noise: float) -> list[dict[str, Any]]:
        return play_scripted(env_id, split, task_ids, max_turns, seed, noise)

    def random_policy(held_out: list[str]) -> Estimate:  # uniform over the listed actions
        return evaluate_random(env_id, num_tasks=len(held_out), max_turns=args.max_turns, seed=args.eval_seed).success

    run(args, env_id, BRIEF_PROMPT, play, random_policy)


if __name__ == "__main__":
    main()
