"""Async rollouts (`rollout_mode="async"`): no turn barrier, and the same episodes as lockstep.

The env (`delayed_env.DelayedEnv`, tests/train/support/) sleeps a task-specific, turn-specific time on every
step, so episodes finish their env calls in an order unlike the order they started in; the scripted policies
reply as a function of the episode's context alone, so both modes must play the very same episodes, token for
token.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from delayed_env import ENV_ID, GATE, TASKS, DelayedEnv, Scripted, engine, fields

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import ChatRenderer, Task, summarize
from agentgym_train.rollout.backends.cached import CachedSampler


@pytest.fixture(autouse=True)
def closed_gate():
    GATE.clear()
    yield
    GATE.set()  # a gated step still waiting ends now


def test_async_plays_the_same_episodes_as_lockstep_in_another_order(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    played = {}
    for mode in ("lockstep", "async"):
        rollout = engine(tokenizer, mode)
        generate = Scripted(tokenizer)
        played[mode] = (rollout.run(TASKS, generate), generate.calls, rollout)
        assert rollout.last_mode == mode and rollout.env_errors == 2
        rollout.close()
    (lock, lock_calls, _), (free, free_calls, free_engine) = played["lockstep"], played["async"]
    for a, b in zip(lock, free, strict=True):
        assert fields(a) == fields(b)
    assert summarize(lock) == summarize(free)
    # what the comparison covers: every way a reply and an episode end, env errors, GiGPO's state keys
    assert {s for e in lock for s in e.stopped_by} == {"eos", "stop_string", "budget"}
    assert {e.budget_truncated for e in lock} == {True, False} and any(e.terminated for e in lock)
    assert [e.env_error for e in lock[12:14]] == [f"RuntimeError: the backend died on turn {k}" for k in (2, 1)]
    assert all(len(e.state_keys) == e.turns for e in lock) and len({k for e in lock for k in e.state_keys}) > 3
    # lockstep: each call holds every live episode, in order; async: calls hold whoever is ready
    assert all([t for t, _ in call] == sorted([t for t, _ in call], key=lambda t: int(t.split(":")[0]))
               for call in lock_calls)  # fmt: skip
    assert len(free_calls) > len(lock_calls)  # the envs finished apart: calls held fewer episodes
    assert sum(len(c) for c in free_calls) == sum(len(c) for c in lock_calls) == sum(e.turns for e in lock)
    assert free_engine.timing["generation"] > 0 and free_engine.timing["env"] > 0


def test_an_env_that_hangs_mid_rollout_in_async_mode_times_out_and_is_replaced(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    tasks = [Task(ENV_ID, "0:hang@2"), Task(ENV_ID, "1"), Task(ENV_ID, "2:raise@3"), Task(ENV_ID, "3")]
    rollout = engine(tokenizer, "async", env_timeout=0.5)
    started, made = time.monotonic(), DelayedEnv.made
    hung, ok, raised, ok2 = rollout.run(tasks, Scripted(tokenizer))
    assert time.monotonic() - started < 10
    assert hung.env_error.startswith("EnvTimeoutError") and hung.turns == 2 and hung.episode_return == 0.0
    assert hung.stats["env_error"] == hung.env_error and hung.env_mask[-1] == 1  # its last reply is kept
    assert raised.env_error == "RuntimeError: the backend died on turn 3" and raised.turns == 3
    assert ok.env_error is None and ok2.env_error is None and rollout.env_errors == 2
    # the two failed envs are never reused: the next rollout makes two fresh ones and reuses the others
    again = rollout.run([Task(ENV_ID, str(k)) for k in range(4)], Scripted(tokenizer))
    assert all(e.env_error is None for e in again) and DelayedEnv.made - made == 6
    rollout.close()


def test_async_has_no_turn_barrier(tiny_babyai: Path) -> None:
    """Episode 0's first step waits until the others have replied 3 times: only async gets there."""
    _, tokenizer = load_model(tiny_babyai)
    tasks = [Task(ENV_ID, "0:gate@1")] + [Task(ENV_ID, str(k)) for k in (1, 2, 3)]

    def open_gate(calls):  # once every other episode is in its 4th turn, episode 0's env may answer
        turns = {t: sum(t == task for call in calls for task, _ in call) for t in ("1", "2", "3")}
        if min(turns.values()) >= 4:
            GATE.set()

    generate = Scripted(tokenizer, open_gate, ["hello"])
    rollout = engine(tokenizer, "async", max_turns=6, max_completion_length=2048)
    episodes = rollout.run(tasks, generate)
    rollout.close()
    assert GATE.is_set() and all(e.env_error is None for e in episodes)
    order = [task for call in generate.calls for task, _ in call]
    second = order.index("0:gate@1", 1)  # episode 0's second context comes after the others' 4th
    assert all(order[:second].count(t) >= 4 for t in ("1", "2", "3"))

    GATE.clear()  # lockstep: every call waits for episode 0, whose env waits 2 s and then goes on
    generate = Scripted(tokenizer, open_gate, ["hello"])
    lockstep = engine(tokenizer, "lockstep", max_turns=6, max_completion_length=2048)
    again = lockstep.run(tasks, generate)
    lockstep.close()
    order = [task for call in generate.calls for task, _ in call]
    assert order.index("0:gate@1", 1) == 4  # the second call starts with episode 0
    assert [fields(e) for e in again] == [fields(e) for e in episodes]


