"""The Ray cluster checks, run by test_ray_pool.py under `unshare -n` (a network namespace with only loopback).

Starts a head and a second node (`LoopbackCluster`), each with a custom resource of its own and one they
share, runs the checks against them, stops every process of the cluster by PID and writes what it saw
as JSON (the test asserts on it). Usage: python ray_cluster_job.py MODEL_DIR OUT_JSON
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from train_helpers import BABYAI, ENV_KWARGS

from agentgym_envs.cluster.local import LoopbackCluster, namespace_inode
from agentgym_train.models.tiny import load_tokenizer
from agentgym_train.rollout import RolloutEngine, Task

NODES = [
    {"num_cpus": 4, "resources": {"envs": 8, "head_node": 8}},
    {"num_cpus": 2, "resources": {"envs": 8, "node2": 8}},
]
ACTIONS = ["Action: turn left", "Action: turn right", "Action: go forward", "Action: go forward"]


def scripted(tokenizer: Any, actions: list[str]) -> Any:
    """A TurnGenerator whose reply depends only on the context (so equal envs give equal trajectories)."""
    encoded = [[*tokenizer(a, add_special_tokens=False)["input_ids"], tokenizer.eos_token_id] for a in actions]

    def generate(contexts: list[list[int]], max_new_tokens: int, stop: Any = None) -> list[Any]:
        out = []
        for context in contexts:
            ids = encoded[sum(context) % len(encoded)][:max_new_tokens]
            out.append((ids, [-0.5] * len(ids)))
        return out

    return generate


def signature(episode: Any) -> dict[str, Any]:
    stats = {k: v for k, v in episode.stats.items() if k != "wall_time"}
    return {
        "completion_ids": episode.completion_ids,
        "prompt_ids": episode.prompt_ids,
        "env_mask": episode.env_mask,
        "logprobs": episode.logprobs,
        "replies": episode.replies,
        "messages": episode.messages,
        "return": episode.episode_return,
        "turns": episode.turns,
        "success": episode.success,
        "ended": [episode.terminated, episode.truncated, episode.budget_truncated],
        "env_error": episode.env_error,
        "stats": repr(stats),
    }


def node_ids(ray: Any) -> dict[str, str]:
    """Custom resource -> id of the node that has it."""
    out = {}
    for node in ray.nodes():
        if node["Alive"]:
            for name in ("head_node", "node2"):
                if name in node["Resources"]:
                    out[name] = node["NodeID"]
    return out


def unauthenticated_driver(address: str) -> dict[str, Any]:
    """A driver with a wrong token: Ray's token authentication must turn it away."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 32})
    code = f"import ray; ray.init(address={address!r}, _node_ip_address='127.0.0.1'); print('CONNECTED', flush=True)"
    started = time.perf_counter()
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30)
        text, rc = out.stdout + out.stderr, out.returncode
    except subprocess.TimeoutExpired as error:
        text, rc = str(error.stdout or "") + str(error.stderr or ""), None
    return {
        "connected": "CONNECTED" in text,
        "token_refused": "InvalidAuthToken" in text,
        "rc": rc,
        "seconds": time.perf_counter() - started,
        "tail": text[-400:],
    }


def env_hosts(ray: Any) -> int:
    """`EnvHost` actors the cluster has had, live or ended (read from the GCS; no dashboard needed): a
    command's pool ends its actors when it is dropped."""
    from ray._private.state import actors

    return sum("EnvHost" in str(a.get("ActorClassName")) for a in actors().values())


