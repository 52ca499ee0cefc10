"""Deep Search (Search-R1 style): answer a question by calling a search engine, then give a short answer."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from agentgym_envs.clientargs import IntRange, OneOf, check_int
from agentgym_envs.core import TextEnv
from agentgym_envs.deepsearch import data as D
from agentgym_envs.deepsearch import tools as deepsearch_tools
from agentgym_envs.deepsearch.passages import PASSAGE_FORMATS, Retriever, format_information
from agentgym_envs.deepsearch.retrieval import open_local_retriever
from agentgym_envs.deepsearch.scoring import score_answer
from agentgym_envs.deepsearch.synthetic import BLOCK_DOCS, Question

# The tags, in any ASCII letter case (the long s or the Kelvin sign spell no tag).
_OPENING = {kind: re.compile(f"<{kind}>", re.IGNORECASE | re.ASCII) for kind in ("search", "answer")}
_CLOSING = {kind: re.compile(f"</{kind}>", re.IGNORECASE | re.ASCII) for kind in ("search", "answer")}
_NO_ACTION = (
    "Invalid action: your reply holds no complete <search> ... </search> or <answer> ... </answer>. "
    "To search, put a query between <search> and </search>; to give your final answer, put it between "
    "<answer> and </answer>."
)
_RETRY = "Sorry, your answer is incorrect. Please try again."


def first_element(reply: str) -> tuple[str, str] | None:
    """The kind ("search" or "answer") and raw body of the first complete element of `reply`, or None.

    The first complete element is the one whose opening tag comes first among those closed later by
    a tag of the same kind; its body ends at the first such closing tag (as in Search-R1 and the
    `tags` parser of agentgym_wrappers). Only the first opening tag of a kind can start it, so four
    searches decide: linear in the length of `reply`.
    """
    best: tuple[int, str, str] | None = None
    for kind, opening_tag in _OPENING.items():
        opening = opening_tag.search(reply)
        if opening is None or (best is not None and opening.start() > best[0]):
            continue
        closing = _CLOSING[kind].search(reply, opening.end())
        if closing is not None:
            best = (opening.start(), kind, reply[opening.end() : closing.start()])
    return None if best is None else (best[1], best[2])


def parse_reply(reply: str, max_query_chars: int) -> tuple[str, str] | str:
    """("search" | "answer", text) for the first complete element of `reply`, or why it is invalid.

    Linear in the length of `reply`, whatever it holds.
    """
    element = first_element(reply)
    if element is None:
        return _NO_ACTION
    kind, body = element[0], " ".join(element[1].split())
    if kind == "search":
        if not body:
            return (
                "Invalid action: the search query is empty. Write what to look up, "
                "e.g. <search> capital of Peru </search>."
            )
        if len(body) > max_query_chars:
            return (
                f"Invalid action: the search query has {len(body):,} characters, more than the limit of "
                f"{max_query_chars}. Search with a short query of a few words."
            )
    elif not body:
        return "Invalid action: the answer is empty. Put your final answer between <answer> and </answer>."
    return kind, body


class DeepSearchEnv(TextEnv):
    """Multi-hop question answering with a search engine (Deep Search, as Search-R1).

    ## Description
    The agent gets a question and may call a search engine as often as it likes before answering.
    The embedded default is a seeded synthetic encyclopedia of invented people, places,
    organisations, works, rivers and mountains (`num_docs` articles, 20,000 by default) with
    single-hop, bridge (2-hop), comparison and 3-4-hop questions; since the facts are invented, the
    agent must search. Retrieval is BM25 (`bm25s`, index built once and cached on disk); dense
    retrieval with a local sentence-transformers model and a remote Search-R1 retrieval server are
    options. Real data (wiki-18 corpus, FlashRAG / Search-R1 QA files) load from user files.
    A task is a question of a split (`"test/00042"`).

    ## Actions
    Any text; the first complete element decides. `<search> query </search>` returns the top
    `topk` passages; `<answer> text </answer>` answers. Reasoning outside the tags is allowed.
    A reply without a complete element, an empty query, a query over `max_query_chars` characters
    or an empty answer is invalid: it is answered with the reason, reward 0,
    `info["valid_action"]` False.

    ## Observation
    At reset `Question: <question>`. After a search,
    `<information>Doc 1(Title: ...) text\\nDoc 2(...) ...</information>`; after an answer, whether
    it was right.

    ## Rewards
    Exact match after SQuAD normalisation (lower case, no punctuation, no articles, single spaces)
    against any gold answer, paid on the answer; `reward="f1"` pays token F1 instead. `info` holds
    both `em` and `f1` after an answer. Success is an exact match.

    ## Termination
    Terminated by an answer. With `wrong_answer="retry"` (AgentGym's variant) a wrong answer is
    answered "Sorry, your answer is incorrect. Please try again." and the episode goes on until a
    right answer (the score is the best answer so far); the turn limit is the wrapper's.

    ## Registered ids
    `AgentGym/DeepSearch-v0`: the synthetic encyclopedia with BM25; every option is a `gym.make` kwarg.
    """

    default_max_turns = 10
    action_format = "tags"
    action_tools = deepsearch_tools.TOOLS  # the actions as tools (action_format: tools)
    tool_instructions = deepsearch_tools.INSTRUCTIONS
    stop_strings = ("<information>",)  # search results are the env's part (agentgym_wrappers.stops)
    default_max_turn_tokens = 512  # step-by-step thinking and one query (the paper's rollout.max_tokens)
    #: lighter than a JVM, heavier than a grid: 8 envs share a Ray actor (agentgym_envs.cluster)
    ray_resources = {"num_cpus": 1 / 8, "memory": 256 * 2**20, "envs_per_actor": 8}
    system_prompt = (
        "You answer questions by searching an encyclopedia. Think step by step in plain text. To search, "
        "write <search> query </search>; the top results come back between <information> and "
        "</information>. Search as often as you need, one query per reply. When you know the answer, "
        "write <answer> answer </answer> with a short answer (a name, a year, a number); this ends the "
        "episode.\n"
        "Example:\n"
        "Question: In which city was the founder of Keldor Press born?\n"
        "Your reply: First I need the founder of Keldor Press. <search> Keldor Press founder </search>\n"
        "<information>Doc 1(Title: Keldor Press) Keldor Press is a publishing house founded in 1902 by Mira "
        "Oswel. ...</information>\n"
        "Your reply: Now I need where Mira Oswel was born. <search> Mira Oswel born </search>\n"
        "<information>Doc 1(Title: Mira Oswel) Mira Oswel (born 1870) is a novelist who was born in "
        "Tarnholt. ...</information>\n"
        "Your reply: Mira Oswel was born in Tarnholt. <answer> Tarnholt </answer>"
    )

    #: What a remote client may choose: how answers are scored and searches answered, never data, paths,
    #: URLs, models or corpus sizes (those are the operator's; see agentgym_envs.clientargs).
    client_kwargs = {
        **TextEnv.client_kwargs,
        "reward": OneOf(("em", "f1")),
        "wrong_answer": OneOf(("end", "retry")),
        "topk": IntRange(1, 10),
        "max_query_chars": IntRange(1, 1000),
        "passage_format": OneOf(PASSAGE_FORMATS),
    }

    def __init__(
        self,
        corpus: str = "synthetic",
        qa_files: dict[str, str] | str | None = None,
        num_docs: int = BLOCK_DOCS,
        seed: int = 0,
        retriever: str | Retriever = "bm25",
        retriever_url: str | None = None,
        dense_model: str | None = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        topk: int = 3,
        reward: str = "em",
        wrong_answer: str = "end",
        max_query_chars: int = 300,
        passage_format: str = "compact",
        cache_dir: str | os.PathLike[str] | None = None,
        render_mode: str | None = None,
    ):
        """Create the env; data and indexes load on first use.

        Args:
            corpus: "synthetic" (the generated encyclopedia) or the path of a wiki-18 style JSONL corpus.
            qa_files: QA files for a user corpus: `{"train": path, "test": path, ...}`, or one path (test).
            num_docs: Size of the synthetic corpus (its test split is the same for every size >= 20,000).
            seed: Seed of the synthetic corpus.
            retriever: "bm25", "dense", "remote", or a `Retriever` (used as given, not closed by the env).
            retriever_url: The Search-R1 retrieval server for "remote" (`http://host:port`).
            dense_model: A local sentence-transformers model directory for "dense".
            query_prefix: Dense only: text put before each query (e5: "query: ").
            passage_prefix: Dense only: text put before each passage (e5: "passage: ").
            topk: Passages returned per search.
            reward: "em" (exact match) or "f1".
            wrong_answer: "end" (an answer ends the episode) or "retry" (AgentGym's "try again").
            max_query_chars: Longest valid search query.
            passage_format: "compact" (one bounded line per passage) or "search-r1" (exactly Search-R1's
                text, for models trained with it); see `agentgym_envs.deepsearch.passages`.
            cache_dir: Where corpora and indexes are cached (default: see `data.cache_root`).
            render_mode: None or "ansi".
        """
        super().__init__(render_mode=render_mode)
        if reward not in ("em", "f1"):
            raise ValueError(f"reward must be 'em' or 'f1', got {reward!r}")
        if wrong_answer not in ("end", "retry"):
            raise ValueError(f"wrong_answer must be 'end' or 'retry', got {wrong_answer!r}")
        check_int("topk", topk, 1, 50)
        check_int("max_query_chars", max_query_chars, 1, 100_000)
        if passage_format not in PASSAGE_FORMATS:
            raise ValueError(f"passage_format must be one of {list(PASSAGE_FORMATS)}, got {passage_format!r:.40}")
        check_int("num_docs", num_docs, 100, 1_000_000)  # 50 blocks; every size builds its own cached corpus
        check_int("seed", seed, 0, 2**32 - 1)
        if retriever_url is not None and (
            not isinstance(retriever_url, str) or urlsplit(retriever_url).scheme not in ("http", "https")
        ):
            raise ValueError(
                f"retriever_url must be an http(s) URL such as 'http://127.0.0.1:8001', got {retriever_url!r:.80}"
            )
        if cache_dir is not None:
            if not isinstance(cache_dir, (str, os.PathLike)):
                raise TypeError(f"cache_dir must be a directory path, got {type(cache_dir).__name__}")
            cache_dir = os.path.abspath(os.path.expanduser(os.fspath(cache_dir)))
            if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
                raise ValueError(f"cache_dir {cache_dir} exists and is not a directory; pass a directory for the cache")
        if isinstance(retriever, str) and retriever not in ("bm25", "dense", "remote"):
            raise ValueError(f"retriever must be 'bm25', 'dense', 'remote' or a Retriever, got {retriever!r}")
        if retriever == "remote" and not retriever_url:
            raise ValueError("retriever='remote' needs retriever_url='http://host:port' (a Search-R1 retrieval server)")
        if retriever == "dense" and not dense_model:
            raise ValueError("retriever='dense' needs dense_model=<a local sentence-transformers model directory>")
        if isinstance(qa_files, (str, os.PathLike)):
            qa_files = {"test": os.fspath(qa_files)}
        self._synthetic = corpus == "synthetic" and qa_files is None
        if not self._synthetic:
            if not qa_files:
                raise ValueError(
                    f"a user corpus ({corpus}) needs its questions: qa_files={{'test': 'test.jsonl'}} "
                    "(FlashRAG / Search-R1 JSONL or Parquet with question, golden_answers, data_source)"
                )
            for split, path in qa_files.items():
                if not os.path.isfile(path):
                    raise FileNotFoundError(
                        f"Deep Search QA file for split {split!r} not found: {path}. Provide a FlashRAG / "
                        "Search-R1 JSONL or Parquet file with question, golden_answers and data_source."
                    )
            if corpus == "synthetic" and isinstance(retriever, str) and retriever != "remote":
                raise ValueError(
                    "user QA files need their corpus: corpus=<a wiki-18 style JSONL file>, or retriever='remote' "
                    "with retriever_url=<a Search-R1 retrieval server over that corpus>"
                )
            if corpus != "synthetic" and not os.path.isfile(corpus):
                raise FileNotFoundError(
                    f"Deep Search corpus not found: {corpus}. Provide a JSONL corpus with one "
                    '{"id": ..., "contents": "Title\\ntext"} object per line (wiki-18 form).'
                )
            self.splits = tuple(qa_files)
        self.corpus, self.qa_files, self.num_docs, self.seed = corpus, qa_files, num_docs, seed
        self.retriever_spec, self.retriever_url, self.dense_model = retriever, retriever_url, dense_model
        self.query_prefix, self.passage_prefix = query_prefix, passage_prefix
        self.topk, self.reward, self.wrong_answer, self.max_query_chars = topk, reward, wrong_answer, max_query_chars
        self.passage_format = passage_format
        self.cache_dir = cache_dir
        self._questions: dict[str, Sequence[Question]] | None = None
        self._ids: dict[str, list[str]] = {}
        self._where: dict[str, tuple[str, int]] = {}  # task id -> (split, index)
        self._retriever: Retriever | None = None
        self._owns_retriever = False
        self._question: Question | None = None

    # ---- data -----------------------------------------------------------------------------------
    def _load_questions(self) -> dict[str, Sequence[Question]]:
        if self._questions is None:
            if self._synthetic:
                questions: dict[str, Sequence[Question]] = dict(
                    D.load_synthetic(self.num_docs, self.seed, self.cache_dir)[1]
                )
            else:
                assert isinstance(self.qa_files, dict)
                questions = {split: D.load_qa(path, split) for split, path in self.qa_files.items()}
            self._ids = {
                split: rows.ids() if isinstance(rows, D.QuestionSplit) else [q.id for q in rows]
                for split, rows in questions.items()
            }
            self._where = {task_id: (split, i) for split, ids in self._ids.items() for i, task_id in enumerate(ids)}
            self._questions = questions
        return self._questions

    @property
    def retriever(self) -> Retriever:
        """The search engine (opened on first use; local indexes are shared by every env of the process)."""
        if self._retriever is None:
            spec = self.retriever_spec
            if isinstance(spec, Retriever):
                self._retriever = spec
            elif spec == "remote":
                from agentgym_envs.deepsearch.remote import RemoteRetriever

                self._retriever, self._owns_retriever = RemoteRetriever(self.retriever_url or ""), True
            else:
                self._retriever = open_local_retriever(
                    spec,
                    corpus=self.corpus,
                    num_docs=self.num_docs,
                    seed=self.seed,
                    dense_model=self.dense_model,
                    query_prefix=self.query_prefix,
                    passage_prefix=self.passage_prefix,
                    cache_dir=None if self.cache_dir is None else os.fspath(self.cache_dir),
                )
        return self._retriever

    def tasks(self, split: str = "train") -> list[str]:
        if split not in self.splits:
            raise ValueError(f"unknown split {split!r}; this Deep Search env has {list(self.splits)}")
        self._load_questions()
        return list(self._ids[split])

    def num_tasks(self, split: str) -> int:
        return len(self._load_questions()[split])

    def task_at(self, split: str, index: int) -> str:
        self._load_questions()
        return self._ids[split][index]

    def split_of(self, task_id: str) -> str | None:
        self._load_questions()
        return self._where[task_id][0] if task_id in self._where else None

    @property
    def question(self) -> Question | None:
        """The current question with its gold answers and (synthetic data) its reasoning chain."""
        return self._question

    # ---- episode --------------------------------------------------------------------------------
    def _reset_task(self, task_id: str) -> tuple[str, dict[str, Any]]:
        split, index = self._where[task_id]
        self._question = self._load_questions()[split][index]
        q = self._question
        info = {"category": q.category, "instruction": q.question, "available_actions": None}
        if q.chain:
            info["hops"] = len(q.chain)
        return f"Question: {q.question}", info

    def _step_action(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        assert self._question is not None
        parsed = parse_reply(action, self.max_query_chars)
        if isinstance(parsed, str):
            return parsed, self._score, False, False, {"valid_action": False, "success": self._success}
        kind, text = parsed
        if kind == "search":
            observation = format_information(self.retriever.search(text, self.topk), self.passage_format)
            return observation, self._score, False, False, {"valid_action": True, "success": False, "query": text}
        golden, shown = self._question.golden_answers, text if len(text) <= 200 else text[:197] + "..."
        em, f1 = score_answer(text, golden)
        score = max(self._score, em if self.reward == "em" else f1)
        info = {"valid_action": True, "success": em == 1.0, "answer": text, "em": em, "f1": f1}
        if em == 1.0:
            return f"Your answer {shown!r} is correct.", score, True, False, info
        if self.wrong_answer == "retry":
            return _RETRY, score, False, False, info
        return f"Your answer {shown!r} is incorrect; the expected answer was {golden[0]!r}.", score, True, False, info

    # ---- expert, lifecycle ----------------------------------------------------------------------
    def make_expert(self) -> Any:
        from agentgym_envs.deepsearch.expert import DeepSearchExpert

        if self._question is None:
            raise RuntimeError("call reset() before make_expert()")
        return DeepSearchExpert(self._question)

    def close(self) -> None:
        if self._retriever is not None and self._owns_retriever:
            self._retriever.close()
        self._retriever = None
        self._owns_retriever = False
        super().close()
