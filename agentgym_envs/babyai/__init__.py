"""BabyAI: grid-world instruction following on minigrid (`AgentGym/BabyAI-v0` and per-level ids)."""

from agentgym_envs.babyai.env import BabyAIEnv

__all__ = ["BabyAIEnv"]
