"""AgentGym text environments. Importing this package registers every `AgentGym/*` id with Gymnasium.

>>> import gymnasium as gym
>>> import agentgym_envs
>>> env = gym.make("AgentGym/BabyAI-GoToLocal-v0")
>>> observation, info = env.reset(seed=0)
>>> info["category"]
'GoTo'
"""

from __future__ import annotations

from agentgym_envs.core import INFO_KEYS, EpisodeOverError, TextEnv, TextSpace
from agentgym_envs.registration import PRIMARY_IDS, register_all

__all__ = ["INFO_KEYS", "PRIMARY_IDS", "EpisodeOverError", "TextEnv", "TextSpace", "registered_ids"]

registered_ids = register_all()