def commands_on_ray(model_dir: str, address: str) -> dict[str, Any]:
    import ray

    from agentgym_train.cli import main as agentgym

    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        before = env_hosts(ray)
        kwargs = json.dumps(ENV_KWARGS)
        common = [
            "--tasks",
            "4",
            "--max-turns",
            "3",
            "--max-turn-tokens",
            "8",
            "--env-kwargs",
            kwargs,
            "--ray",
            address,
        ]
        eval_json = os.path.join(tmp, "eval.json")
        out["eval_rc"] = agentgym(["eval", model_dir, BABYAI, "--split", "train", *common, "--json", eval_json])
        out["eval_episodes"] = len(json.loads(Path(eval_json).read_text()).get("episodes", []))
        out["eval_actors"] = env_hosts(ray) - before
        collected = os.path.join(tmp, "episodes.jsonl")
        before = env_hosts(ray)
        out["collect_rc"] = agentgym(["collect", model_dir, BABYAI, "--out", collected, *common, "--no-progress"])
        out["collect_lines"] = len(Path(collected).read_text().splitlines())
        out["collect_actors"] = env_hosts(ray) - before
    return out


def training_with_a_lost_node(model_dir: str, address: str, cluster: LoopbackCluster) -> dict[str, Any]:
    """Two GRPO steps with env_backend="ray", the envs spread over both nodes (`ray_resource`); the second
    node's raylet is killed during the first step's rollout (before its second batched env step)."""
    import ray
    from train_helpers import grpo_args

    from agentgym_train.models.tiny import load_model
    from agentgym_train.trainers.grpo import MultiTurnGRPOTrainer

    model, tokenizer = load_model(model_dir)
    out: dict[str, Any] = {"nodes": node_ids(ray)}
    with tempfile.TemporaryDirectory() as tmp:
        args = grpo_args(
            Path(tmp),
            env_backend="ray",
            ray_address=address,
            ray_resource="envs",
            ray_envs_per_actor=2,
            max_steps=2,
            env_timeout=120,
        )
        trainer = MultiTurnGRPOTrainer(model, args, processing_class=tokenizer)
        pool = trainer.engine.env_pool
        step, calls = pool.step, {"n": 0}

        def step_then_kill(envs: Any, actions: Any, **kwargs: Any) -> Any:
            calls["n"] += 1
            if calls["n"] == 2:
                out["placement_before_kill"] = pool.placement()
                out["killed_workers"] = len(cluster.kill_node("node2"))
                out["killed_at_step"] = trainer.state.global_step
            return step(envs, actions, **kwargs)

        pool.step = step_then_kill
        trainer.train()
        logs = [entry for entry in trainer.state.log_history if "episode/env_errors" in entry]
        out.update(
            global_step=trainer.state.global_step,
            pool=type(pool).__name__,
            episodes=len(trainer.last_episodes),
            env_errors_per_step=[entry["episode/env_errors"] for entry in logs],
            losses=[entry.get("loss") for entry in logs],
            envs_on_ray_after=pool.placement(),
        )
        trainer.engine.close()
        pool.close()
    return out


def vector_env_on_ray() -> dict[str, Any]:
    import gymnasium as gym

    from agentgym_envs.cluster import RayEnvPool, RayVectorEnv

    pool = RayEnvPool(resource="envs")
    vector = RayVectorEnv(BABYAI, 4, pool=pool, env_kwargs=ENV_KWARGS)
    local = [gym.make(BABYAI, **ENV_KWARGS) for _ in range(4)]
    observations, _ = vector.reset(seed=7)
    same = [observations == tuple(env.reset(seed=7 + i)[0] for i, env in enumerate(local))]
    for action in ["turn left", "go forward", "turn right"]:
        observations, rewards, terminated, truncated, infos = vector.step([action] * 4)
        steps = [env.step(action) for env in local]
        same.append(
            observations == tuple(s[0] for s in steps)
            and list(rewards) == [float(s[1]) for s in steps]
            and list(terminated) == [s[2] for s in steps]
            and list(truncated) == [s[3] for s in steps]
        )
    out = {"same": same, "space": type(vector.single_observation_space).__name__, "infos": sorted(infos)[:4]}
    vector.close()
    pool.close()
    for env in local:
        env.close()
    return out


