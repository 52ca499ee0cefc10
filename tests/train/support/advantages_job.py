"""The estimators whose statistics span the batch, on this process's share of one global batch (run by
test_estimator_formulas.py under `accelerate launch`, 2 CPU processes over gloo): writes OUT/rank-<i>.json."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

GROUP, ROWS, COLUMNS, KL_COEF, GAMMA = 2, 6, 7, 0.1, 0.9


def global_batch() -> dict[str, torch.Tensor]:
    """A fixed batch whose halves differ (so statistics of one half are not those of the whole)."""
    generator = torch.Generator().manual_seed(0)
    rewards = torch.rand(ROWS, generator=generator) * torch.tensor([1.0, 1.0, 1.0, 5.0, 5.0, 5.0])
    mask = (torch.rand(ROWS, COLUMNS, generator=generator) > 0.3).long()
    mask[:, 0] = 1
    mask[1, -2:] = 0  # padding
    kl = torch.randn(ROWS, COLUMNS, generator=generator) * mask
    values = torch.randn(ROWS, COLUMNS, generator=generator) + torch.arange(ROWS).unsqueeze(1)
    return {"rewards": rewards, "mask": mask, "kl": kl, "values": values}


def estimates(batch: dict[str, torch.Tensor], rows: slice, reduce: object) -> dict[str, list]:
    from agentgym_train.estimators import KL_IN_REWARD, masked_whiten, reinforce_pp_advantages

    mask, kl = batch["mask"][rows], batch["kl"][rows]
    out = {
        name: reinforce_pp_advantages(name, batch["rewards"], GROUP, rows, mask, kl, KL_COEF, GAMMA, reduce).tolist()
        for name in KL_IN_REWARD
    }
    out["ppo_whitening"] = masked_whiten(batch["values"][rows], mask, reduce).tolist()
    return out


def main(output_dir: str) -> None:
    from accelerate import Accelerator

    accelerator = Accelerator(cpu=True)
    share = ROWS // accelerator.num_processes
    rows = slice(accelerator.process_index * share, (accelerator.process_index + 1) * share)
    report = estimates(global_batch(), rows, lambda t: accelerator.reduce(t, reduction="sum"))
    report["world_size"] = accelerator.num_processes
    Path(output_dir, f"rank-{accelerator.process_index}.json").write_text(json.dumps(report))


if __name__ == "__main__":
    from train_helpers import close_process_group

    main(sys.argv[1])
    close_process_group()
