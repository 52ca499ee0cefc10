"""The demo's console: one progress bar per phase, no library bars or warnings, results after the bars."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

#: What the libraries underneath printed before: weight-loading and shard-writing bars (transformers),
#: the dataset-map bar (datasets via TRL), the SFT trainer's log dicts, TRL's deprecation warning.
NOISE = ("Loading weights", "Writing model shards", "Building labels", "{'loss'", "FutureWarning", "warnings.warn")
BAR = re.compile(r"\d+%\|")


@pytest.mark.slow
def test_short_demo_prints_one_bar_per_phase_and_results_last(tmp_path: Path) -> None:
    overrides = ["--output_dir", str(tmp_path), "--tiny_hidden_size", "32", "--tiny_layers", "1"]
    overrides += ["--sft_episodes", "8", "--sft_steps", "2", "--max_steps", "2", "--max_turn_schedule", "2", "3"]
    overrides += ["--max_turn_every", "1", "--eval_tasks", "2", "--per_device_train_batch_size", "4"]
    overrides += ["--num_generations", "2", "--torch_threads", "1"]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONWARNINGS": "default"}
    done = subprocess.run(
        [sys.executable, "-m", "agentgym_train.cli", "train", "babyai_demo", *overrides],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
        env=env,
    )
    out = done.stdout
    assert done.returncode == 0, out[-3000:]
    assert not [noise for noise in NOISE if noise in out], out[-3000:]
    # tqdm redraws a bar after carriage returns; each phase has one bar, named after the phase
    names = [part.split(":", 1)[0] for part in re.split("[\r\n]", out) if BAR.search(part)]
    phases = [name for i, name in enumerate(names) if i == 0 or name != names[i - 1]]
    assert phases == ["SFT", "eval before RL", "GRPO", "eval after RL"], out
    assert "SFT: 100%" in out and "loss=" in out and "GRPO: 100%" in out and "success=" in out
    results = out.index("held-out test tasks of")
    assert not BAR.search(out[results:]), out[results:]  # nothing of a bar after the results
    assert out.rstrip().splitlines()[-1].startswith("wrote ")
