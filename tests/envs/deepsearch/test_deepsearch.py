"""Deep Search: scoring, action forms, rewards, the retry variant, the expert on the whole test split, user data."""

from __future__ import annotations

import gc
import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentgym_envs.deepsearch.env import DeepSearchEnv, first_element, parse_reply
from agentgym_envs.deepsearch.expert import DeepSearchExpert, retrieved
from agentgym_envs.deepsearch.scoring import exact_match, f1_score, normalize_answer
from agentgym_wrappers import MultiTurnWrapper


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # One cache for every Deep Search test module and xdist worker: the default corpus is built once.
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "deepsearch-cache"


@pytest.fixture(scope="module")
def env(cache_dir: Path) -> DeepSearchEnv:
    env = DeepSearchEnv(cache_dir=cache_dir)
    yield env
    env.close()


def _first(env: DeepSearchEnv, category: str) -> str:
    return next(q.id for q in env._load_questions()["test"] if q.category == category)


# ---- scoring ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("raw", "normalised"),
    [
        ("The Beatles", "beatles"),
        ("  an   Apple a day ", "apple day"),
        ("U.S.A.", "usa"),
        ("1,234,567", "1234567"),
        ("Rock 'n' Roll!", "rock n roll"),
        ("Theatre of the Absurd", "theatre of absurd"),  # articles go only as whole words
        ("ANSWER:\tLima\n", "answer lima"),
        ("", ""),
    ],
)
def test_squad_normalisation(raw: str, normalised: str) -> None:
    assert normalize_answer(raw) == normalised


def test_exact_match_and_f1_against_any_gold_answer() -> None:
    gold = ["Mount Velkor", "Velkor"]
    assert exact_match("the velkor.", gold) == 1.0
    assert exact_match("Mount Velkor range", gold) == 0.0
    assert f1_score("Mount Velkor range", gold) == pytest.approx(0.8)  # best over the gold answers
    assert f1_score("nothing alike", gold) == 0.0
    assert f1_score("", gold) == 0.0 and exact_match("", gold) == 0.0


# ---- action forms -------------------------------------------------------------------------------------
def test_reply_parsing_takes_the_first_complete_element() -> None:
    assert parse_reply("I think... <search>  capital \n of Peru </search> then <answer>x</answer>", 300) == (
        "search",
        "capital of Peru",
    )
    assert parse_reply("<ANSWER> Lima </ANSWER>", 300) == ("answer", "Lima")
    assert parse_reply("<search> unclosed <answer> Lima </answer>", 300) == ("answer", "Lima")


def test_tags_are_ascii_in_any_case_and_nest_as_in_search_r1() -> None:
    assert first_element("<Search>a</sEaRcH>") == ("search", "a")
    assert first_element("<search><answer>x</answer></search>") == ("search", "<answer>x</answer>")
    assert first_element("<answer> a <search> b </answer> </search>") == ("answer", " a <search> b ")
    assert first_element("</search><search>late</search>") == ("search", "late")
    assert first_element("<\u017fearch>x</\u017fearch>") is None  # long s: no tag (the old regex took it)
    assert first_element("<search>") is None and first_element("") is None


