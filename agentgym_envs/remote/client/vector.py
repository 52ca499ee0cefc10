"""`RemoteVectorEnv`: many sessions of one server, reset and stepped with one request per call."""

from __future__ import annotations

import json.encoder
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agentgym_envs.remote import wire
from agentgym_envs.remote.client.env import RemoteEnv, _plain
from agentgym_envs.remote.client.transport import HTTPTransport

#: `json`'s escaper for strings (ASCII output), the one `wire.dumps` encodes them with.
_encode_str = json.encoder.encode_basestring_ascii


def stack_infos(infos: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Infos of sub-envs (None: no info this call) batched as Gymnasium's `VectorEnv._add_info` does,
    in one pass: per key an array over sub-envs (numeric for int/float/bool, else object) and a mask `_key`.
    """
    n = len(infos)
    columns = _same_keys(infos)
    if columns is not None:  # nearly every step: every sub-env has the same keys
        out: dict[str, Any] = {}
        everyone = np.ones(n, dtype=np.bool_)
        for key, values in columns.items():
            first = values[0]
            if isinstance(first, dict):
                out[key] = stack_infos(values)
            else:
                out[key] = _column(values)
            out[f"_{key}"] = everyone.copy()
        return out
    return stack_any_infos(infos, stack_infos)


def stack_any_infos(
    infos: list[dict[str, Any] | None], nested: Callable[[list[Any]], dict[str, Any]] | None = None
) -> dict[str, Any]:
    """`stack_infos` for infos of any keys (sub-envs without a key or without an info), the general path;
    nested dicts are batched by `nested` (default: this function)."""
    nested = nested or stack_any_infos
    keys: dict[str, None] = {}
    for info in infos:
        if info:
            keys.update(dict.fromkeys(info))
    out: dict[str, Any] = {}
    for key in keys:
        present = [info is not None and key in info for info in infos]
        values = [info[key] if has else None for info, has in zip(infos, present, strict=True)]  # type: ignore[index]
        first = next(v for v, has in zip(values, present, strict=True) if has)
        if isinstance(first, dict):
            out[key] = nested([v if has else None for v, has in zip(values, present, strict=True)])
        else:
            out[key] = _filled(values, present, first)
        out[f"_{key}"] = np.array(present, dtype=np.bool_)
    return out


def _same_keys(infos: list[dict[str, Any] | None]) -> dict[str, list[Any]] | None:
    """Per key (in the first info's order) the values of every sub-env, if all infos are non-empty dicts with
    the same keys; else None."""
    if not infos:
        return None
    first = infos[0]
    if type(first) is not dict or not first:
        return None
    size = len(first)
    for info in infos:
        if type(info) is not dict or len(info) != size:
            return None
    try:  # as many keys as the first and all of the first's: the same keys
        return {key: [info[key] for info in infos] for key in first}  # type: ignore[index]
    except KeyError:
        return None


def _column(values: list[Any]) -> np.ndarray:
    """One key's array when every sub-env has it: what `_filled` makes, built at once for the common types."""
    first = values[0]
    kinds = set(map(type, values))
    if len(kinds) == 1 and type(first) in (int, float, bool):
        return np.array(values, dtype=type(first))
    if kinds <= _TEXT:  # scalars to numpy: one element each
        return np.array(values, dtype=object)
    return _filled(values, [True] * len(values), first)


#: Types that `np.array(..., dtype=object)` keeps as one element each.
_TEXT = {str, type(None)}


def _filled(values: list[Any], present: list[bool], first: Any) -> np.ndarray:
    """The array of one key: numeric of `first`'s type for int/float/bool (and numpy numbers), else object;
    sub-envs without the key keep 0 (or None)."""
    n = len(values)
    if type(first) in (int, float, bool) or isinstance(first, np.number):
        array = np.zeros(n, dtype=type(first))
    else:
        array = np.full(n, None, dtype=object)
    for i, (value, has) in enumerate(zip(values, present, strict=True)):
        if has:
            array[i] = value
    return array


class RemoteVectorEnv(VectorEnv):
    """`num_envs` remote envs of one server, driven through its batched route (`POST /batch`).

    A turn of a rollout costs one round trip for all sub-envs, and the server runs their calls
    concurrently. Observations are tuples of strings, as for the in-process text envs; infos are
    batched as Gymnasium's vector envs batch them. Sub-envs are `RemoteEnv`s (`envs[i]`), so their
    experts, task lists and descriptions are at hand. Sessions open on first use.

    Args:
        num_envs: Sub-envs (server sessions).
        autoreset_mode: Gymnasium's `NEXT_STEP` (default: a sub-env that ended is reset by the next
            `step`, in the same request) or `DISABLED`.
        Other arguments: as for `RemoteEnv`.
    """

    def __init__(
        self,
        num_envs: int,
        base_url: str | None = None,
        env_id: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        token: str | None = None,
        timeout: float = 60.0,
        connect_timeout: float = 5.0,
        retries: int = 3,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        render_mode: str | None = None,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            raise ValueError("RemoteVectorEnv supports autoreset_mode NEXT_STEP and DISABLED")
        self.num_envs = num_envs
        first = RemoteEnv(base_url, env_id, env_kwargs, token, timeout, connect_timeout, retries, render_mode)
        self._first = first
        self.envs = [first]
        self.metadata = {**first.metadata, "autoreset_mode": self.autoreset_mode}
        self.render_mode = render_mode
        self._spaces(first)
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)
        self._connected = False

    def _spaces(self, env: RemoteEnv) -> None:
        self.single_observation_space = env.observation_space
        self.single_action_space = env.action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def _connect(self) -> HTTPTransport:
        """Open every session on first use; all sub-envs share the first one's connection."""
        first = self._first
        first.connect()
        transport = first._http()
        if not self._connected:
            self.envs = [first]
            for _ in range(self.num_envs - 1):
                env = RemoteEnv(first.base_url, first.env_id, first.env_kwargs, transport=transport)
                env.connect()
                self.envs.append(env)
            self._spaces(first)
            self._connected = True
        return transport

    def _batch(self, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
        results = self._connect().request("POST", "/batch", {"calls": calls})["results"]
        self._check([call["op"] for call in calls], results)
        return results

    @staticmethod
    def _check(ops: list[str], results: list[dict[str, Any]]) -> None:
        """Raise the error of the first failed call (`ops`: each call's op), if any failed."""
        for index, (op, result) in enumerate(zip(ops, results, strict=True)):
            if not result["ok"]:
                raise wire.error_for(result["status"], result, f"{op} of sub-env {index}")

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[tuple[str, ...], dict[str, Any]]:
        """Reset every sub-env (or those of `options["reset_mask"]`) in one request; seeds as Gymnasium's."""
        self._connect()
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, (int, np.integer)):
            seeds = [int(seed) + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
        if len(seeds) != self.num_envs:
            raise ValueError(f"got {len(seeds)} seeds for num_envs={self.num_envs}")
        options = dict(options or {})
        mask = np.asarray(options.pop("reset_mask", np.ones(self.num_envs, dtype=np.bool_)), dtype=np.bool_)
        if mask.shape != (self.num_envs,):
            raise ValueError(f"options['reset_mask'] must have shape ({self.num_envs},), got {mask.shape}")
        chosen = [i for i in range(self.num_envs) if mask[i]]
        calls = []
        for i in chosen:
            env = self.envs[i]
            call = {"session_id": env.session_id, "op": "reset", "seed": seeds[i], "options": _plain(options) or None}
            calls.append({**call, "seq": env._next_seq()})
        infos: list[dict[str, Any] | None] = [None] * self.num_envs
        for i, result in zip(chosen, self._batch(calls), strict=True):
            self.envs[i]._apply_reset(result)
            self._autoreset[i] = False
            infos[i] = result["info"]
        return tuple(env._observation or "" for env in self.envs), stack_infos(infos)

    def step(self, actions: Any) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-env in one request (NEXT_STEP: a sub-env that ended is reset instead)."""
        actions = list(actions)
        if len(actions) != self.num_envs:
            raise ValueError(f"got {len(actions)} actions for num_envs={self.num_envs}")
        for action in actions:
            if not isinstance(action, str):
                raise TypeError(f"actions must be str (the action texts), got {type(action).__name__}")
        transport = self._connect()
        # The request's JSON written directly, the bytes `wire.dumps({"calls": calls})` would give for
        # these dicts (a third of the cost): keys in the same order, strings escaped by `json`'s own escaper.
        resets, parts = self._autoreset.tolist(), []
        if not all(isinstance(env.session_id, str) for env in self.envs):  # a server's odd ids: as they came
            return self._step_calls(actions, resets)
        for env, action, reset in zip(self.envs, actions, resets, strict=True):
            session = _encode_str(env.session_id)
            if reset:
                parts.append(f'{{"session_id":{session},"op":"reset","seq":{env._next_seq()}}}')
            else:
                parts.append(
                    f'{{"session_id":{session},"op":"step","action":{_encode_str(action)},"seq":{env._next_seq()}}}'
                )
        encoded = f'{{"calls":[{",".join(parts)}]}}'.encode()
        results = transport.request("POST", "/batch", encoded=encoded)["results"]
        self._check(["reset" if reset else "step" for reset in resets], results)
        return self._stepped(resets, results)

    def _step_calls(
        self, actions: list[str], resets: list[bool]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """`step` with the request encoded from its dicts."""
        calls = []
        for env, action, reset in zip(self.envs, actions, resets, strict=True):
            if reset:
                calls.append({"session_id": env.session_id, "op": "reset", "seq": env._next_seq()})
            else:
                calls.append({"session_id": env.session_id, "op": "step", "action": action, "seq": env._next_seq()})
        return self._stepped(resets, self._batch(calls))

    def _stepped(
        self, resets: list[bool], results: list[dict[str, Any]]
    ) -> tuple[tuple[str, ...], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """A step's results (each sub-env's reset if `resets` says so) applied to the sub-envs and batched."""
        rewards, terminations, truncations = [0.0] * self.num_envs, [False] * self.num_envs, [False] * self.num_envs
        infos: list[dict[str, Any] | None] = [None] * self.num_envs
        for i, (env, result, reset) in enumerate(zip(self.envs, results, resets, strict=True)):
            if reset:
                env._apply_reset(result)
                infos[i] = result["info"]
            else:
                _, rewards[i], terminations[i], truncations[i], infos[i] = env._apply_step(result)
        terminated = np.array(terminations, dtype=np.bool_)
        truncated = np.array(truncations, dtype=np.bool_)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._autoreset = terminated | truncated
        observations = tuple(env._observation or "" for env in self.envs)
        return observations, np.array(rewards, dtype=np.float64), terminated, truncated, stack_infos(infos)

    def close_extras(self, **kwargs: Any) -> None:
        for env in reversed(self.envs):  # the first owns the shared connection: close it last
            env.close()
