"""Async GRPO: generation beside training, with bounded staleness (`MultiTurnGRPOConfig.async_generation`).

A generation worker (`agentgym_train.rollout.worker`, a process of its own with the HF sampler) plays
the rollout batches ahead of the trainer with the newest weights it has, while the trainer trains on
finished ones:

- **Plan.** Which tasks a rollout batch holds is a pure function of its index (`batch_rows`): the
  dataset's rows in one permutation per pass, seeded by `seed` and the pass, each repeated
  `num_generations` times, every process taking its slice as TRL's sampler gives it. The worker can
  so play batch `b + k` before the trainer reaches it, and a resumed run regenerates exactly the
  groups it had buffered (nothing buffered is saved; the same tasks, freshly sampled, take their
  place).
- **Versions.** The policy version is the count of weight syncs: `global_step // weight_sync_steps`,
  so a resumed run knows it from its step. After every `weight_sync_steps` optimiser steps the weights
  go to the worker, which takes them before its next job and between segments of a reply
  (`partial_rollout_tokens`): a reply can span an update and each token records its version.
- **Lookahead and staleness.** When the trainer takes batch `b` it makes sure batches `b .. b + L` are
  submitted, `L = floor(max_staleness * weight_sync_steps / optimiser steps per batch)`, so a group is
  generated at most about `max_staleness` versions behind the trainer. At consumption, a group whose
  oldest sampled token is more than `max_staleness` versions behind leaves the loss (all its tokens
  masked, as a failed env's group) and is counted (`async/stale_groups`); `max_staleness=0` is
  synchronous training through the worker.
- **Correction (AReaL's decoupled objective, with TRL's per-token truncation).** TRL's loss is PPO's
  clipped ratio against `old_per_token_logps`. Here those are the *current* policy's logprobs when the
  batch is consumed (the proximal policy), computed by one forward pass, and each token's advantage is
  multiplied by `w_t = trunc(pi_current(t) / pi_behaviour(t))`, the behaviour logprobs being the
  sampler's. Since `w_t >= 0`, `-min(r A w, clip(r) A w) = w * -min(r A, clip(r) A)`: the loss is
  AReaL's decoupled PPO, `w_t * PPO-clip(pi_theta / pi_prox)`, with the behaviour weight capped as
  TRL's `token_truncate` caps vLLM's (`vllm_importance_sampling_mode`, `..._clip_min`, `..._clip_max`).
  Plain truncated importance sampling (the PPO ratio against the behaviour logprobs) would centre the
  trust region on a policy up to `max_staleness` updates old, where the clip removes the gradient of
  most stale tokens; the decoupled form clips around the current policy and costs one forward pass.
- **vLLM in server mode** (`use_vllm=True, vllm_mode="server"`). Generation goes to the server from a
  thread of each trainer process (`worker.ServerGenerationWorker`; why a thread and not the worker
  process: that module's docstring), each rank its own slice of the plan, in requests of its own (no
  collective). The weights go to the server from the trainer, over TRL's transfer
  (`VLLMGeneration.sync_weights`: `VLLMClient.update_named_params` over its NCCL group, then
  `reset_prefix_cache`), once at the start (the server may hold other weights: a resumed run's are the
  checkpoint's) and after every `weight_sync_steps` optimiser steps; TRL's own push before each rollout
  is turned off, since it would change the server's weights under the generation thread at no version.
  Every rank's generation stops at a segment boundary (`WeightGate`) and the ranks meet before the push
  and after it, so each segment of `partial_rollout_tokens` tokens was sampled by one known version:
  the versions per token are exact, as with the CPU worker. TRL's own importance-sampling ratio for vLLM
  (`vllm_importance_sampling_correction`) is the same per-token weight as the correction above; it is
  set to 1 so that the correction is applied once. Evaluation during training samples from the server
  too, with the newest weights pushed (at most `weight_sync_steps - 1` optimiser steps old).
"""

from __future__ import annotations

import math
import tempfile
import weakref
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback

from agentgym_train.rollout.episode import Episode, Task
from agentgym_train.rollout.versioned import correction_weights, oldest_version
from agentgym_train.rollout.worker import GenerationWorker, ServerGenerationWorker, WorkerSpec

#: TRL loss types whose per-token loss scales with a non-negative weight on the advantage.
LOSS_TYPES = ("grpo", "bnpo", "dr_grpo", "dapo")