# Adversarial replies of about `n` characters: each made the old regex search quadratic, or probes the new one.
_ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "unclosed search tags": lambda n: "<search>" * (n // 8),
    "unclosed tags of both kinds": lambda n: "<search><answer>" * (n // 16),
    "opening tags, then the other kind closes": lambda n: "<search>" * (n // 8) + "</answer>",
    "nested, closed at the end": lambda n: "<search><answer>" * (n // 16) + "</search>",
    "'<' flood": lambda n: "<" * n,
    "tag prefixes": lambda n: "<searc</answe" * (n // 13),
    "closing tags only": lambda n: "</search></answer>" * (n // 18),
    "one long query": lambda n: "<search>" + "word " * (n // 5) + "</search>",
}


def _cpu_seconds(call: Callable[[], object]) -> float:
    """This process's CPU time for `call()`, the collector paused: other processes on a loaded machine
    (a parallel test worker) do not count, as they would in wall time."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        started = time.process_time()
        call()
        return time.process_time() - started
    finally:
        if collecting:
            gc.enable()


def _parse_seconds(*replies: str, repeats: int = 7) -> list[float]:
    """The best of `repeats` timings of `parse_reply` on each reply, measured in turns (fair under load)."""
    best = [float("inf")] * len(replies)
    for _ in range(repeats):
        for i, reply in enumerate(replies):
            best[i] = min(best[i], _cpu_seconds(lambda reply=reply: parse_reply(reply, 300)))
    return best


@pytest.mark.parametrize("make", list(_ADVERSARIAL.values()), ids=list(_ADVERSARIAL))
def test_reply_parsing_is_linear(make: Callable[[int], str]) -> None:
    """The old regex took 11.8 s on 128k unclosed '<search>' characters (0.2 s on 16k): quadratic.

    Sizes of 1 and 2 MB, beyond the CPU caches whose edge alone can triple the time per character. On a
    loaded machine a scan of a few milliseconds can take several times as long once, so the check is
    measured up to three times and allows 20 ms of slack (a quadratic parser takes seconds at these sizes).
    """
    (small,) = _parse_seconds(make(1 << 16), repeats=1)
    assert small < 0.2, f"{small:.2f} s on 64k characters: not linear"  # fails fast on a quadratic parser
    n = 1 << 20
    (megabyte,) = _parse_seconds(make(n), repeats=1)
    assert megabyte < 1.0, f"{megabyte:.2f} s on {n:,} characters"
    replies = make(n), make(2 * n)
    for _ in range(3):
        small, double = _parse_seconds(*replies)
        if double <= 3 * small + 0.02:
            break
    else:
        pytest.fail(f"{small * 1e3:.1f} ms on {n:,} characters, {double * 1e3:.1f} ms on twice that")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("Lima", "holds no complete"),
        ("<search> capital of Peru", "holds no complete"),
        ("<search> x </answer>", "holds no complete"),
        ("<search>   </search>", "query is empty"),
        ("<search>\n</search>", "query is empty"),
        ("<search> " + "word " * 100 + "</search>", "more than the limit of 300"),
        ("<answer>  </answer>", "answer is empty"),
    ],
)
def test_invalid_forms_are_explained_and_cost_nothing(env: DeepSearchEnv, reply: str, reason: str) -> None:
    env.reset(options={"task_id": "test/00000"})
    observation, reward, terminated, truncated, info = env.step(reply)
    assert reason in observation
    assert info["valid_action"] is False and reward == 0 and not terminated and not truncated
    assert info["score"] == 0 and not info["success"]


# ---- hostile replies ----------------------------------------------------------------------------------
_HOSTILE = [
    "9" * 5_000,  # longer than Python's int-parsing limit
    "<answer>" + "9" * 5_000 + "</answer>",
    "<search>" + "9" * 5_000 + "</search>",
    "<search> 1e309 -0 NaN 340282366920938463463374607431768211457 </search>",
    "\ud800",
    "<search> \udfff capital \ud800 </search>",  # lone surrogates in a query
    "<answer> \ud800 </answer>",
    "<search>\x00\x07\x1b[2J\r</search>",
    "".join(chr(c) for c in range(32)),
    "<search> \u202e\ufeff\u0130 \U0010ffff \uffff </search>",
    "x" * 1_000_000,
    "<search>" * 125_000,
    "<" * 1_000_000,
    "<search>" + "word " * 200_000 + "</search>",
    "<search><answer><search>nested</search></answer></search>",
    "<answer><search></search></answer>",
    "</search></answer><search",
    "<SEARCH>\tcapital\n</search>",
]


def _hostile_generated(count: int, seed: int = 11) -> list[str]:
    """Seeded mixes of tags, surrogates, control characters, huge numbers and noise."""
    rng = random.Random(seed)
    parts = ["<search>", "</search>", "<answer>", "</answer>", "<", ">", "/", "\ud800", "\udc00", "\x00", "\x1b",
             "\n", " ", "9" * 4_400, "capital", "-1", "\u0130", "🙂", "<Search>", "</ANSWER>"]  # fmt: skip
    return ["".join(rng.choice(parts) for _ in range(rng.randint(1, 12))) for _ in range(count)]


def test_hostile_replies_are_observations_never_exceptions(env: DeepSearchEnv) -> None:
    answered = 0
    env.reset(options={"task_id": "test/00003"})
    for reply in _HOSTILE + _hostile_generated(400):
        observation, reward, terminated, truncated, info = env.step(reply)
        assert isinstance(observation, str) and len(observation) < 10_000  # bounded, whatever came in
        assert isinstance(info["valid_action"], bool) and 0 <= info["score"] <= 1 and not truncated
        if not info["valid_action"]:
            assert observation.startswith("Invalid action:") and reward == 0 and not terminated
        answered += terminated
        if terminated:
            env.reset(options={"task_id": "test/00003"})
    assert answered > 10  # answers with odd text were scored, not refused


_HOSTILE_STEPS: dict[str, Callable[[int], str]] = {
    "long answer of words": lambda n: "<answer>" + "ab " * (n // 3) + "</answer>",
    "long answer of articles": lambda n: "<answer>" + "the a an " * (n // 9) + "</answer>",
    "long answer of punctuation": lambda n: "<answer>" + "!." * (n // 2) + "</answer>",
    "long query": lambda n: "<search>" + "word " * (n // 5) + "</search>",
    "unclosed tags": lambda n: "<search>" * (n // 8),
}


@pytest.mark.parametrize("make", list(_HOSTILE_STEPS.values()), ids=list(_HOSTILE_STEPS))
def test_step_is_linear_on_hostile_replies(env: DeepSearchEnv, make: Callable[[int], str]) -> None:
    """Parsing, scoring and the observation together: 1 MB well under a second, 2 MB at most ~3 times that."""

    def seconds(reply: str) -> float:
        best = float("inf")
        for _ in range(3):
            env.reset(options={"task_id": "test/00003"})
            best = min(best, _cpu_seconds(lambda: env.step(reply)))
        return best

    n = 1 << 20
    megabyte, double = seconds(make(n)), seconds(make(2 * n))
    assert megabyte < 1.0, f"{megabyte:.2f} s on {n:,} characters"
    assert double <= 3 * megabyte + 0.02, f"{megabyte:.3f} s on {n:,} characters, {double:.3f} s on twice that"


@pytest.mark.parametrize(
    ("reply", "start"),
    [
        ("<search>" * 125_000, "Invalid action: your reply holds no complete"),
        ("<search>" + "word " * 200_000 + "</search>", "Invalid action: the search query has 999,999 characters"),
        ("<answer>" + "9" * 5_000 + "</answer>", "Your answer '999"),
        ("<search> \udfff\x00 </search>", "<information>No document matches this query.</information>"),
    ],
    ids=["1 MB of unclosed tags", "1 MB query", "5,000-digit answer", "lone surrogate query"],
)
def test_hostile_replies_are_answered_as_expected(env: DeepSearchEnv, reply: str, start: str) -> None:
    env.reset(options={"task_id": "test/00003"})
    assert env.step(reply)[0].startswith(start)


def test_search_returns_the_information_block(env: DeepSearchEnv) -> None:
    observation, info = env.reset(options={"task_id": _first(env, "single-hop")})
    question = env.question
    assert observation == f"Question: {question.question}" and info["instruction"] == question.question
    observation, reward, terminated, _, info = env.step(f"Let me look. <search> {question.chain[0].query} </search>")
    assert info["valid_action"] and reward == 0 and not terminated
    assert observation.startswith("<information>Doc 1(Title: ") and observation.endswith("</information>")
    assert observation.count("\nDoc ") == env.topk - 1
    assert retrieved(observation, question.chain[0])
    nothing = env.step("<search> zzzqqq xxyyzz </search>")[0]
    assert nothing == "<information>No document matches this query.</information>"


# ---- rewards and termination --------------------------------------------------------------------------
def test_right_answer_ends_with_reward_one(env: DeepSearchEnv) -> None:
    env.reset(options={"task_id": "test/00001"})
    gold = env.question.golden_answers[0]
    observation, reward, terminated, truncated, info = env.step(f"So it is <answer> The {gold.upper()}! </answer>")
    assert reward == 1.0 and terminated and not truncated and info["success"]
    assert info["em"] == 1.0 and info["f1"] == 1.0 and "is correct" in observation


def test_wrong_answer_ends_with_zero_and_reports_f1(env: DeepSearchEnv) -> None:
    env.reset(options={"task_id": _first(env, "comparison")})
    gold = env.question.golden_answers[0]  # a two-word name
    observation, reward, terminated, _, info = env.step(f"<answer> {gold} Junior </answer>")
    assert reward == 0.0 and terminated and not info["success"]
    assert info["em"] == 0.0 and 0 < info["f1"] < 1 and gold in observation


def test_f1_reward(cache_dir: Path) -> None:
    env = DeepSearchEnv(cache_dir=cache_dir, reward="f1")
    env.reset(options={"task_id": _first(env, "comparison")})
    gold = env.question.golden_answers[0]
    _, reward, terminated, _, info = env.step(f"<answer> {gold} Junior </answer>")
    assert terminated and reward == pytest.approx(info["f1"]) and 0 < reward < 1 and not info["success"]


def test_retry_variant_goes_on_until_right(cache_dir: Path) -> None:
    env = DeepSearchEnv(cache_dir=cache_dir, wrong_answer="retry", reward="f1")
    env.reset(options={"task_id": _first(env, "comparison")})
    gold = env.question.golden_answers[0]
    observation, reward, terminated, _, info = env.step("<answer> nobody </answer>")
    assert observation == "Sorry, your answer is incorrect. Please try again."
    assert info["valid_action"] and reward == 0 and not terminated
    _, partial, terminated, _, _ = env.step(f"<answer> {gold} Junior </answer>")
    assert 0 < partial < 1 and not terminated
    _, worse, terminated, _, _ = env.step("<answer> nobody at all </answer>")
    assert worse == 0 and not terminated  # the score is the best answer so far
    _, last, terminated, _, info = env.step(f"<answer> {gold} </answer>")
    assert terminated and info["success"] and partial + last == pytest.approx(1.0) and info["score"] == 1.0


# ---- expert -------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_expert_solves_the_whole_test_split_with_bm25(env: DeepSearchEnv) -> None:
    """Proves every hop of every test question is in the top 3 for the hop's query."""
    failures, searches = [], 0
    for task_id in env.tasks("test"):
        observation, info = env.reset(options={"task_id": task_id})
        expert = env.make_expert()
        while True:
            action = expert.act(observation, info)
            searches += action.startswith("<search>")
            observation, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        if not info["success"]:
            failures.append(task_id)
    assert failures == []
    assert searches == sum(len(q.chain) for q in env._load_questions()["test"])  # one search per hop


def test_expert_fails_when_a_hop_is_not_found(env: DeepSearchEnv) -> None:
    env.reset(options={"task_id": _first(env, "bridge")})
    expert = DeepSearchExpert(env.question)
    action = expert.act("", {})
    assert action == f"<search> {env.question.chain[0].query} </search>"
    expert.act("<information>Doc 1(Title: Elsewhere) nothing useful</information>", {})
    assert expert.act("<information></information>", {}) == "<answer> unknown </answer>"


def test_multiturn_wrapper_parses_tags(env: DeepSearchEnv) -> None:
    wrapped = MultiTurnWrapper(env)
    wrapped.reset(options={"task_id": "test/00002"})
    assert wrapped.messages[0]["content"] == DeepSearchEnv.system_prompt
    observation, *_ = wrapped.step(f"Thinking... <search> {env.question.chain[0].query} </search> and more")
    assert observation.startswith("<information>")
    _, reward, terminated, _, info = wrapped.step(f"<answer>{env.question.golden_answers[0]}</answer>")
    assert reward == 1.0 and terminated and info["episode"]["success"]


# ---- user data ----------------------------------------------------------------------------------------
def _write_user_data(directory: Path) -> tuple[Path, Path]:
    corpus = directory / "wiki.jsonl"
    rows = [
        {"id": "0", "contents": '"Lima"\nLima is the capital and largest city of Peru.'},
        {"id": "1", "contents": '"Peru"\nPeru is a country in South America. Its capital is Lima.'},
        {"id": "2", "contents": '"Andes"\nThe Andes are the longest continental mountain range.'},
        {"id": "3", "contents": '"Cusco"\nCusco was the capital of the Inca Empire.'},
    ]
    corpus.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    qa = directory / "test.jsonl"
    questions = [
        {"id": "t0", "question": "What is the capital of Peru?", "golden_answers": ["Lima"], "data_source": "nq"},
        {"question": "Longest mountain range?", "golden_answers": ["Andes", "the Andes"], "data_source": "hotpotqa"},
    ]
    qa.write_text("".join(json.dumps(q) + "\n" for q in questions))
    return corpus, qa


def test_user_corpus_and_qa_files(tmp_path: Path) -> None:
    corpus, qa = _write_user_data(tmp_path)
    env = DeepSearchEnv(corpus=str(corpus), qa_files={"test": str(qa)}, topk=2, cache_dir=tmp_path / "cache")
    assert env.splits == ("test",) and env.tasks("test") == ["test/00000", "test/00001"]
    observation, info = env.reset(seed=0, options={"task_id": 0})
    assert info["category"] == "nq" and observation == "Question: What is the capital of Peru?"
    observation, *_ = env.step("<search> capital of Peru </search>")
    assert observation.count("Doc ") == 2 and 'Doc 2(Title: "Lima") Lima is the capital and largest city' in observation
    _, reward, terminated, _, info = env.step("<answer>lima</answer>")
    assert reward == 1.0 and terminated
    _, info = env.reset(options={"task_id": "test/00001"})
    assert info["category"] == "hotpotqa"
    expert = env.make_expert()  # no chain: search the question, answer the gold
    assert expert.act("", info) == "<search> Longest mountain range? </search>"
    env.close()


def test_missing_user_files_name_what_to_provide(tmp_path: Path) -> None:
    corpus, qa = _write_user_data(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"QA file for split 'test' not found.*golden_answers"):
        DeepSearchEnv(corpus=str(corpus), qa_files={"test": str(tmp_path / "nope.jsonl")})
    with pytest.raises(FileNotFoundError, match=r"corpus not found.*contents"):
        DeepSearchEnv(corpus=str(tmp_path / "nope.jsonl"), qa_files=str(qa))
    with pytest.raises(ValueError, match=r"needs its questions: qa_files="):
        DeepSearchEnv(corpus=str(corpus))
    with pytest.raises(ValueError, match=r"need their corpus"):
        DeepSearchEnv(qa_files=str(qa))
    with pytest.raises(ValueError, match="retriever_url"):
        DeepSearchEnv(retriever="remote")
    with pytest.raises(ValueError, match="dense_model"):
        DeepSearchEnv(retriever="dense")
    with pytest.raises(ValueError, match="reward must be"):
        DeepSearchEnv(reward="bleu")
