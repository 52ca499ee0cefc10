"""`agentgym_envs.adapters.verl`: the agent loop, driven by verl's own `AgentLoopWorker`.

Rows are written by `agentgym prepare verl`, read by verl's `RLHFDataset` and batched by its `collate_fn`;
the worker (built from verl's generated trainer config) instantiates the loop from the YAML entry that the
command writes, and returns verl's padded `DataProto`. verl's server manager is replaced by a stand-in
with its `generate(request_id, prompt_ids=..., sampling_params=...) -> TokenOutput` interface: either a
real small model (the tiny Qwen2 of `agentgym_train.models.tiny`) served token-in/token-out, or a script of
replies (each scenario's expert, written as a model would). Episodes are checked token for token against
our `RolloutEngine` playing the same task with the same policy.

The prepare command's tests need no verl (they run in the main environment too); the rest skip without it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
import yaml

import agentgym_envs  # noqa: F401  (registers the ids)
from agentgym_envs.adapters.verl import AGENT_NAME, TARGET, agent_loop_config, close_envs, dataset_rows
from agentgym_train.cli import main
from agentgym_wrappers import MultiTurnWrapper, action_reply

needs_verl = pytest.mark.skipif(importlib.util.find_spec("verl") is None, reason="needs verl (tox -e verl)")
needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs torch")

BABYAI = "AgentGym/BabyAI-GoToLocal-v0"
TINY_KWARGS = {"show_actions": False}
FAST = ["AgentGym/BabyAI-v0", "AgentGym/TextCraft-v0", "AgentGym/DeepSearch-v0", "AgentGym/TextWorld-v0"]
SLOW = ["AgentGym/SciWorld-v0", "AgentGym/WebArena-v0"]
#: Lengths that hold a whole expert episode (the tiny tokenizer spells most words out byte by byte).
BIG = {"prompt_length": 1 << 16, "response_length": 1 << 18}


# ---- the prepare command (no verl needed) ----------------------------------------------------------------
def test_prepare_verl_writes_rows_and_the_agent_loop_entry(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    out = tmp_path / "data" / "babyai.parquet"
    args = ["prepare", "verl", BABYAI, "--split", "test", "--limit", "3", "--out", str(out), "--max-turns", "7"]
    assert main([*args, "--env-kwargs", '{"show_actions": false}']) == 0
    rows = pq.read_table(out).to_pylist()
    assert rows == dataset_rows(BABYAI, split="test", count=3, env_kwargs=TINY_KWARGS, max_turns=7)
    assert rows != dataset_rows(BABYAI, split="test", count=3, max_turns=7)  # the kwargs made the env
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2]
    for row in rows:
        info = row["extra_info"]
        assert row["agent_name"] == AGENT_NAME and row["data_source"] == BABYAI
        assert info["env_id"] == BABYAI and info["split"] == "test" and info["max_turns"] == 7
        env = MultiTurnWrapper(gym.make(BABYAI, **TINY_KWARGS))
        env.reset(seed=info["seed"], options={"split": "test", "task_id": info["task_id"]})
        assert row["prompt"] == env.messages  # the chat the loop plays
        env.close()
    entries = yaml.safe_load((tmp_path / "data" / "agent_loop.yaml").read_text())
    assert entries == [{"name": AGENT_NAME, "_target_": TARGET, "env_kwargs": TINY_KWARGS}]
    printed = capsys.readouterr().out
    assert str(out) in printed and "agent_loop_config_path" in printed and "data.val_files" in printed


def test_prepare_verl_without_its_extra_exits_2_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    assert main(["prepare", "verl", "AgentGym/TextCraft-v0", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "agentgym-rl[verl]" in capsys.readouterr().err
    assert not (tmp_path / "x.parquet").exists()


def test_prepare_verl_rejects_an_unknown_env_or_split(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert main(["prepare", "verl", "AgentGym/Nope-v0", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "Nope" in capsys.readouterr().err
    assert main(["prepare", "verl", BABYAI, "--split", "nope", "--out", str(tmp_path / "x.parquet")]) == 2
    assert "nope" in capsys.readouterr().err


# ---- verl's worker and the stand-in servers --------------------------------------------------------------
class ModelServer:
    """verl's server manager, served by a real causal LM token-in/token-out as vLLM serves it: greedy at
    temperature 0, `max_tokens` new tokens at most, stopping on the model's end tokens and as soon as the
    new text holds one of `stop`; the sampled ids and (with `logprobs`) each one's logprob."""

    def __init__(self, model: Any, tokenizer: Any, eos_token_ids: Sequence[int]):
        self.model, self.tokenizer, self.eos = model, tokenizer, list(eos_token_ids)
        self.requests: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs):
        import torch
        from transformers import GenerationConfig, StoppingCriteria, StoppingCriteriaList
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append({"request_id": request_id, "prompt_ids": list(prompt_ids), **sampling_params})
        assert sampling_params["temperature"] == 0, "the stand-in serves greedy decoding only"
        width, stops, decode = len(prompt_ids), sampling_params.get("stop") or [], self.tokenizer.decode

        class Stop(StoppingCriteria):
            def __call__(self, input_ids: Any, scores: Any, **_: Any) -> Any:
                text = decode(input_ids[0, width:].tolist(), skip_special_tokens=False)
                return torch.tensor([any(s in text for s in stops)])

        config = GenerationConfig(
            max_new_tokens=sampling_params["max_tokens"],
            do_sample=False,
            eos_token_id=self.eos,
            pad_token_id=self.tokenizer.pad_token_id,
            disable_compile=True,
        )
        with torch.no_grad():
            sequence = self.model.generate(
                input_ids=torch.tensor([prompt_ids]),
                attention_mask=torch.ones(1, width, dtype=torch.long),
                generation_config=config,
                stopping_criteria=StoppingCriteriaList([Stop()]),
            )[0]
            # each sampled token's logprob, from one forward pass over the whole sequence
            logits = self.model(sequence[None]).logits[0, width - 1 : -1].float()
        ids = sequence[width:].tolist()
        logps = torch.log_softmax(logits, -1).gather(-1, sequence[width:, None])[:, 0].tolist()
        await asyncio.sleep(0)
        return TokenOutput(token_ids=ids, log_probs=logps if sampling_params.get("logprobs") else None)


