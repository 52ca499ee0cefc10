"""Rejection-sampling fine-tuning (RFT): sample from the current model, keep what succeeded, fine-tune, repeat.

Each round samples `samples_per_task` episodes of each of `tasks_per_round` training tasks with the
current model (the rollout engine's token path), keeps the successful ones (`keep="success"`) or only
the best-return successful episode of each task (`keep="best"`), and fine-tunes on them with TRL's
`SFTTrainer` for `max_steps` steps. The kept episodes are trained on exactly as sampled: their token
ids, with the loss on the model's tokens only (`env_mask`: observations carry no loss, as in RL), so
nothing is decoded and re-tokenized. The next round samples from the fine-tuned model.

Logged per round (`RejectionSamplingTrainer.rounds`, `rft_rounds.json` in `output_dir`): episodes,
kept, kept fraction, sample success and return, tasks with at least one kept episode, final loss.

LoRA: pass `peft_config`; the adapter is added once and trains across rounds. Several processes
(`accelerate launch`, DDP): each samples its share of the round's tasks, the kept episodes are
gathered so every process trains on the same set, and `SFTTrainer` splits the batches. Sampling
needs the whole model on each process (DDP or LoRA), not sharded weights (FSDP, ZeRO-3).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from trl import SFTConfig

from agentgym_train.collect import ModelPolicy
from agentgym_train.evaluation.evaluate import split_tasks
from agentgym_train.rollout import Episode

KEEP_RULES = ("success", "best")


@dataclass
class RFTConfig(SFTConfig):
    """`SFTConfig` (the fine-tuning of each round: `max_steps` per round, learning rate, batch size) plus
    the sampling of each round."""

    env_id: str = field(default="AgentGym/BabyAI-GoToObj-v0", metadata={"help": "Gymnasium id of the env."})
    env_kwargs: dict | str | None = field(
        default=None, metadata={"help": "Keyword arguments for gym.make (a dict, or JSON on the command line)."}
    )
    train_split: str = field(default="train", metadata={"help": "Split whose tasks are sampled."})
    rounds: int = field(default=3, metadata={"help": "Rounds of sample -> keep -> fine-tune."})
    tasks_per_round: int = field(default=64, metadata={"help": "Tasks sampled per round (fresh ones each round)."})
    samples_per_task: int = field(default=8, metadata={"help": "Episodes per task per round (k)."})
    keep: str = field(
        default="success",
        metadata={"help": "'success': every successful episode; 'best': the best-return successful one per task."},
    )
    max_turns: int | None = field(default=None, metadata={"help": "Turn limit (None: the env's default)."})
    max_turn_tokens: int = field(default=32, metadata={"help": "Most tokens in one reply."})
    max_completion_length: int = field(default=1024, metadata={"help": "Token budget of an episode after its prompt."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the rounds."})
    rollout_batch_size: int = field(default=64, metadata={"help": "Episodes generated together."})
    chat_template_kwargs: dict | str | None = field(
        default=None, metadata={"help": "Template variables of the rollouts, e.g. {'enable_thinking': false}."}
    )
    max_length: int | None = field(default=None, metadata={"help": "Truncate training sequences (None: never)."})

    def __post_init__(self) -> None:
        if isinstance(self.env_kwargs, str):
            self.env_kwargs = json.loads(self.env_kwargs)
        if isinstance(self.chat_template_kwargs, str):
            self.chat_template_kwargs = json.loads(self.chat_template_kwargs)
        if self.keep not in KEEP_RULES:
            raise ValueError(f"keep must be one of {KEEP_RULES}, got {self.keep!r}")
        if self.rounds < 1 or self.samples_per_task < 1 or self.tasks_per_round < 1:
            raise ValueError("rounds, tasks_per_round and samples_per_task must be >= 1")
        if self.bf16 is None and not torch.cuda.is_available():
            self.bf16 = False  # TRL defaults to bf16, which transformers refuses on a CPU-only machine
        super().__post_init__()


def keep_episodes(episodes: list[Episode], keep: str = "success") -> list[Episode]:
    """The episodes to fine-tune on: successful ones (no env failure), or per task the best-return one."""
    good = [e for e in episodes if e.success and e.env_error is None]
    if keep == "success":
        return good
    if keep != "best":
        raise ValueError(f"keep must be one of {KEEP_RULES}, got {keep!r}")
    best: dict[Any, Episode] = {}
    for episode in good:
        key = (episode.task.env_id, episode.task.task_id)
        if key not in best or episode.episode_return > best[key].episode_return:
            best[key] = episode
    return list(best.values())


def episode_rows(episodes: list[Episode]) -> dict[str, list[list[int]]]:
    """`input_ids` and `assistant_masks` of episodes as sampled: the prompt (mask 0), then the completion
    with the rollout's `env_mask` (1 on the model's tokens, 0 on the observations)."""
    return {
        "input_ids": [e.prompt_ids + e.completion_ids for e in episodes],
        "assistant_masks": [[0] * len(e.prompt_ids) + list(e.env_mask) for e in episodes],
    }


class RejectionSamplingTrainer:
    """Rounds of rejection sampling and fine-tuning on a multi-turn text env.

    Args:
        model: The policy (trained in place; with `peft_config`, wrapped in an adapter once).
        args: An `RFTConfig`.
        processing_class: The tokenizer (with a chat template).
        callbacks: Passed to each round's `SFTTrainer` (e.g. a progress bar).
        peft_config: LoRA etc.
    """

    def __init__(
        self,
        model: Any,
        args: RFTConfig,
        processing_class: Any,
        callbacks: list[Any] | None = None,
        peft_config: Any = None,
    ) -> None:
        if not isinstance(args, RFTConfig):
            raise TypeError(f"args must be an RFTConfig, got {type(args).__name__}")
        if peft_config is not None:
            from peft import get_peft_model

            model = get_peft_model(model, peft_config)
        self.model = model
        self.args = args
        self.tokenizer = processing_class
        self.callbacks = callbacks
        #: One dict per finished round (what `rft_rounds.json` holds).
        self.rounds: list[dict[str, Any]] = []
        self._tasks = split_tasks(args.env_id, args.train_split, None, args.env_kwargs)
        random.Random(args.seed).shuffle(self._tasks)

    def round_tasks(self, index: int) -> list[str]:
        """The tasks of round `index`: consecutive slices of the shuffled split, wrapping around."""
        n, total = self.args.tasks_per_round, len(self._tasks)
        return [self._tasks[(index * n + i) % total] for i in range(min(n, total))]

    def sample(self, index: int) -> list[Episode]:
        """This process's episodes of round `index` (its share of the round's tasks, k episodes each)."""
        from accelerate import PartialState

        state = PartialState()
        tasks = self.round_tasks(index)[state.process_index :: state.num_processes]
        jobs = [(task, sample) for task in tasks for sample in range(self.args.samples_per_task)]
        policy = ModelPolicy(
            self.model,
            self.tokenizer,
            max_turn_tokens=self.args.max_turn_tokens,
            max_completion_length=self.args.max_completion_length,
            temperature=self.args.temperature,
            batch_size=self.args.rollout_batch_size,
            chat_template_kwargs=self.args.chat_template_kwargs,
        )
        torch.manual_seed(self.args.seed + 1000 * index + state.process_index)
        seed = self.args.seed + 1000 * index
        args = self.args
        return policy.play(args.env_id, args.train_split, jobs, seed, args.max_turns, args.env_kwargs)

    def train(self) -> list[dict[str, Any]]:
        """Run every round; return (and write to `output_dir/rft_rounds.json`) the per-round log."""
        from accelerate import PartialState
        from accelerate.utils import gather_object
        from datasets import Dataset
        from transformers.trainer_callback import PrinterCallback, ProgressCallback
        from trl import SFTTrainer

        state = PartialState()
        out = Path(self.args.output_dir)
        for index in range(self.args.rounds):
            episodes = self.sample(index)
            kept = keep_episodes(episodes, self.args.keep)
            stats = [
                len(episodes),
                len(kept),
                sum(e.success for e in episodes),
                sum(e.episode_return for e in episodes),
                len({e.task.task_id for e in kept}),
            ]
            rows = episode_rows(kept)
            if state.num_processes > 1:  # every process trains on every kept episode (SFTTrainer splits batches)
                stats = [sum(s[i] for s in gather_object([stats])) for i in range(len(stats))]
                rows = {key: gather_object(value) for key, value in rows.items()}
            n, n_kept, successes, returns, solved = stats
            log = {
                "round": index + 1,
                "episodes": n,
                "kept": n_kept,
                "kept_fraction": n_kept / max(1, n),
                "sample_success": successes / max(1, n),
                "sample_return": returns / max(1, n),
                "tasks": len(self.round_tasks(index)),
                "tasks_kept": solved,
                "loss": None,
            }
            if n_kept:
                args = replace(self.args, output_dir=str(out / f"round-{index + 1}"))
                trainer = SFTTrainer(
                    model=self.model,
                    args=args,
                    train_dataset=Dataset.from_dict(rows),
                    processing_class=self.tokenizer,
                    callbacks=self.callbacks,
                )
                if any(isinstance(callback, ProgressCallback) for callback in self.callbacks or []):
                    trainer.remove_callback(PrinterCallback)  # the caller's progress bar, not printed log dicts
                result = trainer.train()
                log["loss"] = float(result.training_loss)
                self.model = trainer.model
            self.rounds.append(log)
            if state.is_main_process:
                print(
                    f"RFT round {index + 1}/{self.args.rounds}: kept {n_kept}/{n} episodes "
                    f"({log['kept_fraction']:.1%}, {solved}/{log['tasks']} tasks)"
                    + (f", loss {log['loss']:.3f}" if log["loss"] is not None else ", nothing to train on"),
                    flush=True,
                )
                out.mkdir(parents=True, exist_ok=True)
                (out / "rft_rounds.json").write_text(json.dumps(self.rounds, indent=2) + "\n")
        return self.rounds
