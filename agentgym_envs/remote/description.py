"""The remote description: what a server tells its clients about a served env, as one documented schema.

A server answers it in `GET /envs` and with every session (`POST /sessions`, `GET /sessions/{id}`);
`describe_env` builds it, the client (`RemoteEnv`) mirrors the env from it, and the server's OpenAPI
schema documents it from these same classes (pydantic reads their attribute docstrings). The schema
is a pair of `TypedDict`s, so that the client, which needs only the standard library, reads it too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from typing_extensions import TypedDict  # pydantic documents a TypedDict from typing_extensions on Python < 3.12

from agentgym_envs.core import TextEnv, TextSpace

# pydantic takes each field's description from the docstring under it.
_DOCUMENTED = {"use_attribute_docstrings": True}


class SpaceDescription(TypedDict):
    """An observation or action space."""

    __pydantic_config__ = _DOCUMENTED  # type: ignore[misc]

    type: str
    """`TextSpace` for every AgentGym env; another space class name otherwise."""
    max_length: int | None
    """A TextSpace's bound on the text length (null for another space)."""
    repr: str | None
    """repr() of a space that is not a TextSpace (null for a TextSpace)."""


class EnvDescription(TypedDict):
    """A served env: its spaces, the scenario's class attributes, and its splits with their sizes."""

    __pydantic_config__ = _DOCUMENTED  # type: ignore[misc]

    env_id: str
    """The registered id."""
    class_name: str
    """Module and class of the env behind the id."""
    observation_space: SpaceDescription
    """What `reset` and `step` answer."""
    action_space: SpaceDescription
    """What `step` accepts."""
    default_max_turns: int | None
    """The turn limit a multi-turn wrapper uses when none is given."""
    action_format: str | None
    """The action parser a multi-turn wrapper uses."""
    system_prompt: str
    """How to act in this scenario, with one worked example."""
    stop_strings: list[str] | None
    """Where a reply ends (generation stops before any of them); null: the action format's."""
    default_max_turn_tokens: int | None
    """The scenario's reply budget in tokens; null: the action format's."""
    splits: dict[str, int]
    """Split name -> number of tasks."""
    metadata: dict[str, Any]
    """The env's `render_modes` and `render_fps`."""
    has_expert: bool
    """Whether POST /sessions/{id}/expert can make a scripted expert."""
    max_episode_steps: int | None
    """The step limit of the registered id (Gymnasium's TimeLimit), if any."""
    client_kwargs: dict[str, str]
    """The kwargs a client may pass when creating a session, with what each accepts."""


def describe_space(space: gym.Space) -> SpaceDescription:
    """A space as JSON: a `TextSpace` by its bound; any other by its class name and repr."""
    if isinstance(space, TextSpace):
        return {"type": "TextSpace", "max_length": space.max_length, "repr": None}
    return {"type": type(space).__name__, "max_length": None, "repr": repr(space)}


def text_space(description: Mapping[str, Any], what: str) -> TextSpace:
    """The `TextSpace` a description names (TypeError for any other space: the client mirrors text only)."""
    if description.get("type") != "TextSpace":
        raise TypeError(f"the remote env's {what} is a {description.get('type')}; the client mirrors TextSpace only")
    return TextSpace(int(description["max_length"]))


def _optional_list(values: Any) -> list[Any] | None:
    return None if values is None else list(values)


def describe_env(env_id: str, env: gym.Env, client_kwargs: Mapping[str, str]) -> EnvDescription:
    """The description of `env` made for `env_id`; `client_kwargs` says what a client may pass (name -> words)."""
    base = env.unwrapped
    splits = getattr(base, "splits", ())
    counts = {split: int(base.num_tasks(split)) for split in splits} if isinstance(base, TextEnv) else {}
    metadata = {k: v for k, v in base.metadata.items() if k in ("render_modes", "render_fps")}
    return {
        "env_id": env_id,
        "class_name": f"{type(base).__module__}.{type(base).__qualname__}",
        "observation_space": describe_space(env.observation_space),
        "action_space": describe_space(env.action_space),
        "default_max_turns": getattr(base, "default_max_turns", None),
        "action_format": getattr(base, "action_format", None),
        "system_prompt": getattr(base, "system_prompt", ""),
        "stop_strings": _optional_list(getattr(base, "stop_strings", None)),
        "default_max_turn_tokens": getattr(base, "default_max_turn_tokens", None),
        "splits": counts,
        "metadata": metadata,
        "has_expert": isinstance(base, TextEnv) and type(base).make_expert is not TextEnv.make_expert,
        "max_episode_steps": env.spec.max_episode_steps if env.spec is not None else None,
        "client_kwargs": dict(client_kwargs),
    }
