"""`action_format: tools` on the paths outside training: the OpenAI-compatible endpoint (requests carry the
env's tools, the reply's `tool_calls` are the move), `agentgym eval` / `collect --action-format tools`
(records keep the calls and the tool answers), and SFT tool demonstrations (the template's call text is
the loss, the tool turns are not)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import gymnasium as gym
import pytest
from chat_server import ChatServer
from train_helpers import BABYAI, ENV_KWARGS

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: tool_templates
from tool_templates import SYNTAX, TOOL_TURN, tool_tokenizer

import agentgym_envs  # noqa: F401
from agentgym_envs.tools import find_tool
from agentgym_train import collect
from agentgym_train.evaluation.endpoint import ChatEndpoint, evaluate_endpoint
from agentgym_train.evaluation.evaluate import split_tasks
from agentgym_train.evaluation.transcripts import exchanges
from agentgym_wrappers import MultiTurnWrapper, parse_tool_calls

TEXTCRAFT = "AgentGym/TextCraft-Depth1-v0"
NO_CALL = {"content": "Let me look around first."}
BAD_JSON = {
    "content": None,
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "go_to", "arguments": '{"target": '}}],
}


def expert_script(env_id: str, split: str, num_tasks: int, seed: int = 0) -> tuple[dict[str, list], list]:
    """Per first observation, the expert's actions as OpenAI assistant messages with `tool_calls` (the first
    task's opened by a reply without a call and a call whose arguments are broken JSON); and the env's tools."""
    env = MultiTurnWrapper(gym.make(env_id, **ENV_KWARGS), parser="tools")
    tools = env.unwrapped.tools()
    script: dict[str, list] = {}
    for n, task in enumerate(split_tasks(env_id, split, num_tasks, ENV_KWARGS)):
        observation, info = env.reset(seed=seed, options={"split": split, "task_id": task})
        expert, replies = env.unwrapped.make_expert(), [NO_CALL, BAD_JSON] if n == 0 else []
        done = False
        while not done:
            tool, arguments = find_tool(tools, expert.act(observation, info))
            function = {"name": tool.name, "arguments": json.dumps(arguments)}
            call = {"id": f"s{len(replies)}", "type": "function", "function": function}
            replies.append({"content": None, "tool_calls": [call]})
            observation, _, terminated, truncated, info = env.step(f"<tool_call>{json.dumps(function)}</tool_call>")
            done = terminated or truncated
        assert info["success"]
        script[env.transcript[1]["content"]] = replies
    assert len(script) == num_tasks  # the first observation tells the episodes apart
    schemas = env.tools
    env.close()
    return script, schemas


def serve_script(server: ChatServer, script: dict[str, list]) -> None:
    """The server answers each request with its episode's next scripted reply (episode: the first user
    message; turn: the assistant messages so far)."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        messages = body["messages"]
        first = next(m["content"] for m in messages if m["role"] == "user")
        return script[first][sum(m["role"] == "assistant" for m in messages)]

    server.respond = respond


def check_requests(requests: list[dict[str, Any]], schemas: list) -> None:
    """Every request carries the tools; past calls go as OpenAI's tool_calls (arguments a JSON string), each
    answered by a `tool` message with the call's id."""
    assert requests and all(r["tools"] == schemas for r in requests)
    answered = 0
    for request in requests:
        messages = request["messages"]
        for k, message in enumerate(messages):
            if message.get("tool_calls"):
                (call,) = message["tool_calls"]
                assert isinstance(call["function"]["arguments"], str)
                json.loads(call["function"]["arguments"])
                assert messages[k + 1]["role"] == "tool" and messages[k + 1]["tool_call_id"] == call["id"]
                answered += 1
    assert answered > 0


def test_endpoint_is_sent_the_tools_and_its_tool_calls_win(server: ChatServer) -> None:
    script, schemas = expert_script(BABYAI, "test", 3)
    serve_script(server, script)
    endpoint = ChatEndpoint(server.url, "scripted", max_tokens=32)
    result = evaluate_endpoint(
        endpoint, BABYAI, num_tasks=3, env_kwargs=ENV_KWARGS, workers=2, progress=False, action_format="tools"
    )
    assert result.meta["action_format"] == "tools"
    assert result.success.mean == 1.0
    assert [r["invalid_replies"] for r in result.episodes] == [2, 0, 0]
    assert [r["turns"] for r in result.episodes] == [len(replies) for replies in script.values()]
    check_requests(server.requests, schemas)
    # the reply without a call and the broken call are answered with the reason, each costing a turn
    first = result.episodes[0]["messages"]
    assert [m["role"] for m in first[:6]] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert "has no tool call" in first[3]["content"] and "not valid JSON" in first[5]["content"]
    assert first[6]["tool_calls"][0]["function"]["name"] in {t["function"]["name"] for t in schemas}
    assert first[7]["role"] == "tool" and first[7]["tool_call_id"] == first[6]["tool_calls"][0]["id"]
    turns = exchanges(result.episodes[0])[2]  # the transcript shows each call and the tool's answer
    assert turns[2]["reply"].startswith(first[6]["tool_calls"][0]["function"]["name"] + "(")
    assert turns[2]["observation"] == first[7]["content"]
    # the text path sends no tools
    server.respond, server.requests[:] = None, []
    assert "Action:" in endpoint([{"role": "user", "content": "hi"}])
    assert "tools" not in server.requests[0]
    with pytest.raises(ValueError, match="action_format must be"):
        evaluate_endpoint(endpoint, BABYAI, num_tasks=1, action_format="json")


