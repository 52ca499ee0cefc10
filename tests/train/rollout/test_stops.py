"""Stop strings and reply budgets per scenario, on every generation path.

The rule (`agentgym_train.rollout.stops`): a reply ends at the first stop string in its text; the ids
kept run up to the token that completes the text before the stop; the turn is closed by the
end-of-turn token with mask 0; logprobs and masks stay aligned with the ids.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import pytest
import torch
from token_path import check_token_path, spans
from train_helpers import BABYAI, ENV_KWARGS
from vllm_standin import StandInVLLM

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import ChatRenderer, RolloutEngine, Task, summarize
from agentgym_train.rollout.backends import hf_generate_fn
from agentgym_train.rollout.backends.cached import CachedSampler
from agentgym_train.rollout.stops import StopStrings
from agentgym_wrappers import get_parser
from agentgym_wrappers.stops import FORMAT_STOPS, find_stop, stop_strings_for, turn_tokens_for

OBSERVATION = "\nObservation:"


@pytest.fixture(scope="module", params=["tiny", "smollm2"])
def tokenizer(request: pytest.FixtureRequest):
    """The tiny model's tokenizer and SmolLM2's real one."""
    path = request.getfixturevalue("tiny_babyai" if request.param == "tiny" else "smollm2")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


# ---- what each scenario declares ---------------------------------------------------------------------
def scenario_classes() -> dict[str, type]:
    import agentgym_envs  # noqa: F401

    classes = {}
    for env_id, spec in gym.registry.items():
        if env_id.startswith("AgentGym/") and isinstance(spec.entry_point, str):
            cls = gym.envs.registration.load_env_creator(spec.entry_point)
            if isinstance(getattr(cls, "action_format", None), str):  # not a remote env (it mirrors a server's)
                classes.setdefault(cls.__name__, cls)
    return classes


def test_every_scenario_declares_stop_strings_and_a_reply_budget() -> None:
    classes = scenario_classes()
    assert {"BabyAIEnv", "TextCraftEnv", "SciWorldEnv", "DeepSearchEnv", "WebArenaEnv"} <= set(classes)
    for name, cls in classes.items():
        stops, budget = stop_strings_for(cls), turn_tokens_for(cls)
        assert stops and all(isinstance(s, str) and s for s in stops), name
        assert 64 <= budget <= 1024, (name, budget)
    assert stop_strings_for(classes["TextCraftEnv"]) == (OBSERVATION,)
    assert stop_strings_for(classes["DeepSearchEnv"]) == ("<information>",)
    assert turn_tokens_for(classes["SciWorldEnv"]) == 200  # the paper's rollout.max_tokens for SciWorld


def test_a_copied_worked_example_acts_on_its_first_action_only() -> None:
    """A model that copies the system prompt's example writes the env's part and a second turn: cut at the
    stop, the reply holds the first action; uncut, the parser would read the invented turn's action."""
    textcraft = scenario_classes()["TextCraftEnv"]
    example = textcraft.system_prompt.split("Your reply: ", 1)[1]
    parse = get_parser(textcraft.action_format)
    cut = example[: find_stop(example, stop_strings_for(textcraft))]
    assert parse(cut) == "get 1 lapis lazuli"
    assert parse(example) == "craft 1 blue dye using 1 lapis lazuli"


def test_envs_without_declarations_get_their_formats_defaults() -> None:
    class Plain(gym.Env):
        action_format = "tags"

    assert stop_strings_for(Plain()) == FORMAT_STOPS["tags"] and turn_tokens_for(Plain()) == 512

    class Bad(Plain):
        stop_strings = "\nObservation:"  # a string, not a tuple of strings

    with pytest.raises(TypeError, match="tuple of non-empty strings"):
        stop_strings_for(Bad())
    assert find_stop("a\nObservation: b <information>", (OBSERVATION, "<information>")) == 1
    assert find_stop("no stop here", (OBSERVATION,)) is None