def check_settings(args: Any) -> None:
    """Refuse what async generation cannot do yet, naming the setting and what would work."""
    if args.max_staleness < 0:
        raise ValueError(f"max_staleness must be >= 0 versions, got {args.max_staleness}")
    if args.weight_sync_steps < 1:
        raise ValueError(f"weight_sync_steps must be >= 1 optimiser steps, got {args.weight_sync_steps}")
    if args.partial_rollout_tokens is not None and args.partial_rollout_tokens < 1:
        raise ValueError(f"partial_rollout_tokens must be None or >= 1, got {args.partial_rollout_tokens}")
    if not args.async_generation:
        return
    refused = {
        "dynamic_sampling": (args.dynamic_sampling, "its refills play new groups inside the trainer's step"),
        "vllm_mode='colocate'": (
            args.use_vllm and args.vllm_mode != "server",
            "a colocated engine shares the trainer's process and device, so it cannot generate while the trainer "
            "trains; serve the model (`vllm serve`) and set vllm_mode='server'",
        ),
        "env_backend='ray'": (args.env_backend == "ray", "the worker process does not connect to a Ray pool yet"),
    }
    for name, (on, why) in refused.items():
        if on:
            raise ValueError(f"async_generation does not support {name}: {why}; set async_generation=False")
    if args.loss_type not in LOSS_TYPES:
        raise ValueError(
            f"async_generation weighs each token's advantage by its behaviour correction, which is the decoupled "
            f"objective only for the PPO-clip losses {LOSS_TYPES}; got loss_type={args.loss_type!r}"
        )
    if args.vllm_importance_sampling_mode not in ("token_truncate", "token_mask"):
        raise ValueError(
            "async_generation corrects per token: vllm_importance_sampling_mode must be 'token_truncate' or "
            f"'token_mask', got {args.vllm_importance_sampling_mode!r}"
        )


def batch_rows(dataset: Any, index: int, groups: int, group_size: int, seed: int, shuffle: bool) -> list[dict]:
    """The global rows of rollout batch `index`: `groups` tasks, each repeated `group_size` times (see the module
    docstring); group `k` overall is row `order_p[k mod n]` of pass `p = k // n`."""
    n = len(dataset)
    rows = []
    for k in range(index * groups, (index + 1) * groups):
        sweep, at = divmod(k, n)
        order = np.random.default_rng([seed, sweep]).permutation(n) if shuffle else np.arange(n)
        row = dataset[int(order[at])]
        rows += [dict(row) for _ in range(group_size)]  # one dict per row: TRL writes the rollout's fields into each
    return rows


def registering_modules(env_ids: set[str]) -> list[str]:
    """The modules whose import registers these env ids (their entry points' modules), for the worker process."""
    import gymnasium as gym

    modules = []
    for env_id in sorted(env_ids):
        entry = gym.spec(env_id).entry_point
        module = entry.partition(":")[0] if isinstance(entry, str) else getattr(entry, "__module__", None)
        if module and module not in modules:
            modules.append(module)
    return modules


