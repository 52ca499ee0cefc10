"""DPO on episode pairs: a successful and a failed episode of the same task, trained with TRL's `DPOTrainer`.

Choice: the whole conversation with the env's turns masked (not only the first turn where the two
episodes differ). An episode's probability under the policy is the product over its replies; the
observations come from the env and are the same factor under the policy and the reference, so they
cancel in DPO's log-ratio. The trajectory-level preference (this episode succeeded, that one failed)
is then exactly DPO on the reply tokens of both whole episodes. Training only the first differing
turn would credit one reply for an outcome that often turns on a later one (two episodes may part on
an equally good first move and fail three turns later).

TRL's `DPOTrainer` masks only the prompt (its collator sets every completion token to 1), but its loss
reads the mask per token (labels -100 elsewhere), so `MultiTurnDPOTrainer` feeds pre-tokenized pairs
with their own masks through `EpisodePairCollator`; everything else (loss types, reference model or
PEFT adapter-off reference, precomputed reference logprobs, accelerate) is TRL's.

Tokens: each episode is rendered through `ChatRenderer` exactly as rollouts and SFT render it; the
longest common token prefix of the two episodes becomes the prompt (its tokens would contribute the
same log-ratio to both sides and cancel), so `chosen`/`rejected` start where the episodes part.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import torch
from trl import DPOConfig, DPOTrainer
from trl.trainer.dpo_trainer import DataCollatorForPreference

from agentgym_train.rollout import ChatRenderer
from agentgym_train.trainers.sft import tokenize_chat

PAIR_COLUMNS = ("prompt_ids", "chosen_ids", "chosen_mask", "rejected_ids", "rejected_mask")


def episode_pairs(
    records: list[dict[str, Any]], pairs_per_task: int = 1
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(chosen, rejected) pairs of collected episodes (`agentgym collect` lines): per task and first
    observation, successful episodes (highest return first, then fewest turns) against failed ones
    (lowest return first), each episode in at most one pair, at most `pairs_per_task` pairs a task."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in records:
        messages = record.get("messages") or []
        if not any(m["role"] == "assistant" for m in messages):
            continue  # nothing the model said
        first = json.dumps(messages[: next(i for i, m in enumerate(messages) if m["role"] == "user") + 1])
        groups[(str(record.get("env_id")), str(record["task_id"]), first)].append(record)
    pairs = []
    for group in groups.values():
        wins = sorted((r for r in group if r["success"]), key=lambda r: (-r["return"], r["turns"]))
        losses = sorted((r for r in group if not r["success"]), key=lambda r: r["return"])
        pairs += list(zip(wins, losses, strict=False))[:pairs_per_task]
    return pairs


def pair_row(renderer: ChatRenderer, chosen: list[dict[str, str]], rejected: list[dict[str, str]]) -> dict[str, Any]:
    """Token ids and loss masks of a pair: the shared prefix as the prompt, then each episode's rest with
    1 on its replies (and their end-of-turn tokens) and 0 on the observations."""
    c, r = tokenize_chat(renderer, chosen), tokenize_chat(renderer, rejected)
    shared = 0
    for a, b in zip(c["input_ids"], r["input_ids"], strict=False):
        if a != b:
            break
        shared += 1
    if shared == len(c["input_ids"]) or shared == len(r["input_ids"]):
        raise ValueError("one episode of the pair is a prefix of the other: no tokens to prefer")
    return {
        "prompt_ids": c["input_ids"][:shared],
        "chosen_ids": c["input_ids"][shared:],
        "chosen_mask": c["assistant_masks"][shared:],
        "rejected_ids": r["input_ids"][shared:],
        "rejected_mask": r["assistant_masks"][shared:],
    }


def pair_dataset(tokenizer: Any, pairs: list[tuple[dict[str, Any], dict[str, Any]]]) -> Any:
    """A `datasets.Dataset` of tokenized pairs (`PAIR_COLUMNS`) for `MultiTurnDPOTrainer`."""
    from datasets import Dataset

    renderer = ChatRenderer(tokenizer)
    rows = [pair_row(renderer, chosen["messages"], rejected["messages"]) for chosen, rejected in pairs]
    return Dataset.from_dict({key: [row[key] for row in rows] for key in PAIR_COLUMNS})


@dataclass
class EpisodePairCollator(DataCollatorForPreference):
    """TRL's preference collator with per-token masks: `completion_mask` is 0 on the prompt and on the
    env's tokens inside `chosen`/`rejected` (from the `chosen_mask`/`rejected_mask` columns)."""

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        output = super().torch_call(examples)
        masks = [[0] * len(e["prompt_ids"]) + list(e["chosen_mask"]) for e in examples]
        masks += [[0] * len(e["prompt_ids"]) + list(e["rejected_mask"]) for e in examples]
        width = output["completion_mask"].size(1)
        if self.max_length is not None:
            keep_start = self.truncation_mode == "keep_start"
            cut = slice(None, self.max_length) if keep_start else slice(-self.max_length, None)
            masks = [m[cut] for m in masks]
        mask = torch.zeros_like(output["completion_mask"])
        for row, values in enumerate(masks):
            mask[row, : len(values)] = torch.tensor(values[:width], dtype=mask.dtype)
        output["completion_mask"] = mask
        return output


