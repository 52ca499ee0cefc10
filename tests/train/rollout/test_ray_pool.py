"""The env pool on Ray (`agentgym_envs.cluster`) against a real two-node Ray cluster on this machine.

The cluster runs inside a network namespace of the test's own with only loopback (`unshare -n`), so no
Ray port is reachable from anything but this machine's loopback; `ray_cluster_job.py` starts it, runs
the checks, stops every process of it by PID and reports; the test asserts on the report and checks that
no process is left in the namespace.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentgym_envs.cluster import check_bind_address, resources_for
from agentgym_envs.cluster.local import namespace_pids

pytest.importorskip("ray")
SUPPORT = Path(__file__).resolve().parents[1] / "support"  # ray_cluster_job.py and what it imports


def lost_on_its_actor(error: str) -> bool:
    kind, _, text = error.partition(":")
    return "Actor" in kind or (kind == "LookupError" and "its actor restarted and lost it" in text)


def unshare_works() -> str | None:
    """None where `unshare -n` may make a network namespace here, else why not."""
    try:
        out = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare is not available: {error}"
    return None if out.returncode == 0 else f"`unshare -n` is not permitted here: {out.stderr.strip()}"


def test_a_head_the_network_reaches_is_refused_unless_the_user_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import ray

    from agentgym_envs.cluster import RayEnvPool
    from agentgym_envs.cluster.local import only_loopback

    def no_ray(*args, **kwargs):  # a guard: this test must never start Ray
        raise AssertionError(f"ray.init was called with {args} {kwargs}")

    monkeypatch.setattr(ray, "init", no_ray)
    for wildcard in ("0.0.0.0", "::", " "):
        with pytest.raises(ValueError, match="every network interface"):
            RayEnvPool("local", node_ip_address=wildcard)
    if not only_loopback():  # here Ray would bind a head asked for 127.0.0.1 to the machine's address
        with pytest.raises(ValueError, match="refusing to start a local Ray head"):
            RayEnvPool("local")
    assert check_bind_address("0.0.0.0", allow_all_interfaces=True) == "0.0.0.0"
    assert check_bind_address("127.0.0.1") == "127.0.0.1"
    if not os.environ.get("RAY_ADDRESS") and not ray.is_initialized():
        with pytest.raises(ValueError, match="no Ray cluster named"):  # never a head started by default
            RayEnvPool(None)


def test_scenarios_declare_what_an_env_needs_on_ray() -> None:
    light, jvm, browser = (
        resources_for("AgentGym/BabyAI-GoToLocal-v0"),
        resources_for("AgentGym/SciWorld-v0"),
        resources_for("AgentGym/WebArena-v0"),
    )
    assert light.envs_per_actor == 32 and light.actor_options()["num_cpus"] == pytest.approx(1.0)
    assert jvm.envs_per_actor == 1 and jvm.memory >= 512 * 2**20
    assert browser.envs_per_actor == 1 and browser.num_cpus >= 1
    assert resources_for("AgentGym/SciWorld-v0", envs_per_actor=2).envs_per_actor == 2


def test_an_actor_no_node_could_hold_is_refused_before_its_envs_wait_for_it() -> None:
    from agentgym_envs.cluster.pool import check_placeable

    head = {"Alive": True, "Resources": {"CPU": 4.0, "memory": 8e9, "node:127.0.0.1": 1.0}}
    env_node = {"Alive": True, "Resources": {"CPU": 2.0, "memory": 4e9, "env_node": 16.0}}
    dead = {"Alive": False, "Resources": {"CPU": 64.0, "memory": 1e12, "gpu_node": 1.0}}
    light = {"num_cpus": 1.0, "memory": 2**31}
    check_placeable("BabyAI", light, [head, env_node])
    check_placeable("BabyAI", {**light, "resources": {"env_node": 1.0}}, [head, env_node])
    check_placeable("BabyAI", {"num_cpus": 0, "memory": 0}, [head])  # nothing asked: any live node
    refusals = {
        "resource no node offers": {**light, "resources": {"env_nodes": 1.0}},
        "resource only a dead node offers": {**light, "resources": {"gpu_node": 1.0}},
        "the resource on one node, the CPUs on another": {"num_cpus": 3.0, "resources": {"env_node": 1.0}},
        "more memory than any node": {"num_cpus": 1.0, "memory": 9e9},
    }
    for why, options in refusals.items():
        with pytest.raises(ValueError, match="no live node of the Ray cluster can hold") as refused:
            check_placeable("BabyAI", options, [head, env_node, dead])
        offered = str(refused.value).split("The live nodes offer:")[1]
        assert "env_node" in offered and "gpu_node" not in offered, why


def test_ray_settings_without_the_ray_backend_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    from train_helpers import BABYAI, grpo_args

    from agentgym_train.cli import main as agentgym
    from agentgym_train.trainers.grpo import _env_pool

    for setting in ({"ray_resource": "env_node"}, {"ray_envs_per_actor": 4}, {"ray_address": "10.0.0.5:6379"}):
        with pytest.raises(ValueError, match=f"{next(iter(setting))} given with env_backend='threads'"):
            _env_pool(grpo_args(tmp_path, **setting))
    assert _env_pool(grpo_args(tmp_path)) is None
    for command in (["eval", "tiny", BABYAI], ["collect", "tiny", BABYAI, "--out", str(tmp_path / "x.jsonl")]):
        assert agentgym([*command, "--ray-resource", "env_node"]) == 2
        assert "--ray-resource places envs on a Ray cluster" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


@pytest.mark.slow
def test_envs_on_a_two_node_ray_cluster_match_in_process_envs_and_survive_a_lost_node(
    tiny_babyai: Path, tmp_path: Path
) -> None:
    reason = unshare_works()
    if reason is not None:
        pytest.skip(reason)
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SUPPORT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        ["unshare", "-n", sys.executable, str(SUPPORT / "ray_cluster_job.py"), str(tiny_babyai), str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and out.exists(), run.stdout[-3000:] + run.stderr[-6000:]
    report = json.loads(out.read_text())
    print(json.dumps({k: v for k, v in report.items() if k not in ("equal", "equal_again", "after_kill_equal")}))
    assert namespace_pids(report["inode"]) == [], "processes of the test's Ray cluster were left running"
    assert report["left"] == []

    # 32 BabyAI episodes: the same tokens, masks, chats and stats on Ray as in this process, also when the
    # envs are reused (reset, not re-created: one actor of 32 envs for both rollouts)
    assert all(report["equal"]) and all(report["equal_again"]), report["equal"]
    assert report["successes"] > 0 and report["actors_after_two_rollouts"] == 1

    nodes = report["nodes"]
    assert report["placement"] == {"node2": {nodes["node2"]: 8}, "head_node": {nodes["head_node"]: 8}}
    assert "no live node of the Ray cluster can hold" in report["unplaceable"] and "node2" in report["unplaceable"]

    # the second node lost mid-rollout: its episodes end with env_error, the others finish, the rollout returns
    assert report["before_kill"].get(nodes["node2"], 0) > 0 and report["before_kill"].get(nodes["head_node"], 0) > 0
    kill = report["kill"]
    assert report["killed_workers"] > 0, report
    lost = [k for k in kill if k["on_node2"]]
    kept = [k for k in kill if not k["on_node2"]]
    assert len(lost) == report["before_kill"][nodes["node2"]]
    # Ray's error while the actor is down, or, when Ray restarted it (empty) before the next step, the actor's
    # refusal to step an env it no longer holds: which one depends on how fast the restart is
    assert all(k["env_error"] and lost_on_its_actor(k["env_error"]) for k in lost), lost
    assert all(k["env_error"] is None and k["turns"] == 8 for k in kept), kept
    assert report["env_errors"] == len(lost)
    # the next rollout makes the lost envs again on the remaining node and plays as in this process
    assert report["after_kill_errors"] == [None] * 32
    assert report["after_kill_placement"] == {nodes["head_node"]: 32}
    assert all(report["after_kill_equal"])

    # the command line and the trainer on Ray: `--ray ADDRESS`, env_backend="ray"
    commands = report["commands"]
    assert commands["eval_rc"] == 0 and commands["eval_episodes"] == 4 and commands["eval_actors"] == 1, commands
    assert commands["collect_rc"] == 0 and commands["collect_lines"] == 4 and commands["collect_actors"] == 1, commands
    # the second node lost during a training step: that step ends its episodes there with env_error and
    # completes; the next step's rollout makes them again on the head and has no error
    train = report["train"]
    assert train["pool"] == "RayEnvPool" and train["killed_at_step"] == 0 and train["killed_workers"] > 0, train
    head, node2 = train["nodes"]["head_node"], train["nodes"]["node2"]
    assert train["placement_before_kill"].get(node2, 0) > 0 and train["placement_before_kill"].get(head, 0) > 0, train
    assert train["global_step"] == 2 and len(train["env_errors_per_step"]) == 2, train
    first, second = train["env_errors_per_step"]
    assert 0 < first <= train["placement_before_kill"][node2] and second == 0, train
    assert all(loss is not None and math.isfinite(loss) for loss in train["losses"]), train
    assert train["envs_on_ray_after"] == {head: train["episodes"]}, train

    # RayVectorEnv: a Gymnasium vector env whose sub-envs step as the same envs do in this process
    assert report["vector"]["same"] == [True] * 4 and report["vector"]["space"] == "TextSpace", report["vector"]

    # 4 SciWorld episodes: a JVM per env, one env per actor, the same episodes as in this process
    sciworld = report["sciworld"]
    assert all(sciworld["equal"]) and sciworld["env_errors"] == [None] * 8 and sciworld["actors"] == 4, sciworld
    assert sciworld["turns"] == [3] * 4, sciworld

    # 2 WebArena episodes: a Chromium per env, one env per actor, the same episodes as in this process
    webarena = report["webarena"]
    assert all(webarena["equal"]) and webarena["env_errors"] == [None] * 4 and webarena["actors"] == 2, webarena
    assert webarena["turns"] == [3, 3] and all("URL: http://" in o for o in webarena["last_observations"]), webarena

    # token authentication: a driver with the wrong token never joins
    assert not report["unauthenticated"]["connected"] and report["unauthenticated"]["token_refused"], report
