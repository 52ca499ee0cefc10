"""AgentGym's SearchQA server (agentenv-searchqa) on AgentGym's routes, for the Deep Search env."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agentgym_envs.remote.dialects.agentgym.base import OVER, AgentGymReply, Dialect

if TYPE_CHECKING:
    from agentgym_envs.remote.server.session import Session


class SearchQADialect(Dialect):
    """agentenv-searchqa: `env_idx` ids, item ids over test then train, wrong answers may be retried."""

    name = "SearchQA"
    id_field = "env_idx"
    index_field = "id"
    create_fields = frozenset({"id"})
    create_reset = "body"

    def options(self, session: Session, index: int) -> dict[str, Any]:
        splits = session.description["splits"]
        order = [s for s in ("test", "train") if s in splits] + [s for s in splits if s not in ("test", "train")]
        start = 0
        for split in order:
            if start <= index < start + splits[split]:
                return {"split": split, "task_id": index - start}
            start += splits[split]
        raise AgentGymReply({"detail": f"Item id {index} is out of range.", "error_type": "ValueError"}, 500)

    def create_kwargs(self, client: dict[str, Any], allowed: Collection[str]) -> dict[str, Any]:
        # As AgentGym's SearchQA server: a wrong answer is answered "try again", passages as Search-R1 shows them.
        wanted = {"wrong_answer": "retry", "passage_format": "search-r1"}
        return {**{k: v for k, v in wanted.items() if k in allowed}, **client}

    def error(self, message: str) -> AgentGymReply:
        return AgentGymReply({"detail": message, "error_type": "ValueError"}, 500)

    def created(self, session: Session) -> Any:
        return session.compat_id

    def reset(self, session: Session) -> Any:
        return session.observation

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        done = step["terminated"] or step["truncated"]
        return {"observation": step["observation"], "reward": step["reward"], "done": done, "info": None}

    def over(self, session: Session) -> Any:
        return {"observation": OVER, "reward": 0.0, "done": True, "info": None}
