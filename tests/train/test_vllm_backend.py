"""Generation through TRL's vLLM integration, against a STAND-IN vLLM server (vLLM cannot run here).

TRL's real `VLLMGeneration` and `VLLMClient` run unchanged; only the server at the other end of the
HTTP connection is `vllm_standin.StandInVLLM`, and the NCCL weight transfer is replaced by the
stand-in's `receive_weights` (see that module).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from train_helpers import grpo_args
from vllm_standin import StandInVLLM

from agentgym_train.rollout.vllm_backend import VLLMTurnGenerator
from agentgym_train.tiny import load_model
from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer


@pytest.fixture
def trl_sees_vllm(monkeypatch: pytest.MonkeyPatch):
    """Let TRL build its vLLM objects without vLLM installed; weights go to the stand-in's model."""
    import trl.generation.vllm_client as client
    import trl.generation.vllm_generation as generation

    monkeypatch.setattr(client, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(generation, "is_vllm_available", lambda *a, **k: True)
    monkeypatch.setattr(client.VLLMClient, "init_communicator", lambda self, device=0: None)

    def attach(server: StandInVLLM) -> None:
        monkeypatch.setattr(
            client.VLLMClient, "update_named_params", lambda self, meta, params: server.receive_weights(meta, params)
        )

    return attach


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
