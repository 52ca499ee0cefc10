"""SFT warm start: expert chats, tokenized like rollouts, loss on assistant turns only."""

from __future__ import annotations

from pathlib import Path

import torch
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import ChatRenderer
from agentgym_train.trainers.sft import expert_chats, run_sft, sft_dataset, tokenize_chat


def test_expert_chats_are_successful_multi_turn_conversations() -> None:
    chats = expert_chats(BABYAI, 5, max_turns=20, env_kwargs=ENV_KWARGS)
    assert len(chats) == 5
    for chat in chats:
        roles = [m["role"] for m in chat]
        assert roles[:2] == ["system", "user"] and roles[-1] == "assistant"
        assert roles[2:] == ["assistant", "user"] * ((len(roles) - 3) // 2) + ["assistant"]
        assert all(m["content"].startswith("Action: ") for m in chat if m["role"] == "assistant")


def test_sft_tokens_are_the_rollout_tokens_and_only_replies_carry_loss(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    renderer = ChatRenderer(tokenizer)
    chat = expert_chats(BABYAI, 1, max_turns=20, env_kwargs=ENV_KWARGS)[0]
    row = tokenize_chat(renderer, chat)
    ids, mask = row["input_ids"], row["assistant_masks"]
    # the same tokens as the chat template renders the whole conversation (minus its final newline)
    assert tokenizer.decode(ids) + "\n" == renderer.render(chat, add_generation_prompt=False)
    # and the loss mask covers exactly each reply and its end-of-turn token
    marked, runs, current = [i for i, m in zip(ids, mask, strict=True) if m], [], []
    for token, m in zip(ids, mask, strict=True):
        if m:
            current.append(token)
        elif current:
            runs.append(current)
            current = []
    runs.append(current)
    replies = [m["content"] for m in chat if m["role"] == "assistant"]
    assert [tokenizer.decode(r) for r in runs] == [reply + "<|im_end|>" for reply in replies]
    assert len(marked) == sum(len(r) for r in runs)


def test_a_short_sft_makes_the_expert_replies_likely(tiny_babyai: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    chats = expert_chats(BABYAI, 40, max_turns=20, env_kwargs=ENV_KWARGS)
    probe = sft_dataset(tokenizer, chats[:8])

    def reply_loss() -> float:
        losses = []
        with torch.no_grad():
            for ids, mask in zip(probe["input_ids"], probe["assistant_masks"], strict=True):
                labels = torch.tensor([i if m else -100 for i, m in zip(ids, mask, strict=True)])
                losses.append(float(model(torch.tensor([ids]), labels=labels[None]).loss))
        return sum(losses) / len(losses)

    before = reply_loss()
    run_sft(model, tokenizer, chats, str(tmp_path), max_steps=30, batch_size=8, learning_rate=5e-3)
    after = reply_loss()
    assert after < 0.4 * before, f"assistant-token loss {before:.2f} -> {after:.2f}"


def test_sft_from_a_collected_file_masks_every_observation(tiny_babyai: Path, tmp_path: Path) -> None:
    from agentgym_train.collect import collect, random_actor
    from agentgym_train.trainers.sft import collected_chats

    path = tmp_path / "random.jsonl"
    collect(random_actor(["turn left", "move forward"]), BABYAI, path, num_tasks=3, max_turns=3,
            env_kwargs=ENV_KWARGS, progress=False)  # fmt: skip
    assert collected_chats(path) == []  # three random moves do not reach the goal: no successful episode
    chats = collected_chats(path, successful_only=False)
    assert len(chats) == 3
    _, tokenizer = load_model(tiny_babyai)
    row = sft_dataset(tokenizer, chats)[0]
    ids, mask = row["input_ids"], row["assistant_masks"]
    unmasked = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
    masked = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if not m])
    observations = [m["content"] for m in chats[0] if m["role"] == "user"]
    replies = [m["content"] for m in chats[0] if m["role"] == "assistant"]
    assert unmasked == "".join(reply + "<|im_end|>" for reply in replies)
    assert all(observation in masked and observation not in unmasked for observation in observations)
