"""BM25 retrieval on `bm25s`: the index is built once per corpus, saved in bm25s's format in the cache,
and loaded memory-mapped; one loaded index serves every env of the process.

bm25s precomputes every (term, document) BM25 score into a sparse CSC matrix. Its numpy `retrieve`
adds postings with `np.add.at` into a dense score vector and selects from all documents; here the
postings of the query terms are summed with `np.bincount` and the top k is selected among the
matching documents only, which answers a query on 100k documents in a fraction of a millisecond
without numba. Scores are bm25s's own (same formula, parameters and index).
"""

from __future__ import annotations

import re
from pathlib import Path

import bm25s
import numpy as np
from bm25s.stopwords import STOPWORDS_EN

from agentgym_envs.deepsearch.cache import build_once
from agentgym_envs.deepsearch.data import DocStore, shared
from agentgym_envs.deepsearch.passages import Passage, Retriever

#: Bump when tokenisation or index parameters change: cached indexes are keyed by it.
BM25_VERSION = 1
# bm25s's default token pattern and English stop words.
_TOKEN = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = frozenset(STOPWORDS_EN)


def tokenize(text: str) -> list[str]:
    """Lower-cased words of two or more characters, without English stop words."""
    return [token for token in _TOKEN.findall(text.lower()) if token not in _STOPWORDS]


def build_index(store: DocStore, directory: Path) -> None:
    """Tokenise every document of `store` and save a bm25s index (Lucene BM25, k1=1.5, b=0.75) in `directory`."""
    vocab: dict[str, int] = {}
    corpus_ids = [[vocab.setdefault(token, len(vocab)) for token in tokenize(text)] for text in store.iter_contents()]
    if not vocab:
        raise ValueError(f"the corpus {store.path} has no searchable words")
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    model.index((corpus_ids, vocab), show_progress=False)
    model.save(directory, show_progress=False)


class BM25Retriever(Retriever):
    """BM25 over a `DocStore`, from an index directory written by `build_index`.

    Use `BM25Retriever.open(store)`: it builds the index on first use and shares the loaded one.
    """

    def __init__(self, store: DocStore, index_dir: Path):
        model = bm25s.BM25.load(index_dir, mmap=True, show_progress=False)
        self.store = store
        self.index_dir = index_dir
        self._data = model.scores["data"]
        self._indices = model.scores["indices"]
        self._indptr = model.scores["indptr"]
        self._vocab: dict[str, int] = model.vocab_dict
        self._num_docs = int(model.scores["num_docs"])
        if self._num_docs != len(store):
            raise ValueError(f"BM25 index {index_dir} has {self._num_docs} documents, the corpus {len(store)}")

    @classmethod
    def open(cls, store: DocStore) -> BM25Retriever:
        """The shared BM25 retriever of `store`, building its index in the cache on first use."""
        directory = store.cache_dir / f"bm25-v{BM25_VERSION}"
        return shared(
            ("bm25", str(directory)), lambda: cls(store, build_once(directory, lambda tmp: build_index(store, tmp)))
        )

    def __len__(self) -> int:
        return self._num_docs

    def top_k(self, query: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Document rows and scores of the best `k` documents for `query` (ties: lower row first)."""
        terms = [self._vocab[token] for token in tokenize(query) if token in self._vocab]
        if not terms or k < 1:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        spans = [(self._indptr[t], self._indptr[t + 1]) for t in terms]
        docs = np.concatenate([self._indices[s:e] for s, e in spans])
        if docs.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        weights = np.concatenate([self._data[s:e] for s, e in spans])
        scores = np.bincount(docs, weights=weights, minlength=self._num_docs)
        # A document occurs at most once per term, so the k*len(terms) best postings hold the top k documents.
        keep = min(docs.size, k * len(terms))
        candidates = docs if keep == docs.size else docs[np.argpartition(-scores[docs], keep - 1)[:keep]]
        candidates = np.unique(candidates)
        best = candidates[np.lexsort((candidates, -scores[candidates]))[:k]]
        return best.astype(np.int64), scores[best]

    def batch_search(self, queries: list[str], k: int) -> list[list[Passage]]:
        results = []
        for query in queries:
            rows, scores = self.top_k(query, k)
            passages = []
            for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
                document = self.store[row]
                passages.append(Passage(document["id"], document["contents"], float(score)))
            results.append(passages)
        return results