def test_async_gathers_envs_that_end_soon_into_one_call(tiny_babyai: Path) -> None:
    """Fast envs and a slow generator: async keeps each turn's contexts in one call, as lockstep does,
    instead of one call per wave of env results (8 episodes, 2 env workers: 4 waves per turn)."""
    _, tokenizer = load_model(tiny_babyai)
    tasks = [Task(ENV_ID, str(k)) for k in range(8)]
    calls = {}
    for mode in ("lockstep", "async"):
        scripted = Scripted(tokenizer, replies=["hello"])

        def slow(contexts, max_new_tokens, stop=None, scripted=scripted):
            time.sleep(0.3)  # a decode's time: far more than the envs' 0-24 ms
            return scripted(contexts, max_new_tokens, stop)

        rollout = engine(tokenizer, mode, max_turns=3, max_completion_length=2048, num_env_workers=2)
        assert all(e.turns == 3 for e in rollout.run(tasks, slow))
        rollout.close()
        calls[mode] = [len(call) for call in scripted.calls]
    assert calls["lockstep"] == [8, 8, 8]
    # the first call takes the resets that end within the first reset's time; the later ones gather whole turns
    assert len(calls["async"]) <= 5 and sum(calls["async"]) == 24


def test_generation_error_in_async_mode_waits_for_the_envs_in_flight(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    rollout = engine(tokenizer, "async")
    scripted = Scripted(tokenizer)

    def broken(contexts, max_new_tokens, stop=None):
        if len(scripted.calls) == 3:
            raise RuntimeError("out of memory")
        return scripted(contexts, max_new_tokens, stop)

    tasks = [Task(ENV_ID, str(k)) for k in range(6)]
    with pytest.raises(RuntimeError, match="out of memory"):
        rollout.run(tasks, broken)
    made = DelayedEnv.made
    assert all(e.env_error is None for e in rollout.run(tasks, Scripted(tokenizer)))
    assert DelayedEnv.made == made  # every env went back to the pool, none was still stepping
    rollout.close()


def test_collective_generators_fall_back_to_lockstep(tiny_babyai: Path, caplog: pytest.LogCaptureFixture) -> None:
    _, tokenizer = load_model(tiny_babyai)
    tasks = [Task(ENV_ID, str(k)) for k in range(3)]
    rollout = engine(tokenizer, "async")
    with pytest.raises(ValueError, match="rollout_mode must be one of lockstep, async, got 'eager'"):
        engine(tokenizer, "eager")

    class Sharded(Scripted):  # a sync_live hook and no word on being local: taken as collective
        def __init__(self, *args):
            super().__init__(*args)
            self.synced = []

        def sync_live(self, any_local: bool) -> bool:
            self.synced.append(any_local)
            return any_local

    sharded = Sharded(tokenizer)
    with caplog.at_level(logging.WARNING, logger="agentgym_train.rollout.asynchronous"):
        rollout.run(tasks, sharded)
    assert rollout.last_mode == "lockstep" and "rollout runs in lockstep" not in caplog.text
    assert "rollouts run in lockstep" in caplog.text and sharded.synced[-1] is False
    assert len(sharded.synced) == len(sharded.calls) + 1  # lockstep's loop: one sync per turn and the last

    local = Sharded(tokenizer)
    local.collective = False  # one process (e.g. vLLM's sleep mode): async, awake from first call to end
    rollout.run(tasks, local)
    assert rollout.last_mode == "async" and local.synced == [True, False]
    rollout.close()


def test_async_sampling_with_the_cached_sampler_keeps_exact_logprobs(tiny_babyai: Path) -> None:
    """Rows sit out calls and join later: logprobs recomputed on each final sequence still match, and the
    sampler parks the rows of episodes that sit out a call, so no token is fed twice."""
    model, tokenizer = load_model(tiny_babyai)
    torch.manual_seed(0)
    sampler = CachedSampler(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=0.7)
    sampler.continuous = False  # calls per batch of ready episodes (continuous batching: test_continuous_batching.py)
    calls, fed, feed = [], [], sampler._feed  # per call: its contexts, and the tokens it fed before decoding
    sampler._feed = lambda pending, device: (
        calls.append(len(pending)),
        fed.append(sum(map(len, pending))),
        feed(pending, device),
    )[-1]

    rollout = engine(tokenizer, "async", max_turns=4, max_completion_length=300)
    episodes = rollout.run([Task(ENV_ID, str(k), seed=k) for k in range(6)], sampler)
    rollout.close()
    assert min(calls) < 6 and sum(calls) == sum(e.turns for e in episodes)  # calls held subsets of the episodes
    # prefill: each prompt, each observation and each reply's last token once (dropped rows would be fed again)
    assert 0 < sum(fed) <= sum(len(e.prompt_ids) + e.env_mask.count(0) + e.turns for e in episodes)
    # every episode ended: the rows left are all retired (dropped at the next call), none leaks into later runs
    assert not sampler.keep_unmatched and sampler.retired == set(range(len(sampler.fed))) != set()
    renderer = ChatRenderer(tokenizer)
    for episode in episodes:
        assert len(episode.completion_ids) == len(episode.env_mask) == len(episode.logprobs)
        assert episode.prompt_ids == renderer.prompt_ids(episode.messages[:2])
        sequence = torch.tensor([episode.prompt_ids + episode.completion_ids])
        with torch.no_grad():
            logits = model(sequence).logits[0, len(episode.prompt_ids) - 1 : -1] / 0.7
        recomputed = torch.log_softmax(logits.float(), -1).gather(-1, sequence[0, len(episode.prompt_ids) :, None])
        sampled = torch.tensor(episode.env_mask, dtype=torch.bool)
        assert torch.allclose(recomputed[:, 0][sampled], torch.tensor(episode.logprobs)[sampled], atol=1e-4)


def test_grpo_trains_with_async_rollouts(tiny_babyai: Path, tmp_path: Path) -> None:
    """`rollout_mode: async` in the config reaches the trainer's engine, and training steps run on it."""
    from train_helpers import grpo_args

    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    model, tokenizer = load_model(tiny_babyai)
    args = grpo_args(tmp_path, max_turns=2, rollout_mode="async")
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    assert trainer.engine.rollout_mode == "async"
    trainer.train()
    assert trainer.engine.last_mode == "async"
    logs = [row for row in trainer.state.log_history if "episode/return" in row]
    assert len(logs) == 2 and all(row["episode/turns"] > 0 for row in logs)


class ThreadPoolStandIn:
    """The env pool's interface (`RayEnvPool`: acquire, reset, step, results or exceptions per env), served in
    this process, logging how many envs each batched call held."""

    def __init__(self):
        self.batches: list[tuple[str, int]] = []

    def acquire(self, env_id, env_kwargs, wrapper):
        from agentgym_wrappers import MultiTurnWrapper

        return MultiTurnWrapper(gym.make(env_id, **env_kwargs), **wrapper)

    def _each(self, kind, calls):
        self.batches.append((kind, len(calls)))
        out = []
        for call in calls:
            try:
                out.append(call())
            except Exception as error:
                out.append(error)
        return out

    def reset(self, envs, seeds, options, *, max_turns=None, timeout=None, with_state=False):
        def reset(env, seed, option):
            env.limit_turns(max_turns)
            return env.reset(seed=seed, options=option)

        return self._each(
            "reset", [lambda e=e, s=s, o=o: reset(e, s, o) for e, s, o in zip(envs, seeds, options, strict=True)]
        )

    def step(self, envs, actions, *, timeout=None, with_state=False):
        return self._each("step", [lambda e=e, a=a: e.step(a) for e, a in zip(envs, actions, strict=True)])


def test_async_with_an_env_pool_plays_the_same_episodes(tiny_babyai: Path) -> None:
    """Envs from a pool (as on Ray): async sends each episode's reset and step on its own, and plays the
    episodes lockstep plays with envs in this process, env errors included."""
    _, tokenizer = load_model(tiny_babyai)
    local = engine(tokenizer, "lockstep")
    expected = local.run(TASKS, Scripted(tokenizer))
    local.close()
    pool = ThreadPoolStandIn()
    pooled = engine(tokenizer, "async", env_pool=pool)
    played = pooled.run(TASKS, Scripted(tokenizer))
    assert [fields(e) for e in played] == [fields(e) for e in expected]
    assert {size for _, size in pool.batches} == {1} and pooled.env_errors == 2
    assert sum(kind == "step" for kind, _ in pool.batches) == sum(e.turns for e in expected)


def test_two_processes_fall_back_to_lockstep_with_a_collective_generator(tiny_babyai: Path, tmp_path: Path) -> None:
    """2 processes over gloo whose episodes last 1 and 3 turns: with the lockstep hooks both ranks play in
    lockstep (the same syncs, no hang); with a local generator each plays async on its own."""
    from train_helpers import launch_two_processes, rank_reports

    launch_two_processes("async_rollout_job.py", tiny_babyai, tmp_path, timeout=300)
    first, second = rank_reports(tmp_path)
    assert first["sharded_mode"] == second["sharded_mode"] == "lockstep"
    assert first["sharded_turns"] == [1, 1] and second["sharded_turns"] == [3, 3]
    # the same collectives on both ranks: the turn loop's 4 (3 turns while rank 1 is live, then the last one)
    # and 2 in each of the 3 calls (the chunk loop's: one chunk, then none left)
    assert first["syncs"] == second["syncs"] == 4 + 3 * 2
    assert first["local_mode"] == second["local_mode"] == "async"
    assert first["local_turns"] == [1, 1] and second["local_turns"] == [3, 3] and first["local_calls"] <= 2
