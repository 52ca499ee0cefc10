"""Async training (`async_generation`, `agentgym_train.trainers.async_grpo`): per-token versions across a weight
update and their correction by hand, stale groups out of the loss, a 2-process run with a worker per rank, and a
resume mid-buffer that keeps the plan and the horizon schedule."""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import pytest
import torch
import toy_env
from policy_versions import (
    StampingWorker,
    assert_first_group_masked,
    assert_first_group_moves_no_loss,
    moved_weights,
    token_logps,
)
from train_helpers import grpo_args, launch_two_processes, rank_reports
from trainer_stand_ins import StopAt

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import Task, make_generator
from agentgym_train.rollout.versioned import ENV_VERSION, VersionedEngine, VersionedGenerator, correction_weights
from agentgym_train.scheduler import MaxTurnScheduler
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer
from agentgym_train.trainers.grpo_config import MultiTurnGRPOConfig


def test_a_reply_across_a_weight_update_records_versions_and_corrects_by_hand(tiny_babyai: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    model.eval()
    v1, v2 = moved_weights(model, 0.05, 1), moved_weights(model, 0.1, 2)
    polls = []

    def poll():  # version 1 arrives after the reply's first segment
        polls.append(len(polls))
        if len(polls) == 2:
            return 1, lambda: model.load_state_dict(v1)
        return None

    def make():  # no end tokens: every reply runs to its budget
        return make_generator(model, tokenizer.pad_token_id, [], temperature=1.0)

    v0 = copy.deepcopy(model.state_dict())
    generator = VersionedGenerator(make, [], poll, version=0, segment_tokens=3)
    context = tokenizer("Your task is to go to the red ball.")["input_ids"]
    torch.manual_seed(0)  # the sampled reply decides where the cap bites; other tests leave the global state anywhere
    (reply,) = generator([context], 8)
    assert generator.last_versions == [[0, 0, 0, 1, 1, 1, 1, 1]]
    assert generator.mid_reply_updates == 1 and len(reply.ids) == 8
    ids = context + list(reply.ids)
    # the behaviour logprobs are those of the version that sampled each token, over the whole context (no stale cache)
    model.load_state_dict(v0)
    expected = token_logps(model, ids, len(context))[:3]
    model.load_state_dict(v1)
    expected += token_logps(model, ids, len(context))[3:]
    assert reply.logprobs == pytest.approx(expected, abs=1e-4)
    # the correction against the current policy (version 2), truncated at 1.2, by hand
    model.load_state_dict(v2)
    current = token_logps(model, ids, len(context))
    by_hand = [min(math.exp(c - b), 1.2) for c, b in zip(current, reply.logprobs, strict=True)]
    weights = correction_weights(
        torch.tensor([current]), torch.tensor([reply.logprobs]), torch.ones(1, 8), "token_truncate", None, 1.2
    )
    assert weights[0].tolist() == pytest.approx(by_hand, rel=1e-5)
    assert 0 < sum(w == 1.2 for w in by_hand) < 8  # the cap bites on some tokens and not on others


def test_the_engine_keeps_each_tokens_version_and_minus_one_where_the_env_spoke(tiny_babyai: Path) -> None:
    from train_helpers import BABYAI, ENV_KWARGS

    model, tokenizer = load_model(tiny_babyai)
    model.eval()
    engine = VersionedEngine(
        tokenizer, max_turns=3, max_turn_tokens=6, max_completion_length=256, env_kwargs=ENV_KWARGS
    )
    calls = iter(range(1000))

    def poll():  # a new version before every other segment
        n = next(calls)
        return (n // 2 + 1, lambda: None) if n % 2 == 1 else None

    generator = VersionedGenerator(
        lambda: make_generator(model, tokenizer.pad_token_id, engine.eos_token_ids),
        engine.eos_token_ids,
        poll,
        segment_tokens=2,
    )
    with torch.no_grad():
        episodes = engine.run([Task(BABYAI, seed=s) for s in range(4)], generator)
    for episode in episodes:
        assert len(episode.versions) == len(episode.completion_ids)
        for t, (v, m) in enumerate(zip(episode.versions, episode.env_mask, strict=True)):
            assert (v == ENV_VERSION) == (m == 0), (t, v, m)
        spans = [episode.versions[a:b] for a, b in episode.reply_spans]
        assert all(s == sorted(s) for s in spans)  # versions only grow along a reply
    assert generator.mid_reply_updates > 0
    assert any(len(set(episode.versions[a:b])) > 1 for episode in episodes for a, b in episode.reply_spans)


def test_a_group_older_than_max_staleness_never_reaches_the_loss(toy_model: Path, tmp_path: Path) -> None:
    model, tokenizer = load_model(toy_model)
    args = grpo_args(
        tmp_path,
        env_id=toy_env.ENV_ID,
        env_kwargs=None,
        max_turns=2,
        max_turn_tokens=4,
        async_generation=True,
        max_staleness=1,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1  # what TRL's training loop sets before a loss
    generation = trainer.async_generation
    generation.version = 5  # the trainer has synced 5 times; group 0 was sampled by version 3, group 1 by 4
    generation.worker = StampingWorker(trainer, [3, 4], trainer.model)
    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    assert_first_group_masked(trainer, out)
    assert_first_group_moves_no_loss(trainer, out)
    assert out["advantages"].dim() == 2  # per-token: the advantage times the behaviour correction


def test_async_settings_are_refused_where_they_cannot_work(tmp_path: Path) -> None:
    base = {"output_dir": str(tmp_path), "report_to": "none", "async_generation": True}
    with pytest.raises(ValueError, match="dynamic_sampling"):
        MultiTurnGRPOConfig(**base, dynamic_sampling=True)
    with pytest.raises(ValueError, match="env_backend='ray'"):
        MultiTurnGRPOConfig(**base, env_backend="ray")
    with pytest.raises(ValueError, match="loss_type='sapo'"):
        MultiTurnGRPOConfig(**base, loss_type="sapo")
    with pytest.raises(ValueError, match="max_staleness must be >= 0"):
        MultiTurnGRPOConfig(**base, max_staleness=-1)


def _async_run(model_dir: Path, out: Path, callbacks: list[Any], **overrides: Any) -> MultiTurnGRPOTrainer:
    model, tokenizer = load_model(model_dir)
    options = {
        "env_id": toy_env.ENV_ID,
        "env_kwargs": None,
        "max_turns": 2,
        "max_turn_tokens": 4,
        "max_completion_length": 96,
        "async_generation": True,
        "max_staleness": 1,
        "learning_rate": 5e-3,
        "max_steps": 4,
        "save_strategy": "steps",
        "save_steps": 2,
        "seed": 3,
        **overrides,
    }
    schedule = MaxTurnScheduler.stages([1, 2], every=2)  # the horizon changes right after the interruption
    return MultiTurnGRPOTrainer(
        model, grpo_args(out, **options), processing_class=tokenizer, callbacks=[schedule, *callbacks]
    )


def test_a_run_stopped_mid_buffer_resumes_with_the_same_plan_and_schedule(toy_model: Path, tmp_path: Path) -> None:
    whole = _async_run(toy_model, tmp_path / "whole", [])
    whole.train()
    plan = [(h["index"], h["tasks"], h["max_turns"]) for h in whole.async_generation.history]
    assert [p[2] for p in plan] == [1, 1, 1, 2]  # batch 2 was submitted at batch 1, under the first stage
    assert [h["trainer_version"] for h in whole.async_generation.history] == [0, 1, 2, 3]

    stopped = _async_run(toy_model, tmp_path / "run", [StopAt(2)])
    stopped.train()  # batch 2 was submitted to the worker (lookahead 1) and is lost with it
    assert stopped.async_generation.submitted == 2 and stopped.async_generation.worker is None
    resumed = _async_run(toy_model, tmp_path / "run", [])
    resumed.train(resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-2"))
    again = [(h["index"], h["tasks"], h["max_turns"]) for h in stopped.async_generation.history]
    again += [(h["index"], h["tasks"], h["max_turns"]) for h in resumed.async_generation.history]
    assert again == plan  # every group of the plan, once, with the same horizon
    assert resumed.async_generation.history[0]["trainer_version"] == 2  # the version restored from the step
    assert resumed.rollout_batches == 4


def test_two_processes_each_with_a_worker(toy_model: Path, tmp_path: Path) -> None:
    launch_two_processes("async_job.py", toy_model, tmp_path)
    reports = rank_reports(tmp_path)
    for report in reports:
        assert report["syncs"] == 3  # one per optimiser step
        assert report["indices"] == [0, 1, 2] and report["stale"] == [0, 0, 0]
        assert report["versions"] == [0, 1, 2]
        assert report["moved"] > 0 and not report["worker_alive"]
    # each rank played its own slice of the plan's global batch; the ranks ended with the same weights
    assert reports[0]["tasks"] != reports[1]["tasks"]
    assert reports[0]["checksum"] == pytest.approx(reports[1]["checksum"])


def test_gigpo_and_the_truncation_guards_train_in_async_mode(toy_model: Path, tmp_path: Path) -> None:
    trainer = _async_run(
        toy_model,
        tmp_path,
        [],
        max_steps=2,
        save_strategy="no",
        advantage_estimator="gigpo",
        truncated_replies="mask_reply",
    )
    trainer.train()
    episodes = trainer.last_episodes
    assert all(len(e.state_keys) == e.turns for e in episodes if e.env_error is None)  # the worker recorded states
    logged = {k for row in trainer.state.log_history for k in row}
    assert {"async/correction_mean", "episode/masked_truncated_replies"} <= logged
    assert any(k.startswith("gigpo/") for k in logged), sorted(logged)


def test_peft_is_refused_in_async_mode(toy_model: Path, tmp_path: Path) -> None:
    from peft import LoraConfig

    model, tokenizer = load_model(toy_model)
    args = grpo_args(tmp_path, env_id=toy_env.ENV_ID, env_kwargs=None, async_generation=True)
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0)
    with pytest.raises(ValueError, match="PEFT"):
        MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, peft_config=lora)
