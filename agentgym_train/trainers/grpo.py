"""`MultiTurnGRPOTrainer`: multi-turn GRPO on text envs, built on TRL's `rollout_func` and `env_mask`.

TRL's `GRPOTrainer` samples each dataset row `num_generations` times in a row, calls `rollout_func`
with the batch, scores it with the reward functions, normalises rewards per group and trains on the
completion tokens where `env_mask` is 1. This trainer supplies the rollout: dataset rows name tasks
(`env_id`, `task_id`, `split`, `seed`), each row's G copies become G episodes of that task (same
reset arguments, so a group compares like with like). The reward of an episode is TRL's: the
`reward_weights`-weighted sum of the `reward_funcs` (default `[episode_return]`, the env's return,
read from the rollout's extra fields), and every `advantage_estimator` uses that sum. Loss, KL,
clipping, importance sampling, PEFT, the reference model and distributed gathering are TRL's.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch
from transformers import TrainerCallback
from transformers.trainer_callback import ExportableState
from trl import GRPOTrainer
from trl.models.utils import disable_gradient_checkpointing, unwrap_model_for_generation

from agentgym_train import estimators as adv
from agentgym_train.models.tiny import keep_master_weights
from agentgym_train.rollout import Episode, RolloutEngine, Task, TurnGenerator, make_generator
from agentgym_train.scheduler import MaxTurnScheduler
from agentgym_train.trainers import sampling
from agentgym_train.trainers import truncation as trunc
from agentgym_train.trainers import turn_samples as turns
from agentgym_train.trainers.grpo_config import MultiTurnGRPOConfig


def episode_return(completions: list[Any], episode_return: list[float], **kwargs: Any) -> list[float]:
    """The reward function: the episode's return, as the rollout reported it."""
    return [float(r) for r in episode_return]


def task_dataset(
    env_id: str,
    split: str = "train",
    num_tasks: int | None = None,
    seed: int = 0,
    env_kwargs: dict[str, Any] | None = None,
) -> Any:
    """A `datasets.Dataset` with one row per task of `split` (the first `num_tasks` when given).

    Columns: `prompt` (a readable label; TRL requires the column), `env_id`, `task_id`, `split`, `seed`.
    """
    import gymnasium as gym
    from datasets import Dataset

    import agentgym_envs  # noqa: F401
    from agentgym_envs.core import task_rows

    env = gym.make(env_id, **(env_kwargs or {}))
    task_ids = [str(task_id) for _, task_id in task_rows(env.unwrapped, split, num_tasks)]
    count = len(task_ids)
    env.close()
    return Dataset.from_dict(
        {
            "prompt": [f"{env_id} {t}" for t in task_ids],
            "env_id": [env_id] * count,
            "task_id": task_ids,
            "split": [split] * count,
            "seed": [seed + i for i in range(count)],
        }
    )


def _env_pool(args: MultiTurnGRPOConfig, accelerator: Any = None) -> Any | None:
    """The Ray env pool of `env_backend='ray'` (None: envs in this process); with `ray_address: local` under
    several processes, one private cluster that the main process starts and the others join."""
    if args.env_backend not in ("threads", "ray"):
        raise ValueError(f"env_backend must be 'threads' or 'ray', got {args.env_backend!r}")
    if args.env_backend == "threads":
        named = [k for k in ("ray_address", "ray_resource", "ray_envs_per_actor") if getattr(args, k) is not None]
        if named:
            raise ValueError(f"{', '.join(named)} given with env_backend='threads': set env_backend='ray' to use Ray")
        return None
    from agentgym_envs.cluster import RayEnvPool, join_local_cluster

    if args.ray_address == "local" and accelerator is not None and accelerator.num_processes > 1:

        def from_main(value: Any) -> Any:
            from accelerate.utils import broadcast_object_list

            box = [value]
            broadcast_object_list(box, from_process=0)
            return box[0]

        join_local_cluster(accelerator.is_main_process, from_main)
    return RayEnvPool(args.ray_address, resource=args.ray_resource, envs_per_actor=args.ray_envs_per_actor)


