"""What one env of a scenario needs on a Ray cluster: read from the scenario's `ray_resources` class attribute.

`TextEnv.ray_resources` is the default (a light, pure-Python env: 32 share an actor, 1/32 of a CPU
each); SciWorld (a JVM per env) and WebArena (a browser per env) declare one env per actor with the
memory it needs. Amounts are per env; an actor asks Ray for the sum over the envs it holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import gymnasium as gym


@dataclass(frozen=True)
class ActorResources:
    """What an actor of `envs_per_actor` envs asks Ray for.

    Args:
        num_cpus: CPUs per env (logical, as Ray counts them).
        memory: Bytes of memory per env (Ray's `memory` resource: admission, not a hard limit).
        envs_per_actor: Envs one actor holds (their calls run one after another in that actor).
    """

    num_cpus: float = 1 / 32
    memory: int = 64 * 2**20
    envs_per_actor: int = 32

    def actor_options(self) -> dict[str, Any]:
        return {"num_cpus": self.num_cpus * self.envs_per_actor, "memory": int(self.memory * self.envs_per_actor)}


def scenario_class(env_id: str) -> type:
    """The env class behind a registered id (`agentgym_envs` registers them on import)."""
    import agentgym_envs  # noqa: F401  (registers the ids)

    entry = gym.spec(env_id).entry_point
    if callable(entry):
        return entry if isinstance(entry, type) else type(entry)
    module, _, name = str(entry).partition(":")
    return getattr(__import__(module, fromlist=[name]), name)


def resources_for(env_id: str, **overrides: Any) -> ActorResources:
    """The scenario's declared resources (`ray_resources`), with `overrides` (None values ignored)."""
    declared: Mapping[str, Any] = getattr(scenario_class(env_id), "ray_resources", None) or {}
    fields = {**declared, **{k: v for k, v in overrides.items() if v is not None}}
    unknown = set(fields) - {"num_cpus", "memory", "envs_per_actor"}
    if unknown:
        raise ValueError(f"unknown resource fields {sorted(unknown)}; known: num_cpus, memory, envs_per_actor")
    resources = ActorResources(**fields)
    if resources.envs_per_actor < 1 or resources.num_cpus < 0 or resources.memory < 0:
        raise ValueError(f"resources of {env_id} must have envs_per_actor >= 1 and no negative amount: {resources}")
    return resources
