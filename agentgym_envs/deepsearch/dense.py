"""Dense retrieval: sentence-transformers embeddings with exact inner-product search.

Only a model the user already has on disk is used (a sentence-transformers directory); nothing is
downloaded. Document embeddings are computed once per (corpus, model), L2-normalised, saved in the
cache as float32 `.npy`, and memory-mapped; a query is one matrix-vector product and a top-k
selection (exact search, no approximate index). For e5-style models pass the prefixes
(`query_prefix="query: "`, `passage_prefix="passage: "`).
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

from agentgym_envs.deepsearch.cache import build_once
from agentgym_envs.deepsearch.data import DocStore, shared
from agentgym_envs.deepsearch.passages import Passage, Retriever


def load_model(model_path: str | os.PathLike[str], device: str | None = None) -> Any:
    """A local sentence-transformers model, loaded without touching the network."""
    path = Path(model_path).expanduser()
    if not (path / "modules.json").is_file() and not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"dense retrieval needs a local sentence-transformers model directory (with modules.json or "
            f"config.json); {path} is not one. Nothing is downloaded: save a model there first."
        )
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as error:
        raise ImportError("dense retrieval needs sentence-transformers: pip install 'agentgym-rl[dense]'") from error
    from transformers.utils import logging as hf_logging

    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # no "Loading weights" bar in the user's terminal
    try:
        return SentenceTransformer(str(path), device=device or "cpu", local_files_only=True)
    finally:
        if shown:
            hf_logging.enable_progress_bar()


class DenseRetriever(Retriever):
    """Exact inner-product search over normalised sentence-transformers embeddings of a `DocStore`.

    Use `DenseRetriever.open(store, model_path)`: it embeds the corpus on first use and shares the result.
    """

    def __init__(self, store: DocStore, model: Any, embeddings: np.ndarray, query_prefix: str = ""):
        if embeddings.shape[0] != len(store):
            raise ValueError(f"{embeddings.shape[0]} embeddings for a corpus of {len(store)} documents")
        self.store, self.model, self.embeddings, self.query_prefix = store, model, embeddings, query_prefix
        self._lock = threading.Lock()  # one encode at a time: torch models are not re-entrant on CPU threads

    @classmethod
    def open(
        cls,
        store: DocStore,
        model_path: str | os.PathLike[str],
        query_prefix: str = "",
        passage_prefix: str = "",
        batch_size: int = 128,
        device: str | None = None,
    ) -> DenseRetriever:
        """The shared dense retriever of (`store`, model), embedding the corpus into the cache on first use."""
        resolved = Path(model_path).expanduser().resolve()
        key = hashlib.sha256(f"{resolved}|{passage_prefix}".encode()).hexdigest()[:16]
        directory = store.cache_dir / f"dense-{resolved.name[:40]}-{key}"

        def create() -> DenseRetriever:
            model = load_model(resolved, device)

            def build(tmp: Path) -> None:
                texts = [passage_prefix + " ".join(text.split()) for text in store.iter_contents()]
                vectors = model.encode(
                    texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False
                ).astype(np.float32)
                np.save(tmp / "embeddings.npy", vectors)

            build_once(directory, build)
            return cls(store, model, np.load(directory / "embeddings.npy", mmap_mode="r"), query_prefix)

        return shared(("dense", str(directory), query_prefix), create)

    def __len__(self) -> int:
        return len(self.store)

    def batch_search(self, queries: list[str], k: int) -> list[list[Passage]]:
        with self._lock:
            vectors = self.model.encode(
                [self.query_prefix + q for q in queries], normalize_embeddings=True, show_progress_bar=False
            ).astype(np.float32)
        results = []
        for scores in vectors @ self.embeddings.T:
            k_eff = min(k, len(scores))
            if k_eff < 1:
                results.append([])
                continue
            best = np.argpartition(-scores, k_eff - 1)[:k_eff] if k_eff < len(scores) else np.arange(len(scores))
            best = best[np.lexsort((best, -scores[best]))]
            passages = []
            for row in best.tolist():
                document = self.store[row]
                passages.append(Passage(document["id"], document["contents"], float(scores[row])))
            results.append(passages)
        return results
