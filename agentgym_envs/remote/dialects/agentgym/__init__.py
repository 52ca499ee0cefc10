"""AgentGym's own routes (`/create`, `/reset`, `/step`, `/observation`, `/close`), one module per scenario.

`routes` serves them and says how each scenario's dialect answers; `base` holds what the dialects
share; `babyai`, `textcraft`, `sciworld`, `searchqa` (Deep Search) and `webarena` are the dialects.
"""

from __future__ import annotations

from agentgym_envs.remote.dialects.agentgym.base import RESET_SEED
from agentgym_envs.remote.dialects.agentgym.routes import (
    AGENTGYM_CLIENT_TIMEOUT,
    COMPAT_TTL,
    AgentGymRoutes,
    add_agentgym_routes,
)
from agentgym_envs.remote.dialects.agentgym.sciworld import sciworld_games

__all__ = [
    "AGENTGYM_CLIENT_TIMEOUT",
    "COMPAT_TTL",
    "RESET_SEED",
    "AgentGymRoutes",
    "add_agentgym_routes",
    "sciworld_games",
]