# ---- the cut on token ids ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "stop"),
    [
        ("I need lapis.\nAction: get 1 lapis lazuli\nObservation: Got 1 lapis lazuli\nAction: craft", OBSERVATION),
        ("Action: go to red ball 1 🙂\nObservation: you see", OBSERVATION),  # a multi-byte character before
        ("Action: turn left\nObservation: done", "vation:"),  # begins inside a token: that token straddles
        ("\nObservation: nothing yet", OBSERVATION),  # at the very start: nothing is kept
    ],
)
def test_cut_keeps_the_tokens_up_to_the_text_before_the_stop(tokenizer, reply: str, stop: str) -> None:
    ids = tokenizer(reply, add_special_tokens=False)["input_ids"]
    stops = StopStrings(tokenizer, (stop,))
    keep = stops.cut(ids)
    before = reply[: reply.index(stop)]
    kept = stops.decode(ids[:keep])
    assert kept.startswith(before)  # nothing of the model's text before the stop is lost
    assert stop.startswith(kept[len(before) :]) and len(kept) - len(before) < len(stop)  # at most a straddle
    assert keep == 0 or not stops.decode(ids[: keep - 1]).startswith(before)  # no token more than needed
    # the samplers stop on the token that completes the stop string, not before
    first = next(k for k in range(1, len(ids) + 1) if stop in stops.decode(ids[:k]))
    assert [stops.completed(ids[:k]) for k in range(1, len(ids) + 1)].index(True) + 1 == first
    assert stops.cut(tokenizer("Action: turn left", add_special_tokens=False)["input_ids"]) is None


