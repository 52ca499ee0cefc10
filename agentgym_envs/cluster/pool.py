"""`RayEnvPool`: envs as Ray actors, many per actor where envs are light, one Ray call per actor per batch.

The pool hands out `PooledEnv`s (a key on an actor). Actors are created on first need with the
resources the scenario declares (`agentgym_envs.cluster.resources`) plus the custom resource the user
names (to place envs on CPU nodes), and reused: an env is reset, not re-created, for its next episode.
`reset` and `step` take many envs at once and send each actor one list of operations; a call's
result per env is its value or the exception it raised.

Faults: an actor that dies (its node lost, its process killed) fails the calls of all its envs with
Ray's `RayActorError` (e.g. `ActorDiedError`); Ray restarts it (`max_restarts`), empty, and the pool
keeps using it: a reset waits for the restart and makes the env again there. An actor past `timeout`
fails its envs with `EnvTimeoutError` and is killed, so that Ray restarts it rather than let a hung env
block later batches. The rollout engine ends such episodes with `env_error`, as it does for an
in-process env that raised.

Security: `RayEnvPool` connects to a running cluster (`address`), or starts a local one only when
told (`address="local"`), without the dashboard, on the address the user names, never on a wildcard
address (all interfaces) and on loopback only where Ray keeps it (`check_local_head`), unless
`allow_all_interfaces=True`. Ray's token
authentication is on for a head it starts (RAY_AUTH_MODE=token; Ray keeps the token in
~/.ray/auth_token or RAY_AUTH_TOKEN).
"""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import pickle
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentgym_envs.cluster.resources import ActorResources, resources_for

WILDCARD_ADDRESSES = frozenset({"", "0.0.0.0", "::", "[::]"})
#: Seconds between calls to an actor that Ray is restarting (resets wait for it).
RESTART_POLL = 0.2
#: Pickle protocol of a batch's operations and results (`EnvHost.run_packed`).
PROTOCOL = pickle.HIGHEST_PROTOCOL


class EnvTimeoutError(TimeoutError):
    """An env call (its actor's batch) ran past the pool's timeout."""


def ray_module() -> Any:
    try:
        import ray
    except ImportError as error:  # pragma: no cover - depends on the install
        raise ImportError("the Ray env pool needs Ray: pip install 'agentgym-rl[ray]'") from error
    return ray


def check_bind_address(address: str, allow_all_interfaces: bool = False) -> str:
    """`address` if a head may bind to it: a wildcard (all interfaces) only with `allow_all_interfaces`."""
    if address.strip() in WILDCARD_ADDRESSES:
        if not allow_all_interfaces:
            raise ValueError(
                f"refusing to start a Ray head on {address!r} (every network interface): anyone who reaches its "
                "ports can run code on this machine. Name one address (default 127.0.0.1), or pass "
                "allow_all_interfaces=True if the network is private."
            )
        return address
    ipaddress.ip_address(address)  # a name or a malformed address is an error here, not inside Ray
    return address


def connect(
    address: str | None,
    *,
    node_ip_address: str | None = None,
    allow_all_interfaces: bool = False,
    namespace: str = "agentgym",
) -> None:
    """Join the Ray cluster at `address` (None: `RAY_ADDRESS`, else an already initialized Ray), or with
    `address="local"` start a private one-node cluster (see `check_local_head`)."""
    if address == "local":  # checked first: refused even where Ray already runs
        node_ip_address = check_local_head(node_ip_address, allow_all_interfaces)
    ray = ray_module()
    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")
    if not address:
        raise ValueError(
            "no Ray cluster named: pass its address (e.g. 10.0.0.5:6379, or 'auto' on a cluster node), set "
            "RAY_ADDRESS, or pass 'local' to start a private cluster on this machine"
        )
    kwargs: dict[str, Any] = {"namespace": namespace, "log_to_driver": False}
    if address == "local":
        token_auth()
        # address="local" starts a new cluster (None would join one recorded under /tmp/ray)
        ray.init(address="local", _node_ip_address=node_ip_address, include_dashboard=False, **kwargs)
        return
    if node_ip_address is not None:
        kwargs["_node_ip_address"] = node_ip_address
    ray.init(address=address, **kwargs)


