"""A retriever that asks a server speaking Search-R1's retrieval protocol.

    POST <url>/retrieve  {"queries": [...], "topk": k, "return_scores": true}
    ->  {"result": [[{"document": {"id": ..., "contents": ...}, "score": ...}, ...], ...]}

Search-R1's own `retrieval_server.py` (e5 + faiss over wiki-18) and `agentgym retrieval-server` both
answer it, so many envs and processes can share one index. No queries need no request; many are
sent `MAX_QUERIES_PER_REQUEST` at a time.
"""

from __future__ import annotations

import hashlib
from typing import Any

from agentgym_envs.deepsearch.data import contents_of
from agentgym_envs.deepsearch.passages import Passage, Retriever

#: Queries per request: what any Search-R1 server answers in one go (ours takes far more).
MAX_QUERIES_PER_REQUEST = 1024


class RemoteRetriever(Retriever):
    """Search through a Search-R1 retrieval server at `url` (`http://host:port` or its `/retrieve` URL)."""

    def __init__(self, url: str, timeout: float = 30.0):
        try:
            import httpx
        except ImportError as error:
            raise ImportError("the remote retriever needs httpx: pip install 'agentgym-rl[server]'") from error
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"retriever_url must be an http(s) URL such as http://127.0.0.1:8000, got {url!r}")
        self.url = url if url.rstrip("/").endswith("/retrieve") else url.rstrip("/") + "/retrieve"
        self._client = httpx.Client(timeout=timeout)
        self._httpx = httpx

    def batch_search(self, queries: list[str], k: int) -> list[list[Passage]]:
        hits: list[list[Passage]] = []
        for start in range(0, len(queries), MAX_QUERIES_PER_REQUEST):
            hits.extend(self._request(queries[start : start + MAX_QUERIES_PER_REQUEST], k))
        return hits

    def _request(self, queries: list[str], k: int) -> list[list[Passage]]:
        # Lone surrogates (legal in a Python str, not in UTF-8) become "?": every query can be sent.
        sendable = [query.encode("utf-8", "replace").decode("utf-8") for query in queries]
        payload = {"queries": sendable, "topk": int(k), "return_scores": True}
        try:
            response = self._client.post(self.url, json=payload)
        except self._httpx.HTTPError as error:
            raise ConnectionError(f"retrieval server {self.url} did not answer: {error}") from error
        if response.status_code != 200:
            status, text = response.status_code, response.text[:300]
            raise RuntimeError(f"retrieval server {self.url} answered HTTP {status}: {text}")
        result = response.json().get("result")
        if not isinstance(result, list) or len(result) != len(queries):
            raise RuntimeError(f"retrieval server {self.url} sent no 'result' list with one entry per query")
        return [[self._passage(item) for item in hits[:k]] for hits in result]

    def _passage(self, item: Any) -> Passage:
        # With return_scores the server sends {"document", "score"}; without, the bare document.
        document = item.get("document", item) if isinstance(item, dict) else item
        contents = contents_of(document, f"retrieval server {self.url}")
        score = item.get("score", 0.0) if isinstance(item, dict) else 0.0
        return Passage(document_id(document, contents), contents, float(score))

    def close(self) -> None:
        self._client.close()


def document_id(document: dict[str, Any], contents: str) -> str:
    """The document's `id`; a server whose corpus rows carry none (`{"title", "text", "contents"}`, as
    some Search-R1-style servers send) gets a stable id from its contents, so equal documents share one
    id and different ones differ."""
    given = document.get("id")
    if given is not None and str(given) != "":
        return str(given)
    return "sha1:" + hashlib.sha1(contents.encode("utf-8", "replace")).hexdigest()[:16]
