"""Continuous batching in async rollouts: rows join the HF cached sampler's decode between decode steps, and a
reply whose row finished goes to its env step while the other rows still decode.

The env is `delayed_env.DelayedEnv` (tests/train/support/; each step sleeps 0-24 ms, drawn from the task and the
turn), so episodes come back from their envs at different times and join decodes that have started.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from delayed_env import ENV_ID, TASKS, DelayedEnv, engine, fields

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import Task, summarize
from agentgym_train.rollout.backends.cached import CachedSampler


def sampler(model, tokenizer, temperature: float = 0.0) -> CachedSampler:
    return CachedSampler(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=temperature)


def without_logprobs(episode) -> dict:
    record = fields(episode)
    record.pop("logprobs")
    return record


def test_greedy_continuous_batching_plays_lockstep_episodes_token_for_token(tiny_babyai: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    lockstep = engine(tokenizer, "lockstep")
    expected = lockstep.run(TASKS, sampler(model, tokenizer))
    lockstep.close()

    streaming = sampler(model, tokenizer)
    rollout = engine(tokenizer, "async")
    played = rollout.run(TASKS, streaming)
    rollout.close()
    assert rollout.last_mode == "async" and rollout.env_errors == 2
    stats = streaming.stream_stats
    # rows joined decodes that had started (counted when other rows were decoding at the join)
    assert stats["joins"] == sum(e.turns for e in expected)  # one per reply
    assert stats["joins_mid_decode"] > 0 and stats["prefills"] < stats["joins"]
    for a, b in zip(expected, played, strict=True):
        assert without_logprobs(a) == without_logprobs(b)
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)
    assert {s for e in expected for s in e.stopped_by} >= {"budget"}
    assert summarize(expected).keys() == summarize(played).keys()
    assert rollout.timing["generation"] > 0 and rollout.timing["env"] > 0
    assert streaming.decoding() == 0 and not streaming._parked  # the stream closed: nothing is kept


def test_a_reply_steps_its_env_while_other_rows_still_decode(tiny_babyai: Path, monkeypatch) -> None:
    model, tokenizer = load_model(tiny_babyai)
    started: dict[tuple[str, int], float] = {}  # (task, turn) -> when its env step began
    step_action = DelayedEnv._step_action

    def timed(self, action):
        started[(self._task_id, self._turn + 1)] = time.monotonic()
        return step_action(self, action)

    monkeypatch.setattr(DelayedEnv, "_step_action", timed)
    reset_task = DelayedEnv._reset_task

    def staggered(self, task_id):
        # resets end 40 ms apart, so episodes join the decode at different steps however slow a step is (on a
        # loaded machine every env step could end within one decode step: all rows would then decode in step)
        time.sleep(0.04 * int(task_id))
        return reset_task(self, task_id)

    monkeypatch.setattr(DelayedEnv, "_reset_task", staggered)
    streaming = sampler(model, tokenizer, temperature=0.8)  # sampled: only the timing is checked here
    steps = []  # per decode step: when it ended, the rows it returned, the rows still decoding
    step = streaming.step

    def logged():
        out = step()
        steps.append((time.monotonic(), [key for key, _ in out], [row.key for row in streaming._rows]))
        return out

    streaming.step = logged
    tasks = [Task(ENV_ID, str(k), seed=k) for k in range(8)]
    rollout = engine(tokenizer, "async", max_turns=3)
    episodes = rollout.run(tasks, streaming)
    rollout.close()
    assert all(e.env_error is None for e in episodes)
    finished = {}  # (episode, reply number) -> when the decode step that returned it ended
    replies = dict.fromkeys(range(len(tasks)), 0)
    for at, out, _ in steps:
        for key in out:
            replies[key] += 1
            finished[key, replies[key]] = at
    # a reply whose env step began before another reply of the same decode (a row decoding beside it) ended
    overlaps = []
    replies = dict.fromkeys(range(len(tasks)), 0)
    for _, out, still in steps:
        for key in out:
            replies[key] += 1
            began = started.get((tasks[key].task_id, replies[key]))
            for other in still:
                later = finished.get((other, replies[other] + 1))
                if began is not None and later is not None and began < later:
                    overlaps.append((key, other))
    assert overlaps, "no env step began while other rows of its decode were still decoding"
    assert streaming.stream_stats["joins_mid_decode"] > 0