class ScriptedServer:
    """verl's server manager answering each call with the next reply of a script (token ids), logprob -0.5 each."""

    def __init__(self, replies: Sequence[list[int]]):
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any], **kwargs):
        from verl.workers.rollout.replica import TokenOutput

        self.requests.append({"request_id": request_id, "prompt_ids": list(prompt_ids), **sampling_params})
        ids = self.replies.pop(0)
        return TokenOutput(token_ids=ids, log_probs=[-0.5] * len(ids))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random-init tiny Qwen2 with a byte-level tokenizer trained on BabyAI text (nothing downloads)."""
    from agentgym_train.models.tiny import TinyModelConfig, build_tiny_model

    config = TinyModelConfig(
        env_ids=[BABYAI],
        env_kwargs=TINY_KWARGS,
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        corpus_episodes=40,
    )
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), config)


@pytest.fixture(scope="module")
def tokenizer(tiny: Path) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny)


@pytest.fixture(autouse=True, scope="module")
def _close_pooled_envs():
    yield
    close_envs()


def verl_rollout(
    tiny: Path,
    tmp_path: Path,
    server: Any,
    env_id: str,
    *,
    split: str = "test",
    count: int = 1,
    prompt_length: int = 4096,
    response_length: int = 2048,
    loop_options: dict[str, Any] | None = None,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
) -> tuple[Any, list[dict[str, Any]]]:
    """Rows of `env_id` as `agentgym prepare verl` writes them, played by verl's `AgentLoopWorker` with
    `server` as its server manager; the worker's `DataProto` and each row's episode, unpadded."""
    import verl
    from omegaconf import OmegaConf
    from verl.experimental.agent_loop.agent_loop import AgentLoopWorker
    from verl.protocol import DataProto
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    data = tmp_path / "verl"
    args = ["prepare", "verl", env_id, "--split", split, "--limit", str(count), "--out", str(data / "rows.parquet")]
    if max_turns is not None:
        args += ["--max-turns", str(max_turns)]
    if env_kwargs is not None:
        args += ["--env-kwargs", json.dumps(env_kwargs)]
    assert main(args) == 0
    entries = yaml.safe_load((data / "agent_loop.yaml").read_text())
    entries[0].update(loop_options or {})
    (data / "agent_loop.yaml").write_text(yaml.safe_dump(entries))

    config = OmegaConf.load(Path(verl.__file__).parent / "trainer/config/_generated_ppo_trainer.yaml")
    rollout = config.actor_rollout_ref.rollout
    config.actor_rollout_ref.model.path = str(tiny)
    rollout.name = "vllm"
    rollout.temperature = 0
    rollout.calculate_log_probs = True
    rollout.prompt_length, rollout.response_length = prompt_length, response_length
    rollout.agent.agent_loop_config_path = str(data / "agent_loop.yaml")
    config.data.max_prompt_length = prompt_length
    config.data.filter_overlong_prompts = False
    config.data.cache_dir = str(tmp_path / "verl-cache")
    worker = AgentLoopWorker(config, server)
    dataset = RLHFDataset(str(data / "rows.parquet"), worker.tokenizer, config.data)
    batch = DataProto.from_single_dict(collate_fn([dataset[i] for i in range(len(dataset))]))
    out = asyncio.run(worker.generate_sequences(batch))
    episodes = []
    for row in range(len(out)):
        attention = out.batch["attention_mask"][row]
        prompt_mask = attention[:prompt_length].bool()
        n = int(attention[prompt_length:].sum())
        episodes.append(
            {
                "prompt_ids": out.batch["prompts"][row][prompt_mask].tolist(),
                "response_ids": out.batch["responses"][row][:n].tolist(),
                "response_mask": out.batch["response_mask"][row][:n].tolist(),
                "logprobs": out.batch["rollout_log_probs"][row][:n].tolist(),
                "reward": float(out.batch["rm_scores"][row].sum()),
                "reward_at": int(out.batch["rm_scores"][row].nonzero()[-1])
                if out.batch["rm_scores"][row].any()
                else n - 1,
                "num_turns": int(out.non_tensor_batch["__num_turns__"][row]),
                "turn_scores": list(out.non_tensor_batch["turn_scores"][row]),
                "record": out.non_tensor_batch["agentgym"][row],
                "success": float(out.non_tensor_batch["success"][row]),
                "padding": out.batch["response_mask"][row][n:].tolist(),
            }
        )
    return out, episodes


def engine_episode(tokenizer: Any, env_id: str, task_id: str, generate: Any, **options: Any) -> Any:
    """The same task played by our `RolloutEngine` (split test, seed 0)."""
    from agentgym_train.rollout import RolloutEngine, Task

    engine = RolloutEngine(tokenizer, num_env_workers=1, **options)
    try:
        return engine.run([Task(env_id, task_id=task_id, split="test", seed=0)], generate)[0]
    finally:
        engine.close()


def check_against_engine(episode: dict[str, Any], expected: Any) -> None:
    """The adapter's episode is the engine's, token for token."""
    assert episode["prompt_ids"] == expected.prompt_ids
    assert episode["response_ids"] == expected.completion_ids
    assert episode["response_mask"] == expected.env_mask
    assert episode["logprobs"] == pytest.approx(expected.logprobs, abs=1e-4)
    assert episode["turn_scores"] == pytest.approx(expected.turn_rewards)
    assert episode["reward"] == pytest.approx(expected.episode_return)
    record = episode["record"]
    assert record["stopped_by"] == expected.stopped_by and record["turns"] == expected.turns
    assert [tuple(s) for s in record["reply_spans"]] == expected.reply_spans
    assert record["success"] == expected.success and record["budget_truncated"] == expected.budget_truncated
    assert record["truncated"] == expected.truncated
    assert set(episode["padding"]) <= {0}  # verl's right padding is masked


# ---- the loop in verl --------------------------------------------------------------------------------------
@needs_verl
def test_the_loop_is_registered_by_name_and_found_by_hydra() -> None:
    from hydra.utils import get_class
    from verl.experimental.agent_loop.agent_loop import AgentLoopBase, _agent_loop_registry

    from agentgym_envs.adapters.verl import agent_loop_class, register_agent_loop

    # an entry verl's worker loaded from agent_loop_config_path (with the operator's options) stays as it is
    # when hydra's first lookup builds the class
    agent_loop_class.cache_clear()
    entry = {"name": AGENT_NAME, "_target_": TARGET, "max_turn_tokens": 24}
    _agent_loop_registry[AGENT_NAME] = entry
    cls = get_class(TARGET)
    assert issubclass(cls, AgentLoopBase) and cls is agent_loop_class()
    assert _agent_loop_registry[AGENT_NAME] is entry
    del _agent_loop_registry[AGENT_NAME]
    agent_loop_class.cache_clear()
    cls = agent_loop_class()  # without one, the class registers itself under its name
    assert _agent_loop_registry[AGENT_NAME] == {"_target_": TARGET}
    assert register_agent_loop("agentgym_other") == "agentgym_other"
    assert _agent_loop_registry["agentgym_other"] == {"_target_": TARGET}
    assert agent_loop_config(env_id="AgentGym/BabyAI-v0", max_turns=None) == [
        {"name": AGENT_NAME, "_target_": TARGET, "env_id": "AgentGym/BabyAI-v0"}
    ]


@needs_verl
@needs_torch
def test_greedy_episodes_match_the_rollout_engine(tiny: Path, tokenizer: Any, tmp_path: Path) -> None:
    """The tiny model, greedy, served token-in/token-out: each episode's prompt, response ids, mask and
    logprobs are the engine's for the same task and policy (three turns, 24-token replies)."""
    from transformers import AutoModelForCausalLM

    from agentgym_train.rollout.backends import hf_generate_fn

    model = AutoModelForCausalLM.from_pretrained(tiny).eval()
    options = {"max_turn_tokens": 24, "env_kwargs": TINY_KWARGS}
    server = ModelServer(model, tokenizer, [tokenizer.eos_token_id])
    out, episodes = verl_rollout(
        tiny, tmp_path, server, BABYAI, count=2, response_length=512, loop_options=options, max_turns=3
    )
    assert out.batch["responses"].shape == (2, 512) and out.batch["prompts"].shape == (2, 4096)
    generate = hf_generate_fn(model, tokenizer.pad_token_id, [tokenizer.eos_token_id], temperature=0.0)
    for episode in episodes:
        expected = engine_episode(
            tokenizer, BABYAI, episode["record"]["task_id"], generate, max_turns=3, max_completion_length=512, **options
        )
        check_against_engine(episode, expected)
        assert sum(episode["response_mask"]) > 0 and 0 in episode["response_mask"]  # the env's turns are masked
        assert episode["num_turns"] == 1 + 2 * expected.turns - 1  # observation, (reply, observation)*, reply
    # one sticky request id per episode, every call asking for the reply budget with the scenario's stop strings
    assert len({r["request_id"] for r in server.requests}) == 2
    assert {(r["max_tokens"], tuple(r["stop"])) for r in server.requests} == {(24, ("\nObservation:",))}


