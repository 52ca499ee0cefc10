"""Async rollouts on 2 processes (run by test_async_rollout.py): each rank asks for `rollout_mode="async"`.

With a collective generator (`LockstepGenerator`: an all-reduce per turn, as under sharded weights) both
ranks fall back to lockstep and make the same number of syncs although their episodes last 1 and 3 turns;
with a local generator (plain DDP: no collective in generation) each rank plays async on its own.
Every rank writes OUT/rank-<i>.json.

Usage: async_rollout_job.py MODEL_DIR OUTPUT_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(model_dir: str, output_dir: str) -> None:
    from accelerate import Accelerator

    from agentgym_train.models.tiny import load_model
    from agentgym_train.rollout import RolloutEngine, Task
    from agentgym_train.rollout.backends.lockstep import LockstepGenerator

    accelerator = Accelerator()
    rank = accelerator.process_index
    _, tokenizer = load_model(model_dir)
    ids = [*tokenizer("Action: turn left", add_special_tokens=False)["input_ids"], tokenizer.eos_token_id]
    calls = []

    def scripted(contexts, max_new_tokens, stop=None):
        calls.append(len(contexts))
        return [(ids[:max_new_tokens], [-0.1] * min(len(ids), max_new_tokens)) for _ in contexts]

    lockstep = LockstepGenerator(scripted, accelerator, tokenizer.pad_token_id)
    syncs = []
    sync = lockstep.sync_live
    lockstep.sync_live = lambda any_local: syncs.append(any_local) or sync(any_local)
    engine = RolloutEngine(
        tokenizer,
        max_turns=1 if rank == 0 else 3,
        max_completion_length=512,
        env_kwargs={"show_actions": False},
        rollout_mode="async",
    )
    tasks = [Task("AgentGym/BabyAI-v0", i, "train", 0) for i in range(2)]
    sharded = engine.run(tasks, lockstep)
    report = {"rank": rank, "sharded_mode": engine.last_mode, "sharded_turns": [e.turns for e in sharded]}
    report["syncs"] = len(syncs)
    calls.clear()
    local = engine.run(tasks, scripted)
    report.update(local_mode=engine.last_mode, local_turns=[e.turns for e in local], local_calls=len(calls))
    engine.close()
    Path(output_dir, f"rank-{rank}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).parent))
    from train_helpers import close_process_group

    main(*sys.argv[1:3])
    close_process_group()
