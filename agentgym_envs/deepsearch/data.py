"""Deep Search data: the on-disk cache, the memory-mapped document store, the synthetic encyclopedia
materialised once per (size, seed), and loaders for the files a user brings.

User files (nothing is downloaded):
- a corpus in the wiki-18 JSONL form of Search-R1 / FlashRAG: one `{"id": ..., "contents": ...}` object
  per line, the title on the first line of `contents` (`{"title", "text"}` rows are accepted too);
- QA files in the FlashRAG / Search-R1 form, JSONL or Parquet, one question per row with
  `question`, `golden_answers` (or Search-R1's `reward_model.ground_truth.target`) and `data_source`.

Everything derived (corpus row offsets, indexes, embeddings) goes under the cache directory: the
`cache_dir` argument, else `$AGENTGYM_DEEPSEARCH_CACHE`, else `$AGENTGYM_CACHE_DIR/deepsearch`, else
`~/.cache/agentgym/deepsearch`. Each artifact is a cache entry (see `agentgym_envs.deepsearch.cache`):
built once, published atomically with a manifest of sizes and checksums, checked when opened and
rebuilt when damaged.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from agentgym_envs.deepsearch import synthetic
from agentgym_envs.deepsearch.cache import build_once, forget_verified
from agentgym_envs.deepsearch.synthetic import Question

T = TypeVar("T")
_CORPUS_FORMAT = (
    'a JSONL corpus with one {"id": ..., "contents": "Title\\ntext ..."} object per line '
    "(the wiki-18 form of Search-R1 and FlashRAG)"
)
_QA_FORMAT = (
    "a QA file in the FlashRAG / Search-R1 form: JSONL or Parquet rows with 'question', "
    "'golden_answers' (a list of strings) and 'data_source'"
)


# ---- cache --------------------------------------------------------------------------------------------
def cache_root(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The directory Deep Search caches corpora, indexes and embeddings in (see the module doc)."""
    if cache_dir is not None:
        return Path(cache_dir).expanduser()
    if os.environ.get("AGENTGYM_DEEPSEARCH_CACHE"):
        return Path(os.environ["AGENTGYM_DEEPSEARCH_CACHE"]).expanduser()
    if os.environ.get("AGENTGYM_CACHE_DIR"):
        return Path(os.environ["AGENTGYM_CACHE_DIR"]).expanduser() / "deepsearch"
    return Path.home() / ".cache" / "agentgym" / "deepsearch"


_SHARED: dict[tuple, Any] = {}
_SHARED_LOCK = threading.Lock()


def shared(key: tuple, factory: Callable[[], T]) -> T:
    """One object per `key` in this process (corpora, indexes), created on first use."""
    with _SHARED_LOCK:
        if key not in _SHARED:
            _SHARED[key] = factory()
        return _SHARED[key]


def clear_shared() -> None:
    """Forget every shared corpus and index of this process: later uses reopen them from the cache and
    checksum them again, as a fresh process does. Envs that hold one keep it; its memory maps close
    when the last reference goes."""
    with _SHARED_LOCK:
        _SHARED.clear()
    forget_verified()


# ---- documents ------------------------------------------------------------------------------------------
def contents_of(row: Any, where: str) -> str:
    """The `contents` of a corpus row (title on its first line); `{"title", "text"}` rows are joined."""
    if isinstance(row, dict):
        if isinstance(row.get("contents"), str):
            return row["contents"]
        if isinstance(row.get("title"), str) and isinstance(row.get("text"), str):
            return f"{row['title']}\n{row['text']}"
    raise ValueError(f"{where}: expected {_CORPUS_FORMAT}, got {str(row)[:120]!r}")


