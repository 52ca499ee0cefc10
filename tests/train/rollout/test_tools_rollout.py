"""`action_format: tools` through the rollout engine: a policy that answers in a family's native tool calls wins
its episodes, and the episode's token sequence is the template's rendering of its chat with the env's tools."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: tool_templates
from tool_templates import SYNTAX, tool_tokenizer

import agentgym_envs  # noqa: F401
from agentgym_train.rollout import RolloutEngine, Task
from agentgym_wrappers import tool_call_reply

TEXTCRAFT = "AgentGym/TextCraft-Depth1-v0"


def expert_by_tools(engine: RolloutEngine, family: str, slots: dict[tuple[int, ...], object]):
    """A TurnGenerator whose reply to each context is its env expert's next action as `family`'s tool call.

    Each context's env is the one whose prompt starts it (each episode's first observation is distinct)."""
    tokenizer = engine.tokenizer

    def generate(contexts, max_new_tokens, stop=None):
        out = []
        for context in contexts:
            env = next(env for prompt, env in slots.items() if tuple(context[: len(prompt)]) == prompt)
            base = env.unwrapped
            observation = env.messages[-1]["content"]
            action = env.expert.act(observation, base.last_info)
            ids = tokenizer(tool_call_reply(action, base.tools(), SYNTAX[family]), add_special_tokens=False)
            ids = [*ids["input_ids"], engine.renderer.end_of_turn_id]
            out.append((ids, [-0.25] * len(ids)))
        return out

    return generate


@pytest.mark.parametrize("family", ["qwen2.5", "llama3.1"])
def test_tool_call_episodes_win_and_read_back_as_the_template_renders_them(family: str) -> None:
    tokenizer = tool_tokenizer(family)
    engine = RolloutEngine(tokenizer, action_format="tools", max_completion_length=4096, max_turns=12)
    tasks = [Task(TEXTCRAFT, task_id=i, split="test") for i in range(3)]

    # the engine makes its envs on first use: make them here through its own _make, with experts attached
    slots: dict[tuple[int, ...], object] = {}
    made = engine._make

    def make(env_id: str):
        env = made(env_id)
        reset = env.reset

        def reset_and_track(**kwargs):
            observation, info = reset(**kwargs)
            env.unwrapped.last_info = info
            env.expert = env.unwrapped.make_expert()
            slots[tuple(engine.renderer.prompt_ids(env.messages, tools=env.tools))] = env
            return observation, info

        step = env.step

        def step_and_track(reply):
            result = step(reply)
            env.unwrapped.last_info = result[-1]
            return result

        env.reset, env.step = reset_and_track, step_and_track
        return env

    engine._make = make
    episodes = engine.run(tasks, expert_by_tools(engine, family, slots))
    assert len({tuple(e.prompt_ids) for e in episodes}) == 3  # the lookup key tells the episodes apart
    for episode in episodes:
        assert episode.success and episode.invalid_replies == 0 and episode.env_error is None
        assert episode.turns >= 2
        chat = episode.messages
        assert all(m.get("tool_calls") for m in chat if m["role"] == "assistant")
        # prompt + every turn = the template over the chat with tools, tool answers as the family's tool turn
        env_tools = next(iter(slots.values())).tools
        rendered = tokenizer.apply_chat_template(chat[:-1], tools=env_tools, tokenize=False)
        text = tokenizer.decode(episode.prompt_ids + episode.completion_ids)
        assert rendered.startswith(text) and not rendered[len(text) :].strip()
        # the env's tokens (tool answers) are mask 0, the calls mask 1
        assert 0 in episode.env_mask and sum(episode.env_mask) == sum(e - s for s, e in episode.reply_spans)
    engine.close()


def test_tools_are_refused_with_the_ray_pool_and_an_unknown_format() -> None:
    tokenizer = tool_tokenizer("qwen2.5")
    with pytest.raises(ValueError, match="Ray pool"):
        RolloutEngine(tokenizer, action_format="tools", env_pool=object())
    with pytest.raises(ValueError, match="action_format must be"):
        RolloutEngine(tokenizer, action_format="json")
