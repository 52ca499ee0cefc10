"""Registration of every `AgentGym/*` id; runs on `import agentgym_envs`, so any process that
imports the package (vector-env workers, servers) has the ids."""

from __future__ import annotations

import gymnasium as gym


def _register(env_id: str, entry_point: str, **kwargs: object) -> None:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=False)


#: One id per scenario, covering all of its tasks (the per-level/per-task variants are subsets).
PRIMARY_IDS = ["AgentGym/BabyAI-v0"]


def register_all() -> list[str]:
    """Register the ids of every scenario (idempotent); return them in a stable order."""
    # Scenario modules are imported lazily by the entry points; only the level list is needed here.
    from agentgym_envs.babyai.levels import MINIGRID_IDS

    ids = []
    _register("AgentGym/BabyAI-v0", "agentgym_envs.babyai.env:BabyAIEnv")
    ids.append("AgentGym/BabyAI-v0")
    for level in sorted(MINIGRID_IDS):
        env_id = f"AgentGym/BabyAI-{level}-v0"
        _register(env_id, "agentgym_envs.babyai.env:BabyAIEnv", levels=(level,))
        ids.append(env_id)
    return ids
