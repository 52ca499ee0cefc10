"""Retrieval for Deep Search: `open_local_retriever` opens the shared in-process BM25 or dense retriever.

The interface every retriever implements (`Retriever`, `Passage`) and the way passages are shown
(`format_information`, `PASSAGE_FORMATS`) live in `agentgym_envs.deepsearch.passages` and are named here
too; the implementations (`bm25`, `dense`, `remote`) import only that module, so the imports run one
way: retrieval -> bm25 / dense -> passages.
"""

from __future__ import annotations

from agentgym_envs.deepsearch.passages import (
    MAX_PASSAGE_CHARS,
    PASSAGE_FORMATS,
    Passage,
    Retriever,
    format_information,
    search_r1_passages,
)

__all__ = [
    "MAX_PASSAGE_CHARS",
    "PASSAGE_FORMATS",
    "Passage",
    "Retriever",
    "format_information",
    "open_local_retriever",
    "search_r1_passages",
]


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
