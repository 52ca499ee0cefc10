"""Shared settings of the trainer tests, and the launcher of their 2-process jobs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

BABYAI = "AgentGym/BabyAI-GoToLocal-v0"
#: The shipped accelerate configs (FSDP, DeepSpeed ZeRO, DDP).
ACCELERATE_CONFIGS = Path(__file__).resolve().parents[3] / "agentgym_train" / "configs" / "accelerate"
ENV_KWARGS = {"show_actions": False}
#: The TrainingArguments of a test run that leaves nothing behind: no reporting integration, no checkpoint, no
#: progress bar.
QUIET_RUN = {"report_to": "none", "save_strategy": "no", "disable_tqdm": True}


def grpo_args(output_dir: Path, **overrides: Any) -> Any:
    """A small CPU `MultiTurnGRPOConfig` for BabyAI (overridable)."""
    from agentgym_train.trainers.grpo_config import MultiTurnGRPOConfig

    options = {
        "env_id": BABYAI,
        "env_kwargs": ENV_KWARGS,
        "max_turns": 3,
        "max_turn_tokens": 6,
        "max_completion_length": 256,
        "num_generations": 4,
        "per_device_train_batch_size": 8,
        "learning_rate": 1e-3,
        "max_steps": 2,
        "logging_steps": 1,
        **QUIET_RUN,
        "activation_checkpointing": False,
        "seed": 0,
        **overrides,
    }
    return MultiTurnGRPOConfig(output_dir=str(output_dir), **options)


def rft_args(output_dir: Path, **overrides: Any) -> Any:
    """A small CPU `RFTConfig` for the toy parity task: 2 rounds of 16 tasks x 4 samples (overridable)."""
    import toy_env

    from agentgym_train.trainers.rft import RFTConfig

    options = {
        "env_id": toy_env.ENV_ID,
        "rounds": 2,
        "tasks_per_round": 16,
        "samples_per_task": 4,
        "max_turn_tokens": 1,
        "max_completion_length": 64,
        "max_steps": 4,
        "per_device_train_batch_size": 16,
        "learning_rate": 5e-3,
        **QUIET_RUN,
        "activation_checkpointing": False,
        "dataloader_pin_memory": False,
        "seed": 0,
        **overrides,
    }
    return RFTConfig(output_dir=str(output_dir), **options)


def close_process_group() -> None:
    """The end of a multi-process job (`tests/train/support/*_job.py`), once its report is written: the pipeline's
    `end_processes`, then an exit that skips the interpreter's teardown. Even with the group ended, a CPU
    process aborted in that teardown now and then on a loaded machine (`terminate called without an active
    exception`, twice in one CI run), failing a job whose work was done."""
    import os
    import sys

    from agentgym_train.pipeline import end_processes

    end_processes()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def launch_two_processes(job: str, *args: str | Path, config: Path | None = None, timeout: float = 600) -> None:
    """Run `tests/train/support/<job> ARGS` (or the job at an absolute path) as 2 CPU processes over gloo under
    `accelerate launch`: plain DDP, or the accelerate `config` file (one written for 2 processes). A run past
    `timeout` fails the test as a likely collective hang, a failing run with the end of its stderr."""
    import contextlib
    import os
    import shutil
    import subprocess
    import sys

    import psutil
    import pytest

    launcher = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or shutil.which("accelerate")
    assert launcher, "accelerate is installed with the [train] extra"
    # faulthandler: a process that aborts prints where each of its threads was
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TRL_EXPERIMENTAL_SILENCE": "1", "PYTHONFAULTHANDLER": "1"}
    command = [launcher, "launch"]
    if config is None:  # accelerate's --cpu runs one process; its torchrun launcher with ACCELERATE_USE_CPU runs two
        env["ACCELERATE_USE_CPU"] = "true"
        command += ["--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
        command += ["--mixed_precision", "no", "--dynamo_backend", "no"]
    else:
        command += ["--config_file", str(config)]
    command += ["--main_process_port", "0", str(Path(__file__).parent / job), *map(str, args)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:  # end the workers too: torchrun starts each in a session of its own
        for child in [*psutil.Process(process.pid).children(recursive=True), process]:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        _, stderr = process.communicate()
        pytest.fail(f"the 2-process run did not finish in {timeout} s (a collective hang?): {stderr[-3000:]!r}")
    assert process.returncode == 0, stderr[-8000:]


def rank_reports(folder: Path) -> list[dict]:
    """What each of a 2-process job's ranks wrote (FOLDER/rank-<r>.json)."""
    return [json.loads((Path(folder) / f"rank-{r}.json").read_text()) for r in (0, 1)]


def cpu_config(name: str, tmp_path: Path, precision: str = "no") -> Path:
    """The shipped accelerate config `name` for 2 processes (`precision`: accelerate's mixed_precision; on this
    GPU-less machine they run on the CPU over gloo; sharded_job.py and critic_job.py make accelerate apply its
    FSDP and DeepSpeed plugins there)."""
    import yaml

    config = yaml.safe_load((ACCELERATE_CONFIGS / name).read_text())
    config.update(num_processes=2, mixed_precision=precision)
    path = tmp_path / name
    path.write_text(yaml.safe_dump(config))
    return path
