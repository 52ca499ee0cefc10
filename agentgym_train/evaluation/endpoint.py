"""An OpenAI-compatible chat endpoint as a policy, and evaluation through it.

Any server that speaks `POST {base_url}/chat/completions` (OpenAI, vLLM's and SGLang's servers,
llama.cpp, ...) can play the envs: each turn the conversation that `MultiTurnWrapper` shows the model
is sent (the whole episode, or what a context policy keeps of it: `context="window:4"`, `"summary"`,
`agentgym_wrappers.context`), and the reply text is the agent's move. Transcripts keep every message.
Text in, text out: this path re-tokenizes on the server and is for evaluation only; training uses the
token path of `agentgym_train.rollout`.
Only the standard library is used, so `agentgym eval --base-url` works on the core install.

Each request carries the scenario's stop strings as `stop` (at most four, OpenAI's limit) and its reply
budget as `max_tokens` (the scenario's `default_max_turn_tokens` unless the user gives one). The reply
is also cut client-side at the first stop string, for servers that ignore `stop`. How each reply
ended is kept per turn: `"budget"` (finish_reason `length`), `"stop_string"` (cut here, or the server
names the stop string that fired: vLLM's `stop_reason`, SGLang's `matched_stop`) or `"eos"` (any other
stop; OpenAI does not say whether a stop string or the end of the turn ended a reply).

Native tool calls (`action_format="tools"`): each request carries the env's tools as `tools=` (OpenAI's
function format, `MultiTurnWrapper.tools`) and the chat's past calls and answers as OpenAI's assistant
`tool_calls` (arguments as a JSON string) and `tool` messages; the reply's `tool_calls` become the text
the wrapper's tools parser reads (`tool_reply_text`), so a reply without a call, with two calls or with
a malformed one is answered with the reason and costs a turn, as in training.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from agentgym_train.evaluation.evaluate import EvalResult, episode_row, split_tasks, summarize_episodes
from agentgym_wrappers import ContextPolicy, MultiTurnWrapper, get_context
from agentgym_wrappers.stops import MAX_ENDPOINT_STOPS, find_stop, turn_tokens_for

RETRY_STATUSES = {429, 500, 502, 503, 504}


class EndpointError(RuntimeError):
    """The endpoint refused a request, answered something unreadable, or could not be reached."""


@dataclass(frozen=True)
class EndpointReply:
    """One reply: its text (cut before any stop string), how it ended (`eos`, `stop_string`, `budget`) and
    the tool calls it made (OpenAI's `message.tool_calls`, as sent; empty without any)."""

    text: str
    stopped_by: str
    tool_calls: tuple[Any, ...] = ()


def openai_messages(messages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A chat as OpenAI's API takes it: an assistant's `tool_calls` with their arguments as a JSON string
    (the wrapper records them as objects, as chat templates take them), a `tool` message with its
    `tool_call_id` and content only."""
    out = []
    for message in messages:
        if message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                function = dict(call.get("function") or {})
                if not isinstance(function.get("arguments"), str):
                    function["arguments"] = json.dumps(function.get("arguments", {}), ensure_ascii=False)
                calls.append({**call, "function": function})
            message = {**message, "content": message.get("content") or "", "tool_calls": calls}
        elif message.get("role") == "tool":
            message = {k: message[k] for k in ("role", "tool_call_id", "content") if k in message}
        out.append(message)
    return out


def tool_reply_text(reply: EndpointReply) -> str:
    """The reply as the text `agentgym_wrappers.ToolCallParser` reads: its content, then each of its
    `tool_calls` as a Hermes `<tool_call>` (the arguments as the server sent them, a JSON string or an
    object). A reply without `tool_calls` stays its content: a server that parses no calls sends the
    model's own call text, which the parser reads in any family's syntax."""
    calls = []
    for call in reply.tool_calls:
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        body = {"name": function.get("name"), "arguments": function.get("arguments", {})}
        calls.append(f"<tool_call>{json.dumps(body, ensure_ascii=False)}</tool_call>")
    return "\n".join(part for part in (reply.text, *calls) if part)


class ChatEndpoint:
    """A chat-completions endpoint: `endpoint(messages) -> reply text`.

    Args:
        base_url: The API root, e.g. `http://127.0.0.1:8000/v1` or `https://api.openai.com/v1`.
        model: The `model` field of each request.
        api_key: Sent as a bearer token; default `$OPENAI_API_KEY` (none when unset).
        temperature: Sampling temperature of each request.
        max_tokens: Most tokens per reply (None: each request's own, by default 512; `evaluate_endpoint`
            sends the scenario's reply budget).
        timeout: Seconds to wait for one answer.
        retries: Extra attempts on a connection error, 429 or 5xx, with exponential backoff.

    Example (against a running server, so not a doctest)::

        endpoint = ChatEndpoint("http://127.0.0.1:8000/v1", "Qwen2.5-7B-Instruct")
        endpoint([{"role": "user", "content": "Say hi"}])  # -> "Hi!"
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        temperature: float = 1.0,
        max_tokens: int | None = None,
        timeout: float = 120.0,
        retries: int = 3,
        backoff: float = 0.5,
    ):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff

    def __call__(self, messages: list[dict[str, Any]], tools: Sequence[dict[str, Any]] | None = None) -> str:
        """The reply's text; with `tools`, the text of its content and tool calls (`tool_reply_text`)."""
        reply = self.complete(messages, tools=tools)
        return tool_reply_text(reply) if tools else reply.text

    def complete(
        self,
        messages: list[dict[str, Any]],
        stop: Sequence[str] = (),
        max_tokens: int | None = None,
        tools: Sequence[dict[str, Any]] | None = None,
    ) -> EndpointReply:
        """The reply to `messages`, stopped at `stop` (sent as `stop` and applied here too).

        Args:
            messages: The chat so far (past tool calls are sent in OpenAI's form, `openai_messages`).
            stop: Stop strings; the first `MAX_ENDPOINT_STOPS` are sent, all are applied to the reply.
            max_tokens: Most tokens of this reply when the endpoint has no `max_tokens` of its own
                (None: 512).
            tools: The tools' JSON schemas (OpenAI's function format), sent as `tools`.
        """
        body: dict[str, Any] = {
            "model": self.model,
            "messages": openai_messages(messages),
            "temperature": self.temperature,
            "max_tokens": self.max_tokens or max_tokens or 512,
        }
        if tools:
            body["tools"] = list(tools)
        if stop:
            body["stop"] = list(stop[:MAX_ENDPOINT_STOPS])
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        data = json.dumps(body).encode()
        for attempt in range(self.retries + 1):
            last = attempt == self.retries
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return self._reply(response.read(), stop)
            except urllib.error.HTTPError as error:
                detail = error.read().decode(errors="replace")[:500]
                if error.code not in RETRY_STATUSES or last:
                    raise EndpointError(f"{self.url} answered {error.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                if last:
                    raise EndpointError(f"no answer from {self.url} ({self.retries + 1} attempts): {error}") from None
            time.sleep(self.backoff * 2**attempt)
        raise AssertionError("the loop returns or raises")

    def _reply(self, raw: bytes, stop: Sequence[str]) -> EndpointReply:
        try:
            choice = json.loads(raw)["choices"][0]
            message = choice["message"]
            calls = message.get("tool_calls") or []
            text = (message.get("content") if calls else message["content"]) or ""  # a call may come without
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise EndpointError(f"{self.url} answered without choices[0].message.content: {raw[:300]!r}") from None
        if not isinstance(text, str):
            raise EndpointError(f"{self.url} answered a non-text choices[0].message.content: {raw[:300]!r}")
        if not isinstance(calls, list):
            raise EndpointError(f"{self.url} answered a choices[0].message.tool_calls that is no list: {raw[:300]!r}")
        calls = tuple(calls)
        at = find_stop(text, stop)
        if at is not None:  # the server ignored `stop`, or this stop string was not sent
            return EndpointReply(text[:at], "stop_string", calls)
        named = choice.get("stop_reason", choice.get("matched_stop"))  # vLLM, SGLang
        if isinstance(named, str) and named in stop:
            return EndpointReply(text, "stop_string", calls)
        return EndpointReply(text, "budget" if choice.get("finish_reason") == "length" else "eos", calls)


def evaluate_endpoint(
    endpoint: ChatEndpoint,
    env_id: str,
    *,
    split: str = "test",
    num_tasks: int | None = 100,
    episodes_per_task: int = 1,
    max_turns: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    seed: int = 0,
    workers: int = 8,
    progress: bool = True,
    context: str | ContextPolicy | None = None,
    action_format: str | None = None,
) -> EvalResult:
    """Play `episodes_per_task` episodes of the first `num_tasks` tasks of `split` through `endpoint`.

    Episodes run concurrently on `workers` threads (the endpoint is the bottleneck), each thread with
    its own env; rows come back in task order. `context` is what each request holds of the episode
    (`agentgym_wrappers.get_context`: None or "full", "window:k", "summary:k", or a `ContextPolicy`),
    the context the model was trained with. `action_format`: None (each scenario's own, text replies) or
    "tools": each request carries the env's tools, and the reply's `tool_calls` are the agent's move.
    """
    if action_format not in (None, "tools"):
        raise ValueError(f"action_format must be None (each scenario's) or 'tools', got {action_format!r}")
    policy = get_context(context)
    jobs = [(t, k) for t in split_tasks(env_id, split, num_tasks, env_kwargs) for k in range(episodes_per_task)]
    local = threading.local()
    envs: list[MultiTurnWrapper] = []
    lock = threading.Lock()

    def play(job: tuple[str, int]) -> dict[str, Any]:
        if not hasattr(local, "env"):
            local.env = MultiTurnWrapper(
                gym.make(env_id, **(env_kwargs or {})), max_turns=max_turns, context=policy, parser=action_format
            )
            with lock:
                envs.append(local.env)
        env, (task_id, sample) = local.env, job
        stops, budget = env.stop_strings, turn_tokens_for(env)
        env.reset(seed=seed + sample, options={"split": split, "task_id": task_id})
        stopped_by = []
        while True:
            reply = endpoint.complete(env.messages, stop=stops, max_tokens=budget, tools=env.tools)
            stopped_by.append(reply.stopped_by)
            _, _, terminated, truncated, info = env.step(tool_reply_text(reply) if env.uses_tools else reply.text)
            if terminated or truncated:
                bar.update(1)
                flags = [{"stopped_by": s} for s in stopped_by]
                row = episode_row(
                    task_id, info, messages=env.transcript, sample=sample, max_turns=env.max_turns, turn_flags=flags
                )
                return {
                    **row,
                    "stop_string_hits": stopped_by.count("stop_string"),
                    "replies_cut": stopped_by.count("budget"),
                }

    try:
        with (
            _progress_bar(len(jobs), f"eval {endpoint.model}", progress) as bar,
            ThreadPoolExecutor(max_workers=max(1, workers)) as pool,
        ):
            rows = list(pool.map(play, jobs))
    finally:
        for env in envs:
            env.close()
    result = summarize_episodes(rows)
    limit = envs[0].max_turns if envs else max_turns
    result.meta = {"policy": endpoint.model, "env_id": env_id, "split": split, "max_turns": limit}
    result.meta["context"] = policy.spec
    result.meta["action_format"] = action_format
    return result


class _NoBar:
    def __enter__(self) -> _NoBar:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def update(self, n: int = 1) -> None:
        return None


def _progress_bar(total: int, desc: str, enabled: bool) -> Any:
    """tqdm's bar where tqdm is installed (the core install may lack it), else none."""
    try:
        from tqdm.auto import tqdm
    except ImportError:
        return _NoBar()
    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)
