"""Resume: a PPO run stopped at a checkpoint and resumed goes on as the uninterrupted run does (model,
optimisers, LR scheduler, max-turn schedule, critic, data order); `agentgym train --resume_from_checkpoint`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import torch
import toy_env
from trainer_stand_ins import StopAt
from transformers import TrainerCallback

from agentgym_train.models.tiny import load_model
from agentgym_train.scheduler import MaxTurnScheduler
from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer


class AtTrainBegin(TrainerCallback):
    """Calls `probe()` once the checkpoint is loaded, before the first resumed step."""

    def __init__(self, probe: Any):
        self.probe = probe

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.probe()


def ppo(model_dir: Path, output_dir: Path, variant: str, callbacks: list[Any]) -> MultiTurnPPOTrainer:
    """A 4-step PPO run; `variant`: the critic kind, or "lora+peft": a LoRA critic on a LoRA policy's base."""
    from peft import LoraConfig

    model, tokenizer = load_model(model_dir)
    critic, _, peft = variant.partition("+")
    args = MultiTurnPPOConfig(
        output_dir=str(output_dir),
        env_id=toy_env.ENV_ID,
        critic=critic,
        critic_lora_rank=4,
        max_turn_tokens=1,
        max_completion_length=64,
        num_generations=4,
        per_device_train_batch_size=8,
        learning_rate=5e-3,
        max_steps=4,
        save_strategy="steps",
        save_steps=2,
        logging_steps=1,
        report_to="none",
        activation_checkpointing=False,
        disable_tqdm=True,
        dataloader_pin_memory=False,
        seed=3,
    )
    schedule = MaxTurnScheduler.stages([1, 2], every=2)  # the horizon changes right after the interruption
    lora = LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], lora_dropout=0.0) if peft else None
    return MultiTurnPPOTrainer(
        model, args, processing_class=tokenizer, callbacks=[schedule, *callbacks], peft_config=lora
    )


def step_logs(trainer: MultiTurnPPOTrainer) -> dict[int, dict[str, float]]:
    return {row["step"]: row for row in trainer.state.log_history if "episode/return" in row}


def critic_state(trainer: MultiTurnPPOTrainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in trainer.critic.state().items()}


@pytest.mark.parametrize("critic", ["full", "lora", "lora+peft"])
def test_a_resumed_ppo_run_continues_the_uninterrupted_one(toy_model: Path, tmp_path: Path, critic: str) -> None:
    from safetensors.torch import load_file

    whole = ppo(toy_model, tmp_path / "whole", critic, [])
    whole.train()
    whole.engine.close()

    stopped = ppo(toy_model, tmp_path / "run", critic, [StopAt(2)])
    stopped.train()
    stopped.engine.close()
    checkpoint = tmp_path / "run" / "checkpoint-2"
    assert stopped.state.global_step == 2 and (checkpoint / "critic" / "critic.safetensors").is_file()
    assert sorted(p.name for p in (checkpoint / "critic").iterdir()) == ["critic.safetensors", "optimizer.pt"]
    if critic == "lora+peft":  # the policy's adapter file holds the policy's adapter only
        policy_keys = load_file(str(checkpoint / "adapter_model.safetensors")).keys()
        assert policy_keys and not any("critic" in k for k in policy_keys)
    saved_critic = load_file(str(checkpoint / "critic" / "critic.safetensors"))
    assert all(torch.equal(saved_critic[k], v) for k, v in critic_state(stopped).items())

    seen: dict[str, Any] = {}
    resumed: MultiTurnPPOTrainer

    def probe() -> None:
        seen["critic"] = critic_state(resumed)
        # copies: a state dict holds the live tensors, which the next steps change in place
        seen["value_optimizer"] = copy.deepcopy(resumed.value_optimizer.state_dict())
        seen["optimizer"] = copy.deepcopy(resumed.optimizer.state_dict())
        seen["lr_scheduler"] = copy.deepcopy(resumed.lr_scheduler.state_dict())

    resumed = ppo(toy_model, tmp_path / "run", critic, [AtTrainBegin(probe)])
    fresh_critic = critic_state(resumed)
    assert any(not torch.equal(fresh_critic[k], v) for k, v in saved_critic.items())  # a fresh critic differs
    resumed.train(resume_from_checkpoint=str(checkpoint))
    resumed.engine.close()

    # restored as saved: the critic's weights, both optimisers, the LR scheduler
    assert seen["critic"].keys() == saved_critic.keys()
    assert all(torch.equal(seen["critic"][k], saved_critic[k]) for k in saved_critic)
    value_optimizer = torch.load(checkpoint / "critic" / "optimizer.pt", weights_only=True)
    assert value_optimizer["state"] and seen["value_optimizer"]["state"].keys() == value_optimizer["state"].keys()
    for key, state in value_optimizer["state"].items():
        assert torch.equal(seen["value_optimizer"]["state"][key]["exp_avg"], state["exp_avg"])
    optimizer = torch.load(checkpoint / "optimizer.pt", weights_only=True)
    for key, state in optimizer["state"].items():
        assert torch.equal(seen["optimizer"]["state"][key]["exp_avg_sq"], state["exp_avg_sq"])
    assert seen["lr_scheduler"]["last_epoch"] == 2

    # the run goes on where it stopped: steps 3 and 4, under the schedule's second horizon
    assert resumed.state.global_step == 4
    logs, reference = step_logs(resumed), step_logs(whole)
    assert sorted(logs) == [1, 2, 3, 4]
    assert [logs[s]["rollout/max_turns"] for s in (1, 2, 3, 4)] == [1, 1, 2, 2]
    # on one CPU process the resumed run is the uninterrupted run, step for step (RNG, data order)
    for step in (3, 4):
        for key in ("episode/return", "value/loss", "rollout/max_turns"):
            assert logs[step][key] == pytest.approx(reference[step][key], rel=1e-4, abs=1e-6), (step, key)
    for (name, a), b in zip(whole.model.named_parameters(), resumed.model.parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5), name
    final = critic_state(resumed)
    assert all(torch.allclose(v, final[k], atol=1e-5) for k, v in critic_state(whole).items())


def test_agentgym_train_resumes_from_the_last_checkpoint(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from agentgym_train.cli import main

    common = ["--output_dir", str(tmp_path), "--tiny_hidden_size", "32", "--tiny_layers", "1", "--sft_steps", "0"]
    common += ["--eval_tasks", "0", "--per_device_train_batch_size", "8", "--num_generations", "4"]
    common += ["--max_turn_schedule", "2", "3", "--max_turn_every", "2", "--torch_threads", "1", "--algorithm", "ppo"]
    common += ["--save_strategy", "steps", "--save_steps", "2", "--disable_tqdm", "true"]
    assert main(["train", "babyai_demo", *common, "--max_steps", "2"]) == 0
    assert (tmp_path / "checkpoint-2" / "critic" / "critic.safetensors").is_file()
    assert main(["train", "babyai_demo", *common, "--max_steps", "3", "--resume_from_checkpoint"]) == 0
    state = json.loads((tmp_path / "checkpoint-3" / "trainer_state.json").read_text())
    steps = [row for row in state["log_history"] if "rollout/max_turns" in row]
    assert state["global_step"] == 3 and [row["step"] for row in steps] == [1, 2, 3]
    assert [row["rollout/max_turns"] for row in steps] == [2, 2, 3]
    # a path that is no checkpoint is refused with a message
    assert main(["train", "babyai_demo", *common, "--resume_from_checkpoint", str(tmp_path / "nope")]) == 2
    assert "is no checkpoint" in capsys.readouterr().err
