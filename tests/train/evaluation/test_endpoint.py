"""Evaluation through an OpenAI-compatible chat endpoint, against a chat server on loopback."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from chat_server import ChatServer
from train_helpers import BABYAI, ENV_KWARGS

from agentgym_train.cli import main
from agentgym_train.evaluation.endpoint import ChatEndpoint, EndpointError, EndpointReply, evaluate_endpoint
from agentgym_train.evaluation.evaluate import evaluate_random


def test_endpoint_play_matches_the_same_policy_played_in_process(server: ChatServer) -> None:
    endpoint = ChatEndpoint(server.url, "tiny-chat", api_key="k", temperature=0.5, max_tokens=64)
    common = {"num_tasks": 12, "max_turns": 5, "env_kwargs": ENV_KWARGS, "seed": 3}
    remote = evaluate_endpoint(endpoint, BABYAI, workers=4, progress=False, **common)
    local = evaluate_random(BABYAI, actions=["move forward"], **common)
    keys = ("task_id", "success", "return", "turns", "invalid_replies")
    assert [[r[k] for k in keys] for r in remote.episodes] == [[r[k] for k in keys] for r in local.episodes]
    assert 0 < remote.success.mean < 1  # moving forward solves some tasks and not others

    assert len(server.requests) == sum(r["turns"] for r in remote.episodes)
    first = server.requests[0]
    assert first["path"] == "/v1/chat/completions" and first["auth"] == "Bearer k"
    assert (first["model"], first["temperature"], first["max_tokens"]) == ("tiny-chat", 0.5, 64)
    # later turns carry the whole conversation: system, then user/assistant turns, ending on the env
    longest = max(server.requests, key=lambda r: len(r["messages"]))
    roles = [m["role"] for m in longest["messages"]]
    assert roles[0] == "system" and roles[-1] == "user" and len(roles) >= 5
    assert roles[1:] == ["user", "assistant"] * (len(roles) // 2 - 1) + ["user"]
    assert all(m["content"] == server.reply for m in longest["messages"] if m["role"] == "assistant")


def test_busy_answers_are_retried(server: ChatServer) -> None:
    server.failures = 2
    assert ChatEndpoint(server.url, "m", backoff=0)([{"role": "user", "content": "hi"}]) == server.reply
    assert len(server.requests) == 3


def test_a_refusal_is_a_clear_error_without_retries(server: ChatServer) -> None:
    server.failures, server.fail_status = 5, 401
    with pytest.raises(EndpointError, match=r"401.*bad key"):
        ChatEndpoint(server.url, "m", backoff=0)([{"role": "user", "content": "hi"}])
    assert len(server.requests) == 1


def test_an_unreadable_answer_is_a_clear_error(server: ChatServer) -> None:
    server.body = b'{"object": "error"}'
    with pytest.raises(EndpointError, match=r"without choices\[0\]\.message\.content"):
        ChatEndpoint(server.url, "m", backoff=0)([{"role": "user", "content": "hi"}])


def test_no_server_is_a_clear_error_after_the_retries(server: ChatServer) -> None:
    url = server.url
    server.shutdown()
    server.server_close()
    with pytest.raises(EndpointError, match=r"no answer from .*\(3 attempts\)"):
        ChatEndpoint(url, "m", retries=2, backoff=0)([{"role": "user", "content": "hi"}])


def test_eval_command_against_an_endpoint(server: ChatServer, capsys: pytest.CaptureFixture) -> None:
    args = ["eval", "tiny-chat", BABYAI, "--base-url", server.url, "--tasks", "4", "--max-turns", "3"]
    assert main([*args, "--env-kwargs", json.dumps(ENV_KWARGS), "--workers", "2"]) == 0
    printed = capsys.readouterr().out
    assert "tiny-chat on AgentGym/BabyAI-GoToLocal-v0" in printed and "success" in printed
    assert 4 <= len(server.requests) <= 4 * 3  # at least one turn per task, at most three

    server.failures, server.fail_status = 1, 401
    assert main([*args, "--tasks", "1"]) == 1
    assert "401" in capsys.readouterr().err


def test_the_endpoint_path_needs_no_torch() -> None:
    code = (
        "import sys, agentgym_train.evaluation.endpoint; "
        "print(sorted({'torch', 'trl', 'transformers'} & set(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_requests_carry_the_scenarios_stop_strings_and_budget_and_replies_are_cut(server: ChatServer) -> None:
    """A server that ignores `stop` (this one): the reply is cut here, at the scenario's stop string."""
    server.reply = "I turn.\nAction: turn left\nObservation: You turned left.\nAction: move forward"
    endpoint = ChatEndpoint(server.url, "tiny-chat")  # no max_tokens: the scenario's reply budget
    result = evaluate_endpoint(
        endpoint, BABYAI, num_tasks=2, max_turns=2, env_kwargs=ENV_KWARGS, workers=1, progress=False
    )
    assert server.requests and all(r["stop"] == ["\nObservation:"] and r["max_tokens"] == 256 for r in server.requests)
    for row in result.episodes:
        assert row["stop_string_hits"] == 2 and row["replies_cut"] == 0
        assert [step["stopped_by"] for step in row["steps"]] == ["stop_string", "stop_string"]
        assert [step["action"] for step in row["steps"]] == ["turn left", "turn left"]  # not the invented turn's
        assert [m["content"] for m in row["messages"] if m["role"] == "assistant"] == ["I turn.\nAction: turn left"] * 2


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ({"finish_reason": "length"}, EndpointReply("Action: go to", "budget")),
        ({"finish_reason": "stop", "stop_reason": "\nObservation:"}, EndpointReply("Action: go to", "stop_string")),
        ({"finish_reason": "stop", "matched_stop": "\nObservation:"}, EndpointReply("Action: go to", "stop_string")),
        ({"finish_reason": "stop", "stop_reason": None}, EndpointReply("Action: go to", "eos")),
    ],
)
def test_how_a_reply_ended_is_read_from_the_answer(server: ChatServer, choice: dict, expected: EndpointReply) -> None:
    server.body = json.dumps({"choices": [{"message": {"content": "Action: go to"}, **choice}]}).encode()
    reply = ChatEndpoint(server.url, "m", max_tokens=7).complete(
        [{"role": "user", "content": "hi"}], ("\nObservation:",), 99
    )
    assert reply == expected and server.requests[-1]["max_tokens"] == 7  # the user's max_tokens wins
