"""OpenEnv clients for `agentgym serve`, which speaks OpenEnv's protocol at `/openenv/<env id>`.

OpenEnv's own `GenericEnvClient` plays any served scenario with no code from this project:

    >>> from openenv import GenericEnvClient  # doctest: +SKIP
    >>> url = "http://127.0.0.1:8000/openenv/AgentGym/TextCraft-v0"  # doctest: +SKIP
    >>> with GenericEnvClient(base_url=url).sync() as env:  # doctest: +SKIP
    ...     result = env.reset(seed=0, split="test")
    ...     result = env.step({"action": "inventory"})
    ...     print(result.observation["text"], result.reward, result.done)

OpenEnv's client sends no `Authorization` header, so it can only reach a server without a token.
`make_client` returns a `GenericEnvClient` that sends the server's bearer token with the WebSocket
handshake (`openenv-core` is imported when it is called: extra `[openenv]`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from agentgym_envs.remote.dialects.openenv import OPENENV_PREFIX


def openenv_url(server_url: str, env_id: str) -> str:
    """The OpenEnv base URL of `env_id` on the server at `server_url` (e.g. `http://127.0.0.1:8000`).

    >>> openenv_url("http://127.0.0.1:8000/", "AgentGym/BabyAI-v0")
    'http://127.0.0.1:8000/openenv/AgentGym/BabyAI-v0'
    """
    return f"{server_url.rstrip('/')}{OPENENV_PREFIX}/{quote(env_id, safe='/')}"


def make_client(server_url: str, env_id: str, token: str | None = None, **options: Any) -> Any:
    """An OpenEnv `GenericEnvClient` (async; `.sync()` for the blocking one) for `env_id` on a server.

    Args:
        server_url: The server's address, e.g. `http://127.0.0.1:8000`.
        env_id: A served id, e.g. `AgentGym/BabyAI-v0`.
        token: The server's bearer token (`agentgym serve --token`), sent with the WebSocket handshake.
        **options: More `GenericEnvClient` options (`message_timeout_s`, ...).
    """
    from openenv import GenericEnvClient

    class _BearerClient(GenericEnvClient):
        """`GenericEnvClient` that sends `Authorization: Bearer <token>` when it connects."""

        async def connect(self) -> Any:
            if self._ws is None:
                from websockets.asyncio.client import connect

                try:
                    self._ws = await connect(
                        self._ws_url,
                        open_timeout=self._connect_timeout,
                        max_size=self._max_message_size,
                        additional_headers={"Authorization": f"Bearer {token}"},
                    )
                except Exception as error:
                    raise ConnectionError(f"cannot connect to {self._ws_url}: {error}") from error
            return self

    cls = GenericEnvClient if token is None else _BearerClient
    return cls(base_url=openenv_url(server_url, env_id), **options)
