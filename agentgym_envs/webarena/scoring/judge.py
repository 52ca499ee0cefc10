"""The judge behind WebArena's `fuzzy_match`: any object with two yes/no questions, or an
OpenAI-compatible chat endpoint.

Without a judge, a `fuzzy_match` that needs one is reported as unscorable rather than guessed.
`judge_from_environment()` builds an `OpenAIJudge` when `AGENTGYM_JUDGE_BASE_URL` is set (model
`AGENTGYM_JUDGE_MODEL`, key `AGENTGYM_JUDGE_API_KEY` or `OPENAI_API_KEY`).
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import Protocol, runtime_checkable


class JudgeError(RuntimeError):
    """The judge could not give a verdict (endpoint unreachable, unreadable reply)."""


@runtime_checkable
class Judge(Protocol):
    """What `fuzzy_match` asks: is the answer equivalent to the reference; does the report of an
    impossible task give the real reason."""

    def fuzzy_match(self, question: str, reference: str, answer: str) -> bool: ...

    def unachievable_match(self, question: str, reason: str, answer: str) -> bool: ...


class OpenAIJudge:
    """A judge on an OpenAI-compatible `/chat/completions` endpoint (temperature 0).

    Args:
        base_url: The API root, e.g. `https://api.openai.com/v1` or `http://localhost:8000/v1`.
        model: The model name the endpoint serves (WebArena used `gpt-4-1106-preview`).
        api_key: Sent as a bearer token when given.
        timeout: Seconds to wait for one verdict.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 60.0):
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout

    def _ask(self, prompt: str) -> str:
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": "You are a careful grader. Follow the requested reply format."},
                {"role": "user", "content": prompt},
            ],
            "temperature": 0,
            "max_tokens": 768,
        }
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                reply = json.loads(response.read().decode("utf-8"))
            return str(reply["choices"][0]["message"]["content"]).lower()
        except (urllib.error.URLError, OSError, ValueError, KeyError, IndexError, TypeError) as error:
            raise JudgeError(f"the judge at {self.url} gave no usable reply: {error}") from error

    def fuzzy_match(self, question: str, reference: str, answer: str) -> bool:
        reply = self._ask(
            "Grade a student's answer to a question against the reference answer. Different wording is fine; "
            "what matters is whether the answer means the same as the reference. The string 'N/A' means "
            "'not achievable'.\n"
            f"question: {question}\nreference answer: {reference}\nstudent answer: {answer}\n"
            "End your reply with one verdict: correct, incorrect, or partially correct."
        )
        if "partially correct" in reply or "incorrect" in reply:
            return False
        if "correct" in reply:
            return True
        raise JudgeError(f"the judge's reply has no verdict: {reply[:200]!r}")

    def unachievable_match(self, question: str, reason: str, answer: str) -> bool:
        reply = self._ask(
            "A task cannot be completed for a known reason. Someone tried it and wrote a report. Does the "
            "report give that reason, even implicitly?\n"
            f"task: {question}\nreason: {reason}\nreport: {answer}\n"
            "Reply with [same] if the report refers to the reason, else [different]."
        )
        if "different" in reply:
            return False
        if "same" in reply:
            return True
        raise JudgeError(f"the judge's reply has no verdict: {reply[:200]!r}")


def judge_from_environment() -> OpenAIJudge | None:
    """An `OpenAIJudge` configured by environment variables, or None when none is configured."""
    base_url = os.environ.get("AGENTGYM_JUDGE_BASE_URL")
    if not base_url:
        return None
    return OpenAIJudge(
        base_url,
        model=os.environ.get("AGENTGYM_JUDGE_MODEL", "gpt-4-1106-preview"),
        api_key=os.environ.get("AGENTGYM_JUDGE_API_KEY") or os.environ.get("OPENAI_API_KEY"),
    )
