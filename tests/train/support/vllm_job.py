"""Multi-turn rollouts through TRL's vLLM integration on 2 processes (run by test_vllm_backend.py).

TRL's real `VLLMGeneration` runs, built by the real `MultiTurnGRPOTrainer`, against a STAND-IN for vLLM
(vllm_standin.py): the stand-in server in `server` mode (in the main process; only it talks HTTP), a
stand-in `vllm.LLM` with tensor parallelism 2 in `colocate` mode. Both reply with `named_reply(prompt)`,
so a reply that went to another prompt than its own is seen.

1. `engine`: a rollout of two scripted scenarios with different stop strings, whose episodes end after
   as many turns as their task id says, chosen so that the ranks' live episodes differ every turn:
   rank 0 has 5 (4 of A, 1 of B) on turn 1, then 3 of A, then 1; rank 1 has 3 (1 of A, 2 of B), then
   2 of B, then 1. (Without padding TRL would give rank 1 the replies to rank 0's contexts 3 and 4.)
2. `train`: one GRPO step on BabyAI whose episodes end after 1 turn on rank 0 and 3 on rank 1.

Every rank writes OUT/rank-<i>.json: each episode's turns (the context sent and the reply ids kept),
its stop strings, and the vLLM calls it can see (the server's requests on the main process in server
mode; each rank's own engine's calls in colocate mode).

`colocate-sleep` (run under an FSDP2 or ZeRO-3 accelerate config): each rank its own colocated
stand-in engine (no tensor parallelism) in sleep mode, so every weight push gathers the sharded
parameters (FSDP2's `full_tensor()`, ZeRO-3's `GatheredParameters`: collectives over both processes).
First two GRPO steps whose episodes end after 1 turn on rank 0 and 3 on rank 1, then a scripted
rollout (`SLEEP_EPISODES`) in which rank 0's episodes (two stop sets) all end on turn 1 and rank 1's
run 3 turns with 2, 2, then 1 stop sets live. Each rank reports its engine's sleep, wake, push and
generate events in order, and the weights last pushed beside the trained ones.

Usage: vllm_job.py MODEL_DIR OUTPUT_DIR MODE  (MODE: server, colocate or colocate-sleep)
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import toy_env  # noqa: F401  (registers the "raw" reply parser)

from agentgym_envs.core import TextEnv

STOPS = {"AgentGymTest/CountdownA-v0": ("\nObservation:",), "AgentGymTest/CountdownB-v0": ("\nStop here:",)}
#: Per rank, (scenario, turns) of each episode of the `engine` rollout.
EPISODES = {
    0: [("A", 3), ("A", 2), ("A", 2), ("A", 1), ("B", 1)],
    1: [("A", 1), ("B", 3), ("B", 2)],
}
#: Per rank, (scenario, turns) of each episode of the `colocate-sleep` scripted rollout.
SLEEP_EPISODES = {
    0: [("A", 1), ("B", 1)],
    1: [("A", 3), ("B", 2), ("B", 1)],
}
TURN_TOKENS = 8  # a named reply (6 tokens and its end token) fits


class Countdown(TextEnv):
    """Ends after as many turns as the task id's first field says, whatever the replies (`turns-label`)."""

    default_max_turns = 5
    action_format = "raw"
    system_prompt = "Reply to each line."

    def tasks(self, split: str = "train") -> list[str]:
        return [f"{k}-{i}" for k in (1, 2, 3) for i in range(10)]

    def split_of(self, task_id: str) -> str | None:
        return "train"

    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        self._left = int(task_id.partition("-")[0])
        return f"Task {task_id}: {self._left} turns left.", {"category": "countdown", "instruction": "reply"}

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._left -= 1
        done = self._left == 0
        info = {"valid_action": True, "success": done}
        return f"{self._left} turns left.", float(done), done, False, info


class CountdownA(Countdown):
    stop_strings = STOPS["AgentGymTest/CountdownA-v0"]


class CountdownB(Countdown):
    stop_strings = STOPS["AgentGymTest/CountdownB-v0"]


for _id, _cls in (("AgentGymTest/CountdownA-v0", CountdownA), ("AgentGymTest/CountdownB-v0", CountdownB)):
    if _id not in gym.registry:
        gym.register(id=_id, entry_point=_cls)


