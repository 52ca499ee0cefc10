"""Two training processes with `env_backend: ray, ray_address: local`: one private Ray cluster for both.

Run by `test_ray_local_ranks.py` as 2 gloo processes (`accelerate launch`) inside a network namespace with
only loopback. Each rank trains one GRPO step of the tiny model on BabyAI with its envs on Ray, then writes
what it saw of the cluster to OUT/rank-<r>.json; the main process counts the Ray heads (GCS servers) in the
namespace while both ranks are connected. The ranks leave Ray one after the other, the main one last (its
process holds the cluster).

    python ray_local_ranks_job.py MODEL_DIR OUT
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "support"))  # train_helpers


def gcs_servers() -> list[int]:
    """PIDs of Ray heads (their GCS server) in this network namespace."""
    from agentgym_envs.cluster.local import cmdline, namespace_inode, namespace_pids

    return [pid for pid in namespace_pids(namespace_inode()) if any("gcs_server" in part for part in cmdline(pid)[:1])]


def main(model_dir: str, out: str) -> None:
    from accelerate import PartialState

    state = PartialState()
    import ray
    from train_helpers import close_process_group, grpo_args

    from agentgym_train.models.tiny import load_model
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    model, tokenizer = load_model(model_dir)
    args = grpo_args(Path(out) / "run", env_backend="ray", ray_address="local", max_steps=1, env_timeout=300)
    trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
    pool = trainer.engine.env_pool
    trainer.train()
    logs = [entry for entry in trainer.state.log_history if "episode/env_errors" in entry]
    report: dict[str, Any] = {
        "rank": state.process_index,
        "gcs_address": ray.get_runtime_context().gcs_address,
        "this_node": ray.get_runtime_context().get_node_id(),
        "nodes": [node["NodeID"] for node in ray.nodes() if node["Alive"]],
        "placement": pool.placement(),
        "global_step": trainer.state.global_step,
        "episodes": len(trainer.last_episodes),
        "env_errors": [entry["episode/env_errors"] for entry in logs],
        "losses": [entry.get("loss") for entry in logs],
        "netns": os.readlink("/proc/self/ns/net"),
    }
    state.wait_for_everyone()  # both ranks connected: count the heads now
    if state.is_main_process:
        report["gcs_servers"] = len(gcs_servers())
    trainer.engine.close()
    pool.close()
    Path(out, f"rank-{state.process_index}.json").write_text(json.dumps(report))
    state.wait_for_everyone()
    if not state.is_main_process:  # a driver leaves before the head it joined goes
        ray.shutdown()
    state.wait_for_everyone()
    if state.is_main_process:
        ray.shutdown()
    close_process_group()


if __name__ == "__main__":
    main(*sys.argv[1:3])
