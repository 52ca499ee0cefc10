"""Episode transcripts: one JSON-ready record per episode, shared by `agentgym eval --json` and `collect`.

A record keeps the summary figures that evaluation averages (`task_id`, `category`, `success`,
`return`, `turns`, `truncated`, `invalid_replies`) and what a reader needs to see the episode:

    sample      which episode of the task this is (0..k-1), to align two policies on the same tasks
    end_reason  why it ended: one of `END_REASONS`
    messages    the chat (system, user, assistant, ...) as `MultiTurnWrapper` kept it
    steps       one entry per turn: `action` as parsed (None when the reply had none), `format_error`,
                `valid_action`, `reward`, and per-turn generation flags where the policy reports them
                (e.g. `stopped_by`)
    env_error   why the env failed, where it did

Records hold model and env text as is: whoever displays them must escape it (`report.py` does).
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

#: Why an episode ended, with the words the console and the report use.
END_REASONS = {
    "success": "solved",
    "failure": "ended by the env without success",
    "max_turns": "turn limit reached",
    "env_limit": "the env's own step limit reached",
    "token_budget": "token budget (max_completion_length) spent",
    "env_error": "the env failed",
    "gave_up": "the policy had no move (a scripted expert gave up)",
}


#: The keys of a step entry that the env side fills; any other key is a generation flag of the policy.
STEP_KEYS = frozenset({"action", "format_error", "valid_action", "reward", "reply", "observation"})


#: Flag values that say a reply ended as replies normally do (left out where flags are shown per turn).
USUAL_FLAGS = frozenset({("stopped_by", "eos")})


def generation_flags(step: dict[str, Any], *, unusual: bool = False) -> dict[str, Any]:
    """The per-turn generation flags of a step entry (e.g. `stopped_by`), those with a value; with
    `unusual`, only those that differ from a normal end of turn (a stop string or the budget fired)."""
    return {
        key: value
        for key, value in step.items()
        if key not in STEP_KEYS
        and value not in (None, False, "")
        and not (unusual and isinstance(value, str) and (key, value) in USUAL_FLAGS)
    }


def end_reason(
    *,
    success: bool,
    terminated: bool,
    truncated: bool,
    turns: int,
    max_turns: int | None,
    budget_truncated: bool = False,
    env_error: str | None = None,
) -> str:
    """The key of `END_REASONS` that says why an episode ended."""
    if env_error:
        return "env_error"
    if success:
        return "success"
    if budget_truncated:
        return "token_budget"
    if truncated and max_turns is not None and turns >= max_turns:
        return "max_turns"
    if truncated:
        return "env_limit"
    return "failure" if terminated else "max_turns"


def episode_record(
    *,
    task_id: str | int | None,
    sample: int,
    category: str | None,
    stats: dict[str, Any],
    messages: list[dict[str, str]],
    max_turns: int | None,
    turn_flags: list[dict[str, Any]] | None = None,
    env_error: str | None = None,
    kind: str | None = None,
) -> dict[str, Any]:
    """The record of one finished episode.

    Args:
        task_id, sample, category: Which episode (sample: its index among the task's k episodes).
        stats: The final `info["episode"]` of `MultiTurnWrapper` (or a rollout's equivalent): turns,
            return, success, terminated, truncated, invalid_replies, optionally budget_truncated, steps.
        messages: The conversation.
        max_turns: The turn limit the episode ran under (tells the turn limit from the env's own).
        turn_flags: Per-turn generation flags (e.g. `{"stopped_by": "stop_string"}`), merged into `steps`.
        env_error: Why the env failed, where it did.
        kind: The task's kind where the env reports one (`info["kind"]`, e.g. WebArena's info/nav/state/na).
    """
    steps = [dict(step) for step in stats.get("steps") or []]
    for step, flags in zip(steps, turn_flags or [], strict=False):
        step.update(flags)
    reason = end_reason(
        success=bool(stats.get("success")),
        terminated=bool(stats.get("terminated")),
        truncated=bool(stats.get("truncated")),
        turns=int(stats.get("turns", 0)),
        max_turns=max_turns,
        budget_truncated=bool(stats.get("budget_truncated")),
        env_error=env_error,
    )
    record = {
        "task_id": task_id,
        "sample": sample,
        "category": category,
        "success": float(bool(stats.get("success"))),
        "return": float(stats.get("return", 0.0)),
        "turns": int(stats.get("turns", 0)),
        "truncated": bool(stats.get("truncated") or stats.get("budget_truncated")),
        "invalid_replies": int(stats.get("invalid_replies", 0)),
        "end_reason": reason,
        "messages": [{k: m[k] for k in MESSAGE_KEYS if k in m} for m in messages],
        "steps": steps,
    }
    if kind is not None:
        record["kind"] = kind
    if env_error:
        record["env_error"] = env_error
    return record


#: What a record keeps of each message: its text, and an episode of tool calls' calls and answers' ids.
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")


def _reply_text(message: dict[str, Any]) -> str:
    """An assistant message as text: its content, then each tool call as `name(arguments)`."""
    calls = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        arguments = function.get("arguments", {})
        arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        calls.append(f"{function.get('name')}({arguments})")
    return "\n".join(part for part in (message.get("content") or "", *calls) if part)


def exchanges(record: dict[str, Any]) -> tuple[str, str, list[dict[str, Any]]]:
    """A record as (system prompt, first observation, turns), each turn a step entry with its `reply`
    and the `observation` that answered it (`messages` and `steps` zipped; either may be shorter)."""
    messages = record.get("messages") or []
    system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    rest = messages[1:] if system else messages
    first = rest[0]["content"] if rest and rest[0]["role"] == "user" else ""
    pairs = rest[1:] if first else rest
    replies = [_reply_text(m) for m in pairs if m["role"] == "assistant"]
    observations = [m["content"] for m in pairs if m["role"] in ("user", "tool")]
    steps = record.get("steps") or []
    turns = []
    for i in range(max(len(replies), len(steps))):
        turn = dict(steps[i]) if i < len(steps) else {}
        turn["reply"] = replies[i] if i < len(replies) else ""
        turn["observation"] = observations[i] if i < len(observations) else ""
        turns.append(turn)
    return system, first, turns


def format_record(record: dict[str, Any], width: int = 100, max_chars: int = 600) -> str:
    """A record as console text: the task, each reply with its parsed action and the env's answer, and
    why it ended. Long texts are cut to `max_chars` characters (the JSON keeps them whole)."""

    def block(label: str, text: str) -> list[str]:
        text = text if len(text) <= max_chars else text[:max_chars] + f" [... {len(text) - max_chars} more chars]"
        lines = []
        for raw in text.splitlines() or [""]:
            lines += textwrap.wrap(raw, width - 8, replace_whitespace=False) or [""]
        return [f"  {label:<8}{lines[0]}"] + [f"  {'':<8}{line}" for line in lines[1:]]

    _, first, turns = exchanges(record)
    head = (
        f"=== {record.get('task_id')} #{record.get('sample', 0)} ({record.get('category')}): "
        f"{END_REASONS.get(record.get('end_reason', ''), record.get('end_reason'))}, "
        f"return {float(record.get('return', 0.0)):.3f} in {record.get('turns')} turns ==="
    )
    lines = [head, *block("task", first)]
    for number, turn in enumerate(turns, 1):
        marks = []
        if turn.get("format_error"):
            marks.append("no action found")
        elif turn.get("valid_action") is False:
            marks.append("invalid action")
        if "reward" in turn:
            marks.append(f"reward {float(turn['reward']):+.3f}")
        marks += [f"{key} {value}" for key, value in generation_flags(turn, unusual=True).items()]
        lines.append(f"  --- turn {number}" + (f" ({', '.join(marks)})" if marks else ""))
        lines += block("reply", turn["reply"])
        if turn.get("action") is not None:
            lines += block("action", str(turn["action"]))
        lines += block("env", turn["observation"])
    if record.get("env_error"):
        lines.append(f"  env error: {record['env_error']}")
    return "\n".join(lines)