def turns_of(episode: Any) -> list[dict[str, list[int]]]:
    """Each model turn: the context it was sampled from and the ids kept (a mask-1 span)."""
    sequence = episode.prompt_ids + episode.completion_ids
    mask = [0] * len(episode.prompt_ids) + episode.env_mask
    spans, start = [], None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append({"context": sequence[:start], "reply": sequence[start:i]})
            start = None
    return spans


def report_of(episodes: list[Any]) -> list[dict[str, Any]]:
    return [
        {"task": [e.task.env_id, e.task.task_id], "turns": e.turns, "stop": list(e.stop_strings), "spans": turns_of(e)}
        for e in episodes
    ]


def visible_calls(mode: str, server: Any, trainer: Any) -> list[dict[str, Any]] | None:
    """The vLLM calls this rank can see, each as its prompts and stop strings (None: none visible here)."""
    if mode == "server":
        return None if server is None else [{"prompts": b["prompt"], "stop": b.get("stop")} for b in server.requests]
    return [{"prompts": c["prompts"], "stop": c.get("stop")} for c in trainer.vllm_generation.llm.calls]


def patch_trl(mode: str, alphabet: list[int], end: int, weight_names: list[str] | None = None) -> None:
    """Let TRL build its vLLM objects without vLLM: the colocated engine is the stand-in `vllm.LLM`."""
    import trl.generation.vllm_client as client
    import trl.generation.vllm_generation as generation
    from vllm_standin import StandInLLM, StandInSamplingParams

    client.is_vllm_available = generation.is_vllm_available = lambda *a, **k: True
    client.VLLMClient.init_communicator = lambda self, device=0: None  # NCCL: see vllm_standin
    if mode.startswith("colocate"):
        generation.LLM = functools.partial(StandInLLM, alphabet=alphabet, end=end, weight_names=weight_names)
        generation.SamplingParams = StandInSamplingParams


def countdown_tasks(episodes: list[tuple[str, int]], rank: int) -> list[Any]:
    """The scripted rollout's tasks: each episode ends after its `turns`, whatever the replies."""
    from agentgym_train.rollout.episode import Task

    return [
        Task(f"AgentGymTest/Countdown{kind}-v0", f"{turns}-{rank}{j}", "train", 0)
        for j, (kind, turns) in enumerate(episodes)
    ]


def main_sleep(model_dir: str, output_dir: str) -> None:
    """`colocate-sleep`: see the module docstring."""
    import os

    import torch
    from sharded_job import treat_cpu_processes_as_gpus
    from train_helpers import grpo_args

    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout.backends.vllm import VLLMTurnGenerator
    from agentgym_train.rollout.engine import RolloutEngine
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    treat_cpu_processes_as_gpus()  # accelerate applies FSDP2 to the CPU processes
    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    model, tokenizer = load_model(model_dir)
    alphabet = tokenizer.convert_tokens_to_ids(list("abcdefghijklmnop"))
    eos = model.generation_config.eos_token_id
    end = int(eos[0] if isinstance(eos, list) else eos)
    initial = {name: float(p.detach().double().sum()) for name, p in model.named_parameters()}
    patch_trl("colocate", alphabet, end, weight_names=list(initial))
    args = grpo_args(
        Path(output_dir),
        use_vllm=True,
        vllm_mode="colocate",
        vllm_enable_sleep_mode=True,
        per_device_train_batch_size=4,
        num_generations=4,
        max_steps=2,
        max_turn_tokens=TURN_TOKENS,
    )
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_position])
    llm = trainer.vllm_generation.llm

    # 1. two GRPO steps whose episodes end after 1 turn on rank 0 and 3 on rank 1
    trainer.engine.max_turns = 1 + 2 * rank
    trainer.train()
    trainer.engine.close()
    train_events = len(llm.events)

    # 2. a scripted rollout: rank 0's episodes (two stop sets) end on turn 1, rank 1's run 3 turns
    engine = RolloutEngine(
        tokenizer, max_completion_length=256, max_turn_tokens=TURN_TOKENS, eos_token_ids=trainer.engine.eos_token_ids
    )
    generate = VLLMTurnGenerator(trainer.vllm_generation, engine.eos_token_ids, trainer.accelerator)
    episodes = report_of(engine.run(countdown_tasks(SLEEP_EPISODES[rank], rank), generate))
    engine.close()
    pushed = {name: float(t.double().sum()) for name, t in llm.model.last.items()}
    # the trained weights, gathered from their shards (collectives: every rank, in the same order)
    trained = {}
    for name, p in trainer.vllm_generation.model.named_parameters():
        with trainer._dist.gather_params([p]):  # ZeRO-3 (a no-op under FSDP2, whose DTensors gather below)
            full = p.full_tensor() if hasattr(p, "full_tensor") else p
            trained[name] = float(full.detach().double().sum())
    report = {
        "rank": rank,
        "world_size": trainer.accelerator.num_processes,
        "fsdp_version": trainer._dist.fsdp_version,
        "zero_stage": trainer._dist.zero_stage,
        "global_step": trainer.state.global_step,
        "train": report_of(trainer.last_episodes),
        "engine": episodes,
        "events": llm.events,
        "train_events": train_events,  # events[:train_events] were the GRPO steps'
        "weight_syncs": llm.weight_syncs,
        "asleep": sorted(llm.sleeping),
        "initial": initial,
        "pushed": pushed,
        "trained": trained,
    }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


