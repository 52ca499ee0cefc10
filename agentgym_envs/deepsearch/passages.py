"""The retriever interface that BM25, dense and remote retrieval implement, and the Search-R1 passage format.

A retriever answers a batch of queries with the top `k` passages of each. Passages travel as
Search-R1's retrieval server sends them, `{"document": {"id", "contents"}, "score"}`, and are shown to
the agent as Search-R1 shows them, `Doc 1(Title: <first line>) <rest>`, in one of two forms
(`PASSAGE_FORMATS`):

- `"compact"` (the default): each passage on one line, its whitespace folded and its text cut at
  `MAX_PASSAGE_CHARS`, and "No document matches this query." when nothing matches. Observations stay
  short and bounded whatever the corpus holds.
- `"search-r1"`: exactly Search-R1's text (and AgentGym's SearchQA server's): every passage's lines
  as the corpus has them, each passage ending in a line break, the whole stripped, and an empty
  `<information></information>` when nothing matches, so that a model trained with Search-R1 sees
  what it saw in training. (Search-R1 also puts a blank line before and after the block, where it
  joins the observation to the model's reply; the chat template does that joining here.)
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


#: How `format_information` renders passages (see the module doc).
PASSAGE_FORMATS = ("compact", "search-r1")


def search_r1_passages(passages: list[Passage]) -> str:
    """Passages as Search-R1's `_passages2string` writes them: `Doc i(Title: <first line>) <other lines>\n` each."""
    return "".join(f"Doc {rank}(Title: {p.title}) {p.text}\n" for rank, p in enumerate(passages, 1))


def format_information(passages: list[Passage], passage_format: str = "compact") -> str:
    """Passages as the `<information>` block of Search-R1, in one of `PASSAGE_FORMATS`."""
    if passage_format == "search-r1":
        return f"<information>{search_r1_passages(passages).strip()}</information>"
    if passage_format != "compact":
        raise ValueError(f"passage_format must be one of {list(PASSAGE_FORMATS)}, got {passage_format!r:.40}")
    if not passages:
        return "<information>No document matches this query.</information>"
    lines = []
    for rank, passage in enumerate(passages, 1):
        text = " ".join(passage.text.split())
        if len(text) > MAX_PASSAGE_CHARS:
            text = text[: MAX_PASSAGE_CHARS - 3] + "..."
        lines.append(f"Doc {rank}(Title: {passage.title[:200]}) {text}")
    return "<information>" + "\n".join(lines) + "</information>"