def token_auth() -> None:
    """RAY_AUTH_MODE=token for this process, unless the user set a mode.

    Ray reads the mode once, when it is imported: a variable set after that reaches the processes of a
    head this process starts but not this process, which then writes no token, and the head's GCS dies
    for want of one (Ray 2.60: "Token authentication is enabled but Ray couldn't find an authentication
    token"). So Ray's configuration is read again, as Ray's own default for new local clusters does.
    """
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return
    os.environ["RAY_AUTH_MODE"] = "token"
    with contextlib.suppress(ImportError, AttributeError):  # a Ray without token authentication ignores it
        from ray._raylet import Config

        Config.initialize("")


def join_local_cluster(
    is_main: bool,
    share: Callable[[Any], Any],
    *,
    node_ip_address: str | None = None,
    allow_all_interfaces: bool = False,
    namespace: str = "agentgym",
) -> str:
    """`address="local"` for several processes on one machine (the ranks of a training run): one cluster.

    The main process starts the private cluster (as `connect("local")` does); `share(value)` hands every
    process the main process's value (a broadcast from it: every process calls it once, the main process
    with its offer, the others with None); the other processes join that cluster. Without this each
    process would start a private cluster of its own. A process on another machine, or in another
    network namespace, than the main one is refused: the cluster listens on the main process's loopback.

    Returns:
        The cluster's address (its GCS, "host:port"), the same in every process.

    Raises:
        ValueError: A process that cannot reach the main process's cluster, or a head refused by
            `check_local_head` (in every process: the main one shares why it started none).
        RuntimeError: The main process failed to start the cluster (in the other processes).
    """
    import socket

    from agentgym_envs.cluster.local import namespace_inode

    here = {"host": socket.gethostname(), "netns": namespace_inode()}
    if is_main:
        try:
            bind = check_local_head(node_ip_address, allow_all_interfaces)
            connect(
                "local", node_ip_address=node_ip_address, allow_all_interfaces=allow_all_interfaces, namespace=namespace
            )
            offer: dict[str, Any] = {"address": ray_module().get_runtime_context().gcs_address, "node_ip": bind, **here}
        except Exception as error:
            share({"error": f"{type(error).__name__}: {error}", "type": type(error).__name__})
            raise
        share(offer)
        return offer["address"]
    offer = share(None)
    if "error" in offer:
        kind = ValueError if offer["type"] == "ValueError" else RuntimeError
        raise kind(f"the main process started no local Ray cluster: {offer['error']}")
    if (offer["host"], offer["netns"]) != (here["host"], here["netns"]):
        raise ValueError(
            f"env_backend 'ray' with address 'local' starts one private cluster on the main process's loopback "
            f"({offer['host']}, network namespace {offer['netns']}), which this process ({here['host']}, "
            f"{here['netns']}) cannot reach: a run over several machines needs a cluster they all reach. Start "
            "one (`ray start --head --node-ip-address ADDR --include-dashboard=false` with RAY_AUTH_MODE=token, "
            "then `ray start --address ADDR:6379` on the others) and pass its address."
        )
    token_auth()  # the head's token is this machine's (~/.ray/auth_token, or the RAY_AUTH_TOKEN* variables)
    connect(offer["address"], node_ip_address=offer["node_ip"], namespace=namespace)
    return offer["address"]


def check_local_head(node_ip_address: str | None, allow_all_interfaces: bool = False) -> str | None:
    """The address a local head may be started on, or a ValueError saying why none may.

    A wildcard address (every interface) needs `allow_all_interfaces`. Loopback (the default) is kept
    only in a network namespace with nothing but loopback (`unshare -n`): elsewhere Ray on Linux binds a
    head asked for 127.0.0.1 to this machine's network address (`ray._private.services.
    resolve_ip_for_localhost`), which the user did not ask for. A named non-loopback address is used as given.
    """
    from agentgym_envs.cluster.local import only_loopback

    if node_ip_address is not None and node_ip_address.strip() in WILDCARD_ADDRESSES:
        return check_bind_address(node_ip_address, allow_all_interfaces)
    address = node_ip_address or "127.0.0.1"
    if ipaddress.ip_address(address).is_loopback and not only_loopback() and not allow_all_interfaces:
        raise ValueError(
            "refusing to start a local Ray head: Ray binds a head asked for 127.0.0.1 to this machine's network "
            "address, where anyone who reaches its ports can run code here. Run under `unshare -n` (a network "
            "namespace with only loopback), name a private address (node_ip_address), start the cluster "
            "yourself (`ray start --head --node-ip-address ADDR --include-dashboard=false`, with "
            "RAY_AUTH_MODE=token), or pass allow_all_interfaces=True if the network is private."
        )
    return check_bind_address(address, allow_all_interfaces)