# ---- the engine: any backend's reply is cut, closed and counted -----------------------------------------
def replaying(tokenizer, replies: list[str], seen: list):
    """A backend that ignores stop strings (it samples past them) and reports what it was asked for."""
    turn = {"n": 0}

    def generate(contexts, max_new_tokens, stop=None):
        seen.append((max_new_tokens, stop))
        text = replies[turn["n"] % len(replies)]
        turn["n"] += 1
        ids = [*tokenizer(text, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id][:max_new_tokens]
        return [(ids, [-(j + 1) / 100 for j in range(len(ids))]) for _ in contexts]  # each logprob tells its place

    return generate


def test_engine_cuts_a_reply_at_the_stop_and_closes_the_turn(tokenizer) -> None:
    engine = RolloutEngine(tokenizer, max_turns=2, max_completion_length=2048, env_kwargs=ENV_KWARGS)
    sampled = "I will turn.\nAction: turn left\nObservation: You turned left.\nAction: move forward"
    seen: list = []
    episodes = engine.run([Task(BABYAI, i, "train", 0) for i in range(2)], replaying(tokenizer, [sampled], seen))
    engine.close()
    renderer = ChatRenderer(tokenizer)
    eot = renderer.end_of_turn_id
    ids = tokenizer(sampled, add_special_tokens=False)["input_ids"]
    keep = StopStrings(tokenizer, (OBSERVATION,)).cut(ids)
    # the scenario's budget and stop strings reached the backend
    assert all(limit == 256 and [s.strings for s in stop] == [(OBSERVATION,)] * 2 for limit, stop in seen)
    for episode in episodes:
        assert episode.max_turn_tokens == 256 and episode.stop_strings == (OBSERVATION,)
        assert episode.stopped_by == ["stop_string", "stop_string"] and episode.replies_cut == 0
        assert episode.stats["stop_string_hits"] == 2 and episode.stats["replies_cut"] == 0
        assert len(episode.completion_ids) == len(episode.logprobs) == len(episode.env_mask)
        for start, end in spans(episode.env_mask, 1):
            assert episode.completion_ids[start:end] == ids[:keep]  # the ids after the stop never enter
            assert episode.logprobs[start:end] == [-(j + 1) / 100 for j in range(keep)]  # aligned, as sampled
            assert episode.completion_ids[end] == eot and episode.env_mask[end] == 0  # closed by the env
        assert episode.completion_ids[-1] == eot and episode.env_mask[-1] == 0 and episode.logprobs[-1] == 0.0
        # the env read the cut reply: the action of the reply itself, not of the invented turn
        assert episode.replies == [tokenizer.decode(ids[:keep])] * 2 and OBSERVATION not in episode.replies[0]
        assert episode.invalid_replies == 0 and episode.stats["repeated_actions"] == 1
        # before the closing token, the sequence is the usual token path (env spans: rendered observations)
        n = len(episode.completion_ids) - 1
        open_ = dataclasses.replace(
            episode,
            completion_ids=episode.completion_ids[:n],
            logprobs=episode.logprobs[:n],
            env_mask=episode.env_mask[:n],
        )
        check_token_path(open_, tokenizer, renderer)
    rates = summarize(episodes)
    assert rates["stop_string_rate"] == 1.0 and rates["reply_cut_rate"] == 0.0


def test_engine_counts_replies_cut_by_the_budget(tiny_babyai: Path) -> None:
    _, tokenizer = load_model(tiny_babyai)
    seen: list = []
    engine = RolloutEngine(
        tokenizer, max_turns=2, max_completion_length=512, max_turn_tokens=4, stop_strings=(), env_kwargs=ENV_KWARGS
    )
    generate = replaying(tokenizer, ["I am thinking about it a lot.\nAction: turn left"], seen)
    episode = engine.run([Task(BABYAI, 0, "train", 0)], generate)[0]
    assert all(limit == 4 and not any(stop) for limit, stop in seen)  # no stop strings: none are sent
    assert episode.stopped_by == ["budget", "budget"] and episode.replies_cut == episode.stats["replies_cut"] == 2
    assert episode.invalid_replies == 2 and summarize([episode])["reply_cut_rate"] == 1.0
    # a budget-cut last reply stays open: it was truncated, not finished
    assert episode.env_mask[-1] == 1
    # the scenario's budget never exceeds the whole completion budget
    small = RolloutEngine(tokenizer, max_turns=2, max_completion_length=100, env_kwargs=ENV_KWARGS)
    short = small.run([Task(BABYAI, 0, "train", 0)], replaying(tokenizer, ["Action: turn left"], seen))[0]
    assert short.max_turn_tokens == 100 and seen[-1][0] == 100
    engine.close()
    small.close()


# ---- the HF samplers: they stop at the stop string, and the cache rolls back ----------------------------
def greedy_sampler(kind: str, model, tokenizer):
    make = CachedSampler if kind == "cached" else hf_generate_fn
    return make(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=0)


@pytest.mark.parametrize(
    ("checkpoint", "kind"),
    [("tiny_babyai", "cached"), ("tiny_babyai", "generate"), pytest.param("smollm2", "cached", marks=pytest.mark.slow)],
)
def test_samplers_stop_at_a_stop_string_of_the_models_own_reply(
    checkpoint: str, kind: str, request: pytest.FixtureRequest
) -> None:
    """Greedy replies with a stop string taken from the model's own first reply: that reply is the same
    reply cut at the stop; every later turn's logprobs equal a fresh forward pass over the final sequence
    (the cached sampler rolled its cache back to the kept tokens)."""
    model, tokenizer = load_model(request.getfixturevalue(checkpoint))
    tasks = [Task(BABYAI, i, "train", 0) for i in range(3)]
    common = {"max_turns": 2, "max_completion_length": 400, "max_turn_tokens": 12, "env_kwargs": ENV_KWARGS}
    free = RolloutEngine(tokenizer, stop_strings=(), **common)
    reference = free.run(tasks, greedy_sampler(kind, model, tokenizer))[0]
    free.close()
    first = reference.completion_ids[: spans(reference.env_mask, 1)[0][1]]
    text = tokenizer.decode(first, skip_special_tokens=False)
    # a stop string of two tokens from the middle of the first reply, first found where those tokens start
    stop = next(
        s
        for j in range(2, len(first) - 3)
        if (s := tokenizer.decode(first[j : j + 2])).strip() and text.find(s) == len(tokenizer.decode(first[:j]))
    )
    engine = RolloutEngine(tokenizer, stop_strings=(stop,), **common)
    generate = greedy_sampler(kind, model, tokenizer)
    resets = []
    if kind == "cached":
        reset = generate._reset
        generate._reset = lambda: (resets.append(1), reset())[1]
    episodes = engine.run(tasks, generate)
    engine.close()
    cut = episodes[0]
    keep = StopStrings(tokenizer, (stop,)).cut(first)
    assert cut.stopped_by[0] == "stop_string" and keep is not None
    assert cut.completion_ids[: keep + 1] == [*first[:keep], ChatRenderer(tokenizer).end_of_turn_id]
    assert cut.env_mask[keep] == 0
    if kind == "cached":
        assert len(resets) == 1  # later turns reused the cache, rolled back to the kept tokens
    for episode in episodes:
        assert len(episode.completion_ids) == len(episode.logprobs) == len(episode.env_mask)
        sequence = torch.tensor([episode.prompt_ids + episode.completion_ids])
        with torch.no_grad():
            logits = model(sequence).logits[0, len(episode.prompt_ids) - 1 : -1].float()
        recomputed = torch.log_softmax(logits, -1).gather(-1, sequence[0, len(episode.prompt_ids) :, None])[:, 0]
        sampled = torch.tensor(episode.env_mask, dtype=torch.bool)
        assert torch.allclose(recomputed[sampled], torch.tensor(episode.logprobs)[sampled], atol=1e-4)
        assert all(stop not in reply for reply in episode.replies)


# ---- vLLM (a stand-in server) ------------------------------------------------------------------------------
def test_vllm_gets_the_stop_strings_and_the_engine_cuts_the_ids_it_keeps(
    tiny_babyai: Path, tmp_path: Path, trl_sees_vllm
) -> None:
    from train_helpers import grpo_args

    from agentgym_train.rollout.backends.vllm import VLLMTurnGenerator
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    model, tokenizer = load_model(tiny_babyai)
    stops = ("e", "a")  # frequent in the tiny model's replies, so that some reply stops at one
    torch.manual_seed(0)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        args = grpo_args(tmp_path, use_vllm=True, vllm_mode="server", vllm_server_base_url=server.url)
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
        engine = RolloutEngine(
            tokenizer,
            max_turns=2,
            max_completion_length=256,
            max_turn_tokens=12,
            env_kwargs=ENV_KWARGS,
            stop_strings=stops,
        )
        generate = VLLMTurnGenerator(trainer.vllm_generation, engine.eos_token_ids)
        episodes = engine.run([Task(BABYAI, i, "train", 0) for i in range(6)], generate)
        engine.close()
        trainer.engine.close()
    assert server.requests and all(body["stop"] == sorted(stops) for body in server.requests)
    assert all(body["max_tokens"] == 12 for body in server.requests)
    assert sum(e.stop_string_hits for e in episodes) > 0, "no reply stopped at a stop string"
    cutter = StopStrings(tokenizer, stops)
    prompts = [prompt for body in server.requests for prompt in body["prompt"]]
    for prompt, returned in zip(prompts, server.completions, strict=True):
        episode = next(e for e in episodes if (e.prompt_ids + e.completion_ids)[: len(prompt)] == prompt)
        start = len(prompt) - len(episode.prompt_ids)
        mask = episode.env_mask[start:]
        kept = episode.completion_ids[start : start + (mask.index(0) if 0 in mask else len(mask))]
        keep = cutter.cut(returned)
        if keep is not None:  # vLLM kept the stop's tokens; the engine kept only those up to the stop
            text = cutter.decode(returned)
            before = text[: find_stop(text, stops)]
            assert kept == returned[:keep] and cutter.decode(kept).startswith(before)
            assert keep == 0 or not cutter.decode(kept[:-1]).startswith(before)
        else:
            assert kept == returned[: len(kept)] and len(returned) - len(kept) <= 1  # at most its end token
    for episode in episodes:
        assert len(episode.completion_ids) == len(episode.logprobs) == len(episode.env_mask)
