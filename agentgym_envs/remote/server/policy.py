"""Who decides an env's configuration on a server: the operator at start, a client only what the env allows.

The operator passes kwargs per env id when the server starts (`agentgym serve ID --env-kwargs JSON`
or `--env-config FILE`); they are checked against the env's constructor then, so a typo fails at
start, not at the first client. A client's kwargs are checked against the env class's
`client_kwargs` (see `agentgym_envs.clientargs`) before any env is made: a kwarg the env does not
declare safe for clients, or one the operator fixed, is refused with 403 and its name; a declared
one with a bad value with 422.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import load_env_creator

from agentgym_envs.clientargs import ClientKwarg
from agentgym_envs.remote.wire import ApiError


def env_class(env_id: str) -> Any:
    """The class (or factory) behind a registered id."""
    entry_point = gym.spec(env_id).entry_point
    return load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point


def declared_client_kwargs(env_id: str) -> Mapping[str, ClientKwarg]:
    """The kwargs `env_id`'s class lets a client choose (none for a factory or a foreign env)."""
    declared = getattr(env_class(env_id), "client_kwargs", None)
    return declared if isinstance(declared, Mapping) else {}


def check_operator_kwargs(env_id: str, kwargs: Mapping[str, Any]) -> None:
    """Raise ValueError if `kwargs` has a name that `env_id`'s constructor (or `gym.make`) does not take."""
    if not isinstance(kwargs, Mapping) or not all(isinstance(name, str) for name in kwargs):
        raise ValueError(f"the env kwargs of {env_id} must be a JSON object of name -> value, got {kwargs!r:.200}")
    try:
        parameters = inspect.signature(env_class(env_id)).parameters
    except (TypeError, ValueError):  # no signature to check against (a builtin factory)
        return
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return
    accepted = [name for name, p in parameters.items() if p.kind is not inspect.Parameter.VAR_POSITIONAL]
    unknown = sorted(set(kwargs) - set(accepted) - {"max_episode_steps", "disable_env_checker"})
    if unknown:
        raise ValueError(f"{env_id} takes no kwargs {unknown}; its constructor accepts {accepted}")


class KwargsPolicy:
    """The operator's kwargs per served id, and the check of what a client asks for.

    Args:
        operator_kwargs: Env id -> kwargs fixed by the operator (applied to every session of that id).
        trust_clients: Accept any client kwargs (only for a server whose one client is this very
            process, such as `AgentGym/Remote-v0`'s in-process server with its random token).
    """

    def __init__(self, operator_kwargs: Mapping[str, Mapping[str, Any]] | None = None, trust_clients: bool = False):
        self.operator_kwargs = {env_id: dict(kwargs) for env_id, kwargs in (operator_kwargs or {}).items()}
        for env_id, kwargs in self.operator_kwargs.items():
            check_operator_kwargs(env_id, kwargs)
        self.trust_clients = trust_clients

    def operator(self, env_id: str) -> dict[str, Any]:
        """The kwargs the operator fixed for `env_id`."""
        return self.operator_kwargs.get(env_id, {})

    def kwargs_for(self, env_id: str, client: Mapping[str, Any]) -> dict[str, Any]:
        """The kwargs to make `env_id` with for a client that asked for `client`; ApiError 403/422 if refused."""
        fixed = self.operator(env_id)
        if self.trust_clients:
            return {**fixed, **client}
        declared = declared_client_kwargs(env_id)
        allowed = sorted(name for name in declared if name not in fixed)
        checked = {}
        for name, value in client.items():
            if name in fixed:
                raise ApiError(
                    403,
                    f"kwarg {name!r} of {env_id} is fixed by the server's operator (agentgym serve --env-kwargs); "
                    f"a client may set {allowed or 'none'}",
                    "ForbiddenKwarg",
                )
            checker = declared.get(name)
            if checker is None:
                raise ApiError(
                    403,
                    f"kwarg {name!r} is not one a client may choose for {env_id}; a client may set "
                    f"{allowed or 'none'}, and the operator sets the others when starting the server "
                    "(agentgym serve ID --env-kwargs JSON)",
                    "ForbiddenKwarg",
                )
            try:
                checked[name] = checker.check(name, value)
            except ValueError as error:
                raise ApiError(422, f"{env_id}: {error}", "ValueError") from error
        return {**fixed, **checked}

    def describe(self, env_id: str) -> dict[str, str]:
        """What a client may pass for `env_id`, in words (name -> description)."""
        fixed = self.operator(env_id)
        return {
            name: checker.describe() for name, checker in declared_client_kwargs(env_id).items() if name not in fixed
        }


def _per_id(value: Any, env_ids: list[str], where: str) -> dict[str, dict[str, Any]]:
    """`{id: kwargs}` from a per-id object (every key a served id) or a flat object applied to every id."""
    if not isinstance(value, dict):
        raise ValueError(f"{where} must be a JSON/YAML object, got {type(value).__name__}")
    if value and all(key in env_ids for key in value):
        bad = [key for key, kwargs in value.items() if not isinstance(kwargs, dict)]
        if bad:
            raise ValueError(f"{where}: the kwargs of {bad} must be objects of name -> value")
        return {key: dict(kwargs) for key, kwargs in value.items()}
    looks_per_id = [key for key in value if "/" in key and key not in env_ids]
    if looks_per_id:
        raise ValueError(f"{where} names ids this server does not serve: {looks_per_id}; served: {env_ids}")
    return {env_id: dict(value) for env_id in env_ids}


def load_env_kwargs(text: str | None, path: str | None, env_ids: list[str]) -> dict[str, dict[str, Any]]:
    """The operator's kwargs per id from `--env-kwargs JSON` and `--env-config FILE` (JSON or YAML).

    Each is either `{"name": value, ...}` for every served id, or `{"ENV_ID": {...}, ...}` per id; the
    command line's kwargs win over the file's. Raises ValueError naming what is wrong.
    """
    merged: dict[str, dict[str, Any]] = {}
    if path is not None:
        try:
            with open(path, encoding="utf-8") as file:
                raw = file.read()
        except OSError as error:
            raise ValueError(f"cannot read --env-config {path}: {error}") from error
        if path.endswith(".json"):
            try:
                data = json.loads(raw)
            except ValueError as error:
                raise ValueError(f"--env-config {path} is not valid JSON: {error}") from error
        else:
            try:
                import yaml
            except ImportError as error:
                raise ValueError(
                    f"--env-config {path}: YAML needs pyyaml (pip install pyyaml), or use a .json file"
                ) from error
            try:
                data = yaml.safe_load(raw)
            except yaml.YAMLError as error:
                raise ValueError(f"--env-config {path} is not valid YAML: {error}") from error
        merged = _per_id(data or {}, env_ids, f"--env-config {path}")
    if text is not None:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise ValueError(f"--env-kwargs is not valid JSON ({error}): e.g. '{{\"show_actions\": false}}'") from error
        for env_id, kwargs in _per_id(data, env_ids, "--env-kwargs").items():
            merged[env_id] = {**merged.get(env_id, {}), **kwargs}
    return merged
