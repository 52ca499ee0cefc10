"""`RayVectorEnv`: a Gymnasium vector env whose sub-envs live on a `RayEnvPool`'s actors."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from agentgym_envs.cluster.pool import RayEnvPool
from agentgym_envs.remote.client.vector import stack_infos


class RayVectorEnv(VectorEnv):
    """`num_envs` envs of `env_id` on a Ray cluster; a reset or step is one Ray call per actor.

    Observations are tuples of strings, as for the in-process text envs; infos are batched as
    Gymnasium's vector envs batch them. A sub-env whose call failed (its actor died, it raised) raises
    here: a Gymnasium loop has no per-episode fault path (the rollout engine has one).

    Args:
        env_id: A registered id.
        num_envs: Sub-envs.
        pool: The pool to take them from (default: a new one on `address`).
        address: The cluster, as for `RayEnvPool`.
        env_kwargs: Keyword arguments for `gym.make` on the actors.
        autoreset_mode: NEXT_STEP (default: a sub-env that ended is reset by the next `step`) or DISABLED.
        timeout: Seconds a reset or step may take (None: no limit).
    """

    def __init__(
        self,
        env_id: str,
        num_envs: int,
        *,
        pool: RayEnvPool | None = None,
        address: str | None = None,
        env_kwargs: dict[str, Any] | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        timeout: float | None = 300.0,
    ):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.autoreset_mode = AutoresetMode(autoreset_mode)
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            raise ValueError("RayVectorEnv supports autoreset_mode NEXT_STEP and DISABLED")
        self._own_pool = pool is None
        self.pool = pool if pool is not None else RayEnvPool(address)
        self.num_envs, self.timeout = num_envs, timeout
        self.envs = [self.pool.acquire(env_id, env_kwargs) for _ in range(num_envs)]
        self._done = np.zeros(num_envs, dtype=np.bool_)
        self._started = False
        self.metadata = {"autoreset_mode": self.autoreset_mode}
        self.single_observation_space = self.single_action_space = None  # known after the first reset

    def _check(self, results: list[Any]) -> list[Any]:
        for i, result in enumerate(results):
            if isinstance(result, BaseException):
                raise RuntimeError(
                    f"sub-env {i} ({self.envs[i]!r}) failed: {type(result).__name__}: {result}"
                ) from result
        return results

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None) -> Any:
        seeds = seed if isinstance(seed, list) else [None if seed is None else seed + i for i in range(self.num_envs)]
        results = self._check(self.pool.reset(self.envs, seeds, [options] * self.num_envs, timeout=self.timeout))
        if self.single_observation_space is None:
            self.single_observation_space, self.single_action_space = self.pool.spaces(self.envs[0])
            self.observation_space = batch_space(self.single_observation_space, self.num_envs)
            self.action_space = batch_space(self.single_action_space, self.num_envs)
        self._done[:] = False
        self._started = True
        return tuple(r[0] for r in results), stack_infos([r[1] for r in results])

    def step(self, actions: Any) -> Any:
        if not self._started:
            raise RuntimeError("call reset() before step()")
        actions = list(actions)
        reset_ids = [i for i in range(self.num_envs) if self._done[i]]
        step_ids = [i for i in range(self.num_envs) if not self._done[i]]
        observations: list[Any] = [None] * self.num_envs
        infos: list[Any] = [None] * self.num_envs
        rewards = np.zeros(self.num_envs, dtype=np.float64)
        terminated = np.zeros(self.num_envs, dtype=np.bool_)
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        if step_ids:
            results = self._check(
                self.pool.step([self.envs[i] for i in step_ids], [actions[i] for i in step_ids], timeout=self.timeout)
            )
            for i, (obs, reward, term, trunc, info) in zip(step_ids, results, strict=True):
                observations[i], rewards[i], terminated[i], truncated[i], infos[i] = obs, reward, term, trunc, info
        if reset_ids:
            envs = [self.envs[i] for i in reset_ids]
            results = self._check(self.pool.reset(envs, [None] * len(envs), [None] * len(envs), timeout=self.timeout))
            for i, (obs, info) in zip(reset_ids, results, strict=True):
                observations[i], infos[i] = obs, info
        ended = terminated | truncated
        self._done = ended if self.autoreset_mode == AutoresetMode.NEXT_STEP else np.zeros_like(ended)
        return tuple(observations), rewards, terminated, truncated, stack_infos(infos)

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
        if self._own_pool:
            self.pool.close()
