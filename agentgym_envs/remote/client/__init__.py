"""The client side: `RemoteEnv` (`AgentGym/Remote-v0`), `RemoteVectorEnv` and their HTTP transport.

They need only the standard library (and gymnasium); `agentgym_envs.remote` hands their names on.
"""

from __future__ import annotations

from agentgym_envs.remote.client.env import RemoteEnv, RemoteExpert
from agentgym_envs.remote.client.vector import RemoteVectorEnv

__all__ = ["RemoteEnv", "RemoteExpert", "RemoteVectorEnv"]