class RolloutCount(TrainerCallback, ExportableState):
    """The trainer's count of training rollout batches, saved in checkpoints: the clock of the max-turn schedule
    and of dynamic sampling's task draws, so that a resumed run continues both, with or without a scheduler."""

    def __init__(self, rollouts: int = 0):
        self.rollouts = rollouts

    def state(self) -> dict[str, Any]:
        return {"args": {}, "attributes": {"rollouts": self.rollouts}}


class MultiTurnGRPOTrainer(GRPOTrainer):
    """GRPO over multi-turn episodes of a text env.

    Args:
        model: A model instance, or a path / hub id (a tiny model directory loads its own tokenizer).
        args: A `MultiTurnGRPOConfig`.
        train_dataset: Rows naming tasks (`task_dataset(...)`); default: every task of `args.train_split`.
        reward_funcs: Default `[episode_return]`; any TRL reward function receives the rollout's
            extra fields (`episode_return`, `success`, `turns`, `truncated`, ...) as keyword arguments.
        callbacks: e.g. `[MaxTurnScheduler.preset("babyai")]`; schedulers are bound to the rollout engine.
        peft_config: LoRA etc.; then only the adapter trains and the reference is the adapter disabled.

    Logged per step (besides TRL's): `episode/return`, `episode/success`, `episode/turns`,
    `episode/truncated` (turn limit or budget), `episode/budget_truncated`, `episode/invalid_reply_rate`,
    `episode/env_errors` (episodes ended by a failing env, all processes; their groups leave the loss),
    `episode/truncated_replies` (replies the reply budget cut), `episode/masked_truncated_replies`,
    `episode/masked_truncated_episodes`, `episode/masked_budget_truncated` (left out of the loss by the
    `truncated_replies` and `budget_truncated_episodes` guards), `episode/overlong_penalty`,
    `rollout/max_turns`, `rollout/generation_time`, `rollout/env_time`, `rollout/env_time_share`, and with
    `dynamic_sampling` the `sampling/*` shares and costs (`agentgym_train.trainers.sampling.Refill`).
    """

    _tag_names = ["trl", "grpo", "agentgym", "multi-turn"]

    def __init__(
        self,
        model: Any,
        args: MultiTurnGRPOConfig | None = None,
        train_dataset: Any = None,
        eval_dataset: Any = None,
        reward_funcs: Any = None,
        processing_class: Any = None,
        callbacks: list[Any] | None = None,
        optimizers: tuple[Any, Any] = (None, None),
        peft_config: Any = None,
    ):
        args = args or MultiTurnGRPOConfig(output_dir="agentgym-grpo")
        if not isinstance(args, MultiTurnGRPOConfig):
            raise TypeError(f"args must be a MultiTurnGRPOConfig, got {type(args).__name__}")
        if processing_class is None and isinstance(model, str):
            from agentgym_train.models.tiny import load_tokenizer

            processing_class = load_tokenizer(model)
        if train_dataset is None:
            train_dataset = task_dataset(args.env_id, args.train_split, seed=args.seed, env_kwargs=args.env_kwargs)
        self._rollout_rows: list[dict[str, Any]] = []
        self.last_episodes: list[Episode] = []
        self.rollout_batches = 0  # training rollouts generated so far: the max-turn schedule's clock
        self._defer_logps = False  # sample_unit='turn': TRL's passes over the episodes are made on the turns
        self.rewards: torch.Tensor | None = None  # the last rollout's rewards, all processes (see _calculate_rewards)
        self._scored: torch.Tensor | None = None  # rewards per function that dynamic sampling computed already
        with warnings.catch_warnings():
            # `rollout_func` is marked experimental in TRL; this trainer is built on it deliberately.
            warnings.filterwarnings("ignore", message="You are using 'rollout_func'")
            super().__init__(
                model=model,
                reward_funcs=reward_funcs or [episode_return],
                args=args,
                train_dataset=train_dataset,
                eval_dataset=eval_dataset,
                processing_class=processing_class,
                callbacks=callbacks,
                optimizers=optimizers,
                peft_config=peft_config,
                rollout_func=self._rollout,
            )
        # bf16 weights under plain DDP would train nothing at small learning rates: float32 masters, autocast over them
        keep_master_weights(self.model, args, self.is_fsdp_enabled or self.is_deepspeed_enabled)
        self.engine = RolloutEngine(
            self._tokenizer,
            max_turns=args.max_turns,
            max_completion_length=args.max_completion_length,
            max_turn_tokens=args.max_turn_tokens,
            env_kwargs=args.env_kwargs,
            system_prompt=args.system_prompt,
            num_env_workers=args.num_env_workers,
            eos_token_ids=self.eos_token_ids,
            chat_template_kwargs=args.chat_template_kwargs,
            env_timeout=args.env_timeout,
            env_pool=_env_pool(args, self.accelerator),
            record_states=adv.get_estimator(args.advantage_estimator).record_states,
            rollout_mode=args.rollout_mode,
            action_format=args.action_format,
            context=args.context,
        )
        if args.overlong_buffer_len > 0:  # one more reward function, as TRL adds an environment's get_reward
            self.reward_funcs.append(trunc.overlong_penalty)
            self.reward_func_names.append("overlong_penalty")
            self.reward_processing_classes.append(None)
            self.reward_weights = torch.cat([self.reward_weights, torch.tensor([args.overlong_penalty_factor])])
        self.add_callback(RolloutCount())
        self._bind_schedulers()
        self.async_generation = None  # generation beside training (async_grpo), with a worker process
        if args.async_generation:
            from agentgym_train.trainers.async_grpo import AsyncGeneration, WeightSync

            self.async_generation = AsyncGeneration(self)
            self.add_callback(WeightSync(self.async_generation))

    # ---- the max-turn schedule counts rollout batches (restored with the callbacks on resume) -------
    def _schedulers(self) -> list[MaxTurnScheduler]:
        return [c for c in self.callback_handler.callbacks if isinstance(c, MaxTurnScheduler)]

    def _bind_schedulers(self) -> None:
        for scheduler in self._schedulers():
            scheduler.bind(self.engine)

    def _clocks(self) -> list[Any]:
        """The callbacks that save the count of rollout batches (schedulers and `RolloutCount`)."""
        return [c for c in self.callback_handler.callbacks if isinstance(c, (MaxTurnScheduler, RolloutCount))]

    def _load_callback_state(self) -> None:
        super()._load_callback_state()
        self._bind_schedulers()
        counts = [clock.rollouts for clock in self._clocks()]
        if counts:  # the checkpoint's count of rollout batches
            self.rollout_batches = max(counts)

    # ---- rollout, rewards and advantages ------------------------------------------------------------
    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        training = self.model.training
        if training and self.async_generation is not None:  # the plan's rows: the worker may have played them
            inputs = self.async_generation.local_rows(self.rollout_batches)
        # TRL hands `rollout_func` only the prompts; the rows (which name the tasks) are kept here.
        self._rollout_rows = inputs
        per_turn = self.args.sample_unit == "turn"
        self._defer_logps = per_turn
        try:
            if training:  # one call per rollout batch, however many optimiser steps the batch then feeds
                for scheduler in self._schedulers():
                    scheduler.before_rollout(self.rollout_batches)
                output = super()._generate_and_score_completions(inputs)
            else:  # evaluation: a fixed horizon, not the schedule's current stage
                fixed = self.args.eval_max_turns if self.args.eval_max_turns is not None else self.args.max_turns
                stage_turns, self.engine.max_turns = self.engine.max_turns, fixed
                try:
                    output = super()._generate_and_score_completions(inputs)
                finally:
                    self.engine.max_turns = stage_turns
        finally:
            self._defer_logps = False
        samples = turns.TurnSamples(self, output) if per_turn else None
        self._log_importance_sampling(samples.samples if per_turn else output)
        if training:
            self.rollout_batches += 1
            for scheduler in self._schedulers():
                scheduler.after_rollout(self.rollout_batches)
            for clock in self._clocks():
                clock.rollouts = self.rollout_batches
        estimator = adv.get_estimator(self.args.advantage_estimator)  # the registry: no branch per estimator
        output["advantages"] = estimator.fn(self._estimator_input(output, len(inputs))).to(output["advantages"])
        if training and self.async_generation is not None:
            self.async_generation.correct(output)
        return samples.batch(output) if per_turn else output

    def _estimator_input(self, output: dict[str, Any], n: int) -> adv.EstimatorInput:
        """What the registered estimator sees of this scored batch (`advantages.EstimatorInput`)."""
        from accelerate.utils import gather_object

        mask = output["completion_mask"]
        if output.get("tool_mask") is not None:
            mask = mask * output["tool_mask"]
        metrics = self._metrics["train" if self.model.training else "eval"]
        return adv.EstimatorInput(
            rewards=self.rewards,
            group_size=self.num_generations if self.model.training else self.num_generations_eval,
            rows=self._local_rows(n),
            grpo=output["advantages"],
            mask=mask,
            episodes=self.last_episodes,
            config=self.args,
            kl_coef=self.beta,
            reduce=self._reduce_sum,
            gather=gather_object if self.accelerator.num_processes > 1 else None,
            kl=lambda: self._kl_in_reward(output, mask),
            log=lambda name, value: metrics[name].append(value),
        )

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        """TRL's rewards per function (all processes); keeps their weighted sum as `self.rewards`, the reward
        every estimator uses (NaN where every function returned None)."""
        per_func, self._scored = self._scored, None  # dynamic sampling scored the batch in the rollout
        if per_func is None:
            per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if self.args.overlong_buffer_len > 0:  # the penalty alone does not make an unscorable episode scorable
            unscorable = torch.isnan(per_func[:, :-1]).all(dim=1)
            per_func[unscorable, -1] = torch.nan
        weighted = (per_func * self.reward_weights.to(per_func.device).unsqueeze(0)).nansum(dim=1)
        self.rewards = torch.where(torch.isnan(per_func).all(dim=1), torch.nan, weighted)
        return per_func

    def _local_rows(self, n: int) -> slice:
        start = self.accelerator.process_index * n
        return slice(start, start + n)

    def local_rewards(self, n: int) -> torch.Tensor:
        """This process's `n` rewards of the last rollout (TRL's weighted reward sum)."""
        return self.rewards[self._local_rows(n)]

    def _reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        return self.accelerator.reduce(tensor, reduction="sum") if self.accelerator.num_processes > 1 else tensor

    def _kl_in_reward(self, output: dict[str, Any], mask: torch.Tensor) -> torch.Tensor | None:
        """(B, T) k1 KL of the sampling policy against the reference on the model tokens (None when beta is 0),
        for estimators with the KL in the reward; TRL's loss then adds no KL term (`_compute_loss`)."""
        if self.beta == 0.0:
            return None
        kl = (self._rollout_policy_logps(output) - output.pop("ref_per_token_logps")) * mask
        totals = self._reduce_sum(torch.stack([kl.sum(), mask.sum().to(kl.dtype)]))
        self._metrics["train" if self.model.training else "eval"]["kl"].append(
            (totals[0] / totals[1].clamp(min=1)).item()
        )
        return kl

    def turn_payments(self, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T) the env's payments during the last rollout's episodes on the model tokens (`mask`) of the turns
        that earned them, and the tokens that end a turn (`advantages.turn_payments`)."""
        episodes = self.last_episodes
        turns = [e.turn_rewards for e in episodes]
        return adv.turn_payments(turns, [e.reply_spans for e in episodes], mask)

    def _rollout_policy_logps(self, output: dict[str, Any]) -> torch.Tensor:
        """Per-token logprobs of the completion under the policy that sampled it (the training engine's
        forward pass, not the sampler's numbers; TRL's `old_per_token_logps` when it computed them)."""
        if output.get("old_per_token_logps") is not None:
            return output["old_per_token_logps"]
        ids = torch.cat([output["prompt_ids"], output["completion_ids"]], dim=1)
        attention = torch.cat([output["prompt_mask"], output["completion_mask"]], dim=1)
        batch = self.args.per_device_train_batch_size if self.model.training else self.args.per_device_eval_batch_size
        with torch.no_grad(), disable_gradient_checkpointing(self.model, self.args.gradient_checkpointing_kwargs):
            logps, _, _ = self._get_per_token_logps_and_entropies(
                self.model, ids, attention, output["completion_ids"].size(1), batch_size=batch
            )
        return logps

    def _get_per_token_logps_and_entropies(self, model: Any, input_ids: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        if self._defer_logps:  # sample_unit='turn': made on the turn samples (`turn_samples.TurnSamples`)
            logits_to_keep = args[1] if len(args) > 1 else kwargs["logits_to_keep"]
            return input_ids.new_zeros((input_ids.size(0), logits_to_keep), dtype=torch.float32), None, None
        return super()._get_per_token_logps_and_entropies(model, input_ids, *args, **kwargs)

    def _compute_loss(self, model: Any, inputs: dict[str, Any]) -> torch.Tensor:
        if not adv.get_estimator(self.args.advantage_estimator).kl_in_reward:
            return super()._compute_loss(model, inputs)
        beta, self.beta = self.beta, 0.0  # REINFORCE++: the KL is in the advantages, not a loss term
        try:
            return super()._compute_loss(model, inputs)
        finally:
            self.beta = beta

    def _generate(self, prompts: list[Any]) -> Any:
        out = super()._generate(prompts)
        prompts[:] = [row["prompt"] for row in self._rollout_rows]  # dynamic sampling's new tasks, for TRL's logs
        return out

    def _rollout(self, prompts: list[Any], trainer: GRPOTrainer) -> dict[str, Any]:
        rows = self._rollout_rows
        if len(rows) != len(prompts):
            raise RuntimeError(f"rollout got {len(prompts)} prompts for {len(rows)} dataset rows")
        generation = self.async_generation if self.model.training else None
        episodes = generation.episodes(self.rollout_batches, rows) if generation is not None else self._play(rows)
        flat: set[int] = set()
        if self.args.dynamic_sampling and self.model.training:  # rows of refilled slots are replaced in place
            episodes, refill = sampling.refill(self, rows, episodes, self._play)
            flat = set(refill.masked)  # zero-variance groups left at the cap, out of the loss (`drop`)
            for name, value in refill.metrics().items():
                self._metrics["train"][name].append(value)
        self.last_episodes = episodes
        self._log_rollout(episodes)
        start = self.accelerator.process_index * len(episodes)
        dropped = [
            failed or (start + j) // self.num_generations in flat
            for j, failed in enumerate(self._failed_groups(episodes))
        ]
        if generation is not None:  # groups older than max_staleness versions leave the loss
            stale = generation.stale_groups(episodes, self.num_generations)
            dropped = [d or s for d, s in zip(dropped, stale, strict=True)]
            self._metrics["train"]["async/stale_groups"].append(generation.history[-1]["stale_groups"])
            self._metrics["train"]["async/version"].append(generation.version)
        guarded, penalty = trunc.guard_rollout(episodes, self.args)
        self._log_guards(episodes, guarded, penalty)
        return {
            "prompt_ids": [e.prompt_ids for e in episodes],
            "completion_ids": [e.completion_ids for e in episodes],
            "logprobs": [e.logprobs for e in episodes],
            "env_mask": [[0] * len(g.env_mask) if d else g.env_mask for g, d in zip(guarded, dropped, strict=True)],
            **sampling.reward_fields(episodes, penalty),
        }

    def _play(self, rows: list[dict[str, Any]]) -> list[Episode]:
        """The episodes of these dataset rows' tasks (one per row), under the current policy."""
        tasks = [Task(r["env_id"], r["task_id"], r.get("split"), r.get("seed")) for r in rows]
        if self.use_vllm:  # TRL synced the weights to vLLM before calling this; no local copy is gathered
            return self.engine.run(tasks, self._sampler(self.vllm_generation))
        with (
            unwrap_model_for_generation(
                self.model_wrapped,
                self.accelerator,
                gather_deepspeed3_params=self.args.ds3_gather_for_generation,
                generation_kwargs=self.generation_kwargs,
                gradient_checkpointing_kwargs=self.args.gradient_checkpointing_kwargs,
            ) as unwrapped_model,
            torch.no_grad(),
            self._dist.summon_full_params(self.model_wrapped, recurse=False),
        ):
            return self.engine.run(tasks, self._sampler(unwrapped_model))

    def _failed_groups(self, episodes: list[Episode]) -> list[bool]:
        """Per local episode: is it in a group (over all processes) where an env failed? Those groups
        leave the loss (every token masked): a failure's 0 is the infrastructure's, not the policy's, and
        would bias the group's baseline for the episodes beside it too."""
        group = self.num_generations if self.model.training else self.num_generations_eval
        failed = torch.tensor([e.env_error is not None for e in episodes], device=self.accelerator.device)
        groups = self.accelerator.gather(failed).view(-1, group).any(dim=1)
        start = self.accelerator.process_index * len(episodes)
        return [bool(groups[(start + j) // group]) for j in range(len(episodes))]

    def _sampler(self, policy: Any) -> TurnGenerator:
        """The rollout's backend over `policy` (the unwrapped model, or TRL's `VLLMGeneration` with vLLM);
        with sharded weights it generates in lockstep on every process (`make_generator`)."""
        return make_generator(
            policy,
            self._tokenizer.pad_token_id,
            self.engine.eos_token_ids,
            backend="vllm" if self.use_vllm else self.args.sampler,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            repetition_penalty=self.repetition_penalty,
            min_p=self.min_p,
            chunk_size=self.args.generation_chunk_size,
            accelerator=self.accelerator,
            ds3_gather_for_generation=self.args.ds3_gather_for_generation,
        )

    def _log_importance_sampling(self, output: dict[str, Any]) -> None:
        """Shares of what TRL's vLLM importance sampling masks or caps (`sampling.importance_sampling_counts`)."""
        counts = sampling.importance_sampling_counts(
            output,
            self.vllm_importance_sampling_mode,
            (self.vllm_importance_sampling_clip_min, self.vllm_importance_sampling_clip_max),
        )
        if counts is not None:  # None: no vLLM, or the correction is off
            metrics = self._metrics["train" if self.model.training else "eval"]
            for name, value in sampling.importance_sampling_shares(self._reduce_sum(counts).tolist()).items():
                metrics[name].append(value)

    def _log_guards(self, episodes: list[Episode], guarded: list[trunc.Guarded], penalty: list[float]) -> None:
        """The truncation guards' shares (`truncation.shares`), over all processes."""
        counts = torch.tensor(trunc.counts(episodes, guarded, penalty), dtype=torch.float64)
        totals = self._reduce_sum(counts.to(self.accelerator.device)).tolist()
        metrics = self._metrics["train" if self.model.training else "eval"]
        for name, value in trunc.shares(totals, self.args.overlong_buffer_len > 0).items():
            metrics[name].append(value)

    def _log_rollout(self, episodes: list[Episode]) -> None:
        mode = "train" if self.model.training else "eval"
        device = self.accelerator.device
        local = torch.tensor(
            [
                len(episodes),
                sum(e.episode_return for e in episodes),
                sum(e.success for e in episodes),
                sum(e.turns for e in episodes),
                sum(e.truncated or e.budget_truncated for e in episodes),
                sum(e.budget_truncated for e in episodes),
                sum(e.invalid_replies for e in episodes),
                sum(e.env_error is not None for e in episodes),
                self.engine.timing["generation"],
                self.engine.timing["env"],
            ],
            dtype=torch.float64,
            device=device,
        )
        total = self.accelerator.gather(local.unsqueeze(0)).sum(dim=0).tolist()
        n, ret, success, turns, truncated, budget, invalid, env_errors, gen_time, env_time = total
        processes = self.accelerator.num_processes
        metrics = self._metrics[mode]
        metrics["episode/return"].append(ret / max(n, 1))
        metrics["episode/success"].append(success / max(n, 1))
        metrics["episode/turns"].append(turns / max(n, 1))
        metrics["episode/truncated"].append(truncated / max(n, 1))
        metrics["episode/budget_truncated"].append(budget / max(n, 1))
        metrics["episode/invalid_reply_rate"].append(invalid / max(turns, 1))
        metrics["episode/env_errors"].append(env_errors)
        metrics["rollout/max_turns"].append(float(self.engine.max_turns or 0))
        metrics["rollout/generation_time"].append(gen_time / processes)
        metrics["rollout/env_time"].append(env_time / processes)
        metrics["rollout/env_time_share"].append(env_time / max(gen_time + env_time, 1e-9))
