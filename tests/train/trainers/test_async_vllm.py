"""Async training with vLLM in server mode (`async_generation`, `use_vllm=True, vllm_mode="server"`), against a
STAND-IN vLLM server (`vllm_standin.StandInVLLM`: vLLM cannot run here) that serves a real tiny model over the
HTTP routes TRL's `VLLMClient` calls, the weight-transfer routes included. TRL's client and `VLLMGeneration` run
unchanged except where vLLM's NCCL group is needed: that group is gloo over loopback here
(`vllm_standin.use_gloo_transfer`), so NCCL itself and vLLM's packed broadcast do not run in these tests. The
2-process run is async_vllm_job.py, against one stand-in server in this process."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from policy_versions import (
    StampingWorker,
    assert_first_group_masked,
    assert_first_group_moves_no_loss,
    moved_weights,
    token_logps,
)
from train_helpers import BABYAI, ENV_KWARGS, grpo_args
from transformers import TrainerCallback
from vllm_standin import StandInVLLM, free_port, use_gloo_transfer

from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import Task
from agentgym_train.rollout.backends.vllm import ServerGeneration, VLLMTurnGenerator
from agentgym_train.rollout.versioned import ENV_VERSION
from agentgym_train.rollout.worker import ServerGenerationWorker
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer
from agentgym_train.trainers.grpo_config import MultiTurnGRPOConfig


def test_trls_client_streams_the_weights_into_the_stand_in_server(tiny_babyai: Path, monkeypatch) -> None:
    from trl.generation.vllm_client import VLLMClient

    use_gloo_transfer(monkeypatch)
    model, tokenizer = load_model(tiny_babyai)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        with torch.no_grad():
            for p in server.model.parameters():  # the server starts with other weights
                p.normal_()
        client = VLLMClient(base_url=server.url, group_port=free_port())
        client.init_communicator(device="cpu")
        client.update_model_params(model)  # TRL's own streaming, over the gloo group
        served = dict(server.model.named_parameters())
        assert all(torch.equal(served[n], p) for n, p in model.named_parameters())
        assert server.weight_syncs == 1 and not server.updating

        new = moved_weights(model, 0.1, 1)  # one update of several tensors, as TRL's sync_weights groups them
        names = [n for n, _ in model.named_parameters()][:3]
        with client.weight_update():
            for name in names:
                client.update_named_param(name, new[name])
        assert all(torch.equal(served[n], new[n]) for n in names)
        client.reset_prefix_cache()
        assert server.prefix_cache_resets == 1 and server.weight_syncs == 2
        assert server.transfer_events == [
            "/init_weight_transfer_engine",
            *["/start_weight_update", "/update_weights", "/finish_weight_update"],
            "/start_weight_update",
            *["/update_weights"] * 3,
            "/finish_weight_update",
        ]
        client.close_communicator()
        assert client.communicator is None


def test_a_reply_across_a_push_records_each_segments_version(tiny_babyai: Path, monkeypatch) -> None:
    """A push is asked for while the first segment's request is at the server, before it samples: the push waits
    for the segment, whose tokens are version 0; every later token is version 1; and the behaviour logprobs are
    those of the weights that sampled each token."""
    use_gloo_transfer(monkeypatch)  # only for VLLMClient's "is vLLM installed" check
    from trl.generation.vllm_client import VLLMClient

    model, tokenizer = load_model(tiny_babyai)
    model.eval()
    v0 = {k: v.clone() for k, v in model.state_dict().items()}
    v1 = moved_weights(model, 0.2, 1)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        client = VLLMClient(base_url=server.url)
        backend = VLLMTurnGenerator(ServerGeneration(client, temperature=1.0), [tokenizer.eos_token_id])
        engine_kwargs = {"max_turns": 2, "max_turn_tokens": 6, "max_completion_length": 256, "env_kwargs": ENV_KWARGS}
        worker = ServerGenerationWorker(engine_kwargs, tokenizer, lambda: backend, segment_tokens=2)
        complete = server.complete
        first: list[int] = []

        def push() -> None:  # what the transfer does to the server: version 1's weights
            server.model.load_state_dict(v1)

        def complete_and_push(body: dict[str, Any]) -> dict[str, Any]:
            if not first:  # the first segment is at the server: a push asked for now waits for it to return
                threading.Thread(target=worker.push, args=(1, push), daemon=True).start()
                deadline = time.monotonic() + 30
                while not (worker.gate.waiting or worker.syncs) and time.monotonic() < deadline:
                    time.sleep(0.01)
                reply = complete(body)
                first.append(len(reply["choices"][0]["token_ids"]))
                return reply
            return complete(body)

        server.complete = complete_and_push
        worker.start(0)
        worker.submit(0, [Task(BABYAI, seed=3)])
        (episode,), stats = worker.result(0)
        worker.close()

    assert first == [2] and stats["mid_reply_updates"] == 1 and worker.syncs == 1
    # by hand: the first 2 sampled tokens are version 0, every later sampled token 1, the env's (and any end token
    # the engine added) -1
    sampled = [t for t, m in enumerate(episode.env_mask) if m]
    assert len(sampled) > 2
    expected = [ENV_VERSION] * len(episode.completion_ids)
    for k, t in enumerate(sampled):
        expected[t] = 0 if k < 2 else 1
    assert episode.versions == expected
    # the behaviour logprobs: version 0's for the first segment, version 1's after it
    ids = episode.prompt_ids + episode.completion_ids
    start = len(episode.prompt_ids)
    model.load_state_dict(v0)
    under0 = token_logps(model, ids, start)
    model.load_state_dict(v1)
    under1 = token_logps(model, ids, start)
    for k, t in enumerate(sampled):
        want = under0[t] if k < 2 else under1[t]
        assert episode.logprobs[t] == pytest.approx(want, abs=1e-4), (k, t)


class Snapshot(TrainerCallback):
    """The policy's weights after each optimiser step (before the weight sync, which runs after this callback)."""

    def __init__(self) -> None:
        self.weights: list[dict[str, torch.Tensor]] = []

    def on_step_end(self, args, state, control, model=None, **kwargs):
        self.weights.append({n: p.detach().clone() for n, p in model.named_parameters()})


