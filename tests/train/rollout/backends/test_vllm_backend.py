"""Generation through TRL's vLLM integration, against a STAND-IN vLLM server (vLLM cannot run here).

TRL's real `VLLMGeneration` and `VLLMClient` run unchanged; only the server at the other end of the
HTTP connection is `vllm_standin.StandInVLLM`, and the NCCL weight transfer is replaced by the
stand-in's `receive_weights` (see that module). On two processes (vllm_job.py) the colocated engine
is the stand-in `vllm_standin.StandInLLM`, and both stand-ins give replies that name their prompt.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import grpo_args, launch_two_processes, rank_reports
from vllm_standin import StandInVLLM

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout.backends.vllm import VLLMTurnGenerator
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer


def test_turns_go_to_vllm_as_token_ids_and_come_back_as_sampled(
    tiny_babyai: Path, tmp_path: Path, trl_sees_vllm
) -> None:
    model, tokenizer = load_model(tiny_babyai)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        trl_sees_vllm(server)
        args = grpo_args(
            tmp_path, use_vllm=True, vllm_mode="server", vllm_server_base_url=server.url, max_turns=3, max_steps=1
        )
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
        trainer.train()

        episodes = trainer.last_episodes
        assert episodes and server.weight_syncs == 1 and server.prefix_cache_resets == 1
        # every turn of every episode was one prompt of a /v1/completions call, as the ids so far
        sent = [tuple(p) for body in server.requests for p in body["prompt"]]
        assert all(body["max_tokens"] == args.max_turn_tokens for body in server.requests)
        assert all(tokenizer.eos_token_id in body["stop_token_ids"] for body in server.requests)
        assert all(body["stop"] == ["\nObservation:"] for body in server.requests)  # BabyAI's stop strings
        for e in episodes:
            sequence = e.prompt_ids + e.completion_ids
            starts = [len(e.prompt_ids)] + [
                len(e.prompt_ids) + i for i in range(1, len(e.env_mask)) if e.env_mask[i] and not e.env_mask[i - 1]
            ]
            assert len(starts) == e.turns
            for start in starts:
                assert tuple(sequence[:start]) in sent
        # what the stand-in sampled is what the trainer scores: TRL's importance-sampling check agrees
        logs = [r for r in trainer.state.log_history if "sampling/sampling_logp_difference/mean" in r]
        assert logs and logs[0]["sampling/sampling_logp_difference/mean"] < 1e-4
        trainer.engine.close()


def reply_length(completions, **kwargs) -> list[float]:
    """A reward that differs inside groups, so that a step changes the weights."""
    return [float(len(c)) for c in completions]


def test_weights_pushed_each_step_are_the_trainers(tiny_babyai: Path, tmp_path: Path, trl_sees_vllm) -> None:
    from transformers import TrainerCallback

    snapshots: list[dict[str, torch.Tensor]] = []

    class Snapshot(TrainerCallback):  # the policy's weights after each optimiser step
        def on_step_end(self, args, state, control, model=None, **kwargs):
            snapshots.append({n: p.detach().clone() for n, p in model.named_parameters()})

    model, tokenizer = load_model(tiny_babyai)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        trl_sees_vllm(server)
        with torch.no_grad():  # stale weights on the server until the first sync
            server.model.get_input_embeddings().weight.normal_()
        args = grpo_args(
            tmp_path, use_vllm=True, vllm_mode="server", vllm_server_base_url=server.url, max_steps=2, temperature=1.5
        )
        initial = {n: p.detach().clone() for n, p in model.named_parameters()}
        trainer = MultiTurnGRPOTrainer(
            model, args, processing_class=tokenizer, callbacks=[Snapshot()], reward_funcs=[reply_length]
        )
        trainer.train()
        assert server.weight_syncs == 2 and len(snapshots) == 2
        # the second rollout sampled with the weights of step 1, pushed before it
        served = dict(server.model.named_parameters())
        assert set(served) == set(snapshots[0])
        assert all(torch.equal(served[n], p) for n, p in snapshots[0].items())
        assert not all(torch.equal(initial[n], p) for n, p in snapshots[0].items())  # step 1 changed them
        trainer.engine.close()


def test_generator_keeps_the_sampled_tokens_logprob_among_top_n() -> None:
    """With top-N logprobs, TRL sorts by probability: the sampled token need not come first."""

    class Recorder:  # the VLLMGeneration attributes and method the generator uses
        max_completion_length = 99
        generation_kwargs = {"seed": 3}

        def generate(self, prompts, images, num_generations):
            assert images is None and num_generations == 1
            self.seen = (prompts, self.max_completion_length, dict(self.generation_kwargs))
            logprobs = [[[-0.1, -2.0], [-0.5, -0.7], [-0.3, None], [-1.0]]]
            return prompts, [[5, 7, 2, 9]], logprobs, [[[5, 1], [3, 7], [2, 4], [9]]]

    vllm = Recorder()
    out = VLLMTurnGenerator(vllm, eos_token_ids=[2])([[1, 2, 3]], 4)
    assert out == [([5, 7, 2], [-0.1, -0.7, -0.3])]  # cut after the end token; 7's logprob is the second entry
    assert vllm.seen == ([[1, 2, 3]], 4, {"seed": 3, "stop_token_ids": [2]})
    assert vllm.max_completion_length == 99 and vllm.generation_kwargs == {"seed": 3}  # restored


def rollout_events(generates: list[int]) -> list[str]:
    """What a colocated engine in sleep mode should see: asleep from its start, then per rollout one weight
    push (TRL wakes the weights for it), the KV cache woken, that rollout's `generate` calls, one sleep."""
    events = ["sleep(2)"]  # TRL puts the new engine to sleep at once
    for n in generates:
        events += ["wake_up(weights)", "sync", "wake_up(kv_cache)", *["generate"] * n, "sleep(2)"]
    return events


