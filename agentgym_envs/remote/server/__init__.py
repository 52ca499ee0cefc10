"""The server side: `create_app` builds the env server (FastAPI), `serve` runs it (uvicorn).

`app` holds the server's own routes and its start, `front` the ASGI layer before them (guard, token,
body limit, hot routes), `sessions` the session manager (cap, reaper, batches), `session` one session
and its env calls, `workers` the threads those calls run on, `guard` the request checks, `policy` who
chooses an env's kwargs, `protocol` the request and reply bodies, and `local` servers inside this
process. Needs the `[server]` extra.
"""

from __future__ import annotations

from agentgym_envs.remote.server.app import create_app, resolve_token, serve

__all__ = ["create_app", "resolve_token", "serve"]
