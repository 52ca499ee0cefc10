"""`--ray ADDRESS` of `agentgym eval` and `agentgym collect`: a model's envs on a Ray cluster."""

from __future__ import annotations

import argparse
import sys
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


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """`--ray ADDRESS` and `--ray-resource NAME`, as `eval` and `collect` take them."""
    parser.add_argument("--ray", metavar="ADDRESS", default=None, help=RAY_HELP)
    parser.add_argument("--ray-resource", metavar="NAME", default=None, help=RAY_RESOURCE_HELP)


def ray_resource_without_ray(args: argparse.Namespace, command: str) -> bool:
    """Whether `--ray-resource` came without `--ray` (said on stderr: the caller exits with 2)."""
    if args.ray_resource and not args.ray:
        print(
            f"agentgym {command}: --ray-resource places envs on a Ray cluster: give it with --ray ADDRESS",
            file=sys.stderr,
        )
        return True
    return False
