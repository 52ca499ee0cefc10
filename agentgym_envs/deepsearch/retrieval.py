"""The retriever interface shared by BM25, dense and remote retrieval, and the Search-R1 passage format.

A retriever answers a batch of queries with the top `k` passages of each. Passages travel as
Search-R1's retrieval server sends them, `{"document": {"id", "contents"}, "score"}`, and are shown to
the agent as Search-R1 shows them: `Doc 1(Title: <first line>) <rest>`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

#: Longest passage text shown to the agent (keeps observations bounded for any corpus).
MAX_PASSAGE_CHARS = 2_000


@dataclass(frozen=True)
class Passage:
    """One retrieved document: its id, its contents (title on the first line) and its score."""

    id: str
    contents: str
    score: float

    @property
    def title(self) -> str:
        return self.contents.split("\n", 1)[0]

    @property
    def text(self) -> str:
        parts = self.contents.split("\n", 1)
        return parts[1] if len(parts) > 1 else ""

    def to_json(self, with_score: bool = True) -> dict[str, Any]:
        """The Search-R1 server form: `{"document": {...}, "score": s}`, or the bare document."""
        document = {"id": self.id, "contents": self.contents}
        return {"document": document, "score": self.score} if with_score else document


class Retriever(ABC):
    """Top-k passage search over one corpus. Implementations are safe to call from several threads."""

    @abstractmethod
    def batch_search(self, queries: list[str], k: int) -> list[list[Passage]]:
        """The best `k` passages for each query, best first (fewer when fewer documents match)."""

    def search(self, query: str, k: int) -> list[Passage]:
        return self.batch_search([query], k)[0]

    def __len__(self) -> int:
        """Number of documents searched (0 when unknown, e.g. remote)."""
        return 0

    def close(self) -> None:  # noqa: B027 (most retrievers hold nothing to free)
        """Free what this retriever holds; shared in-process indexes stay open for other envs."""


def format_information(passages: list[Passage]) -> str:
    """Passages as the `<information>` block of Search-R1."""
    if not passages:
        return "<information>No document matches this query.</information>"
    lines = []
    for rank, passage in enumerate(passages, 1):
        text = " ".join(passage.text.split())
        if len(text) > MAX_PASSAGE_CHARS:
            text = text[: MAX_PASSAGE_CHARS - 3] + "..."
        lines.append(f"Doc {rank}(Title: {passage.title[:200]}) {text}")
    return "<information>" + "\n".join(lines) + "</information>"


def open_local_retriever(
    kind: str = "bm25",
    corpus: str = "synthetic",
    num_docs: int = 20_000,
    seed: int = 0,
    dense_model: str | None = None,
    query_prefix: str = "",
    passage_prefix: str = "",
    cache_dir: str | None = None,
) -> Retriever:
    """The shared in-process retriever `kind` ("bm25" or "dense") over a corpus.

    Args:
        kind: "bm25" (the default, built into the cache on first use) or "dense" (needs `dense_model`).
        corpus: "synthetic" for the generated encyclopedia, or the path of a wiki-18 style JSONL corpus.
        num_docs: Size of the synthetic corpus.
        seed: Seed of the synthetic corpus.
        dense_model: A local sentence-transformers model directory (dense only).
        query_prefix: Text put before each query (dense; e5 models want "query: ").
        passage_prefix: Text put before each passage when embedding (dense; e5 models want "passage: ").
        cache_dir: Cache directory (see `agentgym_envs.deepsearch.data.cache_root`).
    """
    from agentgym_envs.deepsearch.data import load_synthetic, open_corpus

    if kind not in ("bm25", "dense"):
        raise ValueError(f"unknown retriever {kind!r}; choose 'bm25', 'dense' or 'remote' (with a URL)")
    if kind == "dense" and not dense_model:
        raise ValueError("the dense retriever needs dense_model=<a local sentence-transformers model directory>")
    store = load_synthetic(num_docs, seed, cache_dir)[0] if corpus == "synthetic" else open_corpus(corpus, cache_dir)
    if kind == "bm25":
        from agentgym_envs.deepsearch.bm25 import BM25Retriever

        return BM25Retriever.open(store)
    from agentgym_envs.deepsearch.dense import DenseRetriever

    return DenseRetriever.open(store, dense_model, query_prefix=query_prefix, passage_prefix=passage_prefix)
