"""The packaged paper and accelerate configs load, validate and say what the paper's scripts say (no model)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import yaml

import agentgym_envs  # noqa: F401
from agentgym_train.config_files import DEFAULT_CONFIG
from agentgym_train.pipeline import load_configs
from agentgym_train.scheduler import PRESETS

CONFIGS = DEFAULT_CONFIG.parent
GPUS = 8
#: AgentGym-RL's examples/train/ScalingInter-RL/<task>_train.sh: train_batch_size (tasks per rollout),
#: rollout.n, ppo_mini_batch_size (tasks per update), ppo_epochs, rollout.max_tokens, max_response_length
PAPER = {
    "babyai": (32, 4, 8, 2, 512, 8192),
    "sciworld": (16, 8, 8, 1, 200, 8192),
    "deepsearch": (32, 4, 8, 2, 512, 8192),
    "textcraft": (32, 8, 8, 2, 512, 10240),
    "webarena": (32, 4, 4, 2, 512, 14098),
}


@pytest.mark.parametrize("scenario", sorted(PAPER))
def test_paper_config_matches_the_papers_script(scenario: str) -> None:
    path = CONFIGS / "paper" / f"{scenario}.yaml"
    raw = yaml.safe_load(path.read_text())
    assert raw["bf16"] is True and raw["use_vllm"] is True  # GPU settings, switched off below to parse on CPU
    pipeline, args = load_configs(path, ["--bf16", "false"])
    tasks, n, mini, epochs, turn_tokens, budget = PAPER[scenario]
    horizons, every = PRESETS[scenario]

    assert args.env_id in gym.registry
    assert (pipeline.max_turn_schedule, pipeline.max_turn_every) == (list(horizons), every)
    assert (args.learning_rate, args.beta, args.temperature) == (1e-6, 0.001, 1.0)
    assert (args.max_turn_tokens, args.max_completion_length, args.num_generations) == (turn_tokens, budget, n)
    # one rollout batch on 8 GPUs is `tasks` tasks x n episodes; one update sees `mini` tasks
    assert args.generation_batch_size * GPUS == tasks * n
    assert args.per_device_train_batch_size * args.gradient_accumulation_steps * GPUS == mini * n
    assert args.num_iterations == epochs
    updates_per_rollout = args.steps_per_generation * args.num_iterations // args.gradient_accumulation_steps
    assert args.max_steps == len(horizons) * every * updates_per_rollout  # the whole schedule, counted in rollouts
    assert args.save_steps == 25 * updates_per_rollout  # trainer.save_freq=25 rollout batches
    # verl's defaults the scripts keep: grad_clip, clip_ratio, entropy_coeff; agentgym.timeout=600
    assert (args.max_grad_norm, args.epsilon, args.entropy_coef, args.env_timeout) == (1.0, 0.2, 0.001, 600.0)
    # micro-batches of one episode, each its token mean (tests/train/trainers/test_loss_weights.py): TRL's grpo
    assert (args.per_device_train_batch_size, args.loss_type) == (1, "grpo")
    assert args.vllm_importance_sampling_mode == "token_truncate"  # per token: no long episode dropped whole
    # kl_loss_type=low_var_kl is verl's plain k3; TRL's default multiplies it by pi/pi_old
    assert args.use_bias_correction_kl is False
    # TRL's share of the whole GPU, held through training (tests/train/test_plan.py: the plan's suggestion)
    assert 0 < args.vllm_gpu_memory_utilization < 0.7 and args.vllm_enable_sleep_mode is False
    header = path.read_text().split("# --- pipeline ---")[0]
    script = "searchqa" if scenario == "deepsearch" else scenario
    assert f"examples/train/ScalingInter-RL/{script}_train.sh" in header and "82402a9" in header
    cited = [line.split()[1] for line in header.splitlines() if line.startswith("#   ") and line[4] != " "]
    keys = ("learning_rate", "beta", "loss_type", "entropy_coef", "max_steps", "vllm_importance_sampling_mode")
    for key in (*keys, "use_bias_correction_kl", "vllm_gpu_memory_utilization", "vllm_enable_sleep_mode"):
        assert key in cited, f"{path.name}'s header names no source for {key}"


@pytest.mark.parametrize("name", ["ddp", "fsdp", "zero2", "zero3"])
def test_accelerate_configs_load(name: str) -> None:
    from accelerate.commands.config.config_args import load_config_from_file

    config = load_config_from_file(str(CONFIGS / "accelerate" / f"{name}.yaml"))  # refuses unknown keys
    assert config.num_processes == GPUS and config.mixed_precision == "bf16"
    expected = {"ddp": "MULTI_GPU", "fsdp": "FSDP", "zero2": "DEEPSPEED", "zero3": "DEEPSPEED"}[name]
    assert config.distributed_type.value == expected
    if name.startswith("zero"):
        assert config.deepspeed_config["zero_stage"] == int(name[-1])
    if name == "fsdp":
        assert config.fsdp_config["fsdp_version"] == 2
