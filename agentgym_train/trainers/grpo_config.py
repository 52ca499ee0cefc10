"""`MultiTurnGRPOConfig`: TRL's `GRPOConfig` plus the multi-turn rollout's settings (envs, turns, budgets),
the advantage estimator, the long-horizon guards and where envs run. `MultiTurnGRPOTrainer` reads it."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

import torch
from trl import GRPOConfig

from agentgym_train import estimators as adv
from agentgym_train import gigpo
from agentgym_train.trainers import sampling
from agentgym_train.trainers import truncation as trunc


@dataclass
class MultiTurnGRPOConfig(GRPOConfig):
    """`GRPOConfig` plus what a multi-turn env rollout needs.

    `max_completion_length` is the token budget of a whole episode after the prompt (all replies and
    all observations); `max_turn_tokens` bounds one reply.
    """

    env_id: str = field(default="AgentGym/BabyAI-GoToLocal-v0", metadata={"help": "Gymnasium id of the env."})
    env_kwargs: dict | str | None = field(
        default=None, metadata={"help": "Keyword arguments for gym.make (a dict, or JSON on the command line)."}
    )
    train_split: str = field(default="train", metadata={"help": "Split whose tasks make the default dataset."})
    max_turns: int | None = field(
        default=None, metadata={"help": "Turn limit (None: the env's default; a MaxTurnScheduler overrides it)."}
    )
    max_turn_tokens: int | None = field(
        default=None, metadata={"help": "Most tokens in one reply (None: the scenario's default_max_turn_tokens)."}
    )
    eval_max_turns: int | None = field(
        default=None,
        metadata={
            "help": "Turn limit of the evaluation during training, the same at every stage of a max-turn schedule "
            "so that eval curves compare across stages (None: max_turns, or the env's default when that is None)."
        },
    )
    system_prompt: str | None = field(default=None, metadata={"help": "Overrides the scenario's system prompt."})
    num_env_workers: int = field(default=8, metadata={"help": "Threads stepping envs concurrently."})
    env_timeout: float | None = field(
        default=300.0,
        metadata={
            "help": "Seconds one env call (make+reset, or step) may take; past it the episode fails (None: no limit)."
        },
    )
    rollout_mode: str = field(
        default="lockstep",
        metadata={
            "help": "How a rollout's episodes advance: 'lockstep' (each turn every live episode generates in one call, "
            "then every env steps) or 'async' (each episode goes back to the generator as soon as its env call "
            "returns; sharded generation, FSDP/ZeRO-3 or vLLM across processes, falls back to lockstep, logged)."
        },
    )
    action_format: str | None = field(
        default=None,
        metadata={
            "help": "How the model acts: None (each scenario's own format: Action: lines, tags, ...) or 'tools' (the "
            "chat template's native tool calls on the scenario's tool schemas, answered as tool turns; envs in "
            "this process only). Evaluation during training uses the same format."
        },
    )
    context: str | None = field(
        default=None,
        metadata={
            "help": "What each reply is sampled from (agentgym_wrappers.get_context): None or 'full' (the episode's "
            "whole chat), 'window:k' (system prompt, task, last k turns) or 'summary:k' (the window plus the "
            "scenario's compact state); a managed context needs sample_unit='turn'. Evaluation and endpoints take "
            "the same --context."
        },
    )
    sample_unit: str = field(
        default="episode",
        metadata={
            "help": "What one training sample is: 'episode' (the episode's one sequence) or 'turn' (each reply with "
            "the context it was sampled from; its episode's advantage, or its own slice of a per-token one). See "
            "agentgym_train.trainers.turn_samples."
        },
    )
    turn_weighting: str = field(
        default="episode",
        metadata={
            "help": "sample_unit='turn': 'episode' (each episode weighs the same in all, its turns sharing it) or "
            "'turn' (each turn sample weighs 1, as verl-agent and SkyRL's step-wise training)."
        },
    )
    env_backend: str = field(
        default="threads",
        metadata={
            "help": "Where rollout envs live: 'threads' (this process, stepped on threads) or 'ray' (Ray actors on "
            "the cluster at ray_address, agentgym_envs.cluster; needs the [ray] extra)."
        },
    )
    ray_address: str | None = field(
        default=None,
        metadata={"help": "The Ray cluster of env_backend='ray' (host:port, 'auto'; None: RAY_ADDRESS)."},
    )
    ray_resource: str | None = field(
        default=None,
        metadata={
            "help": "env_backend='ray': a custom resource every env actor asks for (one unit each), so that envs land "
            "only on the nodes started with it (`ray start --resources '{\"env_node\": 64}'`), not beside the GPUs."
        },
    )
    ray_envs_per_actor: int | None = field(
        default=None,
        metadata={"help": "env_backend='ray': envs one actor holds (None: what the scenario declares)."},
    )
    sampler: str = field(
        default="cached",
        metadata={
            "help": "'cached' keeps each episode's KV cache between turns (agentgym_train.rollout.backends.cached); "
            "'generate' calls transformers' generate on the whole history every turn (supports every "
            "generation option, e.g. repetition_penalty and min_p)."
        },
    )
    generation_chunk_size: int | None = field(
        default=None, metadata={"help": "Episodes per generate call with sampler='generate' (None: all)."}
    )
    advantage_estimator: str = field(
        default="grpo",
        metadata={
            "help": "grpo (TRL's group normalisation, KL as TRL's loss term), rloo (leave-one-out baseline, "
            "KL as TRL's loss term), reinforce++ or reinforce++_baseline (per-token k1 KL times beta folded "
            "into the reward, returns-to-go, whitened over the global batch), gigpo (GRPO plus a step-level "
            "advantage over turns of a group that start from the same env state), or any name registered with "
            "agentgym_train.estimators.register_estimator."
        },
    )
    reinforce_gamma: float = field(
        default=1.0, metadata={"help": "REINFORCE++ discount per model token (returns-to-go)."}
    )
    gigpo_omega: float = field(default=1.0, metadata={"help": "GiGPO: weight of the step-level advantage."})
    gigpo_gamma: float = field(
        default=0.95, metadata={"help": "GiGPO: discount per turn of the step-level returns-to-go (the paper's 0.95)."}
    )
    gigpo_norm: str = field(
        default="mean_norm",
        metadata={
            "help": "GiGPO: the normalisation of both levels, 'mean_norm' (x - group mean, verl-agent's default) "
            "or 'mean_std_norm' (over the group's std + 1e-6 as well). TRL's scale_rewards is GRPO's: refused "
            "for gigpo unless left at its default."
        },
    )
    gigpo_episode_stats: str = field(
        default="per_episode",
        metadata={
            "help": "GiGPO: what the episode level's group mean and std count, 'per_episode' (each episode once: the "
            "paper's Eq. 3) or 'step_rows' (each episode once per turn it played: verl-agent's rows)."
        },
    )
    turn_gamma: float = field(
        default=1.0,
        metadata={
            "help": "Discount per turn of the token-level returns (reinforce++, PPO's GAE), on top of their gamma per "
            "model token; the env's payments during an episode sit on the last token of the turn that earned them "
            "(GiGPO discounts its turns with gigpo_gamma). 1 with a terminal-only reward: as without turns."
        },
    )
    truncated_replies: str = field(
        default="train",
        metadata={
            "help": "A reply the reply budget cut (no end token): 'train' (as any reply), 'mask_reply' (its tokens "
            "leave the loss), 'mask_episode' (its episode's tokens leave the loss). See "
            "agentgym_train.trainers.truncation."
        },
    )
    budget_truncated_episodes: str = field(
        default="train",
        metadata={"help": "An episode the episode budget (max_completion_length) ended: 'train' or 'mask_episode'."},
    )
    overlong_buffer_len: int = field(
        default=0,
        metadata={
            "help": "DAPO's soft overlong penalty: L_cache, the tokens before the budget over which the penalty falls "
            "linearly from 0 to -1 (0: off). Added to the episode reward as the reward function overlong_penalty."
        },
    )
    overlong_penalty_factor: float = field(default=1.0, metadata={"help": "Weight of the overlong penalty."})
    dynamic_sampling: bool = field(
        default=False,
        metadata={
            "help": "DAPO's dynamic sampling: a group whose episodes all score alike (dynamic_sampling_metric) "
            "leaves the batch and a group of a new train task takes its slot, until none is left or the cap is "
            "spent (see sampling.py). Only for group-relative estimators (grpo, rloo, gigpo, reinforce++_baseline)."
        },
    )
    dynamic_sampling_metric: str = field(
        default="success",
        metadata={
            "help": "What must vary inside a group for it to stay: 'success' (the env's success flag: DAPO's accuracy "
            "filter) or 'reward' (the weighted reward the loss sees; an overlong penalty or a score that falls with "
            "the episode's length then makes an all-success group count as varied)."
        },
    )
    dynamic_sampling_max_extra: float | None = field(
        default=1.0,
        metadata={
            "help": "Dynamic sampling's cap: most new groups per rollout batch, as a multiple of its groups, rounded "
            "down (0: none, only the choice at the cap applies; None: no cap, DAPO's max_num_gen_batches <= 0)."
        },
    )
    dynamic_sampling_at_cap: str = field(
        default="keep",
        metadata={
            "help": "Zero-variance groups still in the batch when the cap is spent: 'keep' (they train with "
            "advantage 0 and the KL term), 'drop' (their tokens leave the loss, as a failed env's group), or "
            "'error' (raise, as DAPO's max_num_gen_batches)."
        },
    )
    overlong_length: str = field(
        default="reply",
        metadata={
            "help": "What the overlong penalty measures: 'reply' (each reply against max_turn_tokens, the mean over "
            "the episode's replies) or 'episode' (the completion against max_completion_length)."
        },
    )
    beta: float = field(
        default=0.001,
        metadata={
            "help": "KL coefficient against the reference model; 0.001 is the AgentGym-RL paper's (TRL's default "
            "is 0, which loads no reference model). For reinforce++ it weighs the KL penalty in the reward."
        },
    )
    max_completion_length: int | None = field(default=1024, metadata={"help": "Token budget of an episode."})
    loss_type: str = field(
        default="grpo",
        metadata={
            "help": "TRL loss type. 'grpo' averages each episode's model tokens, then the episodes: the AgentGym-RL "
            "paper's objective (its verl takes the token mean of each micro-batch of one episode). 'bnpo' equals "
            "it only at per_device_train_batch_size 1 (it averages the tokens of each micro-batch); 'dapo' "
            "averages every token of the accumulated batch (later verl's loss_agg_mode=token-mean), where failed "
            "episodes, which run to the turn limit, outweigh short successful ones on the tokens every reply "
            "shares ('Action:', end of turn) and drive the policy to noise."
        },
    )
    vllm_importance_sampling_mode: str = field(
        default="token_truncate",
        metadata={
            "help": "TRL's correction for vLLM's logprobs differing from the trainer's. 'token_truncate' weighs each "
            "model token by its own ratio, capped at vllm_importance_sampling_clip_max. TRL's default, "
            "'sequence_mask', drops an episode whose ratio summed over all its tokens passes the cap: small "
            "per-token differences over a multi-turn episode of thousands of tokens add up past it."
        },
    )
    async_generation: bool = field(
        default=False,
        metadata={
            "help": "Generation beside training (agentgym_train.trainers.async_grpo): a worker process plays rollout "
            "batches ahead with the newest weights it has while the trainer trains on finished ones; per-token "
            "policy versions, stale groups dropped, the loss corrected per token (AReaL's decoupled objective)."
        },
    )
    max_staleness: int = field(
        default=1,
        metadata={
            "help": "async_generation: most policy versions a group's oldest token may lag the trainer; older groups "
            "leave the loss, counted in async/stale_groups (0: synchronous training through the worker)."
        },
    )
    weight_sync_steps: int = field(
        default=1, metadata={"help": "async_generation: optimiser steps between two weight syncs (one version each)."}
    )
    partial_rollout_tokens: int | None = field(
        default=16,
        metadata={
            "help": "async_generation: tokens the worker samples between two looks for new weights, so a reply can "
            "continue under new weights (a partial rollout; None: new weights only between generator calls)."
        },
    )
    restore_callback_states_from_checkpoint: bool = field(
        default=True, metadata={"help": "Resume the max-turn scheduler's state from checkpoints."}
    )

    def __post_init__(self) -> None:
        if isinstance(self.env_kwargs, str):
            self.env_kwargs = json.loads(self.env_kwargs)
        estimator = adv.get_estimator(self.advantage_estimator)  # a ValueError naming the registered ones
        if not estimator.any_aggregation and self.multi_objective_aggregation != "sum_then_normalize":
            raise ValueError(
                f"multi_objective_aggregation={self.multi_objective_aggregation!r} is GRPO's; "
                f"{self.advantage_estimator} takes the weighted sum of the rewards ('sum_then_normalize')"
            )
        trunc.check_settings(self)
        self._check_gigpo(estimator)
        self._check_dynamic_sampling(estimator)
        if self.sampler not in ("cached", "generate"):
            raise ValueError(f"sampler must be 'cached' or 'generate', got {self.sampler!r}")
        if self.bf16 is None and not torch.cuda.is_available():
            self.bf16 = False  # TRL defaults to bf16, which transformers refuses on a CPU-only machine
        super().__post_init__()
        from agentgym_train.trainers import async_grpo, turn_samples

        async_grpo.check_settings(self)
        turn_samples.check_settings(self)

    def _check_gigpo(self, estimator: adv.Estimator) -> None:
        if self.gigpo_norm not in gigpo.GIGPO_NORMS:
            raise ValueError(f"gigpo_norm must be one of {gigpo.GIGPO_NORMS}, got {self.gigpo_norm!r}")
        if self.gigpo_episode_stats not in gigpo.GIGPO_EPISODE_STATS:
            raise ValueError(
                f"gigpo_episode_stats must be one of {gigpo.GIGPO_EPISODE_STATS}, got {self.gigpo_episode_stats!r}"
            )
        if estimator.name == "gigpo" and self.scale_rewards not in ("group", True):
            raise ValueError(
                f"scale_rewards={self.scale_rewards!r} is GRPO's normalisation; gigpo normalises both of its levels "
                "by gigpo_norm ('mean_norm': no std, 'mean_std_norm'): leave scale_rewards at 'group'"
            )

    def _check_dynamic_sampling(self, estimator: adv.Estimator) -> None:
        extra = self.dynamic_sampling_max_extra
        if extra is not None and (extra < 0 or not math.isfinite(extra)):
            raise ValueError(f"dynamic_sampling_max_extra must be >= 0, or None for no cap; got {extra}")
        if self.dynamic_sampling_metric not in sampling.METRICS:
            raise ValueError(
                f"dynamic_sampling_metric must be one of {sampling.METRICS}, got {self.dynamic_sampling_metric!r}"
            )
        if self.dynamic_sampling_at_cap not in sampling.AT_CAP:
            raise ValueError(
                f"dynamic_sampling_at_cap must be one of {sampling.AT_CAP}, got {self.dynamic_sampling_at_cap!r}"
            )
        if self.dynamic_sampling and not estimator.group_relative:
            relative = tuple(name for name, e in adv.ESTIMATORS.items() if e.group_relative)
            raise ValueError(
                f"dynamic_sampling drops groups whose episodes all score alike, which carry no signal only under a "
                f"group-relative estimator; advantage_estimator={self.advantage_estimator!r} is not one (it "
                f"normalises over the batch): use one of {relative}, or dynamic_sampling=False"
            )