def check_placeable(env_id: str, options: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> None:
    """ValueError unless one live node of `nodes` (`ray.nodes()`) has, in total, what an actor's `options` ask."""
    needs = {"CPU": options.get("num_cpus", 0), "memory": options.get("memory", 0), **options.get("resources", {})}
    needs = {name: amount for name, amount in needs.items() if amount}
    live = [node.get("Resources", {}) for node in nodes if node.get("Alive")]
    if any(all(have.get(name, 0) >= amount for name, amount in needs.items()) for have in live):
        return
    offered = sorted({name for have in live for name in have if not name.startswith("node:")})
    raise ValueError(
        f"no live node of the Ray cluster can hold an actor of {env_id} ({needs}): start nodes with what it asks "
        f"(`ray start --num-cpus N --resources '{{\"NAME\": N}}'`), lower envs_per_actor, num_cpus or memory, or "
        f"pass check_placement=False where an autoscaler adds nodes. The live nodes offer: {', '.join(offered)}"
    )


@dataclass(eq=False)
class _Actor:
    handle: Any
    group: Any
    capacity: int
    keys: set[int] = field(default_factory=set)
    deaths: int = 0


class PooledEnv:
    """One env of a `RayEnvPool`: a key on an actor, with what the engine reads of a wrapped env.

    For a wrapped env (the rollout engine's) it mirrors the chat (`messages`), the stop strings and the
    reply budget, so the engine treats it as it treats a `MultiTurnWrapper` in its own process.
    """

    stats_key = "episode"

    def __init__(self, pool: RayEnvPool, actor: _Actor, key: int, env_id: str, spec: tuple[Any, ...]):
        self.pool, self.actor, self.key, self.env_id, self.spec = pool, actor, key, env_id, spec
        self.messages: list[dict[str, str]] = []
        self.stop_strings: tuple[str, ...] = ()
        self.default_max_turn_tokens: int | None = None
        self._state: Any = None
        self.closed = False

    @property
    def unwrapped(self) -> PooledEnv:
        return self

    def state_key(self) -> Any:
        """The remote env's `state_key()` at its last reset or step (when the call asked for it)."""
        return self._state

    def close(self) -> None:
        self.pool.discard(self)

    def __repr__(self) -> str:
        return f"PooledEnv({self.env_id!r}, key={self.key})"


class RayEnvPool:
    """Text envs held by Ray actors on a cluster.

    Args:
        address: The cluster (see `connect`): "host:port", "auto", "local" (a private one-node cluster on
            loopback), or None (`RAY_ADDRESS`, or a Ray already initialized in this process).
        resource: A custom resource that every actor asks for (e.g. "env_node", given to CPU nodes with
            `ray start --resources '{"env_node": 16}'`), so that envs land only on those nodes.
        resource_per_actor: How much of `resource` one actor takes (a node with N of it holds N/this actors).
        envs_per_actor: Overrides the scenario's declared `ray_resources` (envs one actor holds).
        num_cpus: Overrides the scenario's CPUs per env.
        memory: Overrides the scenario's bytes of memory per env.
        max_restarts: How often Ray restarts a dead actor (`ray.remote(max_restarts=...)`); steps are
            never retried (`max_task_retries=0`), since an env step is not idempotent.
        node_ip_address: This process's address on the cluster (with "local": the head's bind address).
        allow_all_interfaces: Let a local head bind where the network reaches it (see `check_local_head`).
        spread: Place actors with Ray's SPREAD strategy (across nodes) rather than packing them.
        check_placement: Refuse (ValueError) to create an actor that no live node could ever hold (too few
            CPUs, too little memory, or not the custom resource), rather than let its envs wait for it until
            `env_timeout`. Turn it off on an autoscaling cluster whose env nodes start on demand.
    """

    def __init__(
        self,
        address: str | None = None,
        *,
        resource: str | None = None,
        resource_per_actor: float = 1.0,
        envs_per_actor: int | None = None,
        num_cpus: float | None = None,
        memory: int | None = None,
        max_restarts: int = 3,
        node_ip_address: str | None = None,
        allow_all_interfaces: bool = False,
        spread: bool = True,
        check_placement: bool = True,
        namespace: str = "agentgym",
    ):
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
        connect(
            address, node_ip_address=node_ip_address, allow_all_interfaces=allow_all_interfaces, namespace=namespace
        )
        self.resource, self.resource_per_actor = resource, resource_per_actor
        self.overrides = {"envs_per_actor": envs_per_actor, "num_cpus": num_cpus, "memory": memory}
        self.max_restarts, self.spread, self.check_placement = max_restarts, spread, check_placement
        self._actors: list[_Actor] = []
        self._keys = itertools.count()
        self._lock = threading.Lock()
        self._resources: dict[str, ActorResources] = {}
        self._remote_class: Any = None

    # ---- actors and envs ----------------------------------------------------------------------------
    def resources(self, env_id: str) -> ActorResources:
        if env_id not in self._resources:
            self._resources[env_id] = resources_for(env_id, **self.overrides)
        return self._resources[env_id]

    def _new_actor(self, env_id: str) -> _Actor:
        ray = ray_module()
        if self._remote_class is None:
            from agentgym_envs.cluster.actor import EnvHost

            self._remote_class = ray.remote(EnvHost)
        needs = self.resources(env_id)
        options: dict[str, Any] = {**needs.actor_options(), "max_restarts": self.max_restarts, "max_task_retries": 0}
        if self.resource:
            options["resources"] = {self.resource: self.resource_per_actor}
        if self.check_placement:
            check_placeable(env_id, options, ray.nodes())
        if self.spread:
            options["scheduling_strategy"] = "SPREAD"
        actor = _Actor(self._remote_class.options(**options).remote(), env_id, needs.envs_per_actor)
        self._actors.append(actor)
        return actor

    def acquire(
        self, env_id: str, env_kwargs: Mapping[str, Any] | None = None, wrapper: Mapping[str, Any] | None = None
    ) -> PooledEnv:
        """A new env of `env_id` (made on its actor at its first reset); `wrapper`: `MultiTurnWrapper` kwargs
        to wrap it with (the rollout engine's envs), None for the plain env."""
        spec = (env_id, dict(env_kwargs or {}), None if wrapper is None else dict(wrapper))
        with self._lock:
            live = [a for a in self._actors if a.group == env_id and a.deaths <= self.max_restarts]
            actor = next((a for a in live if len(a.keys) < a.capacity), None) or self._new_actor(env_id)
            key = next(self._keys)
            actor.keys.add(key)
        return PooledEnv(self, actor, key, env_id, spec)

    def discard(self, env: PooledEnv) -> None:
        """Drop `env` (closed on its actor in the background; its slot there is free again)."""
        if env.closed:
            return
        env.closed = True
        with self._lock:
            env.actor.keys.discard(env.key)
        with contextlib.suppress(Exception):  # a dead actor: nothing left to close
            env.actor.handle.run.remote([("close", env.key)])

    def placement(self) -> dict[str, int]:
        """Node id -> envs placed there (asks every actor; for tests and monitoring)."""
        ray = ray_module()
        counts: dict[str, int] = defaultdict(int)
        actors = [a for a in self._actors if a.keys]
        nodes = ray.get([a.handle.node_id.remote() for a in actors], timeout=60)
        for actor, node in zip(actors, nodes, strict=True):
            counts[node] += len(actor.keys)
        return dict(counts)

    def close(self) -> None:
        """Kill every actor of the pool (their envs go with them)."""
        ray = ray_module()
        with self._lock:
            actors, self._actors = self._actors, []
        for actor in actors:
            with contextlib.suppress(Exception):
                ray.kill(actor.handle, no_restart=True)

    # ---- batched calls ------------------------------------------------------------------------------
    def reset(
        self,
        envs: Sequence[PooledEnv],
        seeds: Sequence[int | None],
        options: Sequence[dict[str, Any] | None],
        *,
        max_turns: int | None = None,
        timeout: float | None = None,
        with_state: bool = False,
    ) -> list[Any]:
        """Reset `envs` (making those their actor does not hold): per env (observation, info) or an exception."""
        ops = [
            ("reset", e.key, e.spec, s, o, max_turns, with_state) for e, s, o in zip(envs, seeds, options, strict=True)
        ]
        results = self._run(envs, ops, timeout, wait_for_restarts=True)
        for env, result in zip(envs, results, strict=True):
            if not isinstance(result, BaseException):
                meta = result[2]
                if meta is not None:
                    env.messages = list(meta["messages"])
                    env.stop_strings = tuple(meta["stop_strings"])
                    env.default_max_turn_tokens = meta["max_turn_tokens"]
                    env._state = meta["state"]
        return [r if isinstance(r, BaseException) else r[:2] for r in results]

    def step(
        self,
        envs: Sequence[PooledEnv],
        actions: Sequence[Any],
        *,
        timeout: float | None = None,
        with_state: bool = False,
    ) -> list[Any]:
        """Step `envs` with `actions`: per env (observation, reward, terminated, truncated, info) or an exception."""
        ops = [("step", e.key, a, with_state) for e, a in zip(envs, actions, strict=True)]
        results = self._run(envs, ops, timeout)
        for env, action, result in zip(envs, actions, results, strict=True):
            if not isinstance(result, BaseException):
                if env.spec[2] is not None:  # mirror the wrapper's chat, as MultiTurnWrapper.step extends it
                    env.messages += [{"role": "assistant", "content": action}, {"role": "user", "content": result[0]}]
                env._state = result[5]
        return [r if isinstance(r, BaseException) else r[:5] for r in results]

    def spaces(self, env: PooledEnv) -> tuple[Any, Any]:
        result = self._run([env], [("spaces", env.key)], None)[0]
        if isinstance(result, BaseException):
            raise result
        return result

    def _run(
        self,
        envs: Sequence[PooledEnv],
        ops: Sequence[tuple[Any, ...]],
        timeout: float | None,
        wait_for_restarts: bool = False,
    ) -> list[Any]:
        """One Ray call per actor with its envs' operations; waits at most `timeout` seconds for all.

        With `wait_for_restarts` (resets: safe to repeat), an actor that Ray is restarting is called
        again until it is back or the time is up; a step is never repeated (it fails its episode).
        """
        ray = ray_module()
        from ray import cloudpickle

        deadline = None if timeout is None else time.monotonic() + timeout
        todo: dict[_Actor, list[int]] = defaultdict(list)
        for i, env in enumerate(envs):
            todo[env.actor].append(i)
        results: list[Any] = [None] * len(envs)
        while todo:
            calls = {}
            for actor, index in todo.items():  # one bytes object each way (`EnvHost.run_packed`)
                batch = cloudpickle.dumps([ops[i] for i in index], protocol=PROTOCOL)
                calls[actor.handle.run_packed.remote(batch)] = (actor, index)
            todo = {}
            pending = list(calls)
            while pending:  # each batch's results as it comes, unpickled while the other actors still work
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, pending = ray.wait(pending, num_returns=1, timeout=left)
                if not ready:
                    break
                ref = ready[0]
                actor, index = calls[ref]
                try:
                    values = pickle.loads(ray.get(ref))
                except ray.exceptions.ActorUnavailableError as error:  # restarting, or unreachable for now
                    if wait_for_restarts and (deadline is None or time.monotonic() + RESTART_POLL < deadline):
                        todo[actor] = index
                        continue
                    values = [error] * len(index)
                except ray.exceptions.RayActorError as error:  # the actor died: all of its envs failed
                    actor.deaths += 1
                    values = [error] * len(index)
                except Exception as error:
                    values = [error] * len(index)
                for i, value in zip(index, values, strict=True):
                    results[i] = value
            for ref in pending:  # a hung batch: its actor is killed so that Ray restarts it, empty
                actor, index = calls[ref]
                actor.deaths += 1
                with contextlib.suppress(Exception):
                    ray.kill(actor.handle, no_restart=actor.deaths > self.max_restarts)
                for i in index:
                    results[i] = EnvTimeoutError(f"the env's actor took longer than {timeout} s; it was restarted")
            if todo:
                time.sleep(RESTART_POLL)
        return results
