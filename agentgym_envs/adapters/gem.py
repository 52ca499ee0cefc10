"""Every scenario as a GEM environment (`gem-llm`, extra `[gem]`), registered as `agentgym:<name>`.

GEM envs take the model's raw reply as the action and answer with text, like the multi-turn wrapper
here: a reply is parsed with the scenario's parser (an 'Action:' line, `<search>`/`<answer>` tags, a
fenced code block), an unparsable one costs a turn and is answered with a format reminder, and
`max_turns` truncates. The first observation starts with the scenario's instructions. GEM's
`make_vec` passes each env a `seed`, which picks the first task of the split (later resets go on
from there); no global random state is touched.

Example:
    >>> import gem  # doctest: +SKIP
    >>> from agentgym_envs.adapters.gem import register_all  # doctest: +SKIP
    >>> _ = register_all()  # doctest: +SKIP
    >>> env = gem.make("agentgym:TextCraft-v0", split="test", seed=0)  # doctest: +SKIP
    >>> observation, info = env.reset()  # doctest: +SKIP
    >>> observation, reward, terminated, truncated, info = env.step("Action: inventory")  # doctest: +SKIP
"""

from __future__ import annotations

import functools
from typing import Any

import gymnasium as gym

#: The GEM id of `AgentGym/<name>` is `agentgym:<name>`.
GEM_PREFIX = "agentgym:"


def gem_id(env_id: str) -> str:
    """`AgentGym/BabyAI-v0` -> `agentgym:BabyAI-v0`.

    >>> gem_id("AgentGym/BabyAI-v0")
    'agentgym:BabyAI-v0'
    """
    return GEM_PREFIX + env_id.removeprefix("AgentGym/")


@functools.cache
def gem_env_class() -> type:
    """The `gem.Env` subclass that wraps a scenario (made on first use, when `gem` is imported)."""
    from gem.core import Env

    from agentgym_wrappers import MultiTurnWrapper, action_reply

    class AgentGymGemEnv(Env):
        """A registered AgentGym id as a GEM env (see the module docstring).

        Args:
            env_id: A registered id, e.g. `AgentGym/BabyAI-v0`.
            seed: Seeds the first reset (GEM's `make_vec` passes one per env).
            split: The split whose tasks are played.
            env_kwargs: Constructor kwargs of the env.
            max_turns: Turns per episode (None: the scenario's `default_max_turns`).
            include_system_prompt: Start the first observation with the scenario's instructions.
        """

        def __init__(
            self,
            env_id: str,
            seed: int | None = None,
            split: str = "train",
            env_kwargs: dict[str, Any] | None = None,
            max_turns: int | None = None,
            include_system_prompt: bool = True,
        ):
            super().__init__()
            import agentgym_envs  # noqa: F401  (registers the ids)

            self.config = {
                "env_id": env_id,
                "split": split,
                "env_kwargs": dict(env_kwargs or {}),
                "max_turns": max_turns,
                "include_system_prompt": include_system_prompt,
            }
            self.env = MultiTurnWrapper(gym.make(env_id, **self.config["env_kwargs"]), max_turns=max_turns)
            self._first_seed = seed
            self._observation = ""
            self._info: dict[str, Any] = {}
            self._expert: Any = None

        def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
            if seed is None:
                seed, self._first_seed = self._first_seed, None
            self._observation, self._info = self.env.reset(seed=seed, options={"split": self.config["split"]})
            self._expert = None
            prompt = self.env.system_prompt if self.config["include_system_prompt"] else ""
            return (f"{prompt}\n\n{self._observation}" if prompt else self._observation), dict(self._info)

        def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
            observation, reward, terminated, truncated, info = self.env.step(action)
            self._observation, self._info = observation, info
            if not info.get("format_error"):
                info = {**info, "parsed_action": info["action"]}
            return observation, float(reward), terminated, truncated, info

        def sample_random_action(self) -> str:
            """A reply holding one of the actions the scenario lists now (not every scenario lists them)."""
            actions = self._info.get("available_actions")
            if not actions:
                raise NotImplementedError(f"{self.config['env_id']} lists no actions to sample from here")
            index = int(self.env.unwrapped.np_random.integers(len(actions)))
            return self._as_reply(actions[index])

        def expert_reply(self) -> str:
            """The scenario's scripted expert's next reply, as a model would write it (demos, SFT data, tests)."""
            if self._expert is None:
                self._expert = self.env.unwrapped.make_expert()
            return self._as_reply(self._expert.act(self._observation, self._info))

        def _as_reply(self, action: str) -> str:
            return action_reply(action, self.env.unwrapped.action_format)

        def spawn(self, same_state: bool = False, **kwargs: Any) -> Any:
            if same_state:
                raise NotImplementedError("a scenario's state cannot be copied; spawn a fresh env (same_state=False)")
            return type(self)(**{**self.config, **kwargs})

        def close(self) -> None:
            self.env.close()

    return AgentGymGemEnv


def register_all() -> list[str]:
    """Register every AgentGym id (but the remote client) with GEM as `agentgym:<name>`; return the GEM ids."""
    import gem
    from gem.envs.registration import ENV_REGISTRY

    import agentgym_envs

    ids = []
    for env_id in agentgym_envs.registered_ids:
        if env_id.startswith("AgentGym/Remote"):
            continue
        ids.append(gem_id(env_id))
        if ids[-1] not in ENV_REGISTRY:
            gem.register(ids[-1], entry_point=functools.partial(gem_env_class(), env_id))
    return ids
