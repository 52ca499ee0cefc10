"""The token path of the rollout engine: masks, replies, observations, logprobs, the budget."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from token_path import check_token_path, spans
from train_helpers import BABYAI, ENV_KWARGS, grpo_args

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import ChatRenderer, RolloutEngine, Task
from agentgym_train.rollout.backends import hf_generate_fn
from agentgym_train.rollout.backends.cached import CachedSampler


def scripted(tokenizer, replies: list[str], cut: set[int] = frozenset()):
    """A TurnGenerator replaying `replies` turn by turn (turns in `cut` lose their EOS)."""
    turn = {"n": 0}

    def generate(contexts, max_new_tokens, stop=None):
        text = replies[turn["n"] % len(replies)]
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        if turn["n"] not in cut:
            ids = [*ids, tokenizer.eos_token_id]
        turn["n"] += 1
        return [(ids[:max_new_tokens], [-0.5] * len(ids[:max_new_tokens])) for _ in contexts]

    return generate


def test_scripted_rollout_masks_and_text(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    renderer = ChatRenderer(tokenizer)
    engine = RolloutEngine(tokenizer, max_turns=4, max_completion_length=512, max_turn_tokens=12, env_kwargs=ENV_KWARGS)
    replies = ["Action: turn left", "I think so.\nAction: move forward", "no action here", "Action: turn right"]
    tasks = [Task(BABYAI, i, "train", 0) for i in range(3)]
    episodes = engine.run(tasks, scripted(tokenizer, replies))
    engine.close()
    for episode in episodes:
        assert episode.turns == 4 and episode.truncated and not episode.budget_truncated
        assert episode.invalid_replies == 1  # "no action here" costs a turn and is counted
        assert episode.completion_ids[-1] == tokenizer.eos_token_id
        check_token_path(episode, tokenizer, renderer)


def test_reply_cut_at_max_turn_tokens_is_closed_by_the_env(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    engine = RolloutEngine(tokenizer, max_turns=3, max_completion_length=512, max_turn_tokens=3, env_kwargs=ENV_KWARGS)
    episode = engine.run([Task(BABYAI, 0, "train", 0)], scripted(tokenizer, ["Action: turn left now"], cut={0}))[0]
    engine.close()
    first_env = spans(episode.env_mask, 0)[0][0]
    # the EOS the model did not sample opens the env's span (mask 0), never the model's
    assert episode.completion_ids[first_env] == tokenizer.eos_token_id
    assert episode.env_mask[first_env] == 0
    check_token_path(episode, tokenizer, ChatRenderer(tokenizer))


def test_budget_ends_episodes_at_a_turn_boundary(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    budget = 60
    engine = RolloutEngine(
        tokenizer, max_turns=20, max_completion_length=budget, max_turn_tokens=8, env_kwargs=ENV_KWARGS
    )
    episodes = engine.run([Task(BABYAI, i, "train", 0) for i in range(4)], scripted(tokenizer, ["Action: turn left"]))
    engine.close()
    for episode in episodes:
        assert episode.budget_truncated and not episode.terminated
        assert len(episode.completion_ids) <= budget
        assert episode.env_mask[-1] == 1 and episode.completion_ids[-1] == tokenizer.eos_token_id
        assert episode.stats["budget_truncated"] and episode.stats["turns"] == episode.turns


@pytest.mark.parametrize("sampler", ["cached", "generate"])
def test_sampled_rollout_logprobs_match_the_model(tiny_babyai: Path, sampler: str) -> None:
    """Logprobs recomputed on each final, unpadded sequence equal the sampler's on model tokens."""
    model, tokenizer = load_model(tiny_babyai)
    torch.manual_seed(0)
    engine = RolloutEngine(tokenizer, max_turns=3, max_completion_length=400, max_turn_tokens=10, env_kwargs=ENV_KWARGS)
    temperature = 0.7
    make = CachedSampler if sampler == "cached" else hf_generate_fn
    generate = make(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=temperature)
    episodes = engine.run([Task(BABYAI, i, "train", 0) for i in range(6)], generate)
    engine.close()
    renderer = ChatRenderer(tokenizer)
    for episode in episodes:
        check_token_path(episode, tokenizer, renderer)
        sequence = torch.tensor([episode.prompt_ids + episode.completion_ids])
        with torch.no_grad():
            logits = model(sequence).logits[0, len(episode.prompt_ids) - 1 : -1] / temperature
        recomputed = torch.log_softmax(logits.float(), -1).gather(-1, sequence[0, len(episode.prompt_ids) :, None])[
            :, 0
        ]
        model_tokens = torch.tensor(episode.env_mask, dtype=torch.bool)
        sampler = torch.tensor(episode.logprobs)
        assert torch.allclose(recomputed[model_tokens], sampler[model_tokens], atol=1e-4)