def test_sleep_mode_wakes_and_pushes_once_per_rollout(
    tiny_babyai: Path, tmp_path: Path, trl_sees_vllm, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TRL's own generate sleeps after every call, so each turn would push the weights again."""
    import functools

    import trl.generation.vllm_generation as generation
    from vllm_standin import StandInLLM, StandInSamplingParams

    from agentgym_train.rollout.episode import Task

    model, tokenizer = load_model(tiny_babyai)
    alphabet = tokenizer.convert_tokens_to_ids(list("abcdefghijklmnop"))
    names = [name for name, _ in model.named_parameters()]
    engine = functools.partial(StandInLLM, alphabet=alphabet, end=tokenizer.eos_token_id, weight_names=names)
    # vLLM is not installed, so TRL's module lacks these names (raising=False adds them)
    monkeypatch.setattr(generation, "LLM", engine, raising=False)
    monkeypatch.setattr(generation, "SamplingParams", StandInSamplingParams, raising=False)
    args = grpo_args(
        tmp_path, use_vllm=True, vllm_mode="colocate", vllm_enable_sleep_mode=True, max_turns=3, max_steps=2
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[reply_length])
    trainer.train()
    llm = trainer.vllm_generation.llm
    # named replies are no BabyAI action: every episode runs its 3 turns, one generate call each turn
    assert {e.turns for e in trainer.last_episodes} == {3}
    assert llm.events == rollout_events([3, 3]) and llm.weight_syncs == 2
    # a rollout at the same step (TRL pushes nothing before it): the weights a sleep discarded are pushed once
    sampler = trainer._sampler(trainer.vllm_generation)
    trainer.engine.max_turns = 2
    episodes = trainer.engine.run([Task(args.env_id, trainer.train_dataset[0]["task_id"], "train", 0)] * 2, sampler)
    assert [e.turns for e in episodes] == [2, 2]
    assert llm.events == rollout_events([3, 3, 2]) and llm.sleeping == {"weights", "kv_cache"}
    # async rollouts (one process: local calls) batch whatever is ready, still between one wake and one sleep
    trainer.engine.rollout_mode = "async"
    episodes = trainer.engine.run([Task(args.env_id, trainer.train_dataset[1]["task_id"], "train", 1)] * 3, sampler)
    assert [e.turns for e in episodes] == [2, 2, 2] and trainer.engine.last_mode == "async"
    calls = llm.events.count("generate") - 8
    assert 2 <= calls <= 6 and llm.events == rollout_events([3, 3, 2, calls])
    trainer.engine.rollout_mode = "lockstep"
    # a call outside the engine's turn loop is awake for that call only
    sampler([[1, 2, 3]], 4)
    assert llm.events == rollout_events([3, 3, 2, calls, 1]) and llm.weight_syncs == 5
    trainer.engine.close()


# ---- two processes ------------------------------------------------------------------------------------
#: A 2-process run takes ~40 s here; a hang (ranks waiting in different collectives) fails the test.
TIMEOUT = 300


def launch_vllm_job(model_dir: Path, out: Path, mode: str) -> list[dict]:
    """Run vllm_job.py on 2 CPU processes (gloo) under `accelerate launch`; return each rank's report."""
    launch_two_processes("vllm_job.py", model_dir, out, mode, timeout=TIMEOUT)
    return rank_reports(out)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["server", "colocate"])
