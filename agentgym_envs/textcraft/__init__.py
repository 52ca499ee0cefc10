"""TextCraft: crafting Minecraft items from text commands (`AgentGym/TextCraft-v0` and per-depth ids)."""

from agentgym_envs.textcraft.env import TextCraftEnv

__all__ = ["TextCraftEnv"]
