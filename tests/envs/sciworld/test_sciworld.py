"""SciWorld: splits, observations, reward scale, failure ending, JVM lifecycle (crash, close, exit), gold paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import gymnasium as gym
import pytest
from helpers import expert_rollout

from agentgym_envs.core import EpisodeOverError
from agentgym_envs.sciworld import tasks as T
from agentgym_envs.sciworld.backend import ScienceWorldJVM, SciWorldBackendError, live_jvms
from agentgym_envs.sciworld.env import SciWorldEnv, normalise_action
from agentgym_envs.sciworld.gold import GoldPaths, packaged, sample_tasks


def make(**kwargs) -> SciWorldEnv:
    return gym.make("AgentGym/SciWorld-v0", **kwargs).unwrapped


@pytest.fixture(scope="module")
def env():
    env = make()
    yield env
    env.close()


def _gone(pid: int, within_s: float = 10.0) -> bool:
    """Whether process `pid` ends (exits, or is a zombie awaiting its parent) within `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


# ---- tasks and splits (no JVM) -------------------------------------------------------------------
def test_splits_are_scienceworlds_and_ordered_round_robin() -> None:
    base = make()
    assert [len(base.tasks(split)) for split in base.splits] == [3592, 1796, 1819]
    assert sum(count for _, count in T.TASK_TYPES.values()) == 7207
    test = base.tasks("test")
    assert test[:3] == ["boil/21", "melt/21", "freeze/21"]
    assert {T.parse_task_id(t)[0] for t in test[:30]} == set(T.TASK_TYPES)  # any prefix covers the types
    everything = [t for split in base.splits for t in base.tasks(split)]
    assert len(set(everything)) == 7207  # disjoint and complete
    assert all(base.split_of(t) == split for split in base.splits for t in base.tasks(split)[::97])
    assert base.split_of("boil/30") is None and base.split_of("nope/1") is None
    assert base.jvm_pid is None  # listing tasks starts no JVM
    boil = make(task_names=("boil",))
    assert boil.tasks("test") == [f"boil/{v}" for v in range(21, 30)]
    with pytest.raises(ValueError, match="unknown ScienceWorld task types"):
        make(task_names=("boiling",))


def test_jvm_options_bound_the_heap_and_fix_hashing() -> None:
    command = ScienceWorldJVM().command()
    assert "-Xmx512m" in command and "-XX:hashCode=2" in command
    assert f"-Dagentgym.sciworld.owner={os.getpid()}" in command
    assert "-Xmx2g" in ScienceWorldJVM(heap="2g").command()
    fast = ScienceWorldJVM(heap=None, deterministic=False, java_options=["-Xss4m"]).command()
    assert not any(o.startswith("-Xmx") or o == "-XX:hashCode=2" for o in fast) and "-Xss4m" in fast
    with pytest.raises(SciWorldBackendError, match="cannot find Java"):
        ScienceWorldJVM(java="/nonexistent/java").start()


def test_normalise_action() -> None:
    assert normalise_action("  'Open door to kitchen.'\n") == "Open door to kitchen"
    assert normalise_action("look\t\taround") == "look around"


# ---- one shared env ------------------------------------------------------------------------------
def test_splits_match_the_jvm(env: SciWorldEnv) -> None:
    env.reset(options={"task_id": "boil/21"})
    jvm = env._jvm

    def integers(method: str) -> list[int]:  # a java.util.List of Integers, through its toString
        return json.loads(jvm._command(f"c\n{jvm.call(method)}\ntoString\ne\n"))

    assert jvm.call_list("getTaskNames") == sorted(T.TASK_TYPES)
    for name, (_, count) in T.TASK_TYPES.items():
        jvm.call("load", name, 0, "", False)
        assert jvm.call("getTaskMaxVariations", name) == count
        ranges = T.split_ranges(count)
        for split in T.SPLITS:
            assert integers(f"getVariations{split.title()}") == list(ranges[split]), (name, split)


def test_reset_shows_the_task_and_the_room(env: SciWorldEnv) -> None:
    observation, info = env.reset(options={"split": "test", "task_id": 0})
    assert info["task_id"] == "boil/21" and info["category"] == "boil" and info["variation"] == 21
    assert observation.startswith(info["instruction"]) and info["instruction"].startswith("Your task is to boil")
    assert "This room is called the" in observation and info["available_actions"] is None


def test_reward_is_the_score_increase_over_100(env: SciWorldEnv) -> None:
    rollout = expert_rollout(env, options={"task_id": "find-living-thing/225"})
    rewards, info = rollout["rewards"], rollout["info"]
    assert info["success"] and rollout["terminated"] and info["score"] == 1.0
    assert sum(rewards) == pytest.approx(1.0) and all(r >= 0 for r in rewards)
    partial = [r for r in rewards if 0 < r < 1]
    assert partial, "ScienceWorld pays partial credit on the way"
    assert all(abs(100 * r - round(100 * r)) < 1e-9 for r in rewards)  # whole points of 100
    assert rollout["observations"][-1].endswith("The task is complete.")


def test_score_follows_the_jvm(env: SciWorldEnv) -> None:
    env.reset(options={"task_id": "find-living-thing/225"})
    for action in env.gold_actions()[:-1]:
        _, _, _, _, info = env.step(action)
        assert info["score"] == round(100 * env._jvm.call("getScore")) / 100


def test_focus_on_a_wrong_object_fails_and_ends_the_episode(env: SciWorldEnv) -> None:
    env.reset(options={"task_id": "find-living-thing/225"})
    gold = env.gold_actions()
    focus = next(i for i, action in enumerate(gold) if action.startswith("focus on"))
    score = 0.0
    for action in gold[:focus]:
        _, reward, *_ = env.step(action)
        score += reward
    assert score > 0
    observation, reward, terminated, truncated, info = env.step("focus on air")
    assert terminated and not truncated and not info["success"]
    assert reward == pytest.approx(-score) and info["score"] == 0.0  # a failed task scores 0
    assert "The task has failed" in observation
    with pytest.raises(EpisodeOverError):
        env.step("look around")


def test_unparsable_text_is_invalid_and_changes_nothing(env: SciWorldEnv) -> None:
    env.reset(options={"task_id": "boil/21"})
    moves = env._jvm.call("getNumMoves")
    for action in ("xyz", "", "open", "look around please", "7"):
        observation, reward, terminated, _, info = env.step(action)
        assert not info["valid_action"] and reward == 0 and not terminated
        assert observation.startswith("No known action matches that input.")
        assert "check available actions" in observation
    assert env._jvm.call("getNumMoves") == moves
    _, _, _, _, info = env.step("  'LOOK AROUND.' ")  # case, spaces, quotes and a full stop are forgiven
    assert info["valid_action"]


def test_check_available_actions_lists_templates_and_objects_for_free(env: SciWorldEnv) -> None:
    env.reset(options={"task_id": "boil/21"})
    moves = env._jvm.call("getNumMoves")
    observation, reward, _, _, info = env.step("check available actions")
    assert info["valid_action"] and reward == 0 and env._jvm.call("getNumMoves") == moves
    assert "focus on OBJ" in observation and "connect OBJ to OBJ" in observation
    objects = observation.split("Objects you can refer to here: ")[1].rstrip(".").split(", ")
    assert set(objects) == set(env._jvm.call_list("getPossibleObjects")) and "agent" in objects


def test_ambiguity_is_resolved_by_a_number(env: SciWorldEnv) -> None:
    task_id, gold = next((t, g) for t, g in packaged().items() if "0" in g)
    env.reset(options={"task_id": task_id})
    question = gold.index("0") - 1
    for action in gold[:question]:
        env.step(action)
    observation, _, _, _, info = env.step(gold[question])
    assert info["valid_action"] and observation.startswith("Ambiguous request")
    choices, *_ = env.step("check available actions")
    assert "answer with a number from 0 to" in choices
    for action in gold[question + 1 :]:
        _, _, terminated, _, info = env.step(action)
        if terminated:
            break
    assert info["success"]


def test_observations_repeat_across_loads_and_jvms(env: SciWorldEnv) -> None:
    # Without deterministic hashing, the order of objects in a room (and dynamics such as a
    # thermometer's reading) changes between JVMs and even between loads of one JVM.
    def trace(e: SciWorldEnv, task_id: str) -> list[str]:
        observations = [e.reset(options={"task_id": task_id})[0]]
        for action in e.gold_actions():
            observation, _, terminated, _, _ = e.step(action)
            observations.append(observation)
            if terminated:
                return observations
        raise AssertionError(f"the gold path did not finish {task_id}")

    first = trace(env, "find-living-thing/225")
    env.reset(options={"task_id": "grow-fruit/93"})
    assert trace(env, "find-living-thing/225") == first


# ---- JVM lifecycle -------------------------------------------------------------------------------
def test_a_killed_jvm_is_reported_and_reset_starts_a_fresh_one() -> None:
    env = make()
    env.reset(options={"task_id": "boil/21"})
    pid = env.jvm_pid
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    with pytest.raises(SciWorldBackendError, match=rf"JVM \(pid {pid}\) died during step.*reset\(\)"):
        env.step("look around")
    assert env.jvm_pid is None
    with pytest.raises(SciWorldBackendError, match="call reset"):  # no silent restart mid-episode
        env.step("look around")
    _, info = env.reset(options={"task_id": "boil/21"})
    assert env.jvm_pid not in (None, pid) and info["task_id"] == "boil/21"
    assert env.step("open door to kitchen")[4]["valid_action"]
    env.close()


def test_a_hung_jvm_is_killed_after_the_timeout_and_reset_starts_a_fresh_one() -> None:
    env = make(timeout_s=3.0)
    env.reset(options={"task_id": "boil/21"})
    pid = env.jvm_pid
    # Keep the JVM busy for 60 s on this connection (a simulator stuck in a long computation), so
    # the next call waits behind it. SIGSTOP would model a hang too, but some sandboxes (CI's) do
    # not stop a process on it.
    env._jvm._socket.sendall(b"c\nz:java.lang.Thread\nsleep\nL60000\ne\n")
    started = time.monotonic()
    hung = rf"JVM \(pid {pid}\) did not answer step.* within 3 s and was killed"
    with pytest.raises(SciWorldBackendError, match=hung):
        env.step("look around")
    assert 2.5 < time.monotonic() - started < 30 and _gone(pid)
    env.reset(options={"task_id": "boil/21"})
    assert env.jvm_pid not in (None, pid) and env.step("open door to kitchen")[4]["valid_action"]
    env.close()


def test_close_is_idempotent_and_ends_the_jvm(capfd: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Dagentgym.test=1")  # Java announces it on stderr
    unused = make()
    unused.close()  # never reset: no JVM was started
    unused.close()
    env = make()
    assert env.jvm_pid is None  # the JVM starts on the first reset, not in __init__
    env.reset(options={"task_id": "boil/21"})
    pid = env.jvm_pid
    assert pid in live_jvms()
    env.close()
    env.close()
    assert _gone(pid, within_s=1) and env.jvm_pid is None and pid not in live_jvms()
    out, err = capfd.readouterr()
    assert out == "" and "Picked up" not in err  # no backend chatter


def test_envs_start_their_jvms_in_parallel() -> None:
    envs = [make() for _ in range(3)]
    spans: list[tuple[float, float]] = []

    def start(e: SciWorldEnv) -> None:
        began = time.monotonic()
        e.reset(options={"task_id": "boil/21"})
        spans.append((began, time.monotonic()))

    threads = [threading.Thread(target=start, args=(e,)) for e in envs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    pids = {e.jvm_pid for e in envs}
    for e in envs:
        e.close()
    assert len(pids) == 3 and None not in pids
    assert max(b for b, _ in spans) < min(e for _, e in spans)  # all three were starting at once


_CHILD = """
import os, signal, sys
import gymnasium as gym, agentgym_envs
envs = [gym.make("AgentGym/SciWorld-v0") for _ in range(2)]
for e in envs:
    e.reset(options={"task_id": "boil/21"})
print(" ".join(str(e.unwrapped.jvm_pid) for e in envs), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("ending", ["exit", "kill"])
def test_no_jvm_outlives_the_python_process(ending: str) -> None:
    child = subprocess.run([sys.executable, "-c", _CHILD, ending], capture_output=True, text=True, timeout=120)
    pids = [int(p) for p in child.stdout.split()]
    assert len(pids) == 2, child.stderr
    assert all(_gone(pid) for pid in pids)


# ---- gold paths and the expert -------------------------------------------------------------------
def test_packaged_sample_covers_every_task_type() -> None:
    gold = packaged()
    assert sorted(gold) == sorted(sample_tasks()) and len(gold) == 149
    assert {T.parse_task_id(t)[0] for t in gold} == set(T.TASK_TYPES)
    assert all(T.split_of(t) == "test" for t in gold)


def test_gold_paths_are_generated_outside_the_env_jvm(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("AGENTGYM_CACHE_DIR", str(tmp_path))
    env = make()
    env.reset(options={"task_id": "lifespan-longest-lived/0"})  # a train task: not packaged
    expert = env.make_expert()
    generator = env._gold._jvm
    assert generator.pid != env.jvm_pid
    assert generator.call("goldPathGenerationEnabled") and not env._jvm.call("goldPathGenerationEnabled")
    assert list(tmp_path.rglob("lifespan-longest-lived-0.json"))  # cached for next time
    info: dict = {}
    observation = ""
    for _ in range(20):
        observation, _, terminated, _, info = env.step(expert.act(observation, info))
        if terminated:
            break
    assert info["success"]
    gold_pid = generator.pid
    env.close()
    assert _gone(gold_pid, within_s=1)  # close() ends the generator JVM too
    cached = GoldPaths()  # a fresh reader finds the cached path without starting a JVM
    assert cached.get("lifespan-longest-lived/0") and cached._jvm.pid is None


def test_make_expert_needs_the_initial_state(env: SciWorldEnv) -> None:
    env.reset(options={"task_id": "boil/21"})
    env.step("xyz")  # invalid actions change nothing, so the gold path still applies
    env.make_expert()
    env.step("look around")
    with pytest.raises(RuntimeError, match="right after reset"):
        env.make_expert()


def test_task_ids_are_ascii_digits_of_bounded_length() -> None:
    from agentgym_envs.sciworld.tasks import parse_task_id

    assert parse_task_id("boil/3") == ("boil", 3)
    for bad in ("boil/\u0663", "boil/" + "9" * 5000, "boil/3\n", "boil/-3", "/3", "boil/"):
        assert parse_task_id(bad) is None, bad
