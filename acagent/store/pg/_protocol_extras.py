"""The :class:`~acagent.store.Journal` methods PostgresJournal gained with the protocol: the named
unfenced commit, ``info``, paged export and the streaming import (added by the journal engineer so
the conformance suite runs on PostgreSQL too; the PostgreSQL engineer owns this module from here)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any

import orjson

from acagent.errors import JournalError
from acagent.events import Event, now_ts
from acagent.store._numbering import LAST_MESSAGE_CHARS
from acagent.store._ops import Op
from acagent.store._protocol import ImportedSession
from acagent.store.pg._conn import pg_errors

__all__ = ["ProtocolExtras"]

_INSERT = "INSERT INTO event (session_id, seq, ts, type, payload) VALUES ($1, $2, $3, $4, $5)"


class ProtocolExtras:
    """Mixin for :class:`~acagent.store.pg.PostgresJournal` (``_pool``, ``where``, ``_commit``, ``events``)."""

    _pool: Any
    where: str
    busy_timeout_ms: int

    async def _commit(self, session_id: str, events: Any, *, lease: Any, ops: Any = ()) -> list[Event]:
        raise NotImplementedError  # provided by PostgresJournal

    async def events(
        self, session_id: str, since: int = 0, *, limit: int | None = None, until: int | None = None
    ) -> list[Event]:
        raise NotImplementedError  # provided by PostgresJournal

    def info(self) -> dict[str, Any]:
        """``{"backend": "postgresql", "url" (no password), "busy_timeout_ms"}``."""
        return {"backend": "postgresql", "url": self.where, "busy_timeout_ms": self.busy_timeout_ms}

    def forget_session(self, session_id: str) -> None:
        """Nothing to drop: this journal keeps no per-session state between commits."""

    async def commit_unfenced(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        ops: Sequence[Op] = (),
        reason: str,
    ) -> list[Event]:
        """:meth:`commit` without a lease, for repair and administration (``reason`` says which)."""
        if not reason:
            raise ValueError("an unfenced commit names its reason")
        return await self._commit(session_id, events, lease=None, ops=ops)

    async def iter_events(
        self, session_id: str, since: int = 0, *, batch: int = 1000
    ) -> AsyncIterator[Event]:
        """Every committed event after ``since``, ``batch`` at a time."""
        last = since
        while True:
            page = await self.events(session_id, last, limit=batch)
            for event in page:
                yield event
            if len(page) < batch:
                return
            last = page[-1].seq

    async def import_session(self, session: ImportedSession, events: Iterable[Event]) -> None:
        """Create ``session`` with ``events`` in one transaction, 500 rows per ``executemany``.

        One attempt (no retry: the iterable is consumed once). The iterable runs on the event loop
        between batches.

        Raises:
            JournalError: the id exists or the server failed (nothing written).
        """
        import asyncpg

        s = session
        ts = now_ts()
        try:
            with pg_errors(self.where, "import failed"):
                async with self._pool.acquire() as conn, conn.transaction():
                    await conn.execute(
                        "INSERT INTO session (id, cwd, status, created_at, updated_at, last_seq)"
                        " VALUES ($1, $2, 'pending', $3, $4, 0)",
                        s.session_id,
                        s.cwd,
                        s.created_at or ts,
                        ts,
                    )
                    batch: list[tuple[Any, ...]] = []
                    for e in events:
                        batch.append((s.session_id, e.seq, e.ts, e.type, orjson.dumps(e.payload).decode()))
                        if len(batch) >= 500:
                            await conn.executemany(_INSERT, batch)
                            batch.clear()
                    if batch:
                        await conn.executemany(_INSERT, batch)
                    await conn.execute(
                        "UPDATE session SET cwd = $2, title = $3, model = $4, status = $5, created_at = $6,"
                        " last_seq = $7, last_message = $8, checkpoint_seq = $9, checkpoint_bytes = $10,"
                        " tail_bytes = $11, warnings = $12, transcript_stat = $13 WHERE id = $1",
                        s.session_id,
                        s.cwd,
                        s.title,
                        s.model,
                        s.status,
                        s.created_at or ts,
                        s.last_seq,
                        (s.last_message or "")[:LAST_MESSAGE_CHARS] or None,
                        s.checkpoint[0],
                        s.checkpoint[1],
                        s.tail_bytes,
                        orjson.dumps(s.warnings).decode() if s.warnings else None,
                        orjson.dumps(s.transcript_stat).decode() if s.transcript_stat else None,
                    )
        except asyncpg.UniqueViolationError as exc:  # pragma: no cover - pg_errors maps it first
            raise JournalError(f"session {s.session_id!r} already exists; nothing imported") from exc
        except JournalError as exc:
            if "duplicate key" in exc.message or "unique" in exc.message.lower():
                raise JournalError(f"session {s.session_id!r} already exists; nothing imported") from exc
            raise
