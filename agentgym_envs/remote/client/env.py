"""`AgentGym/Remote-v0`: a text env whose episodes run on an AgentGym server."""

from __future__ import annotations

import contextlib
from typing import Any
from urllib.parse import quote

import gymnasium as gym
import numpy as np

from agentgym_envs.core import EpisodeOverError, TextEnv, reset_options
from agentgym_envs.remote import wire
from agentgym_envs.remote.client.transport import HTTPTransport
from agentgym_envs.remote.description import EnvDescription, text_space

#: What a client without `base_url` and `env_id` plays (on its in-process server).
DEFAULT_LOCAL_ENV_ID = "AgentGym/BabyAI-v0"
_TASK_PAGE = 100_000


def _plain(options: dict[str, Any] | None) -> dict[str, Any] | None:
    """Options as JSON wants them (numpy integers as ints)."""
    if options is None:
        return None
    return {k: int(v) if isinstance(v, np.integer) else v for k, v in options.items()}


class RemoteEnv(TextEnv):
    """An env of an AgentGym server (`agentgym serve`), as a local `TextEnv`.

    ## Description
    Every call goes over HTTP to one session on the server; the server runs the real env, the client
    mirrors it: its spaces, its class attributes (`default_max_turns`, `action_format`,
    `system_prompt`, `splits`), its task lists and its info dicts. Seeds and options go to the server,
    so a seeded episode is the same as the in-process one. The session is created on first use
    (`reset`, or reading a mirrored attribute), not at construction; `connect()` does it eagerly.
    Without `base_url` the client starts a server inside this process, on a loopback port with a
    random token, serving every registered id, and plays `env_id` there (default
    `AgentGym/BabyAI-v0`): the whole protocol without a separate process, which is what
    `gym.make("AgentGym/Remote-v0")` with no arguments gives.

    ## Actions, Observation, Rewards, Termination
    Those of the remote env. A step after the episode ended raises `EpisodeOverError`, a non-string
    action `TypeError`, as in process; errors the remote env raises on purpose (`ValueError` for a
    bad option, ...) are raised again here with the server's message. A backend failure raises
    `RemoteEnvError` (HTTP 500 with the message); no server answering, after `retries` attempts,
    raises `ServerUnavailableError`; a session the server no longer knows (closed, reaped after its
    idle TTL, server restarted) raises `SessionLostError` on `step`, and `reset` opens a new session.

    ## Registered ids
    `AgentGym/Remote-v0` (`gym.make_vec` gives a `RemoteVectorEnv`: one batched request a turn).

    Args:
        base_url: `http://host:port` of an `agentgym serve`; None: an in-process server.
        env_id: The remote id to play; default: the server's first (`AgentGym/BabyAI-v0` in process).
        env_kwargs: Keyword arguments for the remote `gym.make(env_id, ...)`.
        token: Bearer token; defaults to `$AGENTGYM_TOKEN`.
        timeout: Seconds to wait for an answer. connect_timeout: for a connection.
        retries: Extra attempts after a connection error (calls are deduplicated by the server).
        render_mode: `"ansi"` renders the last observation.
        transport: A connection to share with other envs of the same server (a vector env does);
            the env then leaves closing it to its owner.
    """

    def __init__(
        self,
        base_url: str | None = None,
        env_id: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        token: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
        render_mode: str | None = None,
        transport: HTTPTransport | None = None,
    ):
        super().__init__(render_mode=render_mode)
        if base_url is None and env_id is None:
            env_id = DEFAULT_LOCAL_ENV_ID
        self.base_url = base_url.rstrip("/") if base_url else None
        self.env_id = env_id
        self.env_kwargs = dict(env_kwargs or {})
        self._token = token
        self._timeouts = (timeout, connect_timeout, retries)
        self._transport = transport
        self._owns_transport = transport is None
        self.session_id: str | None = None
        self._description: EnvDescription | None = None
        self._task_lists: dict[str, list[str]] = {}
        self._seq = 0
        self._started = False
        self._done = False

    # ---- the connection ---------------------------------------------------------------------------
    def _http(self) -> HTTPTransport:
        if self._transport is None:
            token = self._token
            if self.base_url is None:
                from agentgym_envs.remote.server.local import local_server

                server = local_server()
                self.base_url, token = server.base_url, server.token
            timeout, connect_timeout, retries = self._timeouts
            self._transport = HTTPTransport(self.base_url, token, timeout, connect_timeout, retries)
        return self._transport

    def connect(self) -> EnvDescription:
        """Open the session now (if not open yet); return the remote env's description."""
        if self.session_id is None:
            reply = self._http().request("POST", "/sessions", {"env_id": self.env_id, "kwargs": self.env_kwargs})
            self._adopt(reply)
        assert self._description is not None
        return self._description

    def _adopt(self, session: dict[str, Any]) -> None:
        """Mirror a session the server made for this env."""
        self.session_id = session["session_id"]
        self.env_id = session["env_id"]
        self._description = session["description"]
        self.observation_space = text_space(self._description["observation_space"], "observation space")
        self.action_space = text_space(self._description["action_space"], "action space")
        self._started = self._done = False

    def _next_seq(self) -> int:
        self._seq += 1
        return self._seq

    def _session_path(self, suffix: str) -> str:
        self.connect()
        return f"/sessions/{self.session_id}{suffix}"

    # ---- mirrored attributes ----------------------------------------------------------------------
    @property
    def description(self) -> EnvDescription:
        """The remote env's description (spaces, class attributes, splits with sizes); connects if needed."""
        return self.connect()

    @property
    def default_max_turns(self) -> int:  # type: ignore[override]
        return self.description["default_max_turns"]

    @property
    def action_format(self) -> str:  # type: ignore[override]
        return self.description["action_format"]

    @property
    def system_prompt(self) -> str:  # type: ignore[override]
        return self.description["system_prompt"]

    @property
    def stop_strings(self) -> tuple[str, ...] | None:  # type: ignore[override]
        given = self.description.get("stop_strings")  # absent from older servers: None, the format's defaults
        return None if given is None else tuple(given)

    @property
    def default_max_turn_tokens(self) -> int | None:  # type: ignore[override]
        return self.description.get("default_max_turn_tokens")

    @property
    def splits(self) -> tuple[str, ...]:  # type: ignore[override]
        return tuple(self.description["splits"])

    def tasks(self, split: str = "train") -> list[str]:
        if split not in self._task_lists:
            total = self.num_tasks(split)
            ids: list[str] = []
            while len(ids) < total:
                query = f"split={quote(split)}&offset={len(ids)}&limit={_TASK_PAGE}"
                page = self._http().request("GET", self._session_path(f"/tasks?{query}"))
                ids += page["task_ids"]
            self._task_lists[split] = ids
        return self._task_lists[split]

    def num_tasks(self, split: str) -> int:
        counts = self.description["splits"]
        if split not in counts:
            raise ValueError(f"unknown split {split!r}; {self.env_id} has {list(counts)}")
        return counts[split]

    def task_at(self, split: str, index: int) -> str:
        self.num_tasks(split)
        page = self._http().request("GET", self._session_path(f"/tasks?split={quote(split)}&offset={index}&limit=1"))
        return page["task_ids"][0]

    # ---- the Gymnasium API ------------------------------------------------------------------------
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        reset_options(options)  # its type, as the local env checks it, before a round trip
        gym.Env.reset(self, seed=seed)  # the local generator follows Gymnasium's seeding rules too
        body = {"seed": None if seed is None else int(seed), "options": _plain(options)}
        try:
            reply = self._http().request("POST", self._session_path("/reset"), {**body, "seq": self._next_seq()})
        except wire.SessionLostError:
            self.session_id = None  # closed, reaped or the server restarted: a reset may start afresh
            reply = self._http().request("POST", self._session_path("/reset"), {**body, "seq": self._next_seq()})
        self._apply_reset(reply)
        return reply["observation"], reply["info"]

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        if not isinstance(action, str):
            raise TypeError(f"action must be a str (the action text), got {type(action).__name__}: {action!r:.80}")
        if not self._started:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._done:
            raise EpisodeOverError("the episode is over (terminated or truncated); call reset() to start a new one")
        reply = self._http().request("POST", self._session_path("/step"), {"action": action, "seq": self._next_seq()})
        return self._apply_step(reply)

    def _apply_reset(self, reply: dict[str, Any]) -> None:
        self._observation = reply["observation"]
        self._started, self._done = True, False

    def _apply_step(self, reply: dict[str, Any]) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self._observation = reply["observation"]
        terminated, truncated = bool(reply["terminated"]), bool(reply["truncated"])
        self._done = terminated or truncated
        return reply["observation"], float(reply["reward"]), terminated, truncated, reply["info"]

    def make_expert(self) -> RemoteExpert:
        """The remote scenario's scripted expert for the current episode (it runs on the server)."""
        if not self._started:
            raise RuntimeError("call reset() before make_expert()")
        self._http().request("POST", self._session_path("/expert"))
        return RemoteExpert(self)

    def close(self) -> None:
        if self.session_id is not None and self._transport is not None:
            # A session already gone (reaped, or no server) leaves nothing to free.
            with contextlib.suppress(wire.RemoteEnvError):
                self._transport.request("DELETE", f"/sessions/{self.session_id}", retries=0)
        self.session_id = None
        self._started = False
        if self._transport is not None and self._owns_transport:
            self._transport.close()
        super().close()

    def __repr__(self) -> str:
        where = self.base_url or "in-process server"
        return f"<RemoteEnv {self.env_id} at {where}, session {self.session_id}>"


class RemoteExpert:
    """The remote env's scripted expert: `act(observation, info)` asks the server for the next action."""

    def __init__(self, env: RemoteEnv):
        self._env = env

    def act(self, observation: str, info: dict[str, Any]) -> str:
        env = self._env
        reply = env._http().request(
            "POST",
            env._session_path("/expert/act"),
            {"observation": observation, "info": info, "seq": env._next_seq()},
        )
        return reply["action"]