def scripted_replies(tokenizer: Any, texts: Sequence[tuple[str, str]]) -> list[list[int]]:
    """Token ids of replies: (text, how it ends: "eot" the end-of-turn token, "eos" another end token, "" none)."""
    ends = {"eot": ["<|im_end|>"], "eos": ["<|endoftext|>"], "": []}
    return [
        tokenizer(text, add_special_tokens=False)["input_ids"] + tokenizer.convert_tokens_to_ids(ends[end])
        for text, end in texts
    ]


@needs_verl
def test_scripted_episode_matches_the_engine_on_every_way_a_reply_ends(
    tiny: Path, tokenizer: Any, tmp_path: Path
) -> None:
    """Replies that end on the end-of-turn token, on another end token (replaced by the end-of-turn token
    with mask 0), at a stop string (cut token-exactly and closed), at the reply budget (closed), and an
    unparsable one: the same sequence as the engine's."""
    from agentgym_train.rollout import Reply

    texts = [
        ("Action: turn left", "eot"),
        ("Action: turn right", "eos"),
        ("Action: go forward\nObservation: I made this up", "eot"),
        ("Let me think about it " * 20, ""),  # no action, cut at the 32-token budget
        ("Action: turn left", "eos"),
    ]
    replies = scripted_replies(tokenizer, texts)
    options = {
        "max_turn_tokens": 32,
        "env_kwargs": TINY_KWARGS,
        "eos_token_ids": [tokenizer.convert_tokens_to_ids("<|endoftext|>")],
    }
    _, [episode] = verl_rollout(tiny, tmp_path, ScriptedServer(replies), BABYAI, loop_options=options, max_turns=5)
    script = list(replies)

    def generate(contexts: list[list[int]], max_new_tokens: int, stop: Any = None) -> list[Reply]:
        ids = script.pop(0)
        return [Reply(ids, [-0.5] * len(ids))]

    expected = engine_episode(tokenizer, BABYAI, episode["record"]["task_id"], generate, max_turns=5, **options)
    check_against_engine(episode, expected)
    assert episode["record"]["stopped_by"] == ["eos", "eos", "stop_string", "budget", "eos"]
    steps = episode["record"]["steps"]
    assert [s["format_error"] for s in steps] == [False, False, False, True, False]
    eot = tokenizer.convert_tokens_to_ids("<|im_end|>")
    ids, mask, spans = episode["response_ids"], episode["response_mask"], episode["record"]["reply_spans"]
    # reply 2 ended on <|endoftext|>: dropped, and the end-of-turn token follows with mask 0
    assert ids[spans[1][1] - 1] != eot and (ids[spans[1][1]], mask[spans[1][1]]) == (eot, 0)
    # reply 3 was cut before its stop string
    assert "Observation: I made" not in tokenizer.decode(ids[spans[2][0] : spans[2][1]])
    assert episode["record"]["truncated"] and ids[-1] == tokenizer.convert_tokens_to_ids("<|endoftext|>")


