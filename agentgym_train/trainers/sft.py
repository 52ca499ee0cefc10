"""SFT: expert or collected episodes as multi-turn chats, trained with TRL's `SFTTrainer` on assistant turns only.

A tiny random model cannot act at all, so RL starts from a policy that imitated the scenario's
expert (`env.unwrapped.make_expert()`) for a while. Episodes are tokenized through the same path as
the RL rollouts (`ChatRenderer`): the prompt, then each reply with its end-of-turn token (loss on)
and each observation rendered as the next user turn (loss off). So SFT and RL see the same tokens.
Any scenario and any policy: `collected_chats(path)` reads a file of `agentgym collect` (an endpoint's,
the expert's or a model's episodes) instead of playing the expert here.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym_train.rollout import ChatRenderer
from agentgym_wrappers import MultiTurnWrapper


def expert_chats(
    env_id: str,
    episodes: int,
    *,
    split: str = "train",
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    reply: Callable[[str], str] = "Action: {}".format,
    successful_only: bool = True,
) -> list[list[dict[str, str]]]:
    """Play `episodes` expert episodes on random tasks of `split`; return their chats (OpenAI messages).

    The expert's action becomes the assistant's reply through `reply` (the scenario's parser must
    read it back). Episodes the expert does not finish within `max_turns` are skipped when
    `successful_only`.
    """
    import agentgym_envs  # noqa: F401

    rng = random.Random(seed)
    env = MultiTurnWrapper(gym.make(env_id, **(env_kwargs or {})), max_turns=max_turns)
    n_tasks = env.unwrapped.num_tasks(split)
    chats: list[list[dict[str, str]]] = []
    attempts = 0
    while len(chats) < episodes and attempts < 4 * episodes:
        attempts += 1
        observation, info = env.reset(seed=seed + attempts, options={"split": split, "task_id": rng.randrange(n_tasks)})
        expert = env.unwrapped.make_expert()
        while True:
            try:
                action = expert.act(observation, info)
            except Exception:  # the expert gave up on this task
                break
            observation, _, terminated, truncated, info = env.step(reply(action))
            if terminated or truncated:
                break
        if not successful_only or info.get("success"):
            chats.append(env.messages[:-1])  # the final observation is never answered
    env.close()
    return chats


def collected_chats(
    path: str | Path, *, successful_only: bool = True, min_return: float | None = None
) -> list[list[dict[str, str]]]:
    """The chats of a file written by `agentgym collect` (any scenario, any policy), for `run_sft`.

    Keeps the successful episodes when `successful_only`, and those whose return reaches `min_return`
    when given; episodes without a reply are left out (nothing to learn).
    """
    from agentgym_train.collect import read_records

    chats = []
    for record in read_records(path):
        if successful_only and not record["success"]:
            continue
        if min_return is not None and record["return"] < min_return:
            continue
        if any(m["role"] == "assistant" for m in record["messages"]):
            chats.append(record["messages"])
    return chats


def tokenize_chat(renderer: ChatRenderer, messages: list[dict[str, str]]) -> dict[str, list[int]]:
    """`input_ids` and `assistant_masks` of a chat, exactly as a rollout would have produced them."""
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    input_ids = renderer.prompt_ids(messages[: first_user + 1])
    mask = [0] * len(input_ids)
    for k, message in enumerate(messages[first_user + 1 :], start=first_user + 1):
        if message["role"] == "assistant":
            ids = [*renderer.encode(message["content"]), renderer.end_of_turn_id]
            input_ids += ids
            mask += [1] * len(ids)
        else:
            ids = renderer.observation_ids(message["content"], role=message["role"], history=messages[:k])
            input_ids += ids
            mask += [0] * len(ids)
    return {"input_ids": input_ids, "assistant_masks": mask}


def sft_dataset(tokenizer: Any, chats: list[list[dict[str, str]]]) -> Any:
    """A tokenized `datasets.Dataset` for `SFTTrainer` (loss only where `assistant_masks` is 1)."""
    from datasets import Dataset

    renderer = ChatRenderer(tokenizer)
    rows = [tokenize_chat(renderer, chat) for chat in chats]
    return Dataset.from_dict({key: [row[key] for row in rows] for key in ("input_ids", "assistant_masks")})


def run_sft(
    model: Any,
    tokenizer: Any,
    chats: list[list[dict[str, str]]],
    output_dir: str,
    *,
    max_steps: int = 100,
    batch_size: int = 16,
    learning_rate: float = 1e-3,
    callbacks: list[Any] | None = None,
    **sft_kwargs: Any,
) -> Any:
    """Fine-tune `model` on expert chats with TRL's `SFTTrainer`; return the trainer (model trained in place)."""
    import torch
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import SFTConfig, SFTTrainer

    options = {
        "lr_scheduler_type": "cosine",
        "warmup_steps": min(10, max_steps // 10),
        "weight_decay": 0.0,
        "logging_steps": max(1, max_steps // 10),
        "save_strategy": "no",
        "report_to": "none",
        "max_length": None,
        "disable_tqdm": True,
        "bf16": torch.cuda.is_available(),
        "activation_checkpointing": False,
        "dataloader_pin_memory": torch.cuda.is_available(),
        **sft_kwargs,
    }
    args = SFTConfig(
        output_dir=output_dir,
        max_steps=max_steps,
        per_device_train_batch_size=batch_size,
        learning_rate=learning_rate,
        **options,
    )
    trainer = SFTTrainer(
        model=model,
        args=args,
        train_dataset=sft_dataset(tokenizer, chats),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    if any(isinstance(callback, ProgressCallback) for callback in callbacks or []):
        trainer.remove_callback(PrinterCallback)  # the caller's progress bar, not printed log dicts
    trainer.train()
    return trainer
