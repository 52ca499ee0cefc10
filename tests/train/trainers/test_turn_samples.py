"""`sample_unit: turn`: each reply a training sample with the context it was sampled from
(`agentgym_train.trainers.turn_samples`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from train_helpers import BABYAI, grpo_args, launch_two_processes, rank_reports

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import ChatRenderer, Episode, Task
from agentgym_train.trainers import turn_samples as turns
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer
from agentgym_wrappers import get_context

HEAD = 2  # the system prompt and the task


def _rollout(trainer: MultiTurnGRPOTrainer) -> dict[str, Any]:
    trainer.model.train()  # a training rollout, as inside trainer.train()
    out = trainer._generate_and_score_completions(next(iter(trainer.get_train_dataloader())))
    trainer.engine.close()
    return out


def _rows(batch: dict[str, Any]) -> list[tuple[list[int], list[int], list[int]]]:
    """Per sample: its prompt, its completion and its loss mask, without padding."""
    rows = []
    for k in range(batch["prompt_ids"].size(0)):
        prompt = batch["prompt_ids"][k][batch["prompt_mask"][k].bool()].tolist()
        keep = batch["completion_mask"][k].bool()
        rows.append((prompt, batch["completion_ids"][k][keep].tolist(), batch["tool_mask"][k][keep].tolist()))
    return rows


def _recomputed(trainer: MultiTurnGRPOTrainer, batch: dict[str, Any]) -> torch.Tensor:
    """The trainer's own forward pass over the turn samples: the logprobs its loss starts from."""
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    attention = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    width = batch["completion_ids"].size(1)
    with torch.no_grad():
        return trainer._get_per_token_logps_and_entropies(trainer.model, ids, attention, width)[0]


def _check_samples(trainer: MultiTurnGRPOTrainer, batch: dict[str, Any], context: str | None, atol: float) -> int:
    """Every turn sample is its reply, prompted with the template's rendering of the context policy's chat at
    that turn, and the trainer's logprobs on it are the sampler's; returns how many prompts were not a
    continuation of the previous turn's (a window that moved)."""
    renderer = ChatRenderer(trainer._tokenizer, trainer.args.chat_template_kwargs)
    policy = get_context(context)
    rows, logps = _rows(batch), _recomputed(trainer, batch)
    k, moved = 0, 0
    for episode in trainer.last_episodes:
        previous: list[int] = []
        for j, (start, stop) in enumerate(episode.reply_spans):
            prompt, completion, mask = rows[k]
            if policy.full:
                assert prompt == episode.prompt_ids + episode.completion_ids[:start]
            else:
                assert prompt == renderer.prompt_ids(policy(episode.messages[: HEAD + 2 * j]))
            assert completion == episode.completion_ids[start:stop] and mask == [1] * len(completion)
            sampled = torch.tensor(episode.logprobs[start:stop])
            assert torch.allclose(logps[k, : len(completion)], sampled, atol=atol), (k, j)
            moved += bool(previous) and prompt[: len(previous)] != previous
            previous = prompt + completion
            k += 1
    padding = rows[k:]
    assert all(mask == [0] for _, _, mask in padding)  # samples that only pad the batch hold no model token
    return moved