class DocStore:
    """The documents of a JSONL corpus, read on demand from a memory map.

    `rows[i]` holds the byte span of document `i` (blank lines are skipped). `cache_dir` is where
    indexes of this corpus are kept; `key` names its content for cache keys.
    """

    def __init__(self, path: Path, rows: np.ndarray, cache_dir: Path, key: str):
        self.path, self.rows, self.cache_dir, self.key = path, rows, cache_dir, key
        self._file = open(path, "rb")  # noqa: SIM115 (kept open for the memory map)
        self._map = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if rows.size else None

    def __len__(self) -> int:
        return len(self.rows)

    def raw(self, index: int) -> Any:
        """Line `index`, parsed as JSON."""
        start, end = self.rows[index]
        try:
            return json.loads(self._map[start:end])  # type: ignore[index]
        except json.JSONDecodeError as error:
            where = f"{self.path}, document {index}"
            raise ValueError(f"{where}: not valid JSON ({error.msg}); expected {_CORPUS_FORMAT}") from None

    def __getitem__(self, index: int) -> dict[str, str]:
        """Document `index` as `{"id", "contents"}`."""
        row = self.raw(index)
        return {"id": str(row.get("id", index)), "contents": contents_of(row, f"{self.path}, document {index}")}

    def iter_contents(self) -> Iterator[str]:
        """The contents of every document, in order (for building indexes)."""
        for index in range(len(self)):
            yield self[index]["contents"]

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        self._file.close()


def _line_spans(path: Path, chunk: int = 1 << 26) -> np.ndarray:
    """(start, end) byte offsets of the non-blank lines of `path`, scanned in chunks."""
    size = path.stat().st_size
    if size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    data = np.memmap(path, dtype=np.uint8, mode="r")
    newlines = [np.flatnonzero(data[i : i + chunk] == 10) + i for i in range(0, size, chunk)]
    ends = np.concatenate([*newlines, np.array([size], dtype=np.int64)]).astype(np.int64)
    starts = np.concatenate([[0], ends[:-1] + 1]).astype(np.int64)
    spans = np.stack([starts, ends], axis=1)
    lengths = ends - starts
    keep = lengths > 0
    for i in np.flatnonzero(keep & (lengths <= 16)):  # short lines may be blank ("\r", spaces)
        keep[i] = bytes(data[starts[i] : ends[i]]).strip() != b""
    del data
    return spans[keep]


