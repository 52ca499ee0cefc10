"""Property-based tests (Hypothesis) of the retrieval server's routes (Search-R1's `/retrieve`), within a
fixed, derandomised budget: any body, every field with a value of any type, and hostile queries of
the right type are answered with a proper status and JSON, never a 500, and `/health` after.

The server runs in this process on a loopback port over a small BM25 corpus.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentgym_envs.deepsearch.retrieval import open_local_retriever
from agentgym_envs.deepsearch.server import MAX_QUERY_CHARS, RetrievalServerThread
from agentgym_envs.remote import wire

NUM_DOCS = 300
BUDGET = settings(
    max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck)
)

any_text = st.text(st.characters(codec=None, exclude_categories=()), max_size=30)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | any_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    cache_dir: Path = tmp_path_factory.mktemp("retrieval-cache")
    retriever = open_local_retriever("bm25", num_docs=NUM_DOCS, cache_dir=str(cache_dir))
    with RetrievalServerThread(retriever) as running, httpx.Client(base_url=running.url, timeout=60) as client:
        yield client


def _check(reply: httpx.Response, what: str) -> None:
    assert reply.status_code < 500, f"{what}: {reply.status_code} {reply.text[:300]}"
    assert reply.headers.get("content-type", "").startswith("application/json"), f"{what}: {reply.headers}"
    payload = reply.json()
    if reply.status_code == 200:
        assert isinstance(payload["result"], list), what
    else:
        assert "detail" in payload, what


def _post(client: httpx.Client, body: bytes) -> httpx.Response:
    return client.post("/retrieve", content=body, headers={"content-type": "application/json"})


@BUDGET
@given(
    body=st.one_of(
        st.binary(max_size=100),
        json_values.map(wire.dumps),
        st.dictionaries(st.sampled_from(["queries", "topk", "return_scores"]), json_values, max_size=3).map(wire.dumps),
        st.integers(0, 100_000).map(lambda depth: b'{"queries": ' + b"[" * depth + b"]" * depth + b"}"),
    )
)
def test_any_body_is_answered_never_500(server: httpx.Client, body: bytes) -> None:
    _check(_post(server, body), f"POST /retrieve {body[:200]!r}")


@BUDGET
@given(
    queries=st.lists(any_text | st.sampled_from(["capital", "x" * MAX_QUERY_CHARS, "\ud800", "\x00", ""]), max_size=5),
    topk=st.none() | st.integers(-3, 200) | st.sampled_from([float("inf"), float("nan"), 1.5, 2**70, "3", True]),
    scores=st.sampled_from([True, False, None, "yes", 1]),
)
def test_hostile_queries_and_values_are_answered_never_500(server: httpx.Client, queries, topk, scores) -> None:
    body = {"queries": queries, "topk": topk, "return_scores": scores}
    reply = _post(server, wire.dumps(body))
    _check(reply, f"POST /retrieve {body!r:.300}")
    if reply.status_code == 200:
        assert len(reply.json()["result"]) == len(queries)


def test_the_server_answers_health_after_the_properties(server: httpx.Client) -> None:
    assert server.get("/health").json() == {"status": "ok", "documents": NUM_DOCS}
    reply = _post(server, b'{"queries": ["\\ud800 capital"], "topk": 1e999}')  # found by the properties: 500s
    assert reply.status_code == 422 and json.loads(reply.content)["detail"], reply.text
