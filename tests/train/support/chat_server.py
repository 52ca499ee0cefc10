"""A stand-in OpenAI-compatible chat server on loopback (the `server` fixture of tests/train/conftest.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ChatServer(ThreadingHTTPServer):
    """Answers `POST /v1/chat/completions` with `reply`, after `failures` answers of `fail_status`; with
    `respond` set, with the assistant message `respond(request body)` returns (`tool_calls` included, as
    OpenAI's API answers them)."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), ChatHandler)
        self.requests: list[dict[str, Any]] = []
        self.reply = "The ball may be ahead.\nAction: move forward"
        self.failures = 0
        self.fail_status = 503
        self.body: bytes | None = None
        self.respond: Callable[[dict[str, Any]], dict[str, Any]] | None = None
        self.lock = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class ChatHandler(BaseHTTPRequestHandler):
    server: ChatServer

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with self.server.lock:
            self.server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
            failing = self.server.failures > 0
            self.server.failures -= failing
        if failing:
            message = "bad key" if self.server.fail_status == 401 else "busy"
            self._send(self.server.fail_status, {"error": {"message": message}})
        elif self.server.body is not None:
            self._send(200, raw=self.server.body)
        elif self.server.respond is not None:
            with self.server.lock:
                message = {"role": "assistant", **self.server.respond(body)}
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            self._send(200, {"choices": [{"index": 0, "message": message, "finish_reason": finish}]})
        else:
            self._send(200, {"choices": [{"index": 0, "message": {"role": "assistant", "content": self.server.reply}}]})

    def _send(self, status: int, payload: Any = None, raw: bytes | None = None) -> None:
        data = raw if raw is not None else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:  # keep the test output clean
        pass
