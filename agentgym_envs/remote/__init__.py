"""Envs out of process: one HTTP protocol for every registered env, a server and its clients.

- `agentgym serve AgentGym/BabyAI-v0 --port 8000` (or `server.serve`) runs the server: FastAPI and
  uvicorn, the `[server]` extra; `server.create_app` builds the app. Its routes are listed in
  `agentgym_envs.remote.server.app` and documented at `/docs`; `dialects/` speaks AgentGym's and
  OpenEnv's protocols besides.
- `gym.make("AgentGym/Remote-v0", base_url="http://127.0.0.1:8000", env_id=...)` is a client env
  (`RemoteEnv`); `gym.make_vec("AgentGym/Remote-v0", num_envs=32, base_url=...)` a `RemoteVectorEnv`
  that steps all its sessions in one request. The clients need only the standard library.

Importing this package is light: the server modules import FastAPI only when used. `client/` and
`server/` share `wire` (JSON, errors) and `description` (what a server says of an env).
"""

from __future__ import annotations

from agentgym_envs.remote.client import RemoteEnv, RemoteExpert, RemoteVectorEnv
from agentgym_envs.remote.wire import (
    AuthenticationError,
    RemoteEnvError,
    RemoteTimeoutError,
    ServerUnavailableError,
    SessionLostError,
)

__all__ = [
    "AuthenticationError",
    "RemoteEnv",
    "RemoteEnvError",
    "RemoteExpert",
    "RemoteTimeoutError",
    "RemoteVectorEnv",
    "ServerUnavailableError",
    "SessionLostError",
]
