"""What the daemon's routes share: the registry, the guard config and live connection counts."""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio

from acagent._allocator import allocator
from acagent.events import Event
from acagent.runner import SessionRegistry
from acagent.server._idempotency import IdempotencyCache
from acagent.server._limits import ConnectionTracker, Limits
from acagent.server._reaper import Reaper, StreamConn
from acagent.server._security import GuardConfig
from acagent.settings import Settings
from acagent.store import Journal

__all__ = ["DaemonState", "StreamOptions", "hibernate", "pending_approval_events", "release_memory"]


StreamOptions = Limits
"""Former name of :class:`~acagent.server._limits.Limits` (the stream tuning is part of it)."""


@dataclass
class DaemonState:
    """Shared by every route of one daemon (``app.state.daemon``)."""

    registry: SessionRegistry
    settings: Settings
    guard: GuardConfig
    limits: Limits = field(default_factory=Limits)
    tracker: ConnectionTracker | None = None
    """Connections per client (set by ``serve``; None when the app runs without it)."""
    reaper: Reaper = field(init=False)
    """Every stream connection, and the one task that watches them."""
    started_at: float = field(default_factory=time.time)
    accepting: bool = True
    """False once shutdown began: new sessions and turns get 503 ``shutting_down``."""
    shutting_down: anyio.Event = field(default_factory=anyio.Event)
    """Set once running turns have ended during shutdown: streams close (1012)."""
    turn_locks: dict[str, anyio.Lock] = field(default_factory=dict)
    inbox: Any = None
    """In a cluster: the :class:`~acagent.server._inbox.ClusterInput` every input goes through."""
    evictions: int = 0
    send_timeouts: int = 0

    idempotency: IdempotencyCache = field(init=False)
    """First answers by ``Idempotency-Key`` (single daemon; the cluster uses its inbox)."""

    def __post_init__(self) -> None:
        self.reaper = Reaper(self.limits)
        self.idempotency = IdempotencyCache(self.limits.idempotency_keys, self.limits.idempotency_ttl_s)

    @property
    def streams(self) -> Limits:
        """The limits (former name)."""
        return self.limits

    @property
    def connections(self) -> dict[str, StreamConn]:
        """Live stream connections by name."""
        return self.reaper.conns

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
    def journal(self) -> Journal:
        """The registry's journal."""
        return self.registry.journal

    def streams_caught_up(self) -> bool:
        """True when every stream connection has sent its session's last published event."""
        for conn in self.connections.values():
            runner = self.registry.runners.get(conn.session_id)
            if runner is not None and conn.last_seq < runner.bus.last_seq:
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
            kinds[conn.kind] = kinds.get(conn.kind, 0) + 1
        return {
            "pid": os.getpid(),
            "runners": len(self.registry.runners),
            "runners_built": self.registry.runners_built,
            "runners_hibernated": self.registry.runners_hibernated,
            "allocator": allocator(),
            "busy_runners": self.registry.busy_count(),
            "max_sessions": self.settings.max_sessions,
            "busy_timeout_ms": self.journal.info().get("busy_timeout_ms"),
            "connections": kinds,
            "attachers": sum(s["attachers"] for s in per_session.values()),
            "sessions": per_session,
            "evictions": self.evictions,
            "send_timeouts": self.send_timeouts,
            "queue_events": self.limits.queue_events,
            "send_timeout_s": self.limits.send_timeout_s,
            "limits": self.limits.as_dict(),
            "tracked_connections": self.tracker.tracked() if self.tracker is not None else 0,
            "refused": {
                "attachers": self.reaper.refused,
                "connections": self.tracker.refused if self.tracker is not None else 0,
            },
            "reaper_ticks": self.reaper.ticks,
            "blocked_sends": self.reaper.blocked(1.0),
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
        await anyio.to_thread.run_sync(release_memory)  # malloc_trim of a big heap takes a while
    return dropped


async def pending_approval_events(journal: Journal, session_id: str) -> list[Event]:
    """The original ``approval.requested`` envelopes of the session's pending approvals (F14).

    One per pending tool call (the latest request for it), ascending seq:
    :meth:`Journal.pending_approval_events <acagent.store.Journal.pending_approval_events>`.
    """
    return await journal.pending_approval_events(session_id)
