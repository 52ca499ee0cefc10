"""Parsers and action handlers in linear time: each timed on adversarial text of n and 2n characters.

A model's reply and an agent's action are untrusted text, and one function that backtracks over it
stalls a training step or, in the env server, every client (issue 11: the multi-turn wrapper's
parsers took 1.6-17 s on 64k-character replies). Each function below is timed on several
adversarial shapes (blank lines, unclosed tags, runs of brackets, huge numbers, ...) at n and 2n
characters; the targets are linear scaling (time at 2n <= 3x time at n) and 2n = 1 MB in
well under a second (<= 0.5 s). Times under 5 ms count as linear whatever their ratio (too short
to measure a trend on a shared machine).

Baseline, measured in the same run: the regular expressions that the wrapper's parsers used before
they were made linear, on the same shapes at `--baseline-chars` (16k: they take seconds already);
`ratio` is their time over ours at that size, for the worst shape.

Functions: the wrapper's four parsers, `agentgym_envs.core.normalise_action`, BabyAI's and
TextCraft's `step`, SciWorld's `normalise_action` and its `step` (with a JVM; skipped when
ScienceWorld cannot start). Exit status 1 when a target is missed.

    python benchmarks/parsers_speed.py [--chars 1048576] [--repeats 3] [--quick]
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Linear scaling: the time at 2n over the time at n.
MAX_SCALING = 3.0
#: The time allowed at the largest size (1 MB by default).
MAX_SECONDS = 0.5
#: Below this, a time is too short to show a trend: it passes the scaling check.
FLOOR_SECONDS = 0.005

Shape = Callable[[int], str]


def repeat(unit: str, n: int, head: str = "", tail: str = "") -> str:
    """`head`, then `unit` repeated to `n` characters in all, then `tail`."""
    body = max(0, n - len(head) - len(tail))
    return head + (unit * (body // len(unit) + 1))[:body] + tail


@dataclass
class Case:
    """One function under test, its adversarial shapes, and the pre-fix code to compare with (if any)."""

    name: str
    shapes: dict[str, Shape]
    open: Callable[[], Callable[[str], Any]]  # builds the function (and its env, if any)
    baseline: Callable[[str], Any] | None = None
    close: Callable[[], None] = field(default=lambda: None)


# ---- the pre-fix parsers (the baseline) -----------------------------------------------------------
_OLD_ACTION_LINE = re.compile(
    r"^[\s>*_#`-]*action\s*[:\uff1a]\**\s*(?P<action>.*?)[\s*_`]*$", re.IGNORECASE | re.MULTILINE
)
_OLD_TAG = re.compile(r"<(?P<tag>search|answer)>(?P<body>.*?)</(?P=tag)>", re.IGNORECASE | re.DOTALL)
_OLD_TOOL_CALL = re.compile(r"<tool_call>(?P<body>.*?)</tool_call>", re.DOTALL)
_OLD_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def _old_action_line(reply: str) -> Any:
    return [m["action"] for m in _OLD_ACTION_LINE.finditer(reply)]


def _old_tags(reply: str) -> Any:
    return _OLD_TAG.search(reply)


def _old_json(reply: str) -> Any:
    return _OLD_TOOL_CALL.search(reply) or _OLD_JSON_OBJECT.search(reply)


# ---- the shapes -----------------------------------------------------------------------------------
ACTION_LINE_SHAPES: dict[str, Shape] = {
    "blank lines": lambda n: repeat("\n", n),
    "'action' then blank lines": lambda n: repeat("\n", n, head="action"),
    "action, spaces, a word": lambda n: repeat(" ", n, head="Action: a", tail="b"),
    "quote marks and spaces": lambda n: repeat("> *_ \t", n),
    "many Action lines": lambda n: repeat("Action: x\n", n),
    "empty Action lines": lambda n: repeat("Action:\n", n),
    "emphasis runs": lambda n: repeat("*", n, head="Action: x"),
}
TAG_SHAPES: dict[str, Shape] = {
    "unclosed <search>": lambda n: repeat("<search>", n),
    "unclosed <answer>": lambda n: repeat("<answer>", n),
    "both, unclosed, mixed case": lambda n: repeat("<SeArCh><ANSWER>", n),
    "closing tags only": lambda n: repeat("</search></answer>", n),
    "crossed tags": lambda n: repeat("<search></answer>", n),
}
FENCE_SHAPES: dict[str, Shape] = {
    "one unclosed fence": lambda n: repeat("x", n, head="```"),
    "backticks": lambda n: repeat("`", n),
    "double backticks": lambda n: repeat("``x", n),
    "empty blocks": lambda n: repeat("``````", n),
    "language lines": lambda n: repeat("```python\n", n),
}
JSON_SHAPES: dict[str, Shape] = {
    "open braces": lambda n: repeat("{", n),
    "unclosed <tool_call>": lambda n: repeat("<tool_call>", n),
    "deep arrays": lambda n: repeat("[", n, head='{"name": "a", "arguments": ', tail="}"),
    "huge number": lambda n: repeat("9", n, head='{"name": "a", "arguments": {"n": ', tail="}}"),
    "long string": lambda n: repeat("\\u0041", n, head='{"name": "', tail='"}'),
    "braces both ways": lambda n: repeat("}{", n),
}
ACTION_SHAPES: dict[str, Shape] = {
    "spaces": lambda n: repeat(" \t", n),
    "words": lambda n: repeat("a ", n),
    "quotes": lambda n: repeat("`'\"", n),
    "full stops": lambda n: repeat(".!", n, head="x"),
}
BABYAI_SHAPES: dict[str, Shape] = {
    **ACTION_SHAPES,
    "huge object number": lambda n: repeat("9", n, head="go to red ball "),
    "long object name": lambda n: repeat("a", n, head="go to red "),
    "many words": lambda n: repeat("red ", n, head="go to the "),
}
TEXTCRAFT_SHAPES: dict[str, Shape] = {
    **ACTION_SHAPES,
    "huge count": lambda n: repeat("9", n, head="get ", tail=" oak log"),
    "long item name": lambda n: repeat("x", n, head="get 1 "),
    "many 'using'": lambda n: repeat(" using", n, head="craft "),
    "many ingredients": lambda n: repeat("1 oak planks, ", n, head="craft stick using ", tail="1 stick"),
    "item-like words": lambda n: repeat("planks ", n, head="get 1 "),
}
SCIWORLD_SHAPES: dict[str, Shape] = {
    **ACTION_SHAPES,
    "long object name": lambda n: repeat("a", n, head="look at "),
    "many words": lambda n: repeat("door ", n, head="open "),
}


# ---- the functions --------------------------------------------------------------------------------
def _swallow(fn: Callable[[str], Any], expected: type[BaseException] = Exception) -> Callable[[str], Any]:
    """`fn`, with the parse failure it is expected to raise on most shapes ignored."""

    def call(text: str) -> Any:
        try:
            return fn(text)
        except expected:
            return None

    return call


def _parser(name: str) -> Callable[[], Callable[[str], Any]]:
    def build() -> Callable[[str], Any]:
        from agentgym_wrappers import ParseError, get_parser

        return _swallow(get_parser(name), ParseError)

    return build


class _EnvStep:
    """`env.step` on a reset env (invalid actions never end an episode); `close` ends the env."""

    def __init__(self, env_id: str):
        self.env_id = env_id
        self.env: Any = None

    def open(self) -> Callable[[str], Any]:
        import gymnasium as gym

        import agentgym_envs  # noqa: F401

        self.env = gym.make(self.env_id)
        self.env.reset(seed=0)
        return self.step

    def step(self, text: str) -> Any:
        observation, _, terminated, truncated, info = self.env.step(text)
        if info["valid_action"] or terminated or truncated:
            raise AssertionError(f"{self.env_id} took an adversarial text as a valid action: {text[:60]!r}")
        return observation

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


def _core_normalise() -> Callable[[str], Any]:
    from agentgym_envs.core import normalise_action

    return normalise_action


def _sciworld_normalise() -> Callable[[str], Any]:
    from agentgym_envs.sciworld.env import normalise_action

    return normalise_action


def cases(sciworld_step: bool = True) -> list[Case]:
    """Every function the benchmark times (SciWorld's `step` only when asked: it starts a JVM)."""
    babyai, textcraft = _EnvStep("AgentGym/BabyAI-v0"), _EnvStep("AgentGym/TextCraft-v0")
    found = [
        Case("parse_action_line", ACTION_LINE_SHAPES, _parser("action_line"), _old_action_line),
        Case("parse_tags", TAG_SHAPES, _parser("tags"), _old_tags),
        Case("parse_fenced", FENCE_SHAPES, _parser("fenced")),
        Case("parse_json_tool", JSON_SHAPES, _parser("json"), _old_json),
        Case("core.normalise_action", ACTION_SHAPES, _core_normalise),
        Case("BabyAI step", BABYAI_SHAPES, babyai.open, close=babyai.close),
        Case("TextCraft step", TEXTCRAFT_SHAPES, textcraft.open, close=textcraft.close),
        Case("sciworld.normalise_action", SCIWORLD_SHAPES, _sciworld_normalise),
    ]
    if sciworld_step:
        sciworld = _EnvStep("AgentGym/SciWorld-v0")
        found.append(Case("SciWorld step", SCIWORLD_SHAPES, sciworld.open, close=sciworld.close))
    return found


# ---- measuring ------------------------------------------------------------------------------------
def best_times(fn: Callable[[str], Any], texts: list[str], repeats: int, budget: float = 0.1) -> list[float]:
    """The shortest CPU time of `fn` on each text, over at least `repeats` rounds, more while under `budget` s.

    CPU time of this thread, not wall time: on a loaded machine a call that outlasts the
    scheduler's time slice also waits for other processes, which made longer inputs look
    superlinear (SciWorld's JVM is not in it: its long shapes never reach the JVM, see its env).
    The texts take turns, and short calls get more rounds. Each timed call
    follows an untimed one on the same text: the first call after a different text pays for
    memory that the allocator gave back in between (seen as 4x on TextCraft's step). The garbage
    collector is off while timing, as in `timeit`: a full collection scans every object of the
    process (an env's tables included), whatever the input.
    """
    best, spent, rounds = [float("inf")] * len(texts), 0.0, 0
    gc.disable()
    try:
        while rounds < repeats or (spent < budget and rounds < 50):
            for i, text in enumerate(texts):
                fn(text)
                start = time.thread_time()
                fn(text)
                elapsed = time.thread_time() - start
                best[i], spent = min(best[i], elapsed), spent + elapsed
            rounds += 1
    finally:
        gc.enable()
    return best


@contextmanager
def opened(case: Case) -> Iterator[Callable[[str], Any]]:
    fn = case.open()
    try:
        yield fn
    finally:
        case.close()


def measure(case: Case, chars: int, repeats: int, baseline_chars: int = 0, budget: float = 0.1) -> dict[str, Any]:
    """Time `case` on each shape at `chars // 2` and `chars`; the baseline (if any) at `baseline_chars`.

    `budget` is how long the calls on one text may take in all (see `best_times`).
    """
    shapes: dict[str, dict[str, Any]] = {}
    with opened(case) as fn:
        for shape, make in case.shapes.items():
            half, full = make(chars // 2), make(chars)
            fn(make(1000))  # warm up (the JVM's compiler)
            t_half, t_full = best_times(fn, [half, full], repeats, budget)
            scaling = t_full / t_half if t_half > 0 else float("inf")
            row: dict[str, Any] = {
                "seconds_n": t_half,
                "seconds_2n": t_full,
                "scaling": scaling,
                "linear": scaling <= MAX_SCALING or t_full < FLOOR_SECONDS,
                "fast": t_full <= MAX_SECONDS,
            }
            if case.baseline is not None and baseline_chars:
                small = make(baseline_chars)
                (row["baseline_seconds"],) = best_times(case.baseline, [small], 1)
                (row["ours_seconds"],) = best_times(fn, [small], repeats, budget)
            shapes[shape] = row
    worst = max(shapes, key=lambda s: shapes[s]["seconds_2n"])
    result: dict[str, Any] = {
        "shapes": shapes,
        "worst_shape": worst,
        "worst_seconds_2n": shapes[worst]["seconds_2n"],
        "max_scaling": max(r["scaling"] for r in shapes.values()),
        "met": all(r["linear"] and r["fast"] for r in shapes.values()),
    }
    if case.baseline is not None and baseline_chars:
        slowest = max(shapes, key=lambda s: shapes[s]["baseline_seconds"])
        row = shapes[slowest]
        result["baseline"] = {
            "shape": slowest,
            "chars": baseline_chars,
            "seconds": row["baseline_seconds"],
            "ours_seconds": row["ours_seconds"],
            "speedup": row["baseline_seconds"] / max(row["ours_seconds"], 1e-9),
        }
    return result


def summary(results: dict[str, Any]) -> list[dict[str, Any]]:
    """The headlines for `agentgym bench`: one per function, its speed-up over the pre-fix regex if any."""
    rows = []
    for name, r in results["functions"].items():
        base = r.get("baseline")
        rows.append(
            {
                "measure": f"{name}: worst of {len(r['shapes'])} shapes, {results['chars']:,} chars",
                "ratio": base["speedup"] if base else None,
                "baseline": f"pre-fix regex at {base['chars']:,} chars" if base else "-",
                "target": f"2n <= {MAX_SCALING:g}x n, <= {MAX_SECONDS:g} s at {results['chars']:,} chars",
                "met": r["met"],
            }
        )
    return rows


def sciworld_available() -> bool:
    """Whether ScienceWorld's JVM can start here (Java and the `scienceworld` package)."""
    try:
        from agentgym_envs.sciworld.backend import java_executable

        java_executable()
        import scienceworld  # noqa: F401
    except Exception:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=1 << 20, help="the largest size (2n), in characters")
    parser.add_argument("--baseline-chars", type=int, default=16_000, help="size for the pre-fix regexes")
    parser.add_argument("--repeats", type=int, default=3, help="timed calls per shape and size (the best counts)")
    parser.add_argument("--no-sciworld", action="store_true", help="skip SciWorld's step (starts a JVM)")
    parser.add_argument("--quick", action="store_true", help="128k characters, one repeat (agentgym bench --quick)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "parsers_speed.json"))
    args = parser.parse_args()
    if args.quick:
        args.chars, args.baseline_chars, args.repeats = 1 << 17, 4_000, 1

    with_sciworld = not args.no_sciworld and sciworld_available()
    functions = {}
    print(f"{'function':<26}{'shape':<28}{'n (s)':>9}{'2n (s)':>9}{'2n/n':>7}  {'pre-fix regex':>14}")
    for case in cases(sciworld_step=with_sciworld):
        result = measure(case, args.chars, args.repeats, args.baseline_chars)
        functions[case.name] = result
        for shape, row in result["shapes"].items():
            old = f"{row['baseline_seconds']:.3f} s" if "baseline_seconds" in row else ""
            flag = "" if row["linear"] and row["fast"] else "  MISSED"
            print(
                f"{case.name:<26}{shape:<28}{row['seconds_n']:>9.4f}{row['seconds_2n']:>9.4f}"
                f"{row['scaling']:>7.2f}  {old:>14}{flag}"
            )
    results: dict[str, Any] = {
        "chars": args.chars,
        "repeats": args.repeats,
        "targets": {"max_scaling": MAX_SCALING, "max_seconds": MAX_SECONDS, "floor_seconds": FLOOR_SECONDS},
        "sciworld_step": with_sciworld,
        "functions": functions,
    }
    results["summary"] = summary(results)
    print()
    for name, r in functions.items():
        base = r.get("baseline")
        versus = (
            f"; pre-fix regex {base['seconds']:.3f} s vs ours {base['ours_seconds'] * 1e3:.3f} ms "
            f"at {base['chars']:,} chars ({base['shape']})"
            if base
            else ""
        )
        print(
            f"{name}: worst {r['worst_seconds_2n']:.4f} s ({r['worst_shape']}), "
            f"max 2n/n {r['max_scaling']:.2f}, {'met' if r['met'] else 'MISSED'}{versus}"
        )
    if not with_sciworld:
        print("SciWorld step skipped (no Java or scienceworld here, or --no-sciworld)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    sys.exit(0 if all(r["met"] for r in functions.values()) else 1)


if __name__ == "__main__":
    main()
