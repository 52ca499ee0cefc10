"""`accelerate launch` with 2 CPU processes (gloo, DDP) runs 2 multi-turn GRPO steps whose ranks play episodes
of different lengths."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_two_process_cpu_run(tiny_babyai: Path, tmp_path: Path) -> None:
    launcher = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or shutil.which("accelerate")
    assert launcher, "accelerate is installed with the [train] extra"
    job = Path(__file__).parent / "accelerate_job.py"
    # accelerate's --cpu flag runs one process (several need mpirun); its torchrun launcher with
    # ACCELERATE_USE_CPU runs 2 CPU processes over gloo.
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
    command = [launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    command += ["--mixed_precision", "no"]
    command += ["--dynamo_backend", "no", "--main_process_port", "0", str(job), str(tiny_babyai), str(tmp_path)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in reports] == [2, 2]
    assert all(r["global_step"] == 2 for r in reports)
    # each process ran its own group of envs (one task per process, 4 episodes of it)
    tasks = [set(r["tasks"]) for r in reports]
    assert all(len(t) == 1 for t in tasks) and tasks[0] != tasks[1]
    # episodes of uneven length: rank 0's all end after one turn, rank 1's run on
    assert set(reports[0]["turns"]) == {1} and max(reports[1]["turns"]) > 1
    # metrics are gathered over both processes, as TRL gathers rewards
    last = [row for row in reports[0]["log_history"] if "episode/turns" in row][-1]
    turns = reports[0]["turns"] + reports[1]["turns"]
    assert last["episode/turns"] == pytest.approx(sum(turns) / len(turns))
    # DDP kept the replicas identical
    assert reports[0]["weights"] == pytest.approx(reports[1]["weights"], rel=1e-9)