def main(model_dir: str, output_dir: str, mode: str) -> None:
    import os

    import torch
    import trl.generation.vllm_client as client
    from train_helpers import grpo_args
    from vllm_standin import StandInVLLM

    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout.backends.vllm import VLLMTurnGenerator
    from agentgym_train.rollout.engine import RolloutEngine
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    torch.set_num_threads(1)
    rank = int(os.environ["RANK"])
    model, tokenizer = load_model(model_dir)
    alphabet = tokenizer.convert_tokens_to_ids(list("abcdefghijklmnop"))
    assert len(set(alphabet)) == 16 and tokenizer.unk_token_id not in alphabet, "one token per letter"
    eos = model.generation_config.eos_token_id
    end = int(eos[0] if isinstance(eos, list) else eos)
    patch_trl(mode, alphabet, end)
    with contextlib.ExitStack() as stack:
        server = None
        if mode == "server" and rank == 0:
            server = stack.enter_context(StandInVLLM(model, tokenizer=tokenizer, alphabet=alphabet))
            client.VLLMClient.update_named_params = lambda self, meta, params: server.receive_weights(meta, params)
        # only the main process connects (TRL's VLLMClient); the others never read the URL
        url = server.url if server is not None else "http://unused.invalid"
        vllm = {"vllm_server_base_url": url} if mode == "server" else {"vllm_tensor_parallel_size": 2}
        args = grpo_args(
            Path(output_dir),
            use_vllm=True,
            vllm_mode=mode,
            per_device_train_batch_size=4,
            num_generations=4,
            max_steps=1,
            max_turn_tokens=TURN_TOKENS,
            **vllm,
        )
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
        assert trainer.accelerator.process_index == rank

        # 1. scripted episodes, uneven across ranks and turns, two stop sets
        engine = RolloutEngine(
            tokenizer,
            max_completion_length=256,
            max_turn_tokens=TURN_TOKENS,
            eos_token_ids=trainer.engine.eos_token_ids,
        )
        generate = VLLMTurnGenerator(trainer.vllm_generation, engine.eos_token_ids, trainer.accelerator)
        engine_episodes = report_of(engine.run(countdown_tasks(EPISODES[rank], rank), generate))
        engine.close()
        engine_calls = len(visible_calls(mode, server, trainer) or [])

        # 2. one GRPO step whose episodes end after 1 turn on rank 0 and 3 on rank 1
        trainer.engine.max_turns = 1 + 2 * rank
        trainer.train()
        trainer.engine.close()
        calls = visible_calls(mode, server, trainer)
        if mode == "server":
            weights = server.weight_syncs if server is not None else None
        else:
            weights = len(trainer.vllm_generation.llm.model.loaded)
        report = {
            "rank": rank,
            "world_size": trainer.accelerator.num_processes,
            "global_step": trainer.state.global_step,
            "end": end,
            "alphabet": alphabet,
            "engine": engine_episodes,
            "train": report_of(trainer.last_episodes),
            "calls": calls,
            "engine_calls": engine_calls,  # calls[:engine_calls] were the scripted rollout's
            "weights": weights,
        }
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


def by_length(completions, **kwargs):
    """A reward that differs inside groups, so that the step has gradients."""
    return [float(len(c)) for c in completions]


def by_position(completions, **kwargs):
    """A reward that differs inside groups even when their replies are alike (a group's named replies are:
    its episodes share the task), so that the steps move the weights."""
    return [float(i) for i in range(len(completions))]


if __name__ == "__main__":
    from train_helpers import close_process_group

    if sys.argv[3] == "colocate-sleep":
        main_sleep(*sys.argv[1:3])
    else:
        main(*sys.argv[1:4])
    close_process_group()
