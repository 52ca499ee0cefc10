"""`agentgym serve` in a subprocess of its own, for the tests that need a real server process (to kill it, to
limit its descriptors, to run it as users do)."""

from __future__ import annotations

import contextlib
import re
import subprocess
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def serving(*args: str, command: list[str] | None = None, kill: bool = False) -> Iterator[subprocess.Popen]:
    """Start `agentgym serve ARGS --port 0` (or `command`, which must print the server's startup line), wait for
    the line that names its URL and yield the process, with `base_url` and `port` set on it. Afterwards it is
    stopped gracefully (SIGTERM, then SIGKILL after 30 s) or, with `kill`, at once.

    Raises:
        AssertionError: The process ended or printed something else before its URL.
    """
    command = command or [sys.executable, "-m", "agentgym_train.cli", "serve", *args, "--port", "0"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)", line)
        assert match, f"the server did not start: {line!r}"
        server.base_url = match.group(0)  # type: ignore[attr-defined]
        server.port = int(match.group(1))  # type: ignore[attr-defined]
        yield server
    finally:
        if not kill:
            server.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                server.wait(timeout=30)
        server.kill()
        server.wait(timeout=30)
