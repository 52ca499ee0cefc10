"""One scored rollout batch per advantage estimator that reads its process's rows of the global batch (rloo,
reinforce++, reinforce++_baseline, gigpo, PPO's GAE), run by test_estimators_distributed.py under `accelerate
launch` (2 CPU processes over gloo). Groups span the processes (3 rows each, groups of 2) and the ranks' episodes
differ in length (rank 0's end after 1 turn, rank 1's after up to 3). Each rank writes, per estimator, what the
reward function returned for its own completions, the trainer's rewards, advantages and model-token mask, the
episodes' turn rewards, reply spans and state keys, and PPO's critic values to OUT/rank-<i>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ESTIMATORS = ("rloo", "reinforce++", "reinforce++_baseline", "gigpo", "ppo")
ROWS, GROUP = 3, 2  # per process; 6 rows, 3 groups, the middle one on both processes
GAMMA, LAMBDA, TURN_GAMMA, GIGPO_GAMMA = 0.9, 0.8, 0.7, 0.6
SCORES: list[float] = []  # what `by_length` returned on this process
VALUES: list = []  # PPO: the critic's values of the rollout, (B, T)


def by_length(completions, **kwargs):
    """A reward that differs between episodes (a random model never succeeds)."""
    scores = [float(len(str(c))) for c in completions]
    SCORES.extend(scores)
    return scores


def trainer_for(estimator: str, model_dir: str, output_dir: Path) -> Any:
    from train_helpers import grpo_args

    from agentgym_train.models.tiny import load_model
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer
    from agentgym_train.trainers.ppo import MultiTurnPPOConfig, MultiTurnPPOTrainer

    model, tokenizer = load_model(model_dir)
    model.train()
    common = {
        "per_device_train_batch_size": ROWS,
        "num_generations": GROUP,
        "temperature": 1.5,
        "turn_gamma": TURN_GAMMA,
        "reinforce_gamma": GAMMA,
        "gigpo_gamma": GIGPO_GAMMA,
        "gigpo_omega": 0.5,
    }
    if estimator != "ppo":
        args = grpo_args(output_dir, advantage_estimator=estimator, **common)
        return MultiTurnGRPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
    options = grpo_args(output_dir).to_dict()
    keep = ("env_id", "env_kwargs", "max_turns", "max_turn_tokens", "max_completion_length", "report_to", "seed")
    args = MultiTurnPPOConfig(
        output_dir=str(output_dir),
        **{k: options[k] for k in keep},
        **common,
        gae_gamma=GAMMA,
        gae_lambda=LAMBDA,
        activation_checkpointing=False,
        disable_tqdm=True,
    )
    trainer = MultiTurnPPOTrainer(model, args, processing_class=tokenizer, reward_funcs=[by_length])
    values = trainer._values

    def recorded(*args: Any) -> Any:  # the critic's values of the rollout: the first call (later ones fit it)
        out = values(*args)
        if not VALUES:
            VALUES.append(out.detach().clone())
        return out

    trainer._values = recorded
    return trainer


def main(model_dir: str, output_dir: str) -> None:
    import torch

    torch.set_num_threads(1)
    report: dict[str, Any] = {}
    for estimator in ESTIMATORS:
        trainer = trainer_for(estimator, model_dir, Path(output_dir) / estimator)
        rank = trainer.accelerator.process_index
        trainer.engine.max_turns = 1 + 2 * rank  # episodes of uneven length
        SCORES.clear()
        batch = next(iter(trainer.get_train_dataloader()))
        out = trainer._generate_and_score_completions(batch)
        trainer.engine.close()
        mask = out["completion_mask"]
        if out.get("tool_mask") is not None:
            mask = mask * out["tool_mask"]
        episodes = trainer.last_episodes
        report[estimator] = {
            "scores": list(SCORES),
            "rewards": trainer.rewards.tolist(),
            "local_rewards": trainer.local_rewards(len(batch)).tolist(),
            "advantages": out["advantages"].tolist(),
            "mask": mask.tolist(),
            "turn_rewards": [e.turn_rewards for e in episodes],
            "reply_spans": [e.reply_spans for e in episodes],
            "state_keys": [[repr(k) for k in e.state_keys] for e in episodes],
            "turns": [e.turns for e in episodes],
            "values": VALUES[0].tolist() if VALUES else None,
        }
        report["world_size"] = trainer.accelerator.num_processes
        del trainer
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(sys.argv[1], sys.argv[2])
    close_process_group()