class AsyncGeneration:
    """The trainer's side of async generation: the plan, the worker, weight syncs, staleness and correction.

    Args:
        trainer: The `MultiTurnGRPOTrainer` (its args, dataset, engine settings and accelerator).
    """

    def __init__(self, trainer: Any):
        if getattr(trainer, "use_vllm", False) and trainer.args.vllm_mode != "server":  # the config refuses it too
            raise ValueError("async_generation with vLLM needs vllm_mode='server' (a colocated engine cannot)")
        if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
            raise ValueError(
                "async_generation sends the worker the model's whole state_dict, which a sharded model (FSDP, "
                "DeepSpeed) does not hold on one process: train with plain DDP or async_generation=False"
            )
        if hasattr(trainer.accelerator.unwrap_model(trainer.model), "peft_config"):
            raise ValueError(
                "async_generation rebuilds the policy in the worker from its config and full weights, and a PEFT "
                "model's state_dict holds adapter names: train without peft_config or with async_generation=False"
            )
        self.trainer = trainer
        args = trainer.args
        self.max_staleness = args.max_staleness
        self.sync_steps = args.weight_sync_steps
        steps = max(1, args.steps_per_generation * trainer.num_iterations // args.gradient_accumulation_steps)
        self.lookahead = math.floor(self.max_staleness * self.sync_steps / steps)
        self.worker: GenerationWorker | ServerGenerationWorker | None = None
        #: vLLM in server mode: generation through the server, weights over TRL's transfer (module docstring).
        self.server = bool(getattr(trainer, "use_vllm", False))
        self._trl_push: Any = None
        self.skipped_trl_pushes = 0  # TRL's pushes before each rollout, turned off (server mode)
        if self.server:
            vllm = trainer.vllm_generation
            self._trl_push = vllm.sync_weights

            def skip() -> None:
                self.skipped_trl_pushes += 1

            vllm.sync_weights = skip
        self.submitted = -1  # the last batch index submitted
        self.version = 0
        #: Per consumed batch: index, version, stale groups, worker statistics (tests and logs read it).
        self.history: list[dict[str, Any]] = []

    # ---- the plan ----------------------------------------------------------------------------------
    def local_rows(self, index: int) -> list[dict]:
        t = self.trainer
        per_rank = t.args.per_device_train_batch_size * t.args.steps_per_generation
        total = per_rank * t.accelerator.num_processes
        rows = batch_rows(
            t.train_dataset, index, total // t.num_generations, t.num_generations, t.args.seed, t.args.shuffle_dataset
        )
        start = t.accelerator.process_index * per_rank
        return rows[start : start + per_rank]

    # ---- the worker --------------------------------------------------------------------------------
    def _state_dict(self) -> dict[str, torch.Tensor]:
        return self.trainer.accelerator.unwrap_model(self.trainer.model).state_dict()

    def _engine_kwargs(self) -> dict[str, Any]:
        t = self.trainer
        engine = t.engine
        return {
            "max_turns": engine.max_turns,
            "max_completion_length": engine.max_completion_length,
            "max_turn_tokens": engine.max_turn_tokens,
            "stop_strings": engine.stop_strings,
            "env_kwargs": engine.env_kwargs,
            "system_prompt": engine.system_prompt,
            "num_env_workers": engine.num_env_workers,
            "eos_token_ids": engine.eos_token_ids,
            "chat_template_kwargs": t.args.chat_template_kwargs,
            "env_timeout": engine.env_timeout,
            "record_states": engine.record_states,
            "rollout_mode": engine.rollout_mode,
            "action_format": engine.action_format,
        }

    def _start(self) -> None:
        t = self.trainer
        self.version = t.state.global_step // self.sync_steps  # a resumed run's version, from its step
        if self.server:
            self._start_server()
            return
        cuda = t.accelerator.device.type == "cuda"
        spec = WorkerSpec(
            model_config=t.accelerator.unwrap_model(t.model).config,
            tokenizer=t._tokenizer,
            # on a GPU the worker samples on the trainer's device, in the dtype the trainer computes in
            dtype=torch.bfloat16 if t.args.bf16 and cuda else next(t.model.parameters()).dtype,
            engine_kwargs=self._engine_kwargs(),
            sampler_kwargs={
                "backend": t.args.sampler,
                "temperature": t.temperature,
                "top_p": t.top_p,
                "top_k": t.top_k,
                "repetition_penalty": t.repetition_penalty,
                "min_p": t.min_p,
                "chunk_size": t.args.generation_chunk_size,
            },
            pad_token_id=t._tokenizer.pad_token_id,
            segment_tokens=t.args.partial_rollout_tokens,
            imports=registering_modules({t.args.env_id, *t.train_dataset["env_id"]}),
            device=str(t.accelerator.device) if cuda else "cpu",
        )
        folder = tempfile.mkdtemp(prefix=f"agentgym-weights-rank{t.accelerator.process_index}-")
        self.worker = GenerationWorker(spec, folder)
        self.worker.start(self.version, self._state_dict())
        # a run that raises never reaches on_train_end: stop the worker when this object goes, or at exit
        weakref.finalize(self, self.worker.close)

    def _start_server(self) -> None:
        from trl.generation.vllm_client import VLLMClient

        from agentgym_train.rollout.backends.vllm import ServerGeneration, VLLMTurnGenerator

        t = self.trainer
        args = t.args
        url = args.vllm_server_base_url or f"http://{args.vllm_server_host}:{args.vllm_server_port}"
        # this process's own client (the trainer's, on the main process only, pushes the weights)
        client = VLLMClient(base_url=url, group_port=args.vllm_group_port, connection_timeout=args.vllm_server_timeout)
        backend = VLLMTurnGenerator(ServerGeneration.like(t.vllm_generation, client), t.engine.eos_token_ids)
        self.worker = ServerGenerationWorker(
            self._engine_kwargs(), t._tokenizer, lambda: backend, segment_tokens=args.partial_rollout_tokens
        )
        self.worker.start(self.version, self._push_to_server)  # the server may hold other weights (a resumed run)
        weakref.finalize(self, self.worker.close)

    def _push_to_server(self) -> None:
        """TRL's transfer of the trainer's weights to the server, with every rank's generation stopped: the ranks
        meet before it (each has stopped at a segment boundary) and after it (none samples before it is done)."""
        accelerator = self.trainer.accelerator
        accelerator.wait_for_everyone()
        self._trl_push()
        accelerator.wait_for_everyone()

    def sync(self, global_step: int) -> bool:
        """After an optimiser step: send the weights when `weight_sync_steps` steps have passed since the last."""
        if self.worker is None or global_step // self.sync_steps <= self.version:
            return False
        self.version = global_step // self.sync_steps
        if self.server:
            self.worker.push(self.version, self._push_to_server)
        else:
            self.worker.send_weights(self.version, self._state_dict())
        return True

    def close(self) -> None:
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    # ---- a rollout batch ----------------------------------------------------------------------------
    def episodes(self, index: int, rows: list[dict]) -> list[Episode]:
        """Batch `index`'s episodes (`rows` are its local rows), submitting the batches up to `index + lookahead`."""
        if self.worker is None:
            self._start()
            self.submitted = index - 1
        for ahead in range(max(self.submitted + 1, index), index + self.lookahead + 1):
            ahead_rows = rows if ahead == index else self.local_rows(ahead)
            tasks = [Task(r["env_id"], r["task_id"], r.get("split"), r.get("seed")) for r in ahead_rows]
            self.worker.submit(ahead, tasks, self.horizon(ahead))
            self.submitted = ahead
        episodes, stats = self.worker.result(index)
        self.history.append({**stats, "index": index, "trainer_version": self.version})
        self.history[-1]["tasks"] = [e.task.task_id for e in episodes]
        self.trainer.engine.timing = {"generation": stats["generation_time"], "env": stats["env_time"]}
        self.trainer._metrics["train"]["async/max_turns"].append(
            float(stats.get("max_turns") or 0)
        )  # the batch's horizon
        return episodes

    def horizon(self, index: int) -> int | None:
        """The turn limit of batch `index`: the max-turn schedule's stage in force when the batch is submitted, at
        trainer batch `index - lookahead` (a stage applies to the episodes started after it begins); the same in a
        resumed run, which submits the buffered batches again."""
        schedulers = self.trainer._schedulers()
        if not schedulers:
            return self.trainer.engine.max_turns
        return schedulers[-1].max_turns_at(max(0, index - self.lookahead))

    def stale_groups(self, episodes: list[Episode], group: int) -> list[bool]:
        """Per local episode: is its group (over all processes) older than `max_staleness` versions?"""
        t = self.trainer
        oldest = [oldest_version(e) for e in episodes]
        versions = torch.tensor([self.version if v is None else v for v in oldest], device=t.accelerator.device)
        groups = t.accelerator.gather(versions).view(-1, group).min(dim=1).values
        stale = (self.version - groups) > self.max_staleness
        start = t.accelerator.process_index * len(episodes)
        flags = [bool(stale[(start + j) // group]) for j in range(len(episodes))]
        self.history[-1]["stale_groups"] = int(stale.sum())
        return flags

    def correct(self, output: dict[str, Any]) -> None:
        """Weigh each token's advantage by its behaviour correction, with the current policy as the proximal one
        (see the module docstring); logs the weights' mean and the share the truncation changed."""
        t = self.trainer
        mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"]
        current = t._rollout_policy_logps(output)
        output["old_per_token_logps"] = current
        if output.get("importance_sampling_ratio") is not None:  # TRL's vLLM correction: the same weight, once
            output["importance_sampling_ratio"] = torch.ones_like(output["importance_sampling_ratio"])
        args = t.args
        weights = correction_weights(
            current,
            output["sampling_per_token_logps"],
            mask,
            args.vllm_importance_sampling_mode,
            args.vllm_importance_sampling_clip_min,
            args.vllm_importance_sampling_clip_max,
        )
        raw = torch.exp((current - output["sampling_per_token_logps"]) * mask)
        advantages = output["advantages"]
        output["advantages"] = (advantages.unsqueeze(1) if advantages.dim() == 1 else advantages) * weights
        sums = torch.stack(
            [
                (weights * mask).sum(),
                ((weights != raw) & mask.bool()).sum().to(weights.dtype),
                mask.sum().to(weights.dtype),
            ]
        )
        sums = t._reduce_sum(sums)
        metrics = t._metrics["train"]
        metrics["async/correction_mean"].append((sums[0] / sums[2].clamp(min=1)).item())
        metrics["async/correction_clipped"].append((sums[1] / sums[2].clamp(min=1)).item())


class WeightSync(TrainerCallback):
    """Sends the weights to the generation worker after every `weight_sync_steps` optimiser steps and stops
    the worker when training ends."""

    def __init__(self, generation: AsyncGeneration):
        self.generation = generation

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.generation.sync(state.global_step)

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.generation.close()