def expert_replies(env_id: str, tokenizer: Any, **reset: Any) -> tuple[list[list[int]], float]:
    """The expert's replies on a task (played once in an env of its own), as the model's token ids ending
    on the end-of-turn token, and the score they reach."""
    env = MultiTurnWrapper(gym.make(env_id), max_turns=200)
    observation, info = env.reset(**reset)
    expert, replies, done = env.unwrapped.make_expert(), [], False
    while not done:
        reply = action_reply(expert.act(observation, info), env.unwrapped.action_format)
        replies.append(reply)
        observation, _, terminated, truncated, info = env.step(reply)
        done = terminated or truncated
    env.close()
    assert info["success"], f"{env_id}: the expert did not win its own episode"
    return scripted_replies(tokenizer, [(r, "eot") for r in replies]), float(info["score"])


def check_expert_wins(env_id: str, tiny: Path, tokenizer: Any, tmp_path: Path) -> None:
    task_id = gym.make(env_id).unwrapped.task_at("test", 0)
    replies, score = expert_replies(env_id, tokenizer, seed=0, options={"split": "test", "task_id": task_id})
    server = ScriptedServer(replies)
    _, [episode] = verl_rollout(tiny, tmp_path, server, env_id, max_turns=200, **BIG)
    record = episode["record"]
    assert record["success"] and record["terminated"] and not record["truncated"] and record["env_error"] is None
    assert episode["success"] == 1.0 and episode["reward"] == pytest.approx(score) and score > 0
    assert episode["reward_at"] == len(episode["response_ids"]) - 1  # on the last response token
    assert sum(episode["turn_scores"]) == pytest.approx(score) and record["turns"] == len(replies)
    ids, mask = episode["response_ids"], episode["response_mask"]
    assert [ids[a:b] for a, b in record["reply_spans"]] == replies  # kept as sampled
    assert sum(mask) == sum(map(len, replies)) and all(mask[a:b] == [1] * (b - a) for a, b in record["reply_spans"])
    assert all(s["valid_action"] for s in record["steps"])
    assert not server.replies  # every reply was asked for