def reply_length(completions, **kwargs) -> list[float]:
    """A reward that differs inside groups, so that a step changes the weights."""
    return [float(len(c)) for c in completions]


def _server_args(tmp_path: Path, server: StandInVLLM, **overrides: Any) -> MultiTurnGRPOConfig:
    options = {
        "use_vllm": True,
        "vllm_mode": "server",
        "vllm_server_base_url": server.url,
        "vllm_group_port": free_port(),
        "async_generation": True,
        "max_staleness": 1,
        "partial_rollout_tokens": 3,
        "max_steps": 3,
        "temperature": 1.5,
        **overrides,
    }
    return grpo_args(tmp_path, **options)


def test_async_training_through_the_server_pushes_the_trainers_weights(
    tiny_babyai: Path, tmp_path: Path, monkeypatch
) -> None:
    use_gloo_transfer(monkeypatch)
    model, tokenizer = load_model(tiny_babyai)
    snapshot = Snapshot()
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        with torch.no_grad():  # other weights on the server until the first push
            server.model.get_input_embeddings().weight.normal_()
        args = _server_args(tmp_path, server)
        trainer = MultiTurnGRPOTrainer(
            model, args, processing_class=tokenizer, callbacks=[snapshot], reward_funcs=[reply_length]
        )
        generation = trainer.async_generation
        trainer.train()

        # one push at the start, then one per optimiser step (weight_sync_steps 1), all over TRL's client
        assert server.weight_syncs == 4 and generation.worker is None
        assert server.prefix_cache_resets == 4  # TRL's sync_weights resets the cache after each push
        assert generation.skipped_trl_pushes >= 1  # TRL's own push before each rollout is off
        served = dict(server.model.named_parameters())
        last = snapshot.weights[-1]
        assert set(served) == set(last) and all(torch.equal(served[n], p) for n, p in last.items())
        first = snapshot.weights[0]
        assert not all(torch.equal(first[n], p) for n, p in last.items())  # the steps changed the weights
        # every turn went to the server; batch i (consumed at version i) was sampled by versions i-1 or i
        assert server.requests and all(len(body["prompt"]) >= 1 for body in server.requests)
        assert [h["trainer_version"] for h in generation.history] == [0, 1, 2]
        assert [h["stale_groups"] for h in generation.history] == [0, 0, 0]
        for episode in trainer.last_episodes:
            sampled = [v for v in episode.versions if v != ENV_VERSION]
            assert sampled and all(1 <= v <= 2 for v in sampled), episode.versions
            assert len(episode.versions) == len(episode.completion_ids)
        logged = {k for row in trainer.state.log_history for k in row}
        assert {"async/correction_mean", "async/stale_groups"} <= logged
        trainer.engine.close()


