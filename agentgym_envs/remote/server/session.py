"""One session of a server: its env, what the server remembers about it (counts, the last numbered
call and its reply, its idle TTL), and the env calls (`do_*`) that `SessionManager` runs on the
session's worker thread. Errors are `ApiError`s that the app turns into JSON replies.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym

from agentgym_envs.core import TextSpace
from agentgym_envs.remote import wire
from agentgym_envs.remote.description import EnvDescription
from agentgym_envs.remote.wire import ApiError, env_error

_log = logging.getLogger(__name__)


@dataclass(eq=False)
class Session:
    """One env and what the server remembers about it."""

    id: str
    env_id: str
    kwargs: dict[str, Any]
    env: gym.Env
    slot: int
    description: EnvDescription
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.monotonic)
    steps: int = 0
    episodes: int = 0
    episode_over: bool = False
    observation: str | None = None
    info: dict[str, Any] | None = None
    expert: Any = None
    compat_id: int | None = None
    #: Seconds this session may stay idle before the reaper closes it (None: never).
    ttl: float | None = None
    closed: bool = False
    # The last numbered call, what it was, and its reply: a client that retries after a dropped
    # connection sends the same number again and gets the same reply instead of a second step.
    last_seq: int | None = None
    last_call: tuple[Any, ...] | None = None
    last_reply: bytes | None = None

    def replay(self, seq: int, call: tuple[Any, ...]) -> bytes | None:
        """The reply of an earlier call numbered `seq` if this is its retry; None for a new call.

        Raises ApiError 409 for a number already used by a different call or older than the last one,
        rather than answering with another call's reply.
        """
        last = self.last_seq
        if last is None or seq > last:
            return None
        if seq < last:
            raise ApiError(
                409,
                f"call number {seq} of session {self.id} is older than its last call ({last}); numbers must "
                "increase (a retry repeats the last number with the same call)",
                "StaleCall",
            )
        if call != self.last_call:
            raise ApiError(
                409,
                f"call number {seq} of session {self.id} was already used by a different call "
                f"({self.last_call[0] if self.last_call else '?'}); a retry must repeat the same call, a new call "
                "needs a new number",
                "StaleCall",
            )
        return self.last_reply

    def summary(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "env_id": self.env_id,
            "kwargs": self.kwargs,
            "created_at": self.created,
            "idle_s": round(time.monotonic() - self.last_used, 3),
            "steps": self.steps,
            "episodes": self.episodes,
            "episode_over": self.episode_over,
            "busy": self.lock.locked(),
            "compat_id": self.compat_id,
        }

    # ---- env calls: run on the session's worker thread -------------------------------------------
    def do_reset(self, seed: int | None, options: dict[str, Any] | None) -> bytes:
        try:
            observation, info = self.env.reset(seed=seed, options=options)
        except Exception as error:
            raise env_error(error, "reset") from error
        self.observation, self.info = observation, info
        self.episodes += 1
        self.episode_over = False
        self.expert = None
        return wire.dumps({"observation": observation, "info": info})

    def do_step(self, action: str) -> bytes:
        space = self.env.action_space
        if isinstance(space, TextSpace) and len(action) > space.max_length:
            raise ApiError(
                422,
                f"action has {len(action):,} characters; {self.env_id}'s action space allows at most "
                f"{space.max_length:,}",
                "ValueError",
            )
        try:
            observation, reward, terminated, truncated, info = self.env.step(action)
        except Exception as error:
            raise env_error(error, "step") from error
        self.observation, self.info = observation, info
        self.steps += 1
        self.episode_over = bool(terminated or truncated)
        return wire.step_reply(observation, float(reward), bool(terminated), bool(truncated), info)

    def do_make_expert(self) -> None:
        if self.observation is None:  # the envs raise RuntimeError here, which would read as a 500
            raise ApiError(
                409, f"session {self.id} has no episode yet; reset it before asking for its expert", "ResetNeeded"
            )
        try:
            self.expert = self.env.unwrapped.make_expert()
        except Exception as error:
            raise env_error(error, "make_expert") from error

    def do_expert_act(self, observation: str, info: dict[str, Any]) -> bytes:
        if self.expert is None:
            raise ApiError(
                409,
                f"session {self.id} has no expert for this episode; POST /sessions/{self.id}/expert after reset",
                "ResetNeeded",
            )
        try:
            action = self.expert.act(observation, info)
        except Exception as error:
            raise env_error(error, "expert.act") from error
        return wire.dumps({"action": action})

    def do_tasks(self, split: str, offset: int, limit: int) -> dict[str, Any]:
        base = self.env.unwrapped
        if split not in self.description["splits"]:
            raise ApiError(422, f"unknown split {split!r}; {self.env_id} has {list(self.description['splits'])}")
        total = self.description["splits"][split]
        stop = min(total, offset + limit)
        try:
            ids = [base.task_at(split, i) for i in range(offset, stop)]
        except Exception as error:
            raise env_error(error, "tasks") from error
        return {"split": split, "total": total, "offset": offset, "task_ids": ids}

    def do_close(self) -> None:
        try:
            self.env.close()
        except Exception:  # closing must not fail the caller; the backend is gone either way
            _log.exception("closing session %s (%s) failed", self.id, self.env_id)
