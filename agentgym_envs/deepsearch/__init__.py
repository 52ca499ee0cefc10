"""Deep Search: multi-hop question answering with a search engine, Search-R1 style (`AgentGym/DeepSearch-v0`).

Offline by default: a seeded synthetic encyclopedia searched with BM25. See `env.DeepSearchEnv`.
"""

from agentgym_envs.deepsearch.env import DeepSearchEnv

__all__ = ["DeepSearchEnv"]
