"""Rollouts that survive faults: an env that raises, one that hangs, a remote server killed mid-rollout,
and a training step with a failing env."""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import faulty_env
import pytest
from faulty_env import ENV_ID, FaultyEnv
from server_process import serving
from train_helpers import grpo_args

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import EnvTimeoutError, RolloutEngine, Task, run_calls


@pytest.fixture(autouse=True)
def release_hung_threads() -> Iterator[None]:
    faulty_env.RELEASE.clear()
    FaultyEnv.failed_once.clear()
    yield
    faulty_env.RELEASE.set()  # hung test threads end instead of waiting out their 60 s


def replies(tokenizer, text: str = "hello"):
    """A TurnGenerator that answers `text` and EOS in every episode."""
    ids = [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
    return lambda contexts, max_new_tokens, stop=None: [
        (ids[:max_new_tokens], [-0.1] * len(ids[:max_new_tokens])) for _ in contexts
    ]


def task(fault: str, index: int = 0) -> Task:
    return Task(ENV_ID, f"{faulty_env.FAULTS.index(fault) + len(faulty_env.FAULTS) * index}:{fault}")


def test_an_env_that_raises_ends_its_episode_with_score_0_and_is_replaced(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    engine = RolloutEngine(tokenizer, max_completion_length=256, max_turn_tokens=8, env_timeout=30)
    made, closed = FaultyEnv.made, FaultyEnv.closed
    tasks = [task("ok"), task("raise@2"), task("raise@0"), task("ok", 1)]
    episodes = engine.run(tasks, replies(tokenizer))
    ok, late, at_reset, ok2 = episodes
    for episode in (ok, ok2):
        assert episode.env_error is None and episode.success and episode.turns == faulty_env.TURNS
        assert episode.episode_return == pytest.approx(1.0)
    # failed on turn 2 after earning 0.5 on turn 1: the episode ends there and scores 0
    assert late.turns == 2 and late.episode_return == 0.0 and not late.success
    assert late.env_error == "RuntimeError: the backend died on turn 2"
    assert late.stats["env_error"] == late.env_error and late.env_mask[-1] == 1  # its last reply is kept
    # failed at reset: a placeholder with no sampled token
    assert at_reset.env_error.startswith("RuntimeError") and at_reset.turns == 0
    assert at_reset.env_mask == [0] and at_reset.completion_ids == [tokenizer.eos_token_id] and at_reset.prompt_ids
    assert engine.env_errors == 2
    assert FaultyEnv.made - made == 4
    deadline = time.monotonic() + 10  # failed envs are closed in the background
    while FaultyEnv.closed - closed < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert FaultyEnv.closed - closed == 2

    # the next rollout reuses the two healthy envs and makes fresh ones in place of the failed ones
    again = engine.run([task("ok", k) for k in range(4)], replies(tokenizer))
    assert all(e.env_error is None and e.success for e in again)
    assert FaultyEnv.made - made == 6 and engine.env_errors == 2
    engine.close()
    assert FaultyEnv.closed - closed == 6


@pytest.mark.parametrize("fault", ["hang@0", "hang@2"])
def test_a_hung_env_is_abandoned_after_the_timeout_and_never_starves_the_workers(tiny_babyai: Path, fault: str) -> None:
    _, tokenizer = load_model(tiny_babyai)
    engine = RolloutEngine(tokenizer, max_completion_length=256, max_turn_tokens=8, num_env_workers=2, env_timeout=0.5)
    started = time.monotonic()
    episodes = engine.run([task(fault), task("ok"), task(fault, 1), task("ok", 1)], replies(tokenizer))
    assert time.monotonic() - started < 10
    hung = [episodes[0], episodes[2]]
    assert all(e.env_error.startswith("EnvTimeoutError") and e.episode_return == 0.0 for e in hung)
    assert all(e.env_error is None and e.success for e in (episodes[1], episodes[3]))
    # both worker slots were held by hung threads; the next rollout still runs on fresh threads
    again = engine.run([task("ok", k) for k in range(4)], replies(tokenizer))
    assert all(e.env_error is None and e.success for e in again)
    assert engine.env_errors == 2
    engine.close()


def test_envs_go_back_to_the_pool_when_generation_raises(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    engine = RolloutEngine(tokenizer, max_completion_length=256, max_turn_tokens=8)

    def broken(contexts, max_new_tokens, stop=None):
        raise RuntimeError("out of memory")

    with pytest.raises(RuntimeError, match="out of memory"):
        engine.run([task("ok", k) for k in range(2)], broken)
    made = FaultyEnv.made
    assert all(e.env_error is None for e in engine.run([task("ok", k) for k in range(2)], replies(tokenizer)))
    assert FaultyEnv.made == made  # the two envs of the failed call were reused, none leaked
    engine.close()


def test_run_calls_keeps_order_bounds_concurrency_and_times_out_hung_calls() -> None:
    running, peak, lock = [0], [0], threading.Lock()

    def call(k: int) -> int:
        with lock:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.05)
        with lock:
            running[0] -= 1
        if k == 3:
            raise ValueError("three")
        return k * k

    results = run_calls([lambda k=k: call(k) for k in range(8)], workers=3, timeout=5)
    assert results[:3] == [0, 1, 4] and results[4:] == [16, 25, 36, 49]
    assert isinstance(results[3], ValueError) and peak[0] == 3
    started = time.monotonic()
    hung = run_calls([lambda: faulty_env.RELEASE.wait(60), lambda: 7], workers=1, timeout=0.2)
    assert isinstance(hung[0], EnvTimeoutError) and hung[1] == 7 and time.monotonic() - started < 5


@pytest.fixture()
def served_babyai() -> Iterator[subprocess.Popen]:
    """`agentgym serve AgentGym/BabyAI-v0` in a subprocess of its own (so that it can be killed)."""
    with serving("AgentGym/BabyAI-v0", kill=True) as server:
        yield server


def test_a_remote_env_whose_server_is_killed_mid_rollout_fails_its_episodes_only(
    tiny_babyai: Path, served_babyai: subprocess.Popen
) -> None:
    _, tokenizer = load_model(tiny_babyai)
    kwargs = {"base_url": served_babyai.base_url, "timeout": 5.0, "connect_timeout": 1.0, "retries": 0}
    engine = RolloutEngine(tokenizer, max_turns=5, max_completion_length=512, max_turn_tokens=8, env_kwargs=kwargs)
    reply = replies(tokenizer, "Action: turn left")
    turns = {"n": 0}

    def generate(contexts, max_new_tokens, stop=None):
        turns["n"] += 1
        if turns["n"] == 2:  # the server dies while the model writes its second replies
            served_babyai.kill()
            served_babyai.wait(timeout=30)
        return reply(contexts, max_new_tokens)

    tasks = [Task("AgentGym/Remote-v0", i, "train", i) for i in range(3)]
    episodes = engine.run(tasks, generate)
    assert all(e.turns == 2 and e.env_error is not None and e.episode_return == 0.0 for e in episodes)
    assert all("ServerUnavailable" in e.env_error for e in episodes), episodes[0].env_error
    assert engine.env_errors == 3
    engine.close()


def test_a_grpo_step_with_a_failing_env_completes_and_drops_the_failed_group(tiny_babyai: Path, tmp_path: Path) -> None:
    from datasets import Dataset

    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    rows = ["0:ok", f"{faulty_env.FAULTS.index('once@1')}:once@1"]
    dataset = Dataset.from_dict(
        {"prompt": rows, "env_id": [ENV_ID] * 2, "task_id": rows, "split": ["train"] * 2, "seed": [0, 1]}
    )
    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(tmp_path, env_id=ENV_ID, env_kwargs=None, max_turns=None, max_steps=1, env_timeout=30)
    trainer = MultiTurnGRPOTrainer(model, args, train_dataset=dataset, processing_class=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    failed = [e.env_error is not None for e in trainer.last_episodes]
    assert sum(failed) == 1  # one episode of the once@1 group failed, on turn 1
    for row, episode in enumerate(trainer.last_episodes):
        model_tokens = int((out["completion_mask"][row] * out["tool_mask"][row]).sum())
        # the whole once@1 group leaves the loss; the ok group trains
        assert (model_tokens == 0) == episode.task.task_id.endswith("once@1"), episode.task.task_id

    FaultyEnv.failed_once.clear()
    trainer.train()  # the step runs to its end
    trainer.engine.close()
    assert trainer.state.global_step == 1
    logged = [row for row in trainer.state.log_history if "episode/env_errors" in row]
    assert logged and logged[0]["episode/env_errors"] == 1