@pytest.mark.parametrize("context", [None, "window:1"])
def test_turn_samples_are_the_sampled_replies_on_their_contexts(tiny_babyai: Path, tmp_path: Path, context) -> None:
    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(
        tmp_path, sample_unit="turn", context=context, beta=0.0, max_turns=4, max_turn_tokens=8, temperature=0.9
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    batch = _rollout(trainer)
    replies = sum(len(e.reply_spans) for e in trainer.last_episodes)
    assert replies > len(trainer.last_episodes)  # several turns per episode
    assert batch["prompt_ids"].size(0) == replies  # one process, one chunk per generation: no padding
    moved = _check_samples(trainer, batch, context, atol=1e-4)
    assert moved > 0 if context else moved == 0


def test_turn_samples_with_smollm2(smollm2: Path, tmp_path: Path) -> None:
    """A real tokenizer and chat template: SmolLM2-135M-Instruct samples each reply from the 1-turn window."""
    torch.manual_seed(0)
    model, tokenizer = load_model(smollm2)
    args = grpo_args(
        tmp_path,
        sample_unit="turn",
        context="window:1",
        beta=0.0,
        max_turns=3,
        max_turn_tokens=6,
        max_completion_length=400,
        num_generations=2,
        per_device_train_batch_size=2,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    batch = _rollout(trainer)
    assert max(e.turns for e in trainer.last_episodes) == 3
    assert _check_samples(trainer, batch, "window:1", atol=2e-3) > 0


def test_qwen3_turn_samples_drop_past_thinking_as_deployment(tmp_path: Path) -> None:
    """The Qwen3-style template strips the thinking of earlier assistant turns: a turn sample's prompt is the
    template's rendering (no past thinking), while the episode's one sequence keeps it as sampled. The
    replies are forced (each one's logprobs a forward pass of the model on the context it was given), so the
    trainer's recomputation on the turn samples matches only if each sample's prompt is that context."""
    from chat_families import FAMILIES, build_tokenizer
    from transformers import Qwen2Config, Qwen2ForCausalLM

    family = FAMILIES["qwen3-thinking"]
    tokenizer = build_tokenizer(family)
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        intermediate_size=64,
        eos_token_id=tokenizer.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config).eval()
    end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    reply = tokenizer("<think>I think so</think>Action: go to the red ball", add_special_tokens=False)["input_ids"]

    def forced(contexts: list[list[int]], limit: int, stop: Any = None) -> list[tuple[list[int], list[float]]]:
        out = []
        for context in contexts:
            ids = [*reply, end][:limit]
            with torch.no_grad():
                logits = model(torch.tensor([context + ids])).logits[0, len(context) - 1 : -1].float()
            logps = torch.log_softmax(logits, -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
            out.append((ids, logps.tolist()))
        return out

    args = grpo_args(
        tmp_path,
        sample_unit="turn",
        context="window:2",
        beta=0.0,
        max_turns=4,
        max_turn_tokens=len(reply) + 1,
        max_completion_length=2000,
        num_generations=2,
        per_device_train_batch_size=2,
        temperature=1.0,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    trainer._sampler = lambda policy: forced
    batch = _rollout(trainer)
    assert all(e.turns == 4 for e in trainer.last_episodes)
    _check_samples(trainer, batch, "window:2", atol=1e-4)
    think = tokenizer.convert_tokens_to_ids("<think>")
    for prompt, _, _ in _rows(batch):
        assert think not in prompt  # earlier turns' thinking is stripped, as deployment renders them
    assert all(e.completion_ids.count(think) == 4 for e in trainer.last_episodes)  # the sequence keeps it


def _episode(task: int, replies: list[int], observation: int = 2) -> Episode:
    """An episode whose replies have the given lengths, an observation of `observation` tokens between them."""
    episode = Episode(Task(BABYAI, task), prompt_ids=[5, 6, 7])
    for n, length in enumerate(replies):
        if n:
            episode.completion_ids += [9] * observation
            episode.env_mask += [0] * observation
            episode.logprobs += [0.0] * observation
        start = len(episode.completion_ids)
        episode.completion_ids += [10 + n] * length
        episode.env_mask += [1] * length
        episode.logprobs += [-1.0] * length
        episode.reply_spans.append((start, start + length))
    return episode


def _scored(episodes: list[Episode], advantages: torch.Tensor) -> dict[str, Any]:
    """TRL's scored batch for `episodes` as `_generate_and_score_completions` right-pads it."""
    width = max(len(e.completion_ids) for e in episodes)
    ids = torch.zeros(len(episodes), width, dtype=torch.long)
    mask, env = torch.zeros_like(ids), torch.ones_like(ids)  # TRL pads the env mask with 1
    for i, e in enumerate(episodes):
        n = len(e.completion_ids)
        ids[i, :n], mask[i, :n], env[i, :n] = torch.tensor(e.completion_ids), 1, torch.tensor(e.env_mask)
    return {"completion_ids": ids, "completion_mask": mask, "tool_mask": env, "advantages": advantages}


def test_weights_and_advantages_by_hand() -> None:
    episodes = [_episode(0, [3]), _episode(1, [2, 4, 1])]
    rows = turns.turn_rows(episodes)
    assert rows.episode == [0, 1, 1, 1] and rows.span == [(0, 3), (0, 2), (4, 8), (10, 11)]
    assert rows.prompt[2] == [5, 6, 7, 10, 10, 9, 9]  # the full context: the episode up to the reply
    # R=4 samples, E=2 episodes: R / (E n_e) = 2 for the 1-turn episode, 2/3 for each turn of the other
    assert rows.weights("episode").tolist() == pytest.approx([2.0, 2 / 3, 2 / 3, 2 / 3])
    assert rows.weights("turn").tolist() == [1.0] * 4
    scalar = turns.advantages(torch.tensor([0.5, -1.5]), rows, rows.weights("episode"), width=4, pad_to=6)
    assert scalar.tolist() == pytest.approx([1.0, -1.0, -1.0, -1.0, 0.0, 0.0])
    per_token = torch.arange(22, dtype=torch.float).view(2, 11)  # a GiGPO-like (B, T) advantage
    sliced = turns.advantages(per_token, rows, torch.ones(4), width=4, pad_to=5)
    assert sliced.tolist() == [
        [0, 1, 2, 0],
        [11, 12, 0, 0],
        [15, 16, 17, 18],
        [21, 0, 0, 0],
        [0, 0, 0, 0],
    ]
    with pytest.raises(RuntimeError, match="turn prompts"):
        broken = _episode(2, [1, 1])
        broken.turn_prompts = [[1]]
        turns.turn_rows([broken])


@pytest.mark.parametrize(("weighting", "expected"), [("episode", [0.5, 0.5]), ("turn", [0.25, 0.75])])
def test_loss_weighs_episodes_by_hand(
    tiny_babyai: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, weighting: str, expected: list[float]
) -> None:
    """TRL's `grpo` loss over the turn samples of an episode of 1 turn and one of 3, advantage 1 each: the
    gradient on each token's logprob sums, per episode, to 1/E ('episode') or n_e/R ('turn')."""
    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(
        tmp_path,
        sample_unit="turn",
        turn_weighting=weighting,
        beta=0.0,
        num_generations=2,
        per_device_train_batch_size=2,
        steps_per_generation=1,
        gradient_accumulation_steps=1,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    trainer.engine.close()
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    episodes = [_episode(0, [3]), _episode(1, [2, 4, 1])]
    trainer.last_episodes = episodes
    output = _scored(episodes, torch.ones(2))
    batch = turns.TurnSamples(trainer, output).batch(output)
    assert batch["num_items_in_batch"].item() == 10  # the model tokens of both episodes, env tokens out

    logps: list[torch.Tensor] = []
    forward = trainer._get_per_token_logps_and_entropies

    def keep_logps(*a: Any, **k: Any) -> Any:
        out = forward(*a, **k)
        out[0].retain_grad()
        logps.append(out[0])
        return out

    monkeypatch.setattr(trainer, "_get_per_token_logps_and_entropies", keep_logps)
    trainer.compute_loss(trainer.model, batch).backward()
    grads = -(logps[0].grad * batch["tool_mask"])
    per_sample = grads.sum(dim=1).tolist()
    totals = [per_sample[0], sum(per_sample[1:4])]
    assert totals == pytest.approx(expected, rel=1e-5)


def test_settings_refuse_what_turn_samples_cannot_do(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="sample_unit='turn', or context='full'"):
        grpo_args(tmp_path, context="window:2")
    with pytest.raises(ValueError, match="sample_unit must be one of"):
        grpo_args(tmp_path, sample_unit="step")
    with pytest.raises(ValueError, match="turn_weighting must be one of"):
        grpo_args(tmp_path, sample_unit="turn", turn_weighting="token")
    with pytest.raises(ValueError, match="async_generation"):
        grpo_args(tmp_path, sample_unit="turn", async_generation=True)
    with pytest.raises(ValueError, match="context"):
        grpo_args(tmp_path, sample_unit="turn", context="window:x")
    from agentgym_train.trainers.ppo import MultiTurnPPOConfig, check_settings

    with pytest.raises(ValueError, match="critic fits and values each episode"):
        check_settings(MultiTurnPPOConfig(output_dir=str(tmp_path), report_to="none", sample_unit="turn"))
    assert grpo_args(tmp_path, sample_unit="turn", context="summary:1").context == "summary:1"


@pytest.mark.slow
def test_two_process_turn_samples(tiny_babyai: Path, tmp_path: Path) -> None:
    """Two processes whose episodes have 1 and 3 turns (4 and up to 12 turn samples): both pad to the same
    count, train in step (equal weights after two steps), with old-policy and reference passes on the turns."""
    launch_two_processes("turn_samples_job.py", tiny_babyai, tmp_path, timeout=600)
    reports = rank_reports(tmp_path)
    assert [r["global_step"] for r in reports] == [2, 2]
    assert set(reports[0]["turns"]) == {1} and max(reports[1]["turns"]) > 1
    # one rollout feeds both steps (steps_per_generation 2)
    (ones,), (threes,) = reports[0]["replies"], reports[1]["replies"]
    assert ones == 8 < threes  # 8 episodes of one turn on rank 0, of up to three on rank 1
    assert reports[0]["rows"] == reports[1]["rows"] == [-(-threes // 2) * 2]  # the largest, a multiple of 2
    assert reports[0]["weights"] == reports[1]["weights"] != reports[0]["initial_weights"]
