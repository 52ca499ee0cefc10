"""`env_backend: ray, ray_address: local` under several processes: one private cluster that the main
process starts and the others join (`agentgym_envs.cluster.join_local_cluster`), or a clear refusal."""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentgym_envs.cluster import join_local_cluster
from agentgym_envs.cluster.local import namespace_pids

pytest.importorskip("ray")
SUPPORT = Path(__file__).resolve().parents[1] / "support"  # train_helpers
JOB = Path(__file__).resolve().parent / "ray_local_ranks_job.py"


def no_ray_init(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    def refuse(*args: Any, **kwargs: Any) -> None:  # a guard: these checks must never start or join Ray
        raise AssertionError(f"ray.init was called with {args} {kwargs}")

    monkeypatch.setattr(ray, "init", refuse)


def test_a_process_that_cannot_reach_the_main_ones_cluster_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    no_ray_init(monkeypatch)
    import socket

    from agentgym_envs.cluster.local import namespace_inode

    offer = {"address": "127.0.0.1:6379", "node_ip": "127.0.0.1", "host": socket.gethostname(), "netns": "net:[1]"}
    assert namespace_inode() != "net:[1]"
    with pytest.raises(ValueError, match=r"which this process .* cannot reach: a run over several machines"):
        join_local_cluster(False, lambda value: offer)
    with pytest.raises(ValueError, match="cannot reach"):
        join_local_cluster(False, lambda value: {**offer, "host": "another-machine", "netns": namespace_inode()})


def test_the_main_processes_refusal_reaches_every_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """A head the main process may not start (here: not in a loopback-only namespace) is refused in every
    process, and the others are told why rather than left waiting in the broadcast."""
    no_ray_init(monkeypatch)
    import agentgym_envs.cluster.local as local

    monkeypatch.setattr(local, "only_loopback", lambda: False)
    shared: list[Any] = []
    with pytest.raises(ValueError, match="refusing to start a local Ray head"):
        join_local_cluster(True, lambda value: shared.append(value) or value)
    assert len(shared) == 1 and shared[0]["type"] == "ValueError" and "refusing" in shared[0]["error"]
    with pytest.raises(ValueError, match="the main process started no local Ray cluster: ValueError: refusing"):
        join_local_cluster(False, lambda value: shared[0])
    crashed = {"error": "RuntimeError: the head did not start", "type": "RuntimeError"}
    with pytest.raises(RuntimeError, match="started no local Ray cluster: RuntimeError: the head did not start"):
        join_local_cluster(False, lambda value: crashed)


@pytest.mark.slow
def test_two_training_processes_on_local_ray_share_one_cluster(tiny_babyai: Path, tmp_path: Path) -> None:
    from train_helpers import rank_reports

    allowed = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, timeout=30)
    if allowed.returncode != 0:
        pytest.skip(f"`unshare -n` is not permitted here: {allowed.stderr.strip()}")
    launch = (
        f"import sys; sys.path.insert(0, {str(SUPPORT)!r}); from train_helpers import launch_two_processes; "
        f"launch_two_processes({str(JOB)!r}, {str(tiny_babyai)!r}, {str(tmp_path)!r}, "
        "timeout=900)"
    )
    script = f"ip link set lo up && exec {shlex.quote(sys.executable)} -c {shlex.quote(launch)}"
    run = subprocess.run(["unshare", "-n", "sh", "-c", script], capture_output=True, text=True, timeout=1000)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-6000:]
    main, other = rank_reports(tmp_path)
    assert namespace_pids(main["netns"]) == [], "processes of the test's Ray cluster were left running"
    # one cluster: one head in the namespace, one node, both ranks' drivers on it (before: a cluster per rank)
    assert main["gcs_servers"] == 1, main
    assert main["gcs_address"] == other["gcs_address"] and main["nodes"] == other["nodes"] == [main["this_node"]]
    for report in (main, other):  # each rank trained its step with its own envs on the shared node's actors
        assert report["global_step"] == 1 and report["env_errors"] == [0], report
        assert all(loss is not None and math.isfinite(loss) for loss in report["losses"]), report
        assert report["placement"] == {main["this_node"]: report["episodes"]} and report["episodes"] > 0, report


def test_token_mode_reaches_ray_when_set_after_ray_was_imported() -> None:
    """Ray reads RAY_AUTH_MODE on import: set later without a refresh, this process writes no token and the
    head it starts dies for want of one (what `RayEnvPool("local")` did before `token_auth`)."""
    check = (
        "import ray\n"
        "from ray._raylet import AuthenticationMode, get_authentication_mode\n"
        "from agentgym_envs.cluster.pool import token_auth\n"
        "before = get_authentication_mode()\n"
        "token_auth()\n"
        "print(before == AuthenticationMode.TOKEN, get_authentication_mode() == AuthenticationMode.TOKEN)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_AUTH_MODE"}
    run = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and run.stdout.split() == ["False", "True"], run.stdout + run.stderr[-2000:]
