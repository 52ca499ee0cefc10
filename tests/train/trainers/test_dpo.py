"""DPO on episode pairs: pairs of the same task, masks with zeros where the env spoke, TRL's loss moving
the chosen-over-rejected log-ratio."""

from __future__ import annotations

from pathlib import Path

import pytest
import toy_env

from agentgym_train.collect import ModelPolicy, collect, read_records
from agentgym_train.models.tiny import load_model
from agentgym_train.rollout import ChatRenderer
from agentgym_train.trainers.dpo import (
    MultiTurnDPOTrainer,
    episode_pairs,
    pair_dataset,
    pair_logps,
    pair_row,
)


@pytest.fixture(scope="module")
def collected(toy_model: Path, tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    """Four episodes of each of 24 toy tasks from the random-init model (about a quarter succeed)."""
    model, tokenizer = load_model(toy_model)
    policy = ModelPolicy(model, tokenizer, max_turn_tokens=1, max_completion_length=64)
    path = tmp_path_factory.mktemp("dpo") / "toy.jsonl"
    collect(policy, toy_env.ENV_ID, path, num_tasks=24, episodes_per_task=4, progress=False)
    return read_records(path)


def test_pairs_are_a_success_and_a_failure_of_the_same_task(collected: list[dict]) -> None:
    pairs = episode_pairs(collected, pairs_per_task=2)
    by_task = {}
    for record in collected:
        by_task.setdefault(record["task_id"], []).append(record["success"])
    expected = sum(min(sum(s), len(s) - sum(s), 2) for s in by_task.values())
    assert len(pairs) == expected > 0
    for chosen, rejected in pairs:
        assert chosen["task_id"] == rejected["task_id"]
        assert chosen["success"] and not rejected["success"]
        assert chosen["messages"][:2] == rejected["messages"][:2]  # same prompt
    used = [id(r) for pair in pairs for r in pair]
    assert len(used) == len(set(used)), "an episode is in at most one pair"
    assert len(episode_pairs(collected, pairs_per_task=1)) == sum(1 for s in by_task.values() if 0 < sum(s) < len(s))


def test_pair_masks_are_zero_where_the_env_spoke(toy_model: Path) -> None:
    _, tokenizer = load_model(toy_model)
    renderer = ChatRenderer(tokenizer)
    system = {"role": "system", "content": toy_env.ParityEnv.system_prompt}
    cue = {"role": "user", "content": "Cue 1: even even even even even even even even"}
    chosen = [system, cue, {"role": "assistant", "content": "ea"},
              {"role": "user", "content": "Right. Cue 2: odd odd odd odd odd odd odd odd"},
              {"role": "assistant", "content": "a"}]  # fmt: skip
    rejected = [system, cue, {"role": "assistant", "content": "a"}]
    row = pair_row(renderer, chosen, rejected)
    # the prompt is the shared prefix: up to the first reply, where the two episodes part
    assert tokenizer.decode(row["prompt_ids"]).rstrip().endswith("<|im_start|>assistant")
    for ids, mask in ((row["chosen_ids"], row["chosen_mask"]), (row["rejected_ids"], row["rejected_mask"])):
        assert len(ids) == len(mask)
        learned = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m])
        assert "Right." not in learned and "Cue" not in learned
        assert learned.replace("<|im_end|>", "") in ("eaa", "a")
    env_part = tokenizer.decode([i for i, m in zip(row["chosen_ids"], row["chosen_mask"], strict=True) if not m])
    assert "Right. Cue 2: odd" in env_part and 0 in row["chosen_mask"]
    assert all(row["rejected_mask"])  # one reply, nothing from the env after it


def test_dpo_raises_the_chosen_over_rejected_log_ratio(toy_model: Path, collected: list[dict], tmp_path: Path) -> None:
    from trl import DPOConfig

    model, tokenizer = load_model(toy_model)
    dataset = pair_dataset(tokenizer, episode_pairs(collected, pairs_per_task=2))
    chosen, rejected = pair_logps(model, dataset)
    before = sum(c - r for c, r in zip(chosen, rejected, strict=True)) / len(chosen)
    args = DPOConfig(
        output_dir=str(tmp_path),
        max_steps=6,
        per_device_train_batch_size=8,
        learning_rate=5e-3,
        beta=0.1,
        loss_type=["sigmoid", "sft"],  # the pipeline's default: DPO plus NLL on the chosen replies
        loss_weights=[1.0, 1.0],
        max_length=None,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        activation_checkpointing=False,
        dataloader_pin_memory=False,
        bf16=False,
        seed=0,
    )
    trainer = MultiTurnDPOTrainer(model, args=args, train_dataset=dataset, processing_class=tokenizer)
    batch = trainer.data_collator([dataset[0]])
    n_prompt = len(dataset[0]["prompt_ids"])
    assert batch["completion_mask"][0, :n_prompt].sum() == 0
    n_chosen = len(dataset[0]["chosen_mask"])
    assert batch["completion_mask"][0, n_prompt : n_prompt + n_chosen].tolist() == dataset[0]["chosen_mask"]
    trainer.train()
    chosen, rejected = pair_logps(trainer.model, dataset)
    after = sum(c - r for c, r in zip(chosen, rejected, strict=True)) / len(chosen)
    assert after > before + 1.0, f"log-ratio chosen/rejected {before:.2f} -> {after:.2f}"


def test_dpo_refuses_a_dataset_without_masks(toy_model: Path, tmp_path: Path) -> None:
    from datasets import Dataset
    from trl import DPOConfig

    model, tokenizer = load_model(toy_model)
    raw = Dataset.from_dict({"prompt": ["a"], "chosen": ["b"], "rejected": ["c"]})
    args = DPOConfig(output_dir=str(tmp_path), report_to="none", bf16=False, activation_checkpointing=False)
    with pytest.raises(ValueError, match="pair_dataset"):
        MultiTurnDPOTrainer(model, args=args, train_dataset=raw, processing_class=tokenizer)
