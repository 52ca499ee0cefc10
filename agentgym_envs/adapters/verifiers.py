"""Every scenario as a `verifiers` (v1, `import verifiers.v1 as vf`) taskset and env (extra `[verifiers]`).

verifiers finds tasksets by the name of an importable module that exports one `vf.Taskset` subclass
(and here an `Env` and a `Harness` subclass) in `__all__`. `install()` builds that module when called
(so nothing imports verifiers before then) and registers it as `agentgym_verifiers`:

- `AgentGymTaskset` (config: `env_id`, `split`, `count`, `env_kwargs`, `max_turns`) yields one task
  per task of the split: the scenario's system prompt and the task's first observation as prompt.
- `AgentGymEnv.run` plays the task as verifiers' own TextArena env plays a game: the env is the
  run's user; each reply of the model is parsed with the scenario's parser (as the multi-turn
  wrapper does) and stepped, the observation comes back as the next user turn, and the episode's
  score is recorded as the trace's `score` reward.
- `ChatHarness` is the taskset's default harness: one chat completion per turn through verifiers'
  interception endpoint, run in-process (verifiers' `null` harness does the same in a program that
  `uv` installs, which needs the network).

Example:
    >>> from agentgym_envs.adapters.verifiers import install  # doctest: +SKIP
    >>> import verifiers.v1 as vf  # doctest: +SKIP
    >>> taskset = vf.TasksetConfig.model_validate(  # doctest: +SKIP
    ...     {"id": install(), "env_id": "AgentGym/TextCraft-v0", "split": "test", "count": 10})
    >>> env = vf.load_environment(vf.EnvConfig(taskset=taskset))  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import sys
import types
from typing import Any

#: The module name verifiers loads the taskset, env and harness from (`--env.taskset.id agentgym_verifiers`).
MODULE = "agentgym_verifiers"


def install() -> str:
    """Build the verifiers plugin module (imports `verifiers`), register it as `agentgym_verifiers`; return that id."""
    if MODULE not in sys.modules:
        sys.modules[MODULE] = _build_module()
    return MODULE


def _build_module() -> types.ModuleType:
    import gymnasium as gym
    import httpx
    import verifiers.v1 as vf
    from pydantic import Field
    from verifiers.v1.harness import Harness
    from verifiers.v1.runtimes import ProgramResult

    import agentgym_envs  # noqa: F401  (registers the ids)
    from agentgym_wrappers import MultiTurnWrapper

    class AgentGymTasksetConfig(vf.TasksetConfig):
        """Which scenario and tasks: `env_id`, `split`, the first `count` tasks (None: all)."""

        env_id: str = "AgentGym/BabyAI-v0"
        split: str = "test"
        count: int | None = Field(None, ge=1)
        env_kwargs: dict[str, Any] = Field(default_factory=dict)
        max_turns: int | None = Field(None, ge=1)

    class AgentGymData(vf.TaskData):
        info: dict[str, Any]
        """env_id, split, task_id, seed, env_kwargs and max_turns: what the env plays the task with."""

    class AgentGymTask(vf.Task[AgentGymData, vf.State, vf.TaskConfig]):
        """One task of a scenario."""

    class AgentGymTaskset(vf.Taskset[AgentGymTask, AgentGymTasksetConfig]):
        """The tasks of one AgentGym scenario and split."""

        def load(self) -> Any:
            config = self.config
            env = gym.make(config.env_id, **config.env_kwargs)
            try:
                base = env.unwrapped
                count = base.num_tasks(config.split)
                for index in range(count if config.count is None else min(count, config.count)):
                    task_id = base.task_at(config.split, index)
                    # The seed fixes what the task's reset draws (TextCraft's distractors, ...), so that
                    # the env in `run` shows the same first observation as this prompt.
                    observation, _ = env.reset(seed=index, options={"split": config.split, "task_id": task_id})
                    info = {
                        "env_id": config.env_id,
                        "split": config.split,
                        "task_id": task_id,
                        "seed": index,
                        "env_kwargs": config.env_kwargs,
                        "max_turns": config.max_turns,
                    }
                    data = AgentGymData(
                        id=str(task_id),
                        name=f"{config.env_id}#{task_id}",
                        prompt=observation,
                        system_prompt=base.system_prompt,
                        info=info,
                    )
                    yield AgentGymTask(data, config.task)
            finally:
                env.close()

    class AgentGymEnvConfig(vf.EnvConfig):
        player: vf.AgentConfig = vf.AgentConfig(runtime=vf.SubprocessConfig())

    class AgentGymEnv(vf.Env[AgentGymEnvConfig]):
        """Plays a task: the scenario answers each model reply with the next observation (as the user)."""

        async def run(self, task: Any, agents: Any) -> None:
            info = task.data.info
            env = MultiTurnWrapper(gym.make(info["env_id"], **info["env_kwargs"]), max_turns=info["max_turns"])
            score, success = 0.0, False
            try:
                options = {"split": info["split"], "task_id": info["task_id"]}
                await asyncio.to_thread(env.reset, seed=info["seed"], options=options)
                async with agents.player.interaction(task) as interaction:
                    segment = await interaction.turn()
                    while not segment.terminated:
                        observation, _, terminated, truncated, step_info = await asyncio.to_thread(
                            env.step, segment.last_reply
                        )
                        score, success = float(step_info.get("score", score)), bool(step_info.get("success"))
                        if terminated or truncated:
                            break
                        segment = await interaction.turn(observation)
            finally:
                await asyncio.to_thread(env.close)
            trace = interaction.trace
            trace.record_reward("score", score, 1.0)
            trace.info["success"] = success

    class ChatHarnessConfig(vf.HarnessConfig):
        pass

    class ChatHarness(Harness[ChatHarnessConfig]):
        """One chat completion per turn, in-process, through the interception endpoint (no tools, no code)."""

        APPENDS_SYSTEM_PROMPT = True
        SUPPORTS_RESUME = True
        EXECUTES_CODE = False
        NEEDS_CONTAINER = False

        async def launch(
            self,
            ctx: Any,
            trace: Any,
            runtime: Any,
            endpoint: str,
            secret: str,
            mcp_urls: dict[str, str],
            data: Any,
        ) -> Any:
            system, prompt = self.resolve_prompt(data)
            messages = [{"role": "system", "content": system}] if system else []
            if isinstance(prompt, str):
                messages.append({"role": "user", "content": prompt})
            else:
                messages += [m if isinstance(m, dict) else m.model_dump(exclude_none=True) for m in prompt or []]
            async with httpx.AsyncClient(timeout=None) as client:
                reply = await client.post(
                    endpoint.rstrip("/") + "/chat/completions",
                    json={"model": ctx.model, "messages": messages},
                    headers={"Authorization": f"Bearer {secret}"},
                )
            failed = reply.status_code != 200
            return ProgramResult(exit_code=1 if failed else 0, stdout="", stderr=reply.text[-2000:] if failed else "")

    module = types.ModuleType(MODULE, "AgentGym scenarios as a verifiers taskset (built by agentgym_envs.adapters)")
    for cls in (
        AgentGymTasksetConfig,
        AgentGymData,
        AgentGymTask,
        AgentGymTaskset,
        AgentGymEnvConfig,
        AgentGymEnv,
        ChatHarnessConfig,
        ChatHarness,
    ):
        cls.__module__ = MODULE
        setattr(module, cls.__name__, cls)
    module.__all__ = ["AgentGymEnv", "AgentGymTaskset", "ChatHarness"]
    return module
