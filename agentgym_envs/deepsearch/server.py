"""A retrieval server speaking Search-R1's protocol, for any of our retrievers.

    POST /retrieve  {"queries": ["..."], "topk": 3, "return_scores": true}
    ->  {"result": [[{"document": {"id": "...", "contents": "Title\\ntext"}, "score": 7.1}, ...]]}
    (without `return_scores`, each result is the bare document)
    GET /health     {"status": "ok", "documents": N}

As Search-R1's server does, an empty `queries` list is answered `{"result": []}` (Search-R1's
trainer sends one on every turn where no rollout searched), and a request of thousands of queries
(its training script sends 512 prompts x 5 rollouts = 2,560) is answered, searched `CHUNK_QUERIES` at
a time so that a dense retriever's batches stay bounded. Requests of more than `MAX_QUERIES`
queries, or a query longer than `MAX_QUERY_CHARS`, are answered with HTTP 422 and the reason, as
other bad requests are. A `topk` is taken as Search-R1's server takes it (any non-negative integer;
0 or none: the server's default) and answered with at most `min(topk, max_topk, documents)` passages
per query: `max_topk` is the server's cap, `MAX_TOPK` (100) unless `create_app` is given another, so
that one request cannot ask for the whole corpus per query. Run it with `agentgym retrieval-server`;
point envs at it with `gym.make("AgentGym/DeepSearch-v0", retriever="remote", retriever_url="http://127.0.0.1:8000")`.
Needs the `[server]` extra (fastapi, uvicorn); imported lazily so the CLI works without it.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from agentgym_envs.deepsearch.passages import Retriever

#: Most passages per query a reply holds unless the server is made with another cap; a request's
#: larger `topk` is answered with this many (Search-R1's clients may send any topk; its server takes it).
MAX_TOPK = 100
#: Most queries one request may hold (Search-R1's training sends up to 2,560).
MAX_QUERIES = 65_536
#: Longest query (a model's <search> text; Search-R1 cuts replies at a few hundred tokens).
MAX_QUERY_CHARS = 20_000
#: Queries searched at once: a request of more is answered chunk by chunk.
CHUNK_QUERIES = 512


def search_in_chunks(retriever: Retriever, queries: list[str], k: int, chunk: int = CHUNK_QUERIES) -> list[list[Any]]:
    """`retriever.batch_search(queries, k)`, `chunk` queries at a time (none for no queries)."""
    hits: list[list[Any]] = []
    for start in range(0, len(queries), chunk):
        hits.extend(retriever.batch_search(queries[start : start + chunk], k))
    return hits


def create_app(
    retriever: Retriever, default_topk: int = 3, chunk: int = CHUNK_QUERIES, max_topk: int = MAX_TOPK
) -> Any:
    """A FastAPI app serving `retriever` with the Search-R1 `/retrieve` protocol.

    Args:
        retriever: The retriever searched.
        default_topk: Passages per query when a request's `topk` is 0 or absent.
        chunk: Queries searched at once.
        max_topk: The cap on passages per query (a larger `topk` is answered with this many).
    """
    if not (isinstance(max_topk, int) and max_topk >= 1 and isinstance(default_topk, int) and default_topk >= 1):
        raise ValueError(f"max_topk and default_topk must be positive integers, got {max_topk!r} and {default_topk!r}")
    from typing import Annotated

    from fastapi import FastAPI, Request, Response
    from fastapi.exceptions import RequestValidationError
    from pydantic import BaseModel, Field

    from agentgym_envs.remote.wire import bounded, dumps

    class RetrieveRequest(BaseModel):
        queries: list[Annotated[str, Field(max_length=MAX_QUERY_CHARS)]] = Field(max_length=MAX_QUERIES)
        # 0 or absent: the server's default, as Search-R1's servers read it (`if not request.topk`)
        topk: int | None = Field(default=None, ge=0)
        return_scores: bool = False

    app = FastAPI(title="AgentGym Deep Search retrieval server")

    async def invalid(request: Request, error: Exception) -> Response:
        """FastAPI's 422 without the inputs it echoes, which JSON may not hold (a lone surrogate in a query,
        an infinite topk: its reply failed with a 500), in ASCII JSON; each location and message cut short."""
        assert isinstance(error, RequestValidationError)
        shown = [
            {
                "type": e["type"],
                "loc": [part if isinstance(part, int) else bounded(str(part), 100) for part in e["loc"]],
                "msg": bounded(str(e["msg"]), 300),
            }
            for e in error.errors()[:20]
        ]
        return Response(dumps({"detail": shown}), status_code=422, media_type="application/json")

    app.add_exception_handler(RequestValidationError, invalid)

    def retrieve(request: RetrieveRequest) -> dict[str, Any]:
        k = min(request.topk or default_topk, max_topk, len(retriever))
        hits = search_in_chunks(retriever, request.queries, k, chunk)
        return {"result": [[p.to_json(request.return_scores) for p in passages] for passages in hits]}

    # Annotations are strings here (postponed evaluation) and the model is local: give FastAPI the class.
    retrieve.__annotations__["request"] = RetrieveRequest
    app.post("/retrieve")(retrieve)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "documents": len(retriever)}

    return app


class RetrievalServerThread:
    """Serve a retriever on loopback from a background thread (tests, notebooks, one-process setups).

    >>> # with RetrievalServerThread(retriever) as server: RemoteRetriever(server.url)
    """

    def __init__(
        self,
        retriever: Retriever,
        host: str = "127.0.0.1",
        port: int = 0,
        default_topk: int = 3,
        max_topk: int = MAX_TOPK,
    ):
        import uvicorn

        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((host, port))
        self.url = f"http://{host}:{self._socket.getsockname()[1]}"
        config = uvicorn.Config(
            create_app(retriever, default_topk, max_topk=max_topk), log_level="warning", access_log=False
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def start(self) -> RetrievalServerThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the retrieval server at {self.url} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._socket.close()

    def __enter__(self) -> RetrievalServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