def test_trainer_recomputes_the_sampler_logprobs(tiny_babyai: Path, tmp_path: Path) -> None:
    """Through TRL's own padding and forward: its per-token logprobs equal the sampler's on model tokens."""
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    model, tokenizer = load_model(tiny_babyai)
    trainer = MultiTurnGRPOTrainer(model, grpo_args(tmp_path, temperature=0.8), processing_class=tokenizer)
    batch = next(iter(trainer.get_train_dataloader()))
    out = trainer._generate_and_score_completions(batch)
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
    attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, attention, out["completion_ids"].size(1)
        )
    model_tokens = (out["completion_mask"] * out["tool_mask"]).bool()
    assert model_tokens.sum() > 0 and (~model_tokens & out["completion_mask"].bool()).sum() > 0
    assert torch.allclose(logps[model_tokens], out["sampling_per_token_logps"][model_tokens], atol=1e-4)
    # env tokens carry mask 0 into TRL's loss, and are exactly where the rollout said the env spoke
    for row, episode in enumerate(trainer.last_episodes):
        n = len(episode.completion_ids)
        assert out["tool_mask"][row, :n].tolist() == episode.env_mask
    trainer.engine.close()


def test_renderer_refuses_a_template_that_rewrites_history(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    tokenizer.chat_template = "{% for m in messages|reverse %}{{ m['content'] }}{{ eos_token }}{% endfor %}"
    with pytest.raises(ValueError, match="prefix-preserving"):
        ChatRenderer(tokenizer).observation_ids("hello")


def test_cached_sampler_reuses_the_cache_only_for_continuations(tiny_babyai: Path) -> None:
    model, tokenizer = load_model(tiny_babyai)
    sampler = CachedSampler(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=0)
    contexts = [tokenizer("Mission: go to the red ball")["input_ids"], tokenizer("In view: nothing")["input_ids"]]
    first = sampler(contexts, 4)
    cached = sampler.cache
    # the second episode goes on (its reply and an observation appended); the first one ended
    follow = [contexts[1] + first[1][0] + tokenizer("You turned left.")["input_ids"]]
    again = sampler(follow, 4)
    assert sampler.cache is cached and len(sampler.fed) == 1
    # greedy continuation equals a fresh, uncached computation of the same context
    fresh = CachedSampler(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=0)(follow, 4)
    assert again[0][0] == fresh[0][0]
    assert torch.allclose(torch.tensor(again[0][1]), torch.tensor(fresh[0][1]), atol=1e-4)
    # a context that extends nothing starts over
    sampler([tokenizer("Something else")["input_ids"]], 2)
    assert sampler.cache is not cached


def test_cached_sampler_repacks_holes_and_still_computes_the_same(tiny_babyai: Path) -> None:
    """Rows that grow by very different amounts leave holes; repacking removes them, outputs unchanged."""
    model, tokenizer = load_model(tiny_babyai)
    eos = [tokenizer.eos_token_id]
    sampler = CachedSampler(model, tokenizer.pad_token_id, eos, temperature=0)
    words = tokenizer("You see a red ball and a green key in the room")["input_ids"]
    contexts = [words[:3], words[:4], words[:5]]
    for turn in range(6):
        replies = sampler(contexts, 3)
        # each turn another row gets the long observation: without repacking, every row's cache would
        # grow by the longest one each turn, and holes would fill two thirds of it
        grown = [words * 3 if row == turn % 3 else words[:1] for row in range(3)]
        contexts = [c + r + g for c, (r, _), g in zip(contexts, replies, grown, strict=True)]
        width, longest = sampler.mask.size(1), int(sampler.mask.sum(dim=1).max())
        # at most a quarter holes before this turn, plus this turn's padding to its longest observation
        assert width - longest <= 0.25 * width + 3 * len(words) + 3, (turn, width, longest)
    again = sampler(contexts, 4)
    fresh = CachedSampler(model, tokenizer.pad_token_id, eos, temperature=0)(contexts, 4)
    for (ids, logps), (ids_fresh, logps_fresh) in zip(again, fresh, strict=True):
        assert ids == ids_fresh
        assert torch.allclose(torch.tensor(logps), torch.tensor(logps_fresh), atol=1e-4)