def heavy_envs_on_ray(tokenizer: Any, env_id: str, episodes: int, actions: list[str], budget: int) -> dict[str, Any]:
    """`episodes` episodes of a scenario with one env per actor (a JVM, a browser) on Ray and in this process."""
    from agentgym_envs.cluster import RayEnvPool

    tasks = [Task(env_id, None, "train", seed) for seed in range(episodes)]
    args = {"max_turns": 3, "max_completion_length": budget, "max_turn_tokens": 16, "env_timeout": 180}
    local_engine = RolloutEngine(tokenizer, **args)
    local = local_engine.run(tasks, scripted(tokenizer, actions))
    local_engine.close()
    pool = RayEnvPool(resource="envs")
    engine = RolloutEngine(tokenizer, env_pool=pool, **args)
    remote = engine.run(tasks, scripted(tokenizer, actions))
    out = {
        "equal": [signature(a) == signature(b) for a, b in zip(local, remote, strict=True)],
        "env_errors": [e.env_error for e in local + remote],
        "actors": len(pool._actors),
        "turns": [e.turns for e in remote],
        "last_observations": [e.messages[-1]["content"] for e in remote],
    }
    engine.close()
    pool.close()
    return out


def main(model_dir: str, out_path: str) -> None:
    results: dict[str, Any] = {"inode": namespace_inode(), "timings": {}}
    timings = results["timings"]
    tokenizer = load_tokenizer(model_dir)
    engine_args = {"max_turns": 6, "max_completion_length": 512, "max_turn_tokens": 16, "env_kwargs": ENV_KWARGS}
    cluster = LoopbackCluster(NODES)
    started = time.perf_counter()
    with cluster:
        timings["cluster_start"] = time.perf_counter() - started
        import ray

        from agentgym_envs.cluster import RayEnvPool

        started = time.perf_counter()
        ray.init(address=cluster.address, _node_ip_address="127.0.0.1", log_to_driver=False)
        timings["connect"] = time.perf_counter() - started
        nodes = node_ids(ray)
        results["nodes"] = nodes

        # 1. the same 32 BabyAI episodes in this process and on the cluster
        tasks = [Task(BABYAI, i, "train", 100 + i) for i in range(32)]
        local = RolloutEngine(tokenizer, **engine_args).run(tasks, scripted(tokenizer, ACTIONS))
        pool = RayEnvPool(resource="envs")
        engine = RolloutEngine(tokenizer, env_pool=pool, env_timeout=120, **engine_args)
        started = time.perf_counter()
        remote = engine.run(tasks, scripted(tokenizer, ACTIONS))
        timings["ray_rollout_first"] = time.perf_counter() - started
        started = time.perf_counter()
        again = engine.run(tasks, scripted(tokenizer, ACTIONS))  # the same envs, reset (not re-created)
        timings["ray_rollout_again"] = time.perf_counter() - started
        results["equal"] = [signature(a) == signature(b) for a, b in zip(local, remote, strict=True)]
        results["equal_again"] = [signature(a) == signature(b) for a, b in zip(local, again, strict=True)]
        results["successes"] = sum(e.success for e in local)
        results["actors_after_two_rollouts"] = len(pool._actors)
        pool.close()

        # 2. envs land on the node whose resource their pool names
        results["placement"] = {}
        for name in ("node2", "head_node"):
            placed = RayEnvPool(resource=name, envs_per_actor=4)
            RolloutEngine(tokenizer, env_pool=placed, env_timeout=120, **engine_args).run(
                tasks[:8], scripted(tokenizer, ACTIONS)
            )
            results["placement"][name] = placed.placement()
            placed.close()
        try:  # a resource no node offers (a typo): refused at once, not waited for until env_timeout
            RayEnvPool(resource="node3").acquire(BABYAI)
            results["unplaceable"] = "acquired"
        except ValueError as error:
            results["unplaceable"] = str(error)

        # 3. the second node's raylet killed mid-rollout
        pool = RayEnvPool(resource="envs", envs_per_actor=8, max_restarts=2)
        engine = RolloutEngine(tokenizer, env_pool=pool, env_timeout=120, **{**engine_args, "max_turns": 8})
        local8 = RolloutEngine(tokenizer, **{**engine_args, "max_turns": 8}).run(tasks, scripted(tokenizer, ACTIONS))
        engine.run(tasks, scripted(tokenizer, ACTIONS))  # makes the actors, SPREAD over both nodes
        by_node = {}
        for actor in pool._actors:
            by_node.setdefault(ray.get(actor.handle.node_id.remote(), timeout=60), []).extend(sorted(actor.keys))
        results["before_kill"] = {node: len(keys) for node, keys in by_node.items()}
        keys_on_node2 = set(by_node.get(nodes["node2"], []))
        turns = {"n": 0}
        circling = scripted(tokenizer, ["Action: turn left"])

        def killing(contexts: list[list[int]], max_new_tokens: int, stop: Any = None) -> list[Any]:
            turns["n"] += 1
            if turns["n"] == 2:  # the raylet killed, and its workers (the actors) gone with it
                started = time.perf_counter()
                results["killed_workers"] = len(cluster.kill_node("node2"))
                timings["workers_gone_after_kill"] = time.perf_counter() - started
            return circling(contexts, max_new_tokens)

        slots_before = list(engine._pool[BABYAI])
        started = time.perf_counter()
        killed = engine.run(tasks, killing)
        timings["rollout_with_kill"] = time.perf_counter() - started
        on_node2 = {id(e) for e in slots_before if e.key in keys_on_node2}
        # the engine's pooled envs were taken in pool order: map episodes to envs by the order they were taken
        taken = list(reversed(slots_before))[: len(tasks)]
        results["kill"] = [
            {"on_node2": id(env) in on_node2, "env_error": ep.env_error, "turns": ep.turns}
            for env, ep in zip(taken, killed, strict=True)
        ]
        results["env_errors"] = engine.env_errors
        started = time.perf_counter()
        after = engine.run(tasks, scripted(tokenizer, ACTIONS))
        timings["rollout_after_kill"] = time.perf_counter() - started
        results["after_kill_errors"] = [e.env_error for e in after]
        results["after_kill_placement"] = pool.placement()
        results["after_kill_equal"] = [signature(a) == signature(b) for a, b in zip(local8, after, strict=True)]
        pool.close()

        # 4. `agentgym eval/collect --ray` (on the head, the one left), then training with env_backend="ray" over
        # both nodes (the second one started again) while the second node is lost
        results["commands"] = commands_on_ray(model_dir, cluster.address)
        started = time.perf_counter()
        cluster.add_node(NODES[1])
        results["train"] = training_with_a_lost_node(model_dir, cluster.address, cluster)
        timings["train_with_kill"] = time.perf_counter() - started

        # 4b. a Gymnasium vector env over the pool: the same observations and rewards as envs in this process
        results["vector"] = vector_env_on_ray()

        # 5. 4 SciWorld episodes (a JVM per env, one env per actor) on Ray and in this process
        started = time.perf_counter()
        sciworld = ["Action: look around", "Action: inventory", "Action: go to kitchen", "Action: open door to kitchen"]
        results["sciworld"] = heavy_envs_on_ray(tokenizer, "AgentGym/SciWorld-v0", 4, sciworld, 768)
        timings["sciworld"] = time.perf_counter() - started

        # 5b. 2 WebArena episodes (a Chromium per env) on Ray and in this process
        started = time.perf_counter()
        webarena = ["Action: scroll [down]", "Action: scroll [up]", "Action: go_back", "Action: click [3]"]
        results["webarena"] = heavy_envs_on_ray(tokenizer, "AgentGym/WebArena-v0", 2, webarena, 8192)
        timings["webarena"] = time.perf_counter() - started

        # 6. a driver without the cluster's token is turned away
        results["unauthenticated"] = unauthenticated_driver(cluster.address)

        ray.shutdown()
        started = time.perf_counter()
        results["left"] = cluster.stop()
        timings["cluster_stop"] = time.perf_counter() - started
    with open(out_path, "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
