"""Offline tiny models: built here, reloaded from their directory, Qwen-style chat format."""

from __future__ import annotations

import json
from pathlib import Path

from transformers import Qwen2ForCausalLM

from agentgym_train.models.tiny import TINY_MARKER, count_parameters, load_model, load_tokenizer


def test_tiny_model_reloads_with_its_own_tokenizer(tiny_babyai: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    assert isinstance(model, Qwen2ForCausalLM) and count_parameters(model) < 1_000_000
    assert json.loads((tiny_babyai / TINY_MARKER).read_text())["env_ids"] == ["AgentGym/BabyAI-GoToLocal-v0"]
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert model.generation_config.eos_token_id == [tokenizer.eos_token_id]
    assert tokenizer.padding_side == "left"
    # env text merges into phrases: an observation is a few dozen tokens, not hundreds
    observation = "In view: red ball 1, 2 steps ahead and 1 step to your left.\nYou carry nothing."
    ids = tokenizer(observation)["input_ids"]
    assert len(ids) < 12 and tokenizer.decode(ids) == observation
    # and any text still encodes (byte-level), losslessly
    odd = "Ünïcödé ✓ <tag> {json: 1}"
    assert tokenizer.decode(tokenizer(odd)["input_ids"]) == odd


def test_a_resaved_tiny_model_reloads_with_its_own_tokenizer(tiny_babyai: Path, tmp_path: Path) -> None:
    # what the trainer writes for rl-model and checkpoints: model and tokenizer, no marker file
    model, tokenizer = load_model(tiny_babyai)
    model.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    assert not (tmp_path / TINY_MARKER).exists()
    text = "Mission: go to the green key\nIn view: green key 1, 2 steps ahead and 1 step to your right."
    assert load_tokenizer(tmp_path)(text)["input_ids"] == tokenizer(text)["input_ids"]


def test_chat_template_is_qwen_style_and_marks_assistant_tokens(tiny_babyai: Path) -> None:
    tokenizer = load_tokenizer(tiny_babyai)
    chat = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Mission: go to the red ball"},
        {"role": "assistant", "content": "Action: turn left"},
    ]
    text = tokenizer.apply_chat_template(chat, tokenize=False)
    assert text == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nMission: go to the red ball<|im_end|>\n"
        "<|im_start|>assistant\nAction: turn left<|im_end|>\n"
    )
    rendered = tokenizer.apply_chat_template(chat, return_dict=True, return_assistant_tokens_mask=True)
    marked = [i for i, m in zip(rendered["input_ids"], rendered["assistant_masks"], strict=True) if m]
    assert tokenizer.decode(marked) == "Action: turn left<|im_end|>"
    prompt = tokenizer.apply_chat_template(chat[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_start|>assistant\n")
