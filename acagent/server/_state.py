"""What the daemon's routes share: the registry, the guard config and live connection counts."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from acagent.events import Event
from acagent.runner import SessionRegistry
from acagent.server._security import GuardConfig
from acagent.settings import Settings
from acagent.store import SqliteJournal

__all__ = ["DaemonState", "StreamOptions", "hibernate", "pending_approval_events", "release_memory"]


@dataclass
class StreamOptions:
    """Tuning of the WebSocket and SSE streams (seconds unless the name says otherwise).

    Attributes:
        queue_events: bound of each attacher's bus queue; a subscriber that overflows it is evicted
            and told to re-attach with ``since``. Larger than the writer's largest group commit
            (5,000 buffered deltas are published at once), so a burst alone never evicts a healthy
            client; the events are shared between queues, so a full queue costs pointers, not copies.
        send_timeout_s: a single send blocked longer than this closes the connection (a stalled peer).
        keepalive_s: SSE comment line interval when no event flows (WebSocket uses protocol pings).
        close_grace_s: how long a close frame / final SSE event may wait for a stalled peer.
    """

    queue_events: int = 8192
    send_timeout_s: float = 30.0
    keepalive_s: float = 15.0
    close_grace_s: float = 30.0


@dataclass
class DaemonState:
    """Shared by every route of one daemon (``app.state.daemon``)."""

    registry: SessionRegistry
    settings: Settings
    guard: GuardConfig
    streams: StreamOptions = field(default_factory=StreamOptions)
    started_at: float = field(default_factory=time.time)
    accepting: bool = True
    """False once shutdown began: new sessions and turns get 503 ``shutting_down``."""
    shutting_down: anyio.Event = field(default_factory=anyio.Event)
    """Set once running turns have ended during shutdown: streams close (1012)."""
    connections: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Live stream connections: name → {kind, session_id, since, sent, last_seq}."""
    turn_locks: dict[str, anyio.Lock] = field(default_factory=dict)
    evictions: int = 0
    send_timeouts: int = 0

    @asynccontextmanager
    async def turn_lock(self, session_id: str) -> AsyncIterator[None]:
        """Serialize turn starts of one session (the lock is dropped when nobody waits)."""
        lock = self.turn_locks.setdefault(session_id, anyio.Lock())
        try:
            async with lock:
                yield
        finally:
            if not lock.locked() and lock.statistics().tasks_waiting == 0:
                self.turn_locks.pop(session_id, None)

    @property
    def journal(self) -> SqliteJournal:
        """The registry's journal."""
        return self.registry.journal

    def streams_caught_up(self) -> bool:
        """True when every stream connection has sent its session's last published event."""
        for conn in self.connections.values():
            runner = self.registry.runners.get(conn["session_id"])
            if runner is not None and conn["last_seq"] < runner.bus.last_seq:
                return False
        return True

    def stats(self) -> dict[str, Any]:
        """Live counts for ``GET /v1/debug/stats`` (F08, F15)."""
        per_session: dict[str, dict[str, Any]] = {}
        for sid, runner in self.registry.runners.items():
            subs = runner.bus.subscribers
            per_session[sid] = {
                "subscribers": len(subs),
                "attachers": sum(1 for s in subs if s.name.startswith(("ws:", "sse:"))),
                "names": [s.name for s in subs],
                "busy": runner.is_busy,
                "last_seq": runner.bus.last_seq,
            }
        kinds: dict[str, int] = {"ws": 0, "sse": 0}
        for conn in self.connections.values():
            kinds[conn["kind"]] = kinds.get(conn["kind"], 0) + 1
        return {
            "pid": os.getpid(),
            "runners": len(self.registry.runners),
            "busy_runners": self.registry.busy_count(),
            "max_sessions": self.settings.max_sessions,
            "busy_timeout_ms": self.journal.busy_timeout_ms,
            "connections": kinds,
            "attachers": sum(s["attachers"] for s in per_session.values()),
            "sessions": per_session,
            "evictions": self.evictions,
            "send_timeouts": self.send_timeouts,
            "queue_events": self.streams.queue_events,
            "send_timeout_s": self.streams.send_timeout_s,
            "uptime_s": round(time.time() - self.started_at, 3),
        }


def release_memory() -> None:
    """After runners hibernate: collect cycles and hand freed heap back to the OS (glibc ``malloc_trim``)."""
    import gc

    gc.collect()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: the memory stays reusable by this process
        pass


async def hibernate(state: DaemonState) -> int:
    """Drop idle runners without attachers (:meth:`SessionRegistry.hibernate_idle`) and release memory."""
    dropped = await state.registry.hibernate_idle()
    if dropped:
        release_memory()
    return dropped


async def pending_approval_events(journal: SqliteJournal, session_id: str) -> list[Event]:
    """The original ``approval.requested`` envelopes of the session's pending approvals (F14).

    One per pending tool call (the latest request for it), ascending seq.
    """
    pending = {r.tool_call_id for r in await journal.pending_approvals(session_id)}
    if not pending:
        return []

    def q(db: Any) -> Any:
        return db.execute(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = ? AND type = 'approval.requested'"
            " ORDER BY seq",
            (session_id,),
        ).fetchall()

    import orjson

    latest: dict[str, Event] = {}
    for seq, ts, typ, payload in await journal._run(q, read=True):
        data = orjson.loads(payload)
        tcid = data.get("tool_call_id")
        if tcid in pending:
            latest[tcid] = Event(seq=seq, ts=ts, session_id=session_id, type=typ, payload=data)
    return sorted(latest.values(), key=lambda e: e.seq)