def test_two_processes_with_uneven_episodes_get_their_own_replies(tiny_babyai: Path, tmp_path: Path, mode: str) -> None:
    from vllm_job import EPISODES, TURN_TOKENS
    from vllm_standin import NAMED_LENGTH, named_reply

    reports = launch_vllm_job(tiny_babyai, tmp_path, mode)
    assert [r["world_size"] for r in reports] == [2, 2] and [r["global_step"] for r in reports] == [1, 1]
    end, alphabet = reports[0]["end"], reports[0]["alphabet"]
    for report in reports:
        # the scripted rollout: every episode ran its task's turns (live counts differ across ranks each turn)
        assert [e["turns"] for e in report["engine"]] == [turns for _, turns in EPISODES[report["rank"]]]
        # the GRPO step: episodes ended after 1 turn on rank 0, 3 on rank 1
        assert {e["turns"] for e in report["train"]} == {1 + 2 * report["rank"]}
        for episode in report["engine"] + report["train"]:
            assert len(episode["spans"]) == episode["turns"]
            for span in episode["spans"]:
                # each reply is the one to its own context (a crossed reply names another prompt); the
                # engine may replace the end token by the end-of-turn token
                expected = named_reply(span["context"], TURN_TOKENS, alphabet, end)
                assert len(span["reply"]) >= NAMED_LENGTH and span["reply"] == expected[: len(span["reply"])]
    # per-episode stop strings: each context went to vLLM once, with its own episode's stop strings only
    engine_calls = reports[0]["engine_calls"]  # the first calls were the scripted rollout's
    if mode == "server":  # the server (in the main process) saw every rank's prompts
        visible = {0: reports[0]["calls"], 1: reports[0]["calls"]}
        assert reports[0]["weights"] == 1  # one weight sync, before the GRPO step's rollout
    else:  # each rank's colocated engine saw its tensor-parallel group's (here: both ranks') prompts
        visible = {r["rank"]: r["calls"] for r in reports}
        assert reports[1]["calls"] == reports[0]["calls"]
        assert reports[0]["weights"] > 0  # TRL's sync_weights loaded the trainer's weights into the engine
    for report in reports:
        sent = [
            (tuple(p), tuple(c["stop"] or ())) for c in visible[report["rank"]][:engine_calls] for p in c["prompts"]
        ]
        for episode in report["engine"]:
            for span in episode["spans"]:
                assert [stop for p, stop in sent if p == tuple(span["context"])] == [tuple(episode["stop"])]
    # every call carries one stop set and the same number of prompts from each rank: the padding dummies
    # (one end token) make up the difference, so 3 turns x 2 stop sets ran as 2 + 2 + 2 calls
    calls = visible[0][:engine_calls]
    assert len(calls) == 6 and all(len(c["prompts"]) % 2 == 0 for c in calls)
    dummies = [sum(p == [end] for p in c["prompts"]) for c in calls]
    # turn 1: A 4|1 (3 dummies), B 1|2 (1); turn 2: A 3|0 (3), B 0|2 (2); turn 3: A 1|0 (1), B 0|1 (1)
    assert dummies == [3, 1, 3, 2, 1, 1]