def test_collect_through_an_endpoint_records_the_calls_and_tool_answers(server: ChatServer, tmp_path) -> None:
    script, schemas = expert_script(BABYAI, "train", 2)
    serve_script(server, script)
    out = tmp_path / "episodes.jsonl"
    endpoint = ChatEndpoint(server.url, "scripted", max_tokens=32)
    common = {"num_tasks": 2, "env_kwargs": ENV_KWARGS, "workers": 1, "progress": False}
    result = collect.collect(collect.endpoint_actor(endpoint), BABYAI, out, action_format="tools", **common)
    assert result.written == 2 and result.success == 1.0
    check_requests(server.requests, schemas)
    records = collect.read_records(out)
    for record in records:
        assert record["action_format"] == "tools" and record["tools"] == schemas
        assert record["final_observation"] is not None and record["messages"][-1]["role"] == "assistant"
        calls = [m for m in record["messages"] if m.get("tool_calls")]
        assert len(calls) == record["turns"] - record["invalid_replies"]
        assert sum(m["role"] == "tool" for m in record["messages"]) == len(calls) - 1  # the last answer apart
    assert records[0]["invalid_replies"] == 2
    with pytest.raises(ValueError, match="ModelPolicy takes its context and action format"):
        collect.collect(collect.ModelPolicy(None, None), BABYAI, out, action_format="tools")