def test_a_stale_group_never_reaches_the_loss_and_the_correction_is_applied_once(
    tiny_babyai: Path, tmp_path: Path, monkeypatch
) -> None:
    from agentgym_train.rollout.versioned import correction_weights

    use_gloo_transfer(monkeypatch)
    model, tokenizer = load_model(tiny_babyai)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        with torch.no_grad():  # the server samples from other weights than the trainer's: the correction bites
            for p in server.model.parameters():
                p.add_(0.05 * torch.randn_like(p))
        args = _server_args(tmp_path, server, vllm_importance_sampling_correction=True)
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[reply_length])
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1
        generation = trainer.async_generation
        generation.version = 5  # group 0 sampled by version 3 (stale at max_staleness 1), group 1 by 4
        generation.worker = StampingWorker(trainer, [3, 4], trainer.vllm_generation)  # through the stand-in server
        weigh = generation.correct
        seen: dict[str, torch.Tensor] = {}

        def keep_and_weigh(output: dict[str, Any]) -> None:
            seen["advantages"] = output["advantages"].clone()
            seen["trl_ratio"] = output["importance_sampling_ratio"].clone()
            weigh(output)

        generation.correct = keep_and_weigh
        batch = next(iter(trainer.get_train_dataloader()))
        out = trainer._generate_and_score_completions(batch)

    mask = assert_first_group_masked(trainer, out)
    # the correction once: TRL's ratio (the same weight) set to 1, ours in the advantages, equal to it by hand
    assert torch.equal(out["importance_sampling_ratio"], torch.ones_like(out["importance_sampling_ratio"]))
    by_hand = correction_weights(
        out["old_per_token_logps"],
        out["sampling_per_token_logps"],
        mask,
        "token_truncate",
        args.vllm_importance_sampling_clip_min,
        args.vllm_importance_sampling_clip_max,
    )
    assert torch.allclose(out["advantages"], seen["advantages"].unsqueeze(1) * by_hand)
    live = mask.bool()
    assert torch.allclose(seen["trl_ratio"][live], by_hand[live])  # TRL's ratio was this same weight
    assert (by_hand[live] != 1).any()
    assert_first_group_moves_no_loss(trainer, out)
    trainer.engine.close()


def test_the_colocated_engine_is_refused_and_server_mode_is_accepted(tmp_path: Path) -> None:
    base = {"output_dir": str(tmp_path), "report_to": "none", "async_generation": True, "use_vllm": True}
    with pytest.raises(ValueError, match="vllm_mode='colocate'"):
        MultiTurnGRPOConfig(**base, vllm_mode="colocate")
    MultiTurnGRPOConfig(**base, vllm_mode="server")


def test_two_processes_generate_through_one_server_and_push_together(tiny_babyai: Path, tmp_path: Path) -> None:
    from train_helpers import launch_two_processes, rank_reports

    model, tokenizer = load_model(tiny_babyai)
    with StandInVLLM(model, tokenizer=tokenizer) as server:
        with torch.no_grad():  # other weights on the server until the first push
            server.model.get_input_embeddings().weight.normal_()
        launch_two_processes("async_vllm_job.py", tiny_babyai, tmp_path, server.url, free_port())
        served = sum(p.detach().double().sum().item() for p in server.model.state_dict().values())
    reports = rank_reports(tmp_path)
    # one push at the start and one per optimiser step, every rank taking part in each: the server received 4
    assert server.weight_syncs == 4
    for report in reports:
        assert report["pushes"] == [0, 1, 2, 3] and report["thread_stopped"]
        assert report["indices"] == [0, 1, 2] and report["versions"] == [0, 1, 2] and report["stale"] == [0, 0, 0]
        assert set(report["last_batch_versions"]) <= {1, 2} and report["last_batch_versions"]
    # each rank played its own slice of the plan, through the one server; the ranks and the server end with the
    # same weights
    assert reports[0]["tasks"] != reports[1]["tasks"]
    assert reports[0]["checksum"] == pytest.approx(reports[1]["checksum"]) == pytest.approx(served)
