"""One task watches every stream connection: evictions, send deadlines, keep-alives, shutdown.

Before, each connection ran its own watchdog every 0.1 s that scanned the session's subscriber
list: ``N`` connections on a session cost ``O(N²)`` work ten times a second, and 600 stalled
subscribers kept the event loop busy for ~50 s. Now a connection is a :class:`StreamConn`
record; the hot path (one event sent) only stores two floats on it, and :class:`Reaper` visits
every record once per ``reaper_tick_s`` doing ``O(1)`` checks each (its subscription's
``evicted_reason``, the start time of a blocked send, the time of its last activity). Nothing
per event depends on how many connections exist.

The reaper also admits connections: :meth:`Reaper.open` enforces ``max_attachers_per_session``
and ``max_attachers_total`` (``429 too_many_attachers``) with per-session counters, before the
WebSocket handshake is accepted or the SSE response starts.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import Any

import anyio

from acagent.errors import TooManyAttachers
from acagent.server._limits import Limits

__all__ = ["Reaper", "StreamConn"]

log = logging.getLogger("acagent.server")


class StreamConn:
    """One stream connection (WebSocket or SSE), as the reaper and the stats see it."""

    __slots__ = (
        "end",
        "error",
        "keepalive_due",
        "kind",
        "last_activity",
        "last_seq",
        "name",
        "scope",
        "sending_since",
        "sent",
        "session_id",
        "since",
        "sub",
    )

    def __init__(self, kind: str, session_id: str, since: int) -> None:
        self.kind = kind
        self.session_id = session_id
        self.since = since
        self.name = f"{kind}:{uuid.uuid4().hex[:12]}"
        self.sent = 0
        self.last_seq = since
        self.sub: Any = None
        """The bus subscription once streaming live (its ``evicted_reason`` is checked)."""
        self.sending_since: float | None = None
        self.last_activity = anyio.current_time()
        self.end = ""
        self.error: Any = None
        """The :class:`~acagent.errors.AcagentError` that ended the stream (``end == "error"``)."""
        self.scope: anyio.CancelScope | None = None
        self.keepalive_due: anyio.Event | None = None
        """Set by the reaper when an SSE connection is due a keep-alive comment."""

    def finish(self, end: str) -> None:
        """End the connection with reason ``end`` (the first reason wins)."""
        if not self.end:
            self.end = end
        if self.scope is not None:
            self.scope.cancel()

    def as_dict(self) -> dict[str, Any]:
        """For ``GET /v1/debug/stats``."""
        return {
            "kind": self.kind,
            "session_id": self.session_id,
            "since": self.since,
            "sent": self.sent,
            "last_seq": self.last_seq,
        }


class Reaper:
    """The registry of stream connections and the one task that watches them (module docstring)."""

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.conns: dict[str, StreamConn] = {}
        self.per_session: Counter[str] = Counter()
        self.refused = 0
        """Stream connections refused by an attacher cap."""
        self.ticks = 0

    def open(self, kind: str, session_id: str, since: int) -> StreamConn:
        """Admit and register a stream connection.

        Raises:
            TooManyAttachers: the session or the daemon has its maximum of attachers.
        """
        lim = self.limits
        if self.per_session[session_id] >= lim.max_attachers_per_session:
            self.refused += 1
            raise TooManyAttachers(
                f"session {session_id} already has {lim.max_attachers_per_session} attached clients;"
                " close one and retry",
                detail={"scope": "session", "limit": lim.max_attachers_per_session},
            )
        if len(self.conns) >= lim.max_attachers_total:
            self.refused += 1
            raise TooManyAttachers(
                f"the daemon already serves {lim.max_attachers_total} attached clients; close one and retry",
                detail={"scope": "total", "limit": lim.max_attachers_total},
            )
        conn = StreamConn(kind, session_id, since)
        self.conns[conn.name] = conn
        self.per_session[session_id] += 1
        return conn

    def close(self, conn: StreamConn) -> None:
        """Unregister (idempotent)."""
        if self.conns.pop(conn.name, None) is not None:
            self.per_session[conn.session_id] -= 1
            if self.per_session[conn.session_id] <= 0:
                del self.per_session[conn.session_id]

    def check(self, now: float, shutting_down: bool) -> None:
        """One pass over every connection (``O(1)`` each)."""
        lim = self.limits
        for conn in list(self.conns.values()):
            if shutting_down:
                conn.finish("shutdown")
                continue
            started = conn.sending_since
            if started is not None and now - started > lim.send_timeout_s:
                conn.finish("timeout")
            elif conn.sub and conn.sub.evicted_reason:
                conn.finish("evicted")
            elif (
                conn.keepalive_due is not None
                and started is None
                and now - conn.last_activity >= lim.keepalive_s
            ):
                conn.keepalive_due.set()

    def blocked(self, for_s: float) -> int:
        """Connections whose current send has been blocked for more than ``for_s`` (stats)."""
        now = anyio.current_time()
        return sum(
            1 for c in self.conns.values() if c.sending_since is not None and now - c.sending_since > for_s
        )

    async def run(self, shutting_down: anyio.Event) -> None:
        """Check every connection each ``reaper_tick_s``, forever (started by ``serve``)."""
        while True:
            await anyio.sleep(self.limits.reaper_tick_s)
            self.ticks += 1
            try:
                self.check(anyio.current_time(), shutting_down.is_set())
            except Exception:  # pragma: no cover - a bug here must not stop the watching
                log.exception("stream reaper pass failed")
