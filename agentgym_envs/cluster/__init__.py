"""The env pool on Ray: envs as Ray actors on a cluster (actors, placement, batching, faults).

`RayEnvPool` holds envs on actors with the resources each scenario declares (`ray_resources`) and a
custom resource the user names for placement; the rollout engine uses it with `env_backend="ray"`
(`RolloutEngine(env_pool=...)`), and `RayVectorEnv` is a Gymnasium vector env over it. Needs Ray
(`pip install 'agentgym-rl[ray]'`), imported only when a pool is made.

Like `adapters/`, this package sits on top of envs and wrappers: an actor holds the rollout engine's
envs as `agentgym_wrappers.MultiTurnWrapper`s (`RayEnvPool.acquire(..., wrapper=kwargs)`), so that
parsing, the chat and the episode record stay beside the env and one Ray call per actor per batch
carries only replies and observations. `actor.py` alone imports `agentgym_wrappers`, inside the actor's
process and only for a wrapped env; nothing else of `agentgym_envs` imports this package.
"""

from agentgym_envs.cluster.pool import (
    EnvTimeoutError,
    PooledEnv,
    RayEnvPool,
    check_bind_address,
    connect,
    join_local_cluster,
)
from agentgym_envs.cluster.resources import ActorResources, resources_for
from agentgym_envs.cluster.vector import RayVectorEnv

__all__ = [
    "ActorResources",
    "EnvTimeoutError",
    "PooledEnv",
    "RayEnvPool",
    "RayVectorEnv",
    "check_bind_address",
    "connect",
    "join_local_cluster",
    "resources_for",
]
