"""`agentgym_envs.adapters.verifiers`: one episode through verifiers' own rollout code.

verifiers (v1) runs the episode: it loads the taskset from the plugin module, runs the env's `run`,
sends each model call through its interception server and its eval client to an OpenAI-compatible
endpoint, and records the trace and its reward. The endpoint is a stand-in for a model: a small
HTTP server whose replies are the scenario's expert's actions on a mirror of the same task.
"""

from __future__ import annotations

import asyncio
from typing import Any

import gymnasium as gym
import pytest

pytest.importorskip("verifiers")
pytest.importorskip("starlette")

import verifiers.v1 as vf
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import agentgym_envs  # noqa: F401
from agentgym_envs.adapters.verifiers import install
from agentgym_envs.remote.server.local import ServerThread

TEXTCRAFT = "AgentGym/TextCraft-v0"


class ExpertStandIn:
    """A stand-in model: an OpenAI-compatible chat endpoint answering with the expert's next action.

    It plays a mirror of the task (same id) in step with the conversation, and records whether every
    user message it was sent is the observation its mirror shows at that point.
    """

    def __init__(self, env_id: str, split: str, task_id: str, seed: int):
        self.env = gym.make(env_id)
        self.observation, self.info = self.env.reset(seed=seed, options={"split": split, "task_id": task_id})
        self.expert = self.env.unwrapped.make_expert()
        self.sent: list[list[dict[str, Any]]] = []
        self.in_step = True
        self.action: str | None = None

    async def chat(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.sent.append(body["messages"])
        if self.action is not None:
            self.observation, _, _, _, self.info = self.env.step(self.action)
        self.in_step &= body["messages"][-1]["content"] == self.observation
        self.action = self.expert.act(self.observation, self.info)
        message = {"role": "assistant", "content": f"I have a plan.\nAction: {self.action}"}
        return JSONResponse(
            {
                "id": f"stand-in-{len(self.sent)}",
                "object": "chat.completion",
                "created": 0,
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            }
        )


def test_verifiers_plays_a_textcraft_episode_with_a_stand_in_model() -> None:
    taskset = {"id": install(), "env_id": TEXTCRAFT, "split": "test", "count": 2}
    env = vf.load_environment(vf.resolve_env_config({"taskset": taskset}))
    tasks = list(env.taskset)
    assert [t.data.info["task_id"] for t in tasks] == env_tasks()[:2] and tasks[0].data.system_prompt
    task = tasks[0]
    model = ExpertStandIn(TEXTCRAFT, "test", task.data.info["task_id"], task.data.info["seed"])
    assert task.data.prompt == model.observation  # the prompt is the first observation of the task's env
    app = Starlette(routes=[Route("/v1/chat/completions", model.chat, methods=["POST"])])
    with ServerThread(app) as server:
        client = vf.EvalClientConfig(base_url=server.base_url + "/v1", api_key_var="AGENTGYM_TEST_NO_KEY")
        ctx = vf.ModelContext(model="expert-stand-in", client=client)

        async def play() -> Any:
            async with env.serving():
                return await env.run_episode(task, ctx)

        episode = asyncio.run(play())
    model.env.close()
    assert episode.ok, episode.errors
    (trace,) = episode.traces
    assert trace.rewards["score"].score == 1.0 and trace.info["success"] is True
    assert model.in_step and len(model.sent) >= 2  # every turn carried the env's observation
    roles = [m["role"] for m in model.sent[-1]]
    assert roles[:2] == ["system", "user"] and roles[2:] == ["assistant", "user"] * ((len(roles) - 2) // 2)


def env_tasks() -> list[str]:
    env = gym.make(TEXTCRAFT)
    try:
        return env.unwrapped.tasks("test")
    finally:
        env.close()
