"""SFT: expert or collected episodes as multi-turn chats, trained with TRL's `SFTTrainer` on assistant turns only.

A tiny random model cannot act at all, so RL starts from a policy that imitated the scenario's
expert (`env.unwrapped.make_expert()`) for a while. Episodes are tokenized through the same path as
the RL rollouts (`ChatRenderer`): the prompt, then each reply with its end-of-turn token (loss on)
and each observation rendered as the next user turn (loss off). So SFT and RL see the same tokens.
Any scenario and any policy: `collected_chats(path)` reads a file of `agentgym collect` (an endpoint's,
the expert's or a model's episodes) instead of playing the expert here.

Tool demonstrations (`action_format: tools`): `expert_chats(..., action_format="tools")` plays the expert
through the env's tools (each action as the call of the tool that makes it), so the chat holds assistant
`tool_calls` answered by `tool` messages, as `agentgym collect --action-format tools` writes them.
Tokenized with the tools (`tools=`), each call is the text the chat template writes for it after the
generation prompt (loss on, with its end-of-turn token) and each answer the template's tool turn (loss
off): what a tool-format rollout samples and trains on.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym

from agentgym_train.rollout import ChatRenderer
from agentgym_wrappers import MultiTurnWrapper, tool_call_reply


def expert_chats(
    env_id: str,
    episodes: int,
    *,
    split: str = "train",
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    reply: Callable[[str], str] | None = None,
    successful_only: bool = True,
    action_format: str | None = None,
) -> list[list[dict[str, Any]]]:
    """Play `episodes` expert episodes on random tasks of `split`; return their chats (OpenAI messages).

    The expert's action becomes the assistant's reply through `reply` (the env's parser must read it
    back; default `Action: <action>`, or with `action_format="tools"` the Hermes call of the tool that
    makes the action, which the chat records as the assistant's `tool_calls`, answered by `tool`
    messages; tokenize such chats with the env's tools, `env_tools`). Episodes the expert does not
    finish within `max_turns` are skipped when `successful_only`.
    """
    import agentgym_envs  # noqa: F401

    if action_format not in (None, "tools"):
        raise ValueError(f"action_format must be None (each scenario's) or 'tools', got {action_format!r}")
    rng = random.Random(seed)
    env = MultiTurnWrapper(gym.make(env_id, **(env_kwargs or {})), max_turns=max_turns, parser=action_format)
    if reply is None:
        tools = env.unwrapped.tools()
        reply = (lambda action: tool_call_reply(action, tools)) if env.uses_tools else "Action: {}".format
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


def env_tools(env_id: str, env_kwargs: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The tool schemas the chats of `env_id` played through tool calls render with (`MultiTurnWrapper.tools`)."""
    import agentgym_envs  # noqa: F401

    env = MultiTurnWrapper(gym.make(env_id, **(env_kwargs or {})), parser="tools")
    try:
        return list(env.tools or [])
    finally:
        env.close()


def demo_format(chats: list[list[dict[str, Any]]]) -> str | None:
    """ "tools" when the chats act through tool calls (an assistant message has `tool_calls`), else None (text
    replies); ValueError for a mix."""
    formats = {any(m.get("tool_calls") for m in chat) for chat in chats if any(m["role"] == "assistant" for m in chat)}
    if len(formats) > 1:
        raise ValueError("the demonstrations mix tool-call episodes and text episodes; train on one format")
    return "tools" if formats == {True} else None


def call_text(renderer: ChatRenderer, chat: list[dict[str, Any]], tools: Any) -> str:
    """What the template writes for the last message of `chat`, an assistant's tool call: its rendering after
    the generation prompt of the chat before it, up to its end-of-turn token (the text a rollout samples)."""
    head = renderer.render(chat[:-1], add_generation_prompt=True, tools=tools)
    full = renderer.render(chat, add_generation_prompt=False, tools=tools)
    end = full.rfind(renderer.end_of_turn_token)
    if not full.startswith(head) or end < len(head):
        raise ValueError(
            "the chat template does not render an assistant's tool call after the generation prompt of the chat "
            "before it; tool demonstrations need templates that append each turn"
        )
    return full[len(head) : end]


def tokenize_chat(renderer: ChatRenderer, messages: list[dict[str, Any]], tools: Any = None) -> dict[str, list[int]]:
    """`input_ids` and `assistant_masks` of a chat, exactly as a rollout would have produced them.

    `tools` (default: the renderer's) are the schemas a chat of tool calls renders with; an assistant's
    `tool_calls` become the template's text of the call (`call_text`), the env's `tool` answers the
    template's tool turn."""
    tools = tools if tools is not None else renderer.tools
    first_user = next(i for i, m in enumerate(messages) if m["role"] == "user")
    input_ids = renderer.prompt_ids(messages[: first_user + 1], tools=tools)
    mask = [0] * len(input_ids)
    for k, message in enumerate(messages[first_user + 1 :], start=first_user + 1):
        if message["role"] == "assistant":
            if message.get("tool_calls"):
                if not tools:
                    raise ValueError("a chat of tool calls is tokenized with the env's tools: pass tools=")
                text = call_text(renderer, messages[: k + 1], tools)
            else:
                text = message["content"]
            ids = [*renderer.encode(text), renderer.end_of_turn_id]
            input_ids += ids
            mask += [1] * len(ids)
        else:
            ids = renderer.observation_ids(message["content"], role=message["role"], history=messages[:k], tools=tools)
            input_ids += ids
            mask += [0] * len(ids)
    return {"input_ids": input_ids, "assistant_masks": mask}


def sft_dataset(tokenizer: Any, chats: list[list[dict[str, Any]]], tools: Any = None) -> Any:
    """A tokenized `datasets.Dataset` for `SFTTrainer` (loss only where `assistant_masks` is 1); `tools`: the
    env's schemas, for chats of tool calls."""
    from datasets import Dataset

    renderer = ChatRenderer(tokenizer, tools=tools)
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
    tools: Any = None,
    **sft_kwargs: Any,
) -> Any:
    """Fine-tune `model` on expert chats with TRL's `SFTTrainer`; return the trainer (model trained in place).
    `tools`: the env's schemas, for chats of tool calls (`action_format: tools`)."""
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
        train_dataset=sft_dataset(tokenizer, chats, tools),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
    if any(isinstance(callback, ProgressCallback) for callback in callbacks or []):
        trainer.remove_callback(PrinterCallback)  # the caller's progress bar, not printed log dicts
    trainer.train()
    return trainer
