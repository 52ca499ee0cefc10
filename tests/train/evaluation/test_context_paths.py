"""One context policy on every path that prompts a model: the endpoint path, collection and the CLI's
`--context` (the rollout engine's turn prompts: `test_context_engine` below)."""

from __future__ import annotations

import json

import pytest
from chat_server import ChatServer
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train import collect
from agentgym_train.evaluation.endpoint import ChatEndpoint, evaluate_endpoint


def test_endpoint_requests_hold_the_window_and_transcripts_everything(server: ChatServer) -> None:
    endpoint = ChatEndpoint(server.url, "tiny-chat", max_tokens=16)
    common = {"num_tasks": 3, "max_turns": 6, "env_kwargs": ENV_KWARGS, "seed": 0, "workers": 1, "progress": False}
    full = evaluate_endpoint(endpoint, BABYAI, **common)
    full_requests, server.requests[:] = list(server.requests), []
    windowed = evaluate_endpoint(endpoint, BABYAI, context="window:2", **common)
    assert windowed.meta["context"] == "window:2" and full.meta["context"] == "full"
    # the same replies play the same episodes: only what each request holds differs
    keys = ("task_id", "turns", "return", "messages")
    assert [[r[k] for k in keys] for r in windowed.episodes] == [[r[k] for k in keys] for r in full.episodes]
    assert len(server.requests) == len(full_requests) == sum(r["turns"] for r in full.episodes)
    for before, now in zip(full_requests, server.requests, strict=True):
        turns = (len(before["messages"]) - 2) // 2  # exchanges before this request
        assert len(now["messages"]) == 2 + 2 * min(turns, 2)
        assert now["messages"][:2] == before["messages"][:2]  # system prompt and task
        assert now["messages"][2:] == before["messages"][len(before["messages"]) - 2 * min(turns, 2) :]
    assert max(len(r["messages"]) for r in full_requests) == 2 + 2 * 5  # the full chat did grow
    assert all(len(r["messages"]) == 1 + 2 * r["turns"] + 1 for r in windowed.episodes)  # rows: every message


def test_collect_sends_the_summary_and_records_every_message(server: ChatServer, tmp_path) -> None:
    endpoint = ChatEndpoint(server.url, "tiny-chat", max_tokens=16)
    out = tmp_path / "episodes.jsonl"
    collect.collect(
        collect.endpoint_actor(endpoint),
        BABYAI,
        out,
        num_tasks=1,
        max_turns=4,
        env_kwargs=ENV_KWARGS,
        workers=1,
        progress=False,
        context="summary:1",
    )
    record = json.loads(out.read_text().splitlines()[0])
    assert record["turns"] == 4 and len(record["messages"]) == 2 + 2 * 4 - 1  # the last observation apart
    last = server.requests[-1]["messages"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "user"]
    assert "(2 earlier turns not shown. Progress so far:\nYou carry nothing.\nKnown objects:" in last[1]["content"]
    with pytest.raises(ValueError, match="ModelPolicy takes its context"):
        collect.collect(collect.ModelPolicy(None, None), BABYAI, out, context="window:2")


def test_context_engine_samples_each_turn_from_the_windowed_prompt(tiny_babyai) -> None:
    """With `context="window:1"` every reply is sampled from the template's rendering of the windowed chat
    (the cached sampler rolls each row back to the shared head and feeds the rest), and its logprobs are a
    plain forward pass's on that prompt."""
    import torch

    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout import ChatRenderer, RolloutEngine, Task
    from agentgym_train.rollout.backends.cached import CachedSampler
    from agentgym_wrappers import WindowContext

    model, tokenizer = load_model(tiny_babyai)
    torch.manual_seed(0)
    engine = RolloutEngine(
        tokenizer, max_turns=4, max_completion_length=300, max_turn_tokens=12, env_kwargs=ENV_KWARGS, context="window:1"
    )
    sampler = CachedSampler(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=0.7)
    seen: list[list[int]] = []

    def generate(contexts, limit, stop=None):
        seen.extend(contexts)
        return sampler(contexts, limit, stop=stop)

    episodes = engine.run([Task(BABYAI, i, "train", 0) for i in range(4)], generate)
    engine.close()
    renderer, window = ChatRenderer(tokenizer), WindowContext(1)
    checked = 0
    for episode in episodes:
        head = 2  # system prompt and task
        assert len(episode.turn_prompts) == len(episode.reply_spans) == episode.turns
        assert len(episode.messages) == head + 2 * episode.turns  # the record is the whole transcript
        for k, (start, stop) in enumerate(episode.reply_spans):
            prompt = renderer.prompt_ids(window(episode.messages[: head + 2 * k]))
            assert episode.turn_prompts[k] == prompt and prompt in seen
            reply = episode.completion_ids[start:stop]
            sequence = torch.tensor([prompt + reply])
            with torch.no_grad():
                logits = model(sequence).logits[0, len(prompt) - 1 : -1] / 0.7
            recomputed = torch.log_softmax(logits.float(), -1).gather(-1, sequence[0, len(prompt) :, None])[:, 0]
            assert torch.allclose(recomputed, torch.tensor(episode.logprobs[start:stop]), atol=1e-4)
            checked += k >= 2  # a prompt that is no continuation of the previous one
    assert checked >= 2
    assert max(map(len, seen)) < max(len(e.prompt_ids) + len(e.completion_ids) for e in episodes)


def test_context_engine_refuses_what_it_cannot_play(tiny_babyai) -> None:
    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout import RolloutEngine, Task

    _, tokenizer = load_model(tiny_babyai)
    with pytest.raises(ValueError, match="Ray pool keeps a full chat"):
        RolloutEngine(tokenizer, context="summary", env_pool=object())
    engine = RolloutEngine(tokenizer, context="window:2", rollout_mode="async", env_kwargs=ENV_KWARGS)
    with pytest.raises(ValueError, match="'async' plays the full context only"):
        engine.run([Task(BABYAI, 0, "train", 0)], lambda contexts, limit, stop=None: [])


def test_cli_context_reaches_the_model_and_the_endpoint(tiny_babyai, server: ChatServer, tmp_path, capsys) -> None:
    from agentgym_train.cli import main

    out = tmp_path / "eval.json"
    common = [BABYAI, "--tasks", "2", "--max-turns", "3", "--env-kwargs", json.dumps(ENV_KWARGS)]
    assert main(["eval", str(tiny_babyai), *common, "--context", "window:1", "--json", str(out)]) == 0
    assert json.loads(out.read_text())["context"] == "window:1"
    assert (
        main(["eval", "tiny-chat", *common, "--base-url", server.url, "--context", "summary", "--json", str(out)]) == 0
    )
    assert json.loads(out.read_text())["context"] == "summary:1"
    assert max(len(r["messages"]) for r in server.requests) == 4  # system, task (with the summary), 1 exchange
    assert main(["eval", "random", *common, "--context", "window:1"]) == 2
    assert "reads only the observation" in capsys.readouterr().err
    records = tmp_path / "c.jsonl"
    collect_args = ["--tasks", "1", "--max-turns", "3", "--env-kwargs", json.dumps(ENV_KWARGS), "--no-progress"]
    assert (
        main(["collect", str(tiny_babyai), BABYAI, "--out", str(records), *collect_args, "--context", "window:1"]) == 0
    )
    assert json.loads(records.read_text())["turns"] >= 1
    with pytest.raises(SystemExit):
        main(["eval", "random", *common, "--context", "window:0"])
