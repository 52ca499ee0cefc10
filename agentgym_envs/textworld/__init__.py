"""TextWorld: generated text adventures on Microsoft's `textworld` (`AgentGym/TextWorld-v0`).

Needs the `textworld` extra (`pip install agentgym-rl[textworld]`). See `env.TextWorldEnv`.
"""

from agentgym_envs.textworld.env import TextWorldEnv

__all__ = ["TextWorldEnv"]
