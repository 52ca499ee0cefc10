"""`--ray ADDRESS` of `agentgym eval` and `agentgym collect`: a model's envs on a Ray cluster."""

from __future__ import annotations

from typing import Any

RAY_HELP = (
    "run the envs on the Ray cluster at ADDRESS (host:port, 'auto' on a cluster node, or 'local': a private "
    "cluster on this machine) as Ray actors (agentgym_envs.cluster; needs the [ray] extra)"
)


RAY_RESOURCE_HELP = (
    "with --ray: a custom resource every env actor asks for, so that envs land only on the nodes started with it "
    "(ray start --resources '{\"NAME\": N}')"
)


def ray_pool(address: str | None, resource: str | None = None) -> Any | None:
    """An `agentgym_envs.cluster.RayEnvPool` on `address` (its actors asking for `resource`), or None (envs in this
    process) without one."""
    if not address:
        return None
    from agentgym_envs.cluster import RayEnvPool

    return RayEnvPool(address, resource=resource)
