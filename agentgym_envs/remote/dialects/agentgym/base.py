"""What every dialect of AgentGym's routes shares: the reply of a failed call, the timeouts, and `Dialect`.

`Dialect` is how one of AgentGym's servers speaks; its methods are BabyAI's server's ways, which also
serve an env of no AgentGym scenario. Each scenario's module overrides what its server does differently.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from agentgym_envs.remote.wire import ApiError

if TYPE_CHECKING:
    from agentgym_envs.remote.server.session import Session

#: The seed of every reset on these routes, so that an index always gives the same observation.
RESET_SEED = 0

_MAX_ID_BITS = 100


class AgentGymReply(Exception):
    """A reply AgentGym's server would send for a failed call: `payload` with HTTP `status` (mostly 200)."""

    def __init__(self, payload: Any, status: int = 200):
        super().__init__(str(payload)[:200])
        self.payload, self.status = payload, status


def int_field(body: dict[str, Any], name: str, default: int | None = None) -> int:
    """`body[name]` (or `default`) as a bounded integer; ApiError 422 for anything else."""
    value = body.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ApiError(422, f"malformed request: body.{name} must be an integer, got {value!r:.40}", "ValueError")
    if value.bit_length() > _MAX_ID_BITS:
        raise ApiError(422, f"malformed request: body.{name} is larger than 2**{_MAX_ID_BITS}", "ValueError")
    return value


class Dialect:
    """How one of AgentGym's servers speaks; this base class is BabyAI's server, also used for unknown envs."""

    name = "generic"
    id_field = "id"
    index_field = "data_idx"
    #: Body fields of `/create` that AgentGym's server takes; others are kwargs a client asks for.
    create_fields: frozenset[str] = frozenset()
    #: Body fields AgentGym's clients send and its server ignores (never kwargs: e.g. a path).
    ignored_fields: frozenset[str] = frozenset()
    #: The data index `/create` resets to: "zero", "id" (the new id) or None (no reset).
    create_reset: str | None = "zero"

    # ---- tasks ----------------------------------------------------------------------------------
    def options(self, session: Session, index: int) -> dict[str, Any]:
        """Reset options for AgentGym's index `index`: every split's tasks in order, wrapping around."""
        splits = session.description["splits"]
        total = sum(splits.values())
        if total == 0:
            raise self.error(f"{session.env_id} has no tasks")
        index %= total
        for split, count in splits.items():
            if index < count:
                return {"split": split, "task_id": index}
            index -= count
        raise AssertionError("unreachable")

    def create_kwargs(self, client: dict[str, Any], allowed: Collection[str]) -> dict[str, Any]:
        """The kwargs of a session made on `/create`: the client's, and the dialect's defaults among `allowed`
        (the kwargs a client may set: declared by the env, not fixed by the operator)."""
        return client

    def custom_task(self, body: dict[str, Any]) -> tuple[Any, ...] | None:
        """The client's own task that a `/create` body names, checked (ApiError 422 if malformed); None: none."""
        return None

    def reset_custom(self, session: Session, *task: Any) -> None:
        """Start the custom task `custom_task` made (on the session's thread)."""
        raise NotImplementedError(f"the {self.name} dialect has no custom tasks")

    # ---- replies --------------------------------------------------------------------------------
    def error(self, message: str) -> AgentGymReply:
        return AgentGymReply({"error": message})

    def unknown_id(self, compat_id: int, reaped_after: float | None) -> AgentGymReply:
        why = (
            f"it was closed after {reaped_after:g} s idle (reaped); create a new env"
            if reaped_after is not None
            else "never made here, or closed"
        )
        return self.error(f"The id {compat_id} is not valid: {why}.")

    def reset_failed(self, message: str) -> AgentGymReply:
        """The reply to a reset the env refused (a task it cannot make), as AgentGym's server answers one."""
        return self.error(message)

    def not_reset(self, compat_id: int) -> AgentGymReply:
        return self.error(f"The env {compat_id} has not been reset yet: POST /reset first.")

    def created(self, session: Session) -> Any:
        return {"id": session.compat_id, **self._state(session, 0.0)}

    def reset(self, session: Session) -> Any:
        info = session.info or {}
        return {
            "id": session.compat_id,
            **self._state(session, 0.0),
            "deleted": False,
            "task_description": str(info.get("instruction", "")),
            "info": info,
        }

    def _state(self, session: Session, reward: float) -> dict[str, Any]:
        score = float((session.info or {}).get("score", 0.0))
        return {"observation": session.observation, "reward": reward, "score": score, "done": session.episode_over}

    def action(self, text: str) -> str:
        """The action the env gets for the text a client sent (its server's own parsing, if any)."""
        return text

    def step(self, session: Session, step: dict[str, Any]) -> Any:
        return {
            "observation": step["observation"],
            "reward": step["reward"],
            "score": float(step["info"].get("score", 0.0)),
            "done": step["terminated"] or step["truncated"],
            "info": step["info"],
        }

    def over(self, session: Session) -> Any:
        return self.error(f"The task with environment {session.compat_id} has finished.").payload

    def observation(self, session: Session) -> Any:
        return session.observation

    def closed(self, compat_id: int) -> Any:
        return True


#: What a step after the episode ended observes, on the servers that step on (they do not check).
OVER = "The episode is over; reset to start another task."
