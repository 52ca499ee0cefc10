"""Registration of every `AgentGym/*` id; runs on `import agentgym_envs`, so any process that
imports the package (vector-env workers, servers) has the ids."""

from __future__ import annotations

import gymnasium as gym


def _register(env_id: str, entry_point: str, **kwargs: object) -> None:
    if env_id not in gym.registry:
        gym.register(id=env_id, entry_point=entry_point, kwargs=kwargs, disable_env_checker=False)


#: One id per scenario, covering all of its tasks (the per-level/per-task variants are subsets).
PRIMARY_IDS = [
    "AgentGym/BabyAI-v0",
    "AgentGym/TextCraft-v0",
    "AgentGym/DeepSearch-v0",
    "AgentGym/SciWorld-v0",
    "AgentGym/WebArena-v0",
    "AgentGym/TextWorld-v0",
]


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
    _register("AgentGym/TextCraft-v0", "agentgym_envs.textcraft.env:TextCraftEnv")
    ids.append("AgentGym/TextCraft-v0")
    for depth in (1, 2, 3, 4):
        _register(f"AgentGym/TextCraft-Depth{depth}-v0", "agentgym_envs.textcraft.env:TextCraftEnv", depths=(depth,))
        ids.append(f"AgentGym/TextCraft-Depth{depth}-v0")
    _register("AgentGym/DeepSearch-v0", "agentgym_envs.deepsearch.env:DeepSearchEnv")
    ids.append("AgentGym/DeepSearch-v0")
    _register("AgentGym/SciWorld-v0", "agentgym_envs.sciworld.env:SciWorldEnv")
    ids.append("AgentGym/SciWorld-v0")
    _register("AgentGym/WebArena-v0", "agentgym_envs.webarena.env:WebArenaEnv")
    ids.append("AgentGym/WebArena-v0")
    _register("AgentGym/TextWorld-v0", "agentgym_envs.textworld.env:TextWorldEnv")  # needs the [textworld] extra
    ids.append("AgentGym/TextWorld-v0")
    if "AgentGym/Remote-v0" not in gym.registry:  # a client of `agentgym serve`; make_vec gives the batched one
        gym.register(
            id="AgentGym/Remote-v0",
            entry_point="agentgym_envs.remote.client.env:RemoteEnv",
            vector_entry_point="agentgym_envs.remote.client.vector:RemoteVectorEnv",
        )
    ids.append("AgentGym/Remote-v0")
    return ids
