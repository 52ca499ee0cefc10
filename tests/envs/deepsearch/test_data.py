"""Deep Search data: the cache, the memory-mapped document store, the synthetic corpus on disk, user QA files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agentgym_envs.deepsearch import data as D


@pytest.fixture(autouse=True)
def _fresh_shared() -> None:
    D.clear_shared()
    yield
    D.clear_shared()


# ---- cache --------------------------------------------------------------------------------------------
def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AGENTGYM_DEEPSEARCH_CACHE", raising=False)
    monkeypatch.delenv("AGENTGYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert D.cache_root() == tmp_path / ".cache" / "agentgym" / "deepsearch"
    monkeypatch.setenv("AGENTGYM_CACHE_DIR", str(tmp_path / "all"))
    assert D.cache_root() == tmp_path / "all" / "deepsearch"
    monkeypatch.setenv("AGENTGYM_DEEPSEARCH_CACHE", str(tmp_path / "ds"))
    assert D.cache_root() == tmp_path / "ds"
    assert D.cache_root(tmp_path / "arg") == tmp_path / "arg"


# ---- corpora ------------------------------------------------------------------------------------------
def test_user_corpus_is_memory_mapped_and_cached(tmp_path: Path) -> None:
    corpus = tmp_path / "wiki.jsonl"
    rows = [
        json.dumps({"id": "a", "contents": '"Lima"\nLima is the capital of Peru.'}),
        "",
        "   ",
        json.dumps({"id": "b", "title": "Peru", "text": "A country."}),  # FlashRAG's title/text rows
        json.dumps({"id": "c", "contents": "Ünïcödé\nstill one line"}),
    ]
    corpus.write_text("\n".join(rows))  # no final newline
    store = D.open_corpus(corpus, tmp_path / "cache")
    assert len(store) == 3 and isinstance(store.rows, np.memmap)
    assert store[0] == {"id": "a", "contents": '"Lima"\nLima is the capital of Peru.'}
    assert store[1] == {"id": "b", "contents": "Peru\nA country."}
    assert store[2]["contents"] == "Ünïcödé\nstill one line"
    assert D.open_corpus(corpus, tmp_path / "cache") is store  # shared in the process
    assert len(list((tmp_path / "cache").glob("corpus-wiki-*/rows.npy"))) == 1


def test_corpus_errors_name_the_expected_form(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r'not found: provide a JSONL corpus with one \{"id"'):
        D.open_corpus(tmp_path / "missing.jsonl", tmp_path)
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="is empty"):
        D.open_corpus(tmp_path / "empty.jsonl", tmp_path)
    (tmp_path / "bad.jsonl").write_text('{"id": 1, "contents": "ok"}\n{"id": 2, "body": "no contents"}\n{oops\n')
    store = D.open_corpus(tmp_path / "bad.jsonl", tmp_path)
    assert store[0]["contents"] == "ok"
    with pytest.raises(ValueError, match=r"document 1: expected a JSONL corpus"):
        store[1]
    with pytest.raises(ValueError, match=r"document 2: not valid JSON"):
        store[2]


def test_synthetic_corpus_is_written_once(tmp_path: Path) -> None:
    store, questions = D.load_synthetic(num_docs=300, seed=5, cache_dir=tmp_path)
    directory = D.synthetic_dir(300, 5, tmp_path)
    assert sorted(p.name for p in directory.iterdir()) == [
        "corpus.jsonl",
        "corpus.rows.npy",
        "manifest.json",
        "questions-test.jsonl",
        "questions-test.rows.npy",
        "questions-train.jsonl",
        "questions-train.rows.npy",
    ]
    assert len(store) == 300 and store[7]["id"] == "7" and len(questions["test"]) == 1_000
    stamp = (directory / "corpus.jsonl").stat().st_mtime_ns
    D.clear_shared()
    again, questions_again = D.load_synthetic(num_docs=300, seed=5, cache_dir=tmp_path)
    assert (directory / "corpus.jsonl").stat().st_mtime_ns == stamp and again[7] == store[7]
    assert questions_again == questions


# ---- QA files -----------------------------------------------------------------------------------------
def test_flashrag_jsonl(tmp_path: Path) -> None:
    path = tmp_path / "nq_test.jsonl"
    path.write_text(
        json.dumps(
            {"id": "test_0", "question": " who wrote hamlet? ", "golden_answers": ["Shakespeare"], "metadata": {}}
        )
        + "\n\n"
        + json.dumps({"question": "q2", "golden_answers": "one string", "data_source": "triviaqa"})
        + "\n"
    )
    first, second = D.load_qa(path, split="dev")
    assert (first.id, first.question, first.golden_answers, first.category) == (
        "dev/00000",
        "who wrote hamlet?",
        ("Shakespeare",),
        "nq_test",  # no data_source: the file's stem
    )
    assert second.golden_answers == ("one string",) and second.category == "triviaqa" and second.chain == ()


def test_search_r1_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    rows = [
        {
            "data_source": "hotpotqa",
            "question": "Which band?",
            "golden_answers": ["Queen", "Queen (band)"],
            "reward_model": {"style": "rule", "ground_truth": {"target": ["Queen", "Queen (band)"]}},
        },
        {
            "data_source": "nq",
            "question": "Who?",
            "golden_answers": None,
            "reward_model": {"style": "rule", "ground_truth": {"target": ["Nobody"]}},
        },
    ]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "test.parquet")
    first, second = D.load_qa(tmp_path / "test.parquet")
    assert first.golden_answers == ("Queen", "Queen (band)") and first.category == "hotpotqa"
    assert first.id == "test/00000"
    assert second.golden_answers == ("Nobody",)  # from Search-R1's reward_model.ground_truth.target


def test_qa_errors_name_what_to_provide(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"QA file .* not found: provide a QA file .* 'golden_answers'"):
        D.load_qa(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"golden_answers": ["x"]}\n')
    with pytest.raises(ValueError, match="row 0: missing a non-empty 'question'"):
        D.load_qa(bad)
    bad.write_text('{"question": "q", "golden_answers": [1, 2]}\n')
    with pytest.raises(ValueError, match="row 0: 'golden_answers' must be a non-empty list of strings"):
        D.load_qa(bad)
    bad.write_text('{"question": "q", "golden_answers": ["a"]}\n{not json\n')
    with pytest.raises(ValueError, match="line 2: not valid JSON"):
        D.load_qa(bad)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="holds no questions"):
        D.load_qa(tmp_path / "empty.jsonl")
