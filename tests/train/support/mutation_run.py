"""`tox -e mutants`: mutation testing (mutmut, configured in pyproject.toml's [tool.mutmut]) of the estimators,
the rollout engine and token path, the stop strings, the schedule and the wrapper, against their fast tests.

Starts from a clean `mutants/` (mutmut's copy of the sources), bounds the run in wall time (MUTANTS_WALL_S,
default 1500 s: then mutmut is interrupted and keeps what it finished), and prints the counts per status and
each surviving mutant with its diff. Arguments restrict the mutants to names (globs), e.g.
`tox -e mutants -- "agentgym_train.estimators.*"`. Not part of CI's test command (it is slow).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def run(names: list[str], wall_s: float) -> None:
    shutil.rmtree(ROOT / "mutants", ignore_errors=True)
    (ROOT / "mutants").mkdir()
    # `wrappers/` installs as `agentgym_wrappers`: the tests import the mutated copy under that name
    (ROOT / "mutants" / "agentgym_wrappers").symlink_to("wrappers", target_is_directory=True)
    command = [sys.executable, "-m", "mutmut", "run", "--max-children", os.environ.get("MUTANTS_CHILDREN", "1")]
    started = time.monotonic()
    process = subprocess.Popen([*command, *names], cwd=ROOT, start_new_session=True)
    try:
        process.wait(timeout=wall_s)
    except subprocess.TimeoutExpired:
        print(f"\nwall-clock bound ({wall_s:.0f} s) reached: stopping mutmut, keeping the mutants it finished")
        os.killpg(process.pid, signal.SIGINT)  # mutmut stops its workers and keeps the results so far
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    print(f"\nmutmut ran {time.monotonic() - started:.0f} s, exit status {process.returncode}")


def summary() -> Counter:
    from mutmut.stats import status_by_exit_code

    counts: Counter = Counter()
    survivors = []
    for meta in sorted((ROOT / "mutants").rglob("*.py.meta")):
        results = json.loads(meta.read_text()).get("exit_code_by_key", {})
        for name, code in sorted(results.items()):
            status = status_by_exit_code[code]
            counts[status] += 1
            if status not in ("killed", "timeout", "not checked"):
                survivors.append(name)
    print("\nmutants by status:", ", ".join(f"{k}: {v}" for k, v in sorted(counts.items())))
    for name in survivors:
        print()
        subprocess.run([sys.executable, "-m", "mutmut", "show", name], cwd=ROOT, check=False)
    return counts


if __name__ == "__main__":
    run(sys.argv[1:], float(os.environ.get("MUTANTS_WALL_S", "1500")))
    summary()