def test_each_stop_set_is_its_own_call_and_replies_keep_their_order() -> None:
    """Contexts of two scenarios: one call per stop set (sorted), each with its own stop strings only."""
    from agentgym_train.rollout.stops import StopStrings

    class Recorder:
        max_completion_length = 99
        generation_kwargs: dict = {}

        def __init__(self) -> None:
            self.calls: list[tuple[list[list[int]], list[str] | None]] = []

        def generate(self, prompts, images, num_generations):
            self.calls.append((prompts, self.generation_kwargs.get("stop")))
            replies = [[100 + p[0], 2] for p in prompts]  # names its prompt by the first id
            return prompts, replies, [[[-0.5]] * 2 for _ in prompts], [[[t] for t in r] for r in replies]

    vllm = Recorder()
    a, b = StopStrings(None, ["\nObservation:"]), StopStrings(None, ["\nStop here:", "END"])
    out = VLLMTurnGenerator(vllm, eos_token_ids=[2])([[1], [2], [3], [4]], 4, stop=[b, a, None, b])
    assert vllm.calls == [([[3]], None), ([[2]], ["\nObservation:"]), ([[1], [4]], ["\nStop here:", "END"])]
    assert [ids for ids, _ in out] == [[101, 2], [102, 2], [103, 2], [104, 2]]


def test_a_reply_to_another_prompt_raises() -> None:
    class Crossed:  # returns the replies to other prompts than those sent, as TRL's slicing did
        max_completion_length = 99
        generation_kwargs: dict = {}

        def generate(self, prompts, images, num_generations):
            others = [[9, 9] for _ in prompts]
            return others, [[2] for _ in prompts], [[[-0.5]] for _ in prompts], [[[2]] for _ in prompts]

    with pytest.raises(RuntimeError, match="another prompt"):
        VLLMTurnGenerator(Crossed(), eos_token_ids=[2])([[1, 5]], 4)


@pytest.mark.slow
@pytest.mark.parametrize("config", ["fsdp.yaml", "zero3.yaml"])
def test_sleep_mode_with_sharded_weights_and_uneven_episodes_pushes_once_per_rollout(
    tiny_babyai: Path, tmp_path: Path, config: str
) -> None:
    """Colocated engines in sleep mode on 2 processes under FSDP2 or ZeRO-3 (each push gathers the shards over
    both), ranks whose episodes end at different turns and carry different stop sets: no hang (the
    per-call sleep of TRL's generate hung here past the limit), one push per rollout."""
    from train_helpers import cpu_config
    from vllm_job import SLEEP_EPISODES

    out = tmp_path / "out"
    accelerate_config = cpu_config(config, tmp_path)
    launch_two_processes("vllm_job.py", tiny_babyai, out, "colocate-sleep", config=accelerate_config, timeout=TIMEOUT)
    reports = rank_reports(out)
    sharding = [(r["fsdp_version"], r["zero_stage"]) for r in reports]
    assert sharding == ([(2, 0)] * 2 if config == "fsdp.yaml" else [(None, 3)] * 2)
    assert [r["global_step"] for r in reports] == [2, 2]
    for report in reports:
        rank = report["rank"]
        # the GRPO steps: 1 turn on rank 0, 3 on rank 1, one generate call per turn (one stop set)
        assert {e["turns"] for e in report["train"]} == {1 + 2 * rank}
        # the scripted rollout: one call per stop set live on each turn (rank 0: 2; rank 1: 2 + 2 + 1)
        scripted = SLEEP_EPISODES[rank]
        assert [e["turns"] for e in report["engine"]] == [turns for _, turns in scripted]
        calls = sum(
            len({kind for kind, turns in scripted if turns >= t}) for t in range(1, max(n for _, n in scripted) + 1)
        )
        assert calls == (2 if rank == 0 else 5)
        train = 1 + 2 * rank
        assert report["events"] == rollout_events([train, train, calls])
        assert report["weight_syncs"] == 3 and report["asleep"] == ["kv_cache", "weights"]
        # the last push (the scripted rollout's) carried the trained weights, which the steps moved
        assert report["pushed"] == report["trained"]
        assert any(report["trained"][n] != v for n, v in report["initial"].items())
