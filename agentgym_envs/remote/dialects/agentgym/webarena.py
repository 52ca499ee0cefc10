"""AgentGym's WebArena server (agentenv-webarena) on AgentGym's routes."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentgym_envs.remote.dialects.agentgym.base import OVER, AgentGymReply, Dialect
from agentgym_envs.remote.wire import bounded

if TYPE_CHECKING:
    from agentgym_envs.remote.server.session import Session


class WebArenaDialect(Dialect):
    """agentenv-webarena: `env_idx` ids; `/reset {"idx"}` names WebArena's task id; actions in ``` fences."""

    name = "WebArena"
    id_field = "env_idx"
    index_field = "idx"
    create_reset = None

    def options(self, session: Session, index: int) -> dict[str, Any]:
        if str(index) not in session.env.unwrapped.catalog.by_id:
            raise self._failed_reset()
        return {"task_id": str(index)}

    def reset_failed(self, message: str) -> AgentGymReply:
        return self._failed_reset()

    @staticmethod
    def _failed_reset() -> AgentGymReply:
        # What AgentGym's WebArena server answers when a reset fails; its client raises TimeoutError on it.
        return AgentGymReply({"observation": "TimeoutError", "sites": "Error", "object": "Error"})

    def error(self, message: str) -> AgentGymReply:
        reply = {"observation": message, "reward": 0, "terminated": False, "truncated": False, "info": None}
        return AgentGymReply(reply)

    def created(self, session: Session) -> Any:
        return {"env_idx": session.compat_id}

    def action(self, text: str) -> str:
        # AgentGym's WebArena server gets the model's whole reply and acts on its first ```...``` block.
        start = text.find("```")
        end = text.find("```", start + 3) if start >= 0 else -1
        if end < 0:
            raise self.error(f"Cannot parse action from response {bounded(text, 200)}")
        return text[start + 3 : end].strip()

    def reset(self, session: Session) -> Any:
        task = session.env.unwrapped.catalog.by_id[(session.info or {}).get("task_id")]
        return {"observation": session.observation, "sites": task.sites, "object": task.intent}

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        return {key: step[key] for key in ("observation", "reward", "terminated", "truncated", "info")}

    def over(self, session: Session) -> Any:
        return {"observation": OVER, "reward": 0.0, "terminated": True, "truncated": False, "info": None}

    def closed(self, compat_id: int) -> Any:
        return {"closed": "closed"}