@needs_verl
@pytest.mark.parametrize("env_id", FAST)
def test_expert_episode_wins_through_the_loop(env_id: str, tiny: Path, tokenizer: Any, tmp_path: Path) -> None:
    check_expert_wins(env_id, tiny, tokenizer, tmp_path)


@needs_verl
@pytest.mark.slow
@pytest.mark.parametrize("env_id", SLOW)
def test_slow_expert_episode_wins_through_the_loop(env_id: str, tiny: Path, tokenizer: Any, tmp_path: Path) -> None:
    check_expert_wins(env_id, tiny, tokenizer, tmp_path)


@needs_verl
def test_bad_replies_are_answered_as_invalid(tiny: Path, tokenizer: Any, tmp_path: Path) -> None:
    replies = scripted_replies(
        tokenizer, [("Action: fly to the moon", "eot"), ("I am not sure.", "eot"), ("Action: turn left", "eot")]
    )
    _, [episode] = verl_rollout(tiny, tmp_path, ScriptedServer(replies), "AgentGym/BabyAI-v0", max_turns=3)
    record = episode["record"]
    assert record["steps"] == [
        {"action": "fly to the moon", "format_error": False, "valid_action": False},
        {"action": None, "format_error": True, "valid_action": False},
        {"action": "turn left", "format_error": False, "valid_action": True},
    ]
    assert record["truncated"] and not record["success"] and episode["reward"] == 0.0
    ids, mask, spans = episode["response_ids"], episode["response_mask"], record["reply_spans"]
    answers = [tokenizer.decode(ids[spans[k][1] : spans[k + 1][0]]) for k in range(2)]
    assert all(set(mask[spans[k][1] : spans[k + 1][0]]) == {0} for k in range(2))  # the env's words are masked
    assert "fly to the moon" in answers[0] or "not" in answers[0].lower()
    assert "Your reply must end with" in answers[1]
    assert episode["num_turns"] == 6  # observation, (reply, answer) x 2, reply


