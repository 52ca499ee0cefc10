"""`RemoteVectorEnv`: many sessions of one server, reset and stepped with one request per call."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agentgym_envs.remote import wire
from agentgym_envs.remote.client.env import RemoteEnv, _plain
from agentgym_envs.remote.client.transport import HTTPTransport


def stack_infos(infos: list[dict[str, Any] | None]) -> dict[str, Any]:
    """Infos of sub-envs (None: no info this call) batched as Gymnasium's `VectorEnv._add_info` does,
    in one pass: per key an array over sub-envs (numeric for int/float/bool, else object) and a mask `_key`.
    """
    n = len(infos)
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
            out[key] = stack_infos([v if has else None for v, has in zip(values, present, strict=True)])
        else:
            if type(first) in (int, float, bool) or isinstance(first, np.number):
                array = np.zeros(n, dtype=type(first))
            else:
                array = np.full(n, None, dtype=object)
            for i, (value, has) in enumerate(zip(values, present, strict=True)):
                if has:
                    array[i] = value
            out[key] = array
        out[f"_{key}"] = np.array(present, dtype=np.bool_)
    return out


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
        for index, (call, result) in enumerate(zip(calls, results, strict=True)):
            if not result["ok"]:
                error = wire.error_for(result["status"], result, f"{call['op']} of sub-env {index}")
                raise error
        return results

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
        self._connect()
        calls = []
        for i, env in enumerate(self.envs):
            if self._autoreset[i]:
                calls.append({"session_id": env.session_id, "op": "reset", "seq": env._next_seq()})
            else:
                calls.append({"session_id": env.session_id, "op": "step", "action": actions[i], "seq": env._next_seq()})
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminations = np.zeros(self.num_envs, dtype=np.bool_)
        truncations = np.zeros(self.num_envs, dtype=np.bool_)
        infos: list[dict[str, Any] | None] = [None] * self.num_envs
        for i, (call, result) in enumerate(zip(calls, self._batch(calls), strict=True)):
            env = self.envs[i]
            if call["op"] == "reset":
                env._apply_reset(result)
                infos[i] = result["info"]
            else:
                _, rewards[i], terminations[i], truncations[i], infos[i] = env._apply_step(result)
        if self.autoreset_mode == AutoresetMode.NEXT_STEP:
            self._autoreset = terminations | truncations
        observations = tuple(env._observation or "" for env in self.envs)
        return observations, rewards, terminations, truncations, stack_infos(infos)

    def close_extras(self, **kwargs: Any) -> None:
        for env in reversed(self.envs):  # the first owns the shared connection: close it last
            env.close()
