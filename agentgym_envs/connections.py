"""A bound on a server's open connections, in all and per client address, below its descriptor limit.

Each connection holds a file descriptor. When a process runs out of them, the event loop's accept
fails (EMFILE), and uvloop's libuv then accepts and closes (resets) the connections waiting in the
backlog to shed them, so a flood of half-sent requests resets well-behaved clients' connections too.
`ConnectionLimit` keeps the open connections below the descriptor limit: a connection past the bound
(of all, or of its address) closes the connection whose request has been longest in arriving (a
half-sent head or body, or a connection that sent nothing), failing that the longest idle keep-alive
connection; a connection being answered or upgraded to a WebSocket is never closed for this. When
every connection is busy, the newcomer is answered 503 (429 past its address's share) and closed.

`timeouts.timed_protocol(connections=...)` applies it to uvicorn's connections.
"""

from __future__ import annotations

import resource
import time
from typing import Any

#: Descriptors left for everything but client connections (the listening socket, stdio, the event loop,
#: the envs' own files, JVM and browser pipes): a quarter of the limit, at least this many.
MIN_RESERVED_DESCRIPTORS = 64
#: Connections at most, however high the descriptor limit (an unlimited one included).
MAX_CONNECTIONS_CAP = 65_536

READING, IDLE, BUSY = "reading", "idle", "busy"

_REPLY = b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nconnection: close\r\ncontent-length: %d\r\n\r\n%s"


def descriptor_limit() -> int:
    """This process's soft RLIMIT_NOFILE (MAX_CONNECTIONS_CAP * 2 when unlimited)."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return MAX_CONNECTIONS_CAP * 2 if soft == resource.RLIM_INFINITY or soft < 0 else soft


def default_max_connections(limit: int | None = None) -> int:
    """Connections at once for a process allowed `limit` descriptors (default: its soft RLIMIT_NOFILE):
    the limit less a reserve of a quarter (at least MIN_RESERVED_DESCRIPTORS), at least 8."""
    limit = descriptor_limit() if limit is None else limit
    reserve = max(MIN_RESERVED_DESCRIPTORS, limit // 4)
    return max(8, min(MAX_CONNECTIONS_CAP, limit - reserve))


def _reply(status: int, reason: str, detail: str, error_type: str) -> bytes:
    body = b'{"detail":"%s","error_type":"%s"}' % (detail.encode(), error_type.encode())
    return _REPLY % (status, reason.encode(), len(body), body)


class ConnectionLimit:
    """At most `max_connections` open connections, at most `per_address` of them from one client address.

    Args:
        max_connections: Open connections at once (None or 0: `default_max_connections()`, derived from
            the soft RLIMIT_NOFILE now).
        per_address: Open connections from one address (None or 0: half of `max_connections`).

    The connections (uvicorn protocol objects with a `transport`) report themselves with `admit`,
    `state` and `release`; `stats()` counts them and what was shed.
    """

    def __init__(self, max_connections: int | None = None, per_address: int | None = None):
        if (max_connections or 0) < 0 or (per_address or 0) < 0:
            raise ValueError(f"connection limits must be positive, got {max_connections} and {per_address}")
        self.max_connections = max_connections or default_max_connections()
        self.per_address = min(per_address or max(1, self.max_connections // 2), self.max_connections)
        self._address: dict[Any, Any] = {}  # connection -> its client address
        self._since: dict[Any, float] = {}  # connection -> when it entered its state
        self._reading: dict[Any, None] = {}  # waiting for a request to arrive, longest waiting first
        self._idle: dict[Any, None] = {}  # idle after a reply, longest idle first
        self._upgraded: dict[Any, None] = {}  # handed to a WebSocket protocol: released once it closes
        self._by_address: dict[Any, dict[Any, None]] = {}
        self.shed = 0  # connections closed to make room
        self.refused = 0  # connections refused with 503/429

    def __len__(self) -> int:
        return len(self._address)

    def stats(self) -> dict[str, int]:
        """Open connections, the bounds, and how many were closed to make room or refused since start."""
        self._prune()
        return {
            "open": len(self._address),
            "max": self.max_connections,
            "per_address": self.per_address,
            "shed": self.shed,
            "refused": self.refused,
        }

    def admit(self, connection: Any, address: Any) -> bool:
        """Count a new connection (reading its first request); make room for it, or refuse it (False: it
        has been answered 503 or 429 and closed, and is not counted)."""
        self._address[connection] = address
        self._by_address.setdefault(address, {})[connection] = None
        self.state(connection, READING)
        mine = self._by_address[address]
        if len(mine) > self.per_address or len(self._address) > self.max_connections:
            self._prune()
        if len(mine) > self.per_address and not self._shed(self._oldest(mine, connection)):
            return self._refuse(connection, 429, "Too Many Requests", "from your address", self.per_address)
        if len(self._address) > self.max_connections and not self._shed(self._oldest(None, connection)):
            return self._refuse(connection, 503, "Service Unavailable", "in all", self.max_connections)
        return True

    def state(self, connection: Any, state: str) -> None:
        """`connection` now waits for a request (READING), is idle after a reply (IDLE), is being answered
        (BUSY), or was upgraded to a WebSocket ("upgraded"). Entering READING or IDLE queues it last."""
        if connection not in self._address:
            return
        if state == READING:
            if connection in self._reading:
                return
            self._idle.pop(connection, None)
            self._reading[connection] = None
        elif state == IDLE:
            if connection in self._idle:
                return
            self._reading.pop(connection, None)
            self._idle[connection] = None
        else:
            self._reading.pop(connection, None)
            self._idle.pop(connection, None)
            if state == "upgraded":
                self._upgraded[connection] = None
        self._since[connection] = time.monotonic()

    def release(self, connection: Any) -> None:
        """The connection is closed (or being closed): it no longer counts. Idempotent."""
        if connection not in self._address:
            return
        address = self._address.pop(connection)
        self._since.pop(connection, None)
        self._reading.pop(connection, None)
        self._idle.pop(connection, None)
        self._upgraded.pop(connection, None)
        mine = self._by_address.get(address)
        if mine is not None:
            mine.pop(connection, None)
            if not mine:
                del self._by_address[address]

    def _oldest(self, among: dict[Any, None] | None, new: Any) -> Any:
        """The connection to close first (of `among`, else of all), never `new`: the longest reading,
        else the longest idle; None when every one is busy."""
        for queue in (self._reading, self._idle):
            if among is None:
                for connection in queue:
                    if connection is not new:
                        return connection
            else:
                waiting = [c for c in among if c in queue and c is not new]
                if waiting:
                    return min(waiting, key=self._since.__getitem__)
        return None

    def _shed(self, connection: Any) -> bool:
        if connection is None:
            return False
        reading = connection in self._reading
        self.release(connection)
        self.shed += 1
        transport = connection.transport
        if not transport.is_closing():
            if reading:  # a request was (perhaps) on its way: say why it is not answered
                transport.write(
                    _reply(503, "Service Unavailable", "the server closed this connection to make room", "Overloaded")
                )
            transport.close()
        return True

    def _refuse(self, connection: Any, status: int, reason: str, where: str, bound: int) -> bool:
        self.release(connection)
        self.refused += 1
        detail = f"the server holds its maximum of {bound} connections {where}, all busy; retry later"
        connection.transport.write(_reply(status, reason, detail, "TooManyConnections"))
        connection.transport.close()
        return False

    def _prune(self) -> None:
        """Release the WebSocket connections that have closed (their HTTP protocol is not told)."""
        for connection in [c for c in self._upgraded if c.transport.is_closing()]:
            self.release(connection)