def open_corpus(path: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None) -> DocStore:
    """The user corpus at `path` (wiki-18 JSONL), shared in this process; row offsets cached on disk."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"Deep Search corpus {path} not found: provide {_CORPUS_FORMAT}")
    stat = path.stat()
    key = hashlib.sha256(f"{path}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    directory = cache_root(cache_dir) / f"corpus-{path.stem[:40]}-{key}"

    def build(tmp: Path) -> None:
        np.save(tmp / "rows.npy", _line_spans(path))

    def load() -> DocStore:
        build_once(directory, build)
        store = DocStore(path, np.load(directory / "rows.npy", mmap_mode="r"), directory, f"corpus-{key}")
        if len(store) == 0:
            raise ValueError(f"Deep Search corpus {path} is empty: provide {_CORPUS_FORMAT}")
        return store

    return shared(("corpus", str(directory)), load)


# ---- the synthetic encyclopedia -------------------------------------------------------------------------
class QuestionSplit(Sequence[Question]):
    """The questions of one synthetic split, read from their memory-mapped JSONL file on first access.

    Question `i` of split `s` has the id `f"{s}/{i:05d}"`, so listing tasks reads nothing.
    """

    def __init__(self, split: str, lines: DocStore):
        self.split, self._lines = split, lines
        self._made: list[Question | None] = [None] * len(lines)

    def __len__(self) -> int:
        return len(self._made)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        question = self._made[index]
        if question is None:
            question = self._made[index] = Question.from_json(self._lines.raw(index))
        return question

    def ids(self) -> list[str]:
        return [f"{self.split}/{i:05d}" for i in range(len(self))]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and list(self) == list(other)


def _write_jsonl(stem: Path, rows: list[dict[str, Any]]) -> None:
    """`stem.jsonl` with one row per line, and the byte span of each line in `stem.rows.npy`."""
    spans, offset = [], 0
    with open(stem.with_name(stem.name + ".jsonl"), "wb") as out:
        for row in rows:
            line = json.dumps(row, ensure_ascii=False).encode() + b"\n"
            out.write(line)
            spans.append((offset, offset + len(line) - 1))
            offset += len(line)
    np.save(stem.with_name(stem.name + ".rows.npy"), np.array(spans, dtype=np.int64).reshape(-1, 2))


def synthetic_dir(num_docs: int, seed: int, cache_dir: str | os.PathLike[str] | None = None) -> Path:
    return cache_root(cache_dir) / f"synthetic-v{synthetic.GENERATOR_VERSION}-docs{num_docs}-seed{seed}"


def load_synthetic(
    num_docs: int = synthetic.BLOCK_DOCS, seed: int = 0, cache_dir: str | os.PathLike[str] | None = None
) -> tuple[DocStore, dict[str, QuestionSplit]]:
    """The synthetic corpus and its question splits: generated once, cached on disk, shared in-process."""
    directory = synthetic_dir(num_docs, seed, cache_dir)

    def build(tmp: Path) -> None:
        data = synthetic.generate(num_docs=num_docs, seed=seed)
        _write_jsonl(tmp / "corpus", data.documents)
        for split, questions in data.questions.items():
            _write_jsonl(tmp / f"questions-{split}", [q.to_json() for q in questions])

    def lines(name: str) -> DocStore:
        return DocStore(
            directory / f"{name}.jsonl", np.load(directory / f"{name}.rows.npy", mmap_mode="r"), directory, name
        )

    def load() -> tuple[DocStore, dict[str, QuestionSplit]]:
        build_once(directory, build)
        store = lines("corpus")
        store.key = directory.name
        return store, {split: QuestionSplit(split, lines(f"questions-{split}")) for split in ("train", "test")}

    return shared(("synthetic", str(directory)), load)


# ---- user QA files --------------------------------------------------------------------------------------
def _read_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix.lower() == ".parquet":
        try:
            import pyarrow.parquet as pq
        except ImportError as error:
            raise ImportError(f"reading {path} needs pyarrow: pip install pyarrow (or give a JSONL file)") from error
        return pq.read_table(path).to_pylist()
    if path.suffix.lower() == ".json":
        rows = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(rows, list):
            raise ValueError(f"{path}: a .json QA file must hold a list of rows; expected {_QA_FORMAT}")
        return rows
    rows = []
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as error:
                    where = f"{path}, line {number}"
                    raise ValueError(f"{where}: not valid JSON ({error.msg}); expected {_QA_FORMAT}") from None
    return rows


def _golden_of(row: dict[str, Any]) -> Any:
    if row.get("golden_answers") is not None:
        return row["golden_answers"]
    return ((row.get("reward_model") or {}).get("ground_truth") or {}).get("target")


def load_qa(path: str | os.PathLike[str], split: str = "test", data_source: str | None = None) -> list[Question]:
    """The questions of a FlashRAG / Search-R1 QA file (JSONL, JSON list or Parquet).

    Args:
        path: The file.
        split: Used in the task ids (`"<split>/<row>"`).
        data_source: The category of rows without a `data_source` (default: the file's stem).
    """
    path = Path(path).expanduser()
    if not path.is_file():
        raise FileNotFoundError(f"Deep Search QA file {path} not found: provide {_QA_FORMAT}")
    questions = []
    for number, row in enumerate(_read_rows(path)):
        where = f"{path}, row {number}"
        if not isinstance(row, dict) or not isinstance(row.get("question"), str) or not row["question"].strip():
            raise ValueError(f"{where}: missing a non-empty 'question'; expected {_QA_FORMAT}")
        golden = _golden_of(row)
        if isinstance(golden, str):
            golden = [golden]
        if hasattr(golden, "tolist"):  # numpy arrays from Parquet readers
            golden = golden.tolist()
        if not isinstance(golden, list) or not golden or not all(isinstance(g, str) for g in golden):
            raise ValueError(f"{where}: 'golden_answers' must be a non-empty list of strings; expected {_QA_FORMAT}")
        category = str(row.get("data_source") or data_source or path.stem)
        questions.append(Question(f"{split}/{number:05d}", row["question"].strip(), tuple(golden), category))
    if not questions:
        raise ValueError(f"{path} holds no questions; expected {_QA_FORMAT}")
    return questions
