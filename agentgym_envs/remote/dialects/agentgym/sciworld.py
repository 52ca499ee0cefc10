"""AgentGym's SciWorld server (agentenv-sciworld) on AgentGym's routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentgym_envs.remote.dialects.agentgym.base import Dialect

if TYPE_CHECKING:
    from agentgym_envs.remote.server.session import Session

#: ScienceWorld task numbers AgentGym's SciWorld server leaves out of its index.
SCIWORLD_EXCLUDED = frozenset({"5-1", "5-2", "9-1", "9-2", "9-3", "10-1", "10-2"})


def sciworld_games() -> list[str]:
    """AgentGym's SciWorld index: every variation of each kept task type, in ScienceWorld's task order."""
    from agentgym_envs.sciworld.tasks import TASK_TYPES

    return [
        f"{name}/{variation}"
        for name, (number, variations) in TASK_TYPES.items()
        if number not in SCIWORLD_EXCLUDED
        for variation in range(variations)
    ]


class SciWorldDialect(Dialect):
    """agentenv-sciworld: `games[i]` (Python indexing, no wrap); scores on ScienceWorld's 0-100 scale."""

    name = "SciWorld"
    create_reset = None
    _games: list[str] | None = None

    def options(self, session: Session, index: int) -> dict[str, Any]:
        if SciWorldDialect._games is None:
            SciWorldDialect._games = sciworld_games()
        games = SciWorldDialect._games
        if not -len(games) <= index < len(games):
            raise self.error("list index out of range")
        task = games[index]
        if task.partition("/")[0] not in session.env.unwrapped.task_names:
            raise self.error(f"data_idx {index} is {task}, a task type this server's env does not serve")
        return {"task_id": task}

    def created(self, session: Session) -> Any:
        return {"id": session.compat_id}

    def reset(self, session: Session) -> Any:
        info = session.info or {}
        description = str(info.get("instruction", ""))
        observation = session.observation or ""
        if observation.startswith(description):  # the client shows task_description + "\n" + observation
            observation = observation[len(description) :].lstrip("\n")
        name, _, variation = str(info.get("task_id", "")).partition("/")
        return {
            "task_name": name,
            "var_num": int(variation) if variation.isdigit() else None,
            "task_description": description,
            "observation": observation,
            "reward": 0,
            "score": 0,
            "deleted": False,
            "done": False,
        }

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        return {
            "observation": step["observation"],
            "reward": round(100 * step["reward"]),
            "score": round(100 * float(step["info"].get("score", 0.0))),
            "done": step["terminated"] or step["truncated"],
        }
