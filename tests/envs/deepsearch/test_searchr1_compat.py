"""Search-R1's retrieval protocol and passage text: what its trainer sends and what its model was shown.

Search-R1 (`search_r1/llm_agent/generation.py`) posts `{"queries", "topk", "return_scores": true}` to
`/retrieve` every turn, with an empty list when no rollout searched and up to 512 prompts x 5
rollouts = 2,560 queries at once, and shows each answer as
`<information>{"".join(f"Doc {i}(Title: {first line}) {other lines}\\n"...).strip()}</information>`.
"""

from __future__ import annotations

import os
from pathlib import Path

import httpx
import pytest

from agentgym_envs.deepsearch.env import DeepSearchEnv
from agentgym_envs.deepsearch.remote import RemoteRetriever
from agentgym_envs.deepsearch.retrieval import Passage, Retriever, format_information, open_local_retriever
from agentgym_envs.deepsearch.server import RetrievalServerThread

NUM_DOCS = 2_000


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.getbasetemp()
    return (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "deepsearch-cache"


class RecordingRetriever(Retriever):
    """A stand-in around a real retriever that records the size of every batch it is asked for."""

    def __init__(self, inner: Retriever):
        self.inner, self.batches = inner, []

    def batch_search(self, queries: list[str], k: int) -> list[list[Passage]]:
        self.batches.append(len(queries))
        return self.inner.batch_search(queries, k)

    def __len__(self) -> int:
        return len(self.inner)


class FixedRetriever(Retriever):
    """A stand-in search engine answering every query with the same passages (none for "nothing")."""

    def __init__(self, passages: list[Passage]):
        self.passages = passages

    def batch_search(self, queries: list[str], k: int) -> list[list[Passage]]:
        return [[] if query == "nothing" else self.passages[:k] for query in queries]


@pytest.fixture(scope="module")
def bm25(cache_dir: Path) -> Retriever:
    return open_local_retriever("bm25", num_docs=NUM_DOCS, cache_dir=str(cache_dir))


@pytest.fixture(scope="module")
def server(bm25: Retriever):
    recorder = RecordingRetriever(bm25)
    with RetrievalServerThread(recorder, default_topk=3) as running:
        running.recorder = recorder
        yield running


def _search_r1_block(results: list[dict]) -> str:
    """Search-R1's rendering of one query's `result` entry, restated from its generation.py."""
    text = ""
    for rank, item in enumerate(results, 1):
        lines = item["document"]["contents"].split("\n")
        text += f"Doc {rank}(Title: {lines[0]}) {chr(10).join(lines[1:])}\n"
    return f"<information>{text.strip()}</information>"


def test_an_empty_query_list_is_answered_with_an_empty_result(server) -> None:
    with httpx.Client() as client:
        reply = client.post(f"{server.url}/retrieve", json={"queries": [], "topk": 3, "return_scores": True})
    assert reply.status_code == 200 and reply.json() == {"result": []}
    remote = RemoteRetriever(server.url)
    assert remote.batch_search([], 3) == []
    remote.close()


def test_a_training_batch_of_2560_queries_is_answered_in_chunks(server, bm25: Retriever) -> None:
    words = ["capital", "river", "founded", "born", "mountain", "press", "novelist", "city"]
    queries = [f"{words[i % 8]} {words[(i // 8) % 8]} {i}" for i in range(2_560)]
    server.recorder.batches.clear()
    with httpx.Client(timeout=120) as client:
        reply = client.post(f"{server.url}/retrieve", json={"queries": queries, "topk": 3, "return_scores": True})
    assert reply.status_code == 200
    result = reply.json()["result"]
    assert len(result) == 2_560
    assert server.recorder.batches == [512] * 5  # searched a chunk at a time
    expected = bm25.batch_search(queries[::97], 3)
    assert [[Passage(d["document"]["id"], d["document"]["contents"], d["score"]) for d in r] for r in result[::97]] == (
        expected
    )
    remote = RemoteRetriever(server.url)  # the client sends 1,024 queries a request at most
    server.recorder.batches.clear()
    assert remote.batch_search(queries, 3)[::97] == expected
    assert sum(server.recorder.batches) == 2_560 and max(server.recorder.batches) <= 512
    remote.close()


def test_search_r1_rendering_matches_search_r1_on_the_wire(server) -> None:
    with httpx.Client() as client:
        reply = client.post(
            f"{server.url}/retrieve", json={"queries": ["capital city", "zzqx"], "topk": 3, "return_scores": True}
        ).json()["result"]
    remote = RemoteRetriever(server.url)
    for query, results in zip(["capital city", "zzqx"], reply, strict=True):
        assert format_information(remote.search(query, 3), "search-r1") == _search_r1_block(results)
    assert _search_r1_block(reply[1]) == "<information></information>"  # nothing matched: an empty block
    remote.close()


def test_search_r1_format_keeps_line_breaks_and_shows_an_empty_block() -> None:
    passages = [
        Passage("1", '"Ada Lovelace"\nAda was a mathematician.\n\nShe wrote notes.', 9.0),
        Passage("2", "Analytical Engine", 5.0),  # a title and no text
        Passage("3", "Notes\n  indented line\ttab ", 1.0),
    ]
    expected = (
        '<information>Doc 1(Title: "Ada Lovelace") Ada was a mathematician.\n\nShe wrote notes.\n'
        "Doc 2(Title: Analytical Engine) \n"
        "Doc 3(Title: Notes)   indented line\ttab</information>"
    )
    assert format_information(passages, "search-r1") == expected
    assert format_information([], "search-r1") == "<information></information>"
    compact = format_information(passages)  # the default: one folded line per passage
    assert (
        compact.splitlines()[0] == '<information>Doc 1(Title: "Ada Lovelace") Ada was a mathematician. She wrote notes.'
    )
    assert format_information([]) == "<information>No document matches this query.</information>"
    with pytest.raises(ValueError, match="passage_format must be one of"):
        format_information(passages, "html")


def test_env_option_shows_passages_as_search_r1_does(cache_dir: Path) -> None:
    passages = [Passage("7", "Keldor Press\nA publishing house.\nFounded in 1902.", 3.0)]
    env = DeepSearchEnv(num_docs=NUM_DOCS, cache_dir=cache_dir, retriever=FixedRetriever(passages),
                        passage_format="search-r1")  # fmt: skip
    env.reset(options={"split": "test", "task_id": 0})
    observation = env.step("<search> Keldor Press </search>")[0]
    assert observation == "<information>Doc 1(Title: Keldor Press) A publishing house.\nFounded in 1902.</information>"
    assert env.step("<search> nothing </search>")[0] == "<information></information>"
    default = DeepSearchEnv(num_docs=NUM_DOCS, cache_dir=cache_dir, retriever=FixedRetriever(passages))
    default.reset(options={"split": "test", "task_id": 0})
    assert default.step("<search> Keldor Press </search>")[0] == (
        "<information>Doc 1(Title: Keldor Press) A publishing house. Founded in 1902.</information>"
    )
    with pytest.raises(ValueError, match="passage_format"):
        DeepSearchEnv(passage_format="raw")
    env.close()
    default.close()