@needs_verl
def test_a_failing_env_ends_its_episode_out_of_the_loss(
    tiny: Path, tokenizer: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_step = MultiTurnWrapper.step

    def step(self: MultiTurnWrapper, reply: str) -> Any:
        if self.turns >= 1:
            raise RuntimeError("the backend died")
        return real_step(self, reply)

    monkeypatch.setattr(MultiTurnWrapper, "step", step)
    replies = scripted_replies(tokenizer, [("Action: turn left", "eot")] * 2)
    _, [episode] = verl_rollout(
        tiny, tmp_path, ScriptedServer(replies), BABYAI, loop_options={"env_kwargs": TINY_KWARGS}
    )
    record = episode["record"]
    assert record["env_error"] == "RuntimeError: the backend died" and episode["reward"] == 0.0
    assert set(episode["response_mask"]) == {0} and len(episode["response_ids"]) > 0


@needs_verl
def test_a_remote_env_plays_through_the_loop(tiny: Path, tokenizer: Any, tmp_path: Path) -> None:
    """`agentgym prepare verl AgentGym/Remote-v0 --env-kwargs '{"base_url": ..., "env_id": ...}'`: the rows name
    the remote client, the loop's entry holds its kwargs, and the episode is played on the server."""
    pytest.importorskip("fastapi")
    from agentgym_envs.remote.server import create_app
    from agentgym_envs.remote.server.local import ServerThread

    env_id = "AgentGym/BabyAI-v0"
    task_id = gym.make(env_id).unwrapped.task_at("test", 0)
    replies, score = expert_replies(env_id, tokenizer, seed=0, options={"split": "test", "task_id": task_id})
    with ServerThread(create_app([env_id], max_sessions=4, ttl=None)) as running:
        remote = {"base_url": running.base_url, "env_id": env_id}
        server = ScriptedServer(replies)
        _, [episode] = verl_rollout(tiny, tmp_path, server, "AgentGym/Remote-v0", env_kwargs=remote, **BIG)
        close_envs()  # the pooled client ends its session while the server still runs
    record = episode["record"]
    assert record["env_id"] == "AgentGym/Remote-v0" and record["task_id"] == task_id and record["success"]
    assert episode["reward"] == pytest.approx(score)
