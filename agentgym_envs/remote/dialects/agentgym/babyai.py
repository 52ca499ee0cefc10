"""AgentGym's BabyAI server (agentenv-babyai) on AgentGym's routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentgym_envs.remote.dialects.agentgym.base import Dialect

if TYPE_CHECKING:
    from agentgym_envs.remote.server.session import Session


class BabyAIDialect(Dialect):
    """agentenv-babyai: indexes spread over the levels (`level = levels[i % n]`, `seed = i // n`)."""

    name = "BabyAI"
    create_reset = None

    def options(self, session: Session, index: int) -> dict[str, Any]:
        levels = session.env.unwrapped.levels
        if index < 0:
            raise self.error(f"data_idx must be >= 0 (it picks level data_idx % {len(levels)} and seed data_idx // "
                             f"{len(levels)}), got {index}")  # fmt: skip
        return {"task_id": f"{levels[index % len(levels)]}/{index // len(levels)}"}

    def created(self, session: Session) -> Any:
        return {"id": session.compat_id}

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        score = float(step["info"].get("score", 0.0))
        done = step["terminated"] or step["truncated"]
        return {"observation": step["observation"], "reward": score, "score": score, "done": done, "info": step["info"]}

    def observation(self, session: Session) -> Any:
        return {**self._state(session, float((session.info or {}).get("score", 0.0))), "deleted": False}
