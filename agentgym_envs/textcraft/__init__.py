"""TextCraft: crafting Minecraft items from text commands (`AgentGym/TextCraft-v0` and per-depth ids).

>>> import gymnasium as gym
>>> import agentgym_envs
>>> env = gym.make("AgentGym/TextCraft-v0")
>>> observation, info = env.reset(seed=0, options={"task_id": "blue_dye"})
>>> observation.splitlines()[-1], info["category"]
('Goal: craft blue dye.', 'depth-1')
>>> env.step("get 1 lapis lazuli")[0]
'Got 1 lapis lazuli'
>>> observation, reward, terminated, truncated, info = env.step("craft 1 blue dye using 1 lapis lazuli")
>>> observation, reward, terminated, info["success"]
('Crafted 1 minecraft:blue_dye', 1.0, True, True)
"""

from agentgym_envs.textcraft.env import TextCraftEnv

__all__ = ["TextCraftEnv"]
