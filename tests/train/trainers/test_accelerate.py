"""`accelerate launch` with 2 CPU processes (gloo, DDP) runs 2 multi-turn GRPO steps whose ranks play episodes
of different lengths."""

from __future__ import annotations

from pathlib import Path

import pytest
from train_helpers import launch_two_processes, rank_reports


@pytest.mark.slow
def test_two_process_cpu_run(tiny_babyai: Path, tmp_path: Path) -> None:
    launch_two_processes("accelerate_job.py", tiny_babyai, tmp_path, timeout=600)
    reports = rank_reports(tmp_path)
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


def test_end_processes_ends_the_process_group(tmp_path: Path) -> None:
    """`agentgym train` ends its process group once training is done, so that no process leaves the group to the
    interpreter's exit (a one-process gloo group in a child process: the pytest worker keeps none)."""
    import subprocess
    import sys

    script = (
        "import torch.distributed as dist\n"
        "from agentgym_train.pipeline import end_processes\n"
        f"dist.init_process_group('gloo', init_method='file://{tmp_path / 'store'}', rank=0, world_size=1)\n"
        "before = dist.is_initialized()\n"
        "end_processes()\n"
        "end_processes()  # again, or in a single process: nothing to do\n"
        "print(before, dist.is_initialized())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["True", "False"]