def test_cli_action_format_reaches_the_model_the_endpoint_and_the_expert(
    tiny_babyai, server: ChatServer, tmp_path, capsys
) -> None:
    from agentgym_train.cli import main

    tool_prompt = gym.make(BABYAI, **ENV_KWARGS).unwrapped.tool_instructions
    out = tmp_path / "eval.json"
    common = [BABYAI, "--tasks", "2", "--max-turns", "3", "--env-kwargs", json.dumps(ENV_KWARGS)]
    assert main(["eval", str(tiny_babyai), *common, "--action-format", "tools", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["action_format"] == "tools"
    assert all(e["messages"][0]["content"] == tool_prompt for e in document["episodes"])  # played with tools
    assert main(["eval", str(tiny_babyai), *common, "--json", str(out)]) == 0
    assert json.loads(out.read_text())["action_format"] is None

    script, schemas = expert_script(BABYAI, "test", 2)
    serve_script(server, script)
    endpoint_args = ["eval", "scripted", *common[:3], "--env-kwargs", json.dumps(ENV_KWARGS), "--base-url", server.url]
    assert main([*endpoint_args, "--action-format", "tools", "--json", str(out)]) == 0
    document = json.loads(out.read_text())
    assert document["action_format"] == "tools" and document["success"]["mean"] == 1.0
    check_requests(server.requests, schemas)

    assert main(["eval", "expert", *common, "--action-format", "tools"]) == 2
    assert "shapes a model's replies" in capsys.readouterr().err

    records = tmp_path / "model.jsonl"
    collect_args = ["--tasks", "1", "--max-turns", "2", "--env-kwargs", json.dumps(ENV_KWARGS), "--no-progress"]
    collect_args += ["--action-format", "tools"]
    assert main(["collect", str(tiny_babyai), BABYAI, "--out", str(records), *collect_args]) == 0
    (record,) = collect.read_records(records)
    assert record["action_format"] == "tools" and record["tools"] == schemas
    assert record["messages"][0]["content"] == tool_prompt

    demos = tmp_path / "expert.jsonl"
    expert_args = ["--tasks", "3", "--env-kwargs", json.dumps(ENV_KWARGS), "--no-progress", "--action-format", "tools"]
    assert main(["collect", "expert", BABYAI, "--out", str(demos), *expert_args]) == 0
    for record in collect.read_records(demos):
        assert record["success"] and record["invalid_replies"] == 0 and record["tools"] == schemas
        assistants = [m for m in record["messages"] if m["role"] == "assistant"]
        assert len(assistants) == record["turns"] and all(m["tool_calls"] for m in assistants)


def masked_runs(ids: list[int], mask: list[int]) -> list[list[int]]:
    """The maximal runs of ids under mask 1."""
    runs: list[list[int]] = []
    for k, (token, on) in enumerate(zip(ids, mask, strict=True)):
        if on:
            if k == 0 or not mask[k - 1]:
                runs.append([])
            runs[-1].append(token)
    return runs


@pytest.mark.parametrize("family", ["qwen2.5", "llama3.1"])
def test_sft_tool_demonstrations_train_on_the_calls_only(family: str, tmp_path) -> None:
    from agentgym_train.rollout import ChatRenderer
    from agentgym_train.trainers.sft import demo_format, env_tools, expert_chats, sft_dataset, tokenize_chat

    tokenizer = tool_tokenizer(family)
    tools = env_tools(TEXTCRAFT)
    chats = expert_chats(TEXTCRAFT, 2, split="test", action_format="tools")
    assert len(chats) == 2 and demo_format(chats) == "tools"
    renderer = ChatRenderer(tokenizer)
    eot = renderer.end_of_turn_token
    for chat in chats:
        row = tokenize_chat(renderer, chat, tools)
        ids, mask = row["input_ids"], row["assistant_masks"]
        # the tokens are the template's rendering of the chat with its tools: calls and tool turns included
        text = tokenizer.decode(ids)
        rendered = tokenizer.apply_chat_template(chat, tools=tools, tokenize=False)
        assert rendered.startswith(text) and not rendered[len(text) :].strip()
        assistants = [m for m in chat if m["role"] == "assistant"]
        tool_answers = [m for m in chat if m["role"] == "tool"]
        assert len(tool_answers) == len(assistants) - 1 >= 1
        # the loss covers each call and its end-of-turn token, nothing else
        runs = [tokenizer.decode(run) for run in masked_runs(ids, mask)]
        assert len(runs) == len(assistants)
        for run, message in zip(runs, assistants, strict=True):
            assert run.endswith(eot)
            (call,) = parse_tool_calls(run[: -len(eot)], SYNTAX[family])
            function = message["tool_calls"][0]["function"]
            assert (call.name, call.arguments) == (function["name"], function["arguments"])
        unmasked = tokenizer.decode([t for t, on in zip(ids, mask, strict=True) if not on])
        assert unmasked.count(TOOL_TURN[family]) == len(tool_answers)
        assert all(TOOL_TURN[family] not in run for run in runs)
        assert all(answer["content"].strip()[:40] in unmasked for answer in tool_answers)
    assert sft_dataset(tokenizer, chats, tools)[0]["input_ids"] == tokenize_chat(renderer, chats[0], tools)["input_ids"]
    with pytest.raises(ValueError, match="pass tools="):
        tokenize_chat(renderer, chats[0])
    text_chats = expert_chats(TEXTCRAFT, 1, split="test")
    assert demo_format(text_chats) is None
    with pytest.raises(ValueError, match="mix"):
        demo_format(chats + text_chats)


def test_pipeline_sft_stage_warm_starts_tool_runs_on_tool_demonstrations(tmp_path, monkeypatch) -> None:
    import agentgym_train.pipeline.stages as stages
    from agentgym_train.cli import main
    from agentgym_train.trainers.sft import env_tools

    seen: dict[str, Any] = {}
    sft_stage = stages.sft_stage

    def spy(model, tokenizer, chats, pipeline, output_dir, seed, **options):
        seen["chats"], seen["tools"] = chats, options.get("tools")
        return sft_stage(model, tokenizer, chats, pipeline, output_dir, seed, **options)

    monkeypatch.setattr(stages, "sft_stage", spy)
    overrides = ["--output_dir", str(tmp_path / "run"), "--tiny_hidden_size", "32", "--tiny_layers", "1"]
    overrides += ["--sft_episodes", "8", "--sft_steps", "2", "--max_steps", "1", "--max_turn_schedule", "3"]
    overrides += ["--eval_tasks", "2", "--per_device_train_batch_size", "4", "--num_generations", "2"]
    overrides += ["--torch_threads", "1", "--action_format", "tools"]
    assert main(["train", "babyai_demo", *overrides]) == 0
    env_id = json.loads((tmp_path / "run" / "results.json").read_text())["env_id"]
    assert seen["tools"] == env_tools(env_id) and seen["chats"]
    for chat in seen["chats"]:
        assistants = [m for m in chat if m["role"] == "assistant"]
        assert assistants and all(m["tool_calls"] for m in assistants)
    # demonstrations of Action: lines do not warm-start a tool run
    text_demos = tmp_path / "text.jsonl"
    collect.collect(collect.expert_actor, env_id, text_demos, num_tasks=2, workers=1, progress=False)
    overrides[1] = str(tmp_path / "run2")
    with pytest.raises(ValueError, match="are text episodes but the run acts with action_format tools"):
        main(["train", "babyai_demo", *overrides, "--sft_data", str(text_demos)])