class MultiTurnDPOTrainer(DPOTrainer):
    """`DPOTrainer` on tokenized episode pairs (`pair_dataset`) with the env's turns masked.

    Takes the same arguments as `DPOTrainer` (`ref_model`, `peft_config`, callbacks, ...); the datasets
    must hold `PAIR_COLUMNS`.
    """

    _tag_names = ["trl", "dpo", "agentgym", "multi-turn"]

    def __init__(self, model: Any, ref_model: Any = None, args: DPOConfig | None = None, **kwargs: Any) -> None:
        tokenizer = kwargs.get("processing_class")
        if kwargs.get("data_collator") is None and tokenizer is not None:
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
            kwargs["data_collator"] = EpisodePairCollator(
                pad_token_id=pad,
                max_length=args.max_length if args is not None else None,
                truncation_mode=args.truncation_mode if args is not None else "keep_start",
            )
        super().__init__(model, ref_model=ref_model, args=args, **kwargs)

    def _prepare_dataset(self, dataset: Any, processing_class: Any, args: DPOConfig, dataset_name: str) -> Any:
        missing = [c for c in PAIR_COLUMNS if c not in dataset.column_names]
        if missing:
            raise ValueError(
                f"the {dataset_name} dataset lacks {missing}: build it with agentgym_train.trainers.dpo.pair_dataset "
                "(tokenized episode pairs with their masks)"
            )
        return dataset

    def _set_signature_columns_if_needed(self) -> None:
        super()._set_signature_columns_if_needed()
        self._signature_columns = list(dict.fromkeys([*self._signature_columns, *PAIR_COLUMNS]))


def pair_logps(model: Any, dataset: Any, batch_size: int = 16) -> tuple[list[float], list[float]]:
    """Summed log-probabilities of the masked (model) tokens of each pair's chosen and rejected episode."""
    collator = EpisodePairCollator(pad_token_id=0)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    chosen: list[float] = []
    rejected: list[float] = []
    try:
        for start in range(0, len(dataset), batch_size):
            batch = collator([dataset[i] for i in range(start, min(start + batch_size, len(dataset)))])
            ids, attention = batch["input_ids"].to(device), batch["attention_mask"].to(device)
            mask = batch["completion_mask"].to(device)[:, 1:]
            with torch.no_grad():
                logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
            logps = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None]).squeeze(-1)
            sums = (logps * mask).sum(dim=1).tolist()
            half = len(sums) // 2
            chosen += sums[:half]
            rejected += sums[half:]
    finally:
        model.train(was_training)
    return chosen, rejected
