"""A reply cut by the reply budget keeps exactly `max_turn_tokens` sampled tokens (mask 1), and the end-of-turn
token the engine adds after it has mask 0: on each generation backend (the cached sampler, transformers'
`generate`, vLLM against the stand-in server)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import ChatRenderer, RolloutEngine, Task
from agentgym_train.rollout.backends import hf_generate_fn
from agentgym_train.rollout.backends.cached import CachedSampler

BUDGET = 5  # a random tiny model's reply is over 5 tokens nearly always: most replies are cut by the budget


def check_budget_cuts(episodes: list, tokenizer) -> None:
    end_of_turn = ChatRenderer(tokenizer).end_of_turn_id
    cut = 0
    for episode in episodes:
        assert len(episode.completion_ids) == len(episode.logprobs) == len(episode.env_mask)
        for turn, ((start, stop), why) in enumerate(zip(episode.reply_spans, episode.stopped_by, strict=True)):
            if why != "budget":
                continue
            cut += 1
            assert stop - start == BUDGET, (turn, episode.stopped_by)  # every sampled token of the budget kept
            assert episode.env_mask[start:stop] == [1] * BUDGET
            if turn < len(episode.reply_spans) - 1:  # a later turn: the end-of-turn token closes this reply
                assert episode.completion_ids[stop] == end_of_turn
                assert episode.env_mask[stop] == 0 and episode.logprobs[stop] == 0.0
    assert cut >= 4, "too few replies were cut by the budget to check"


def engine(tokenizer) -> RolloutEngine:
    return RolloutEngine(
        tokenizer,
        max_turns=3,
        max_completion_length=256,
        max_turn_tokens=BUDGET,
        stop_strings=(),
        env_kwargs=ENV_KWARGS,
    )


@pytest.mark.parametrize("kind", ["cached", "generate"])
def test_a_reply_cut_by_the_budget_keeps_max_turn_tokens_on_the_hf_samplers(tiny_babyai: Path, kind: str) -> None:
    model, tokenizer = load_model(tiny_babyai)
    make = CachedSampler if kind == "cached" else hf_generate_fn
    torch.manual_seed(0)
    rollout = engine(tokenizer)
    episodes = rollout.run(
        [Task(BABYAI, i, "train", 0) for i in range(4)], make(model, tokenizer.pad_token_id, [tokenizer.eos_token_id])
    )
    rollout.close()
    check_budget_cuts(episodes, tokenizer)


def test_a_reply_cut_by_the_budget_keeps_max_turn_tokens_on_vllm(
    tiny_babyai: Path, tmp_path: Path, trl_sees_vllm
) -> None:
    from train_helpers import grpo_args
    from vllm_standin import StandInVLLM

    from agentgym_train.rollout.backends.vllm import VLLMTurnGenerator
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    model, tokenizer = load_model(tiny_babyai)
    torch.manual_seed(0)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        args = grpo_args(tmp_path, use_vllm=True, vllm_mode="server", vllm_server_base_url=server.url)
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
        rollout = engine(tokenizer)
        generate = VLLMTurnGenerator(trainer.vllm_generation, rollout.eos_token_ids)
        episodes = rollout.run([Task(BABYAI, i, "train", 0) for i in range(4)], generate)
        rollout.close()
        trainer.engine.close()
    assert server.requests and all(body["max_tokens"] == BUDGET for body in server.requests)
    check_budget_cuts(episodes, tokenizer)
