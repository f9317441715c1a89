"""SqliteJournal: the SQLite implementation of :class:`~acagent.store.Journal`.

- One write connection per process (aiosqlite, WAL, ``synchronous=NORMAL`` by default, FULL with
  ``durability="full"``), ``busy_timeout`` so concurrent writers wait instead of failing with
  "database is locked"; a second connection serves reads (replay, listings) so an attacher's
  replay never queues behind a write (:mod:`acagent.store._sqlite_read`). How calls reach the
  connections — a thread hop, or inline on the event loop for short calls of the write connection
  with ``durability="normal"`` — is :mod:`acagent.store._sqlite_conn`.
- :meth:`SqliteJournal.commit` is the one choke point for durable writes: under ``BEGIN IMMEDIATE``
  it checks the writer's fencing token, applies the guarded ops (:mod:`acagent.store._sqlite_ops`),
  numbers and appends the events (:mod:`acagent.store._numbering`) and commits — one function
  (:mod:`acagent.store._sqlite_commit`) run inline or on the connection's thread (never one hop
  per statement); a commit with more than :data:`~acagent.store._sqlite_commit.INLINE_MAX_CHARS`
  of payload text always runs on the thread.
- New databases use 512-byte pages (:data:`PAGE_SIZE`): a WAL frame is one page, and a small commit
  that appends a few hundred bytes then writes about 0.5 KiB per touched page instead of 4 KiB.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import aiosqlite
import orjson

from acagent._private import private_dir
from acagent.errors import ApprovalNotFound, JournalError
from acagent.events import Event, make_payload, now_ts
from acagent.store._migrations import migrate
from acagent.store._numbering import LAST_MESSAGE_CHARS
from acagent.store._ops import Op
from acagent.store._protocol import ImportedSession
from acagent.store._row_ids import TOOL_CALLS, keys_sql, num_range
from acagent.store._rows import PENDING_APPROVAL, Lease, SessionRow, ToolCallRow, new_session_id
from acagent.store._session_text import LAST_MESSAGE, WARNINGS, set_session_text, set_text
from acagent.store._sqlite_commit import INSERT_EVENT, commit_tx, event_row, is_big
from acagent.store._sqlite_conn import SqliteConnections, map_errors, open_connection
from acagent.store._sqlite_lease import HOSTNAME, SqliteLeases, transaction
from acagent.store._sqlite_ops import step_rid
from acagent.store._sqlite_read import TOOL_SELECT, SqliteReads, tool_row
from acagent.store._usage import UsageQueries

__all__ = ["HOSTNAME", "PAGE_SIZE", "SqliteJournal"]

PAGE_SIZE = 512
"""Page size of a newly created journal, bytes (an existing file keeps its own: changing it needs a
``VACUUM``, which acagent does not run for you). 512 rather than 1024 since m007 (benchmarks
figure 3): a commit rewrites a few mostly-unchanged pages (the session row's, the event b-tree's
last leaf, page 1 when the file grows), and half-size pages halve that, about 20 % fewer bytes per
turn; with compressed payloads and no session id per row a full scan of a session's events was no
slower (0.35 ms against 0.46 ms for 3,067 events; decoding the events costs 100× more)."""
_NEXT_NUM = "(SELECT COALESCE(MAX(num), 0) + 1 FROM session)"
"""A new session's ``num`` (the ``session_num`` index answers it; creation holds the write lock)."""


class SqliteJournal(SqliteConnections, SqliteLeases, SqliteReads, UsageQueries):
    """The SQLite journal. Open with :meth:`open`; close with :meth:`aclose`."""

    def __init__(
        self,
        path: Path,
        write: aiosqlite.Connection,
        read: aiosqlite.Connection,
        busy_timeout_ms: int,
        durability: Literal["normal", "full"] = "normal",
    ):
        super().__init__(write, read, busy_timeout_ms, durability)
        self.path = path
        self._seq_hints: dict[str, tuple[int, int]] = {}
        """``session id → (num, last_seq)`` as this journal last wrote them: a hint that lets a
        commit without ops skip reading the session row (``_append`` verifies it)."""

    @classmethod
    async def open(
        cls, path: Path, *, durability: Literal["normal", "full"] = "normal", busy_timeout_ms: int = 10000
    ) -> SqliteJournal:
        """Open (creating and migrating) the journal at ``path``.

        Raises:
            JournalError: the file cannot be opened or migrated.
        """
        private_dir(path.parent)
        opened: list[aiosqlite.Connection] = []
        try:
            for _ in range(2):
                opened.append(await open_connection(path, busy_timeout_ms))
            for conn in opened:
                await conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                await conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # only takes effect on a new file
                await conn.execute("PRAGMA journal_mode = WAL")
                await conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
                await conn.execute("PRAGMA foreign_keys = ON")
                # Keep a WAL that grew during a burst from staying large on disk after its checkpoint.
                await conn.execute("PRAGMA journal_size_limit = 4194304")
            journal = cls(path, opened[0], opened[1], busy_timeout_ms, durability)
            await journal._run(migrate)
            await journal._start_inline()
            for suffix in ("", "-wal", "-shm"):  # conversations are private: owner-only files
                with contextlib.suppress(OSError):
                    os.chmod(f"{path}{suffix}", 0o600)
        except BaseException as exc:
            for conn in opened:  # their threads would keep the process alive
                await conn.close()
            if isinstance(exc, sqlite3.Error):
                raise map_errors(exc) from exc
            raise
        return journal

    def info(self) -> dict[str, Any]:
        """``{"backend": "sqlite", "path", "busy_timeout_ms"}``."""
        return {"backend": "sqlite", "path": str(self.path), "busy_timeout_ms": self.busy_timeout_ms}

    def forget_session(self, session_id: str) -> None:
        """Drop the session's append hint (``_seq_hints``: its num and last seq, 3 small objects
        a session, 4,096 sessions kept): a hibernated session's would stay in memory and, scattered
        among freed runners, keep their pages from going back to the OS (issue 12 item 6)."""
        self._seq_hints.pop(
            session_id, None
        )  # a dict pop is atomic under the GIL (the writer thread reads it)

    # ------------------------------------------------------------------ unfenced creation

    async def create_session(
        self, *, cwd: str, model: str | None, title: str | None, session_id: str | None = None
    ) -> tuple[SessionRow, Event]:
        """Create a session in ``pending`` with its ``session.created`` event (seq 1)."""
        sid = session_id or new_session_id()
        ts = now_ts()
        payload = make_payload("session.created", cwd=cwd, model=model, title=title)

        def tx(db: sqlite3.Connection) -> None:
            num = db.execute(
                "INSERT INTO session (id, cwd, title, model, status, created_at, updated_at, last_seq, num)"
                f" VALUES (?, ?, ?, ?, 'pending', ?, ?, 1, {_NEXT_NUM}) RETURNING num",
                (sid, cwd, title, model, ts, ts),
            ).fetchone()[0]
            db.execute(INSERT_EVENT, event_row(num, 1, ts, "session.created", orjson.dumps(payload).decode()))

        await self._run_short(lambda db: transaction(db, lambda: tx(db)))
        event = Event(seq=1, ts=ts, session_id=sid, type="session.created", payload=payload)
        return await self.get_session(sid), event

    async def import_session(self, session: ImportedSession, events: Iterable[Event]) -> None:
        """Create ``session`` with ``events`` in one transaction, streaming them in batches.

        The iterable is consumed on the connection's thread (it may read a file: the event loop
        is never blocked), 500 rows per ``executemany``; ``session``'s fields are written after it
        is exhausted.

        Raises:
            JournalError: the id exists, or the store failed (nothing written).
        """
        ts = now_ts()

        def body(db: sqlite3.Connection) -> None:
            s = session
            num = db.execute(
                "INSERT INTO session (id, cwd, status, created_at, updated_at, num)"
                f" VALUES (?, ?, 'pending', ?, ?, {_NEXT_NUM}) RETURNING num",
                (s.session_id, s.cwd, s.created_at or ts, ts),
            ).fetchone()[0]
            batch: list[tuple[Any, ...]] = []
            for e in events:
                batch.append(event_row(num, e.seq, e.ts, e.type, orjson.dumps(e.payload).decode()))
                if len(batch) >= 500:
                    db.executemany(INSERT_EVENT, batch)
                    batch.clear()
            if batch:
                db.executemany(INSERT_EVENT, batch)
            db.execute(
                "UPDATE session SET cwd = ?, title = ?, model = ?, status = ?, created_at = ?, last_seq = ?,"
                " checkpoint_seq = ?, checkpoint_bytes = ?, tail_bytes = ?, transcript_stat = ? WHERE id = ?",
                (
                    s.cwd,
                    s.title,
                    s.model,
                    s.status,
                    s.created_at or ts,
                    s.last_seq,
                    *s.checkpoint,
                    s.tail_bytes,
                    orjson.dumps(s.transcript_stat).decode() if s.transcript_stat else None,
                    s.session_id,
                ),
            )
            set_text(db, num, LAST_MESSAGE, (s.last_message or "")[:LAST_MESSAGE_CHARS] or None)  # (m013)
            set_text(db, num, WARNINGS, orjson.dumps(s.warnings).decode() if s.warnings else None)

        try:
            await self._run(lambda db: transaction(db, lambda: body(db)))
        except JournalError as exc:
            if "UNIQUE" in exc.message:
                raise JournalError(
                    f"session {session.session_id!r} already exists; nothing imported"
                ) from exc
            raise

    # ------------------------------------------------------------------ commits

    async def commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        lease: Lease,
        ops: Sequence[Op] = (),
    ) -> list[Event]:
        """Append ``events`` and apply ``ops`` in one transaction fenced by ``lease``.

        Raises:
            StaleLease: the fencing token moved on (a zombie writer); nothing is written.
            InvalidTransition: an op's precondition failed; nothing is written.
            SessionNotFound: no such session.
            JournalError: SQLite failed (disk full, locked past the busy timeout, …).
        """
        if not isinstance(lease, Lease):
            raise TypeError("commit needs the writer's Lease; unfenced writes use commit_unfenced")
        return await self._commit(session_id, events, ops, lease)

    async def commit_unfenced(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        ops: Sequence[Op] = (),
        reason: str,
    ) -> list[Event]:
        """:meth:`commit` without a lease: repair and administration only (``reason`` says which)."""
        if not reason:
            raise ValueError("an unfenced commit names its reason")
        return await self._commit(session_id, events, ops, None)

    async def _commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        ops: Sequence[Op],
        lease: Lease | None,
    ) -> list[Event]:
        ts = now_ts()
        size = [0]  # the payloads' bytes, for the WAL estimate (set on whichever thread runs body)

        def body(db: sqlite3.Connection) -> list[Event]:
            return commit_tx(db, self._seq_hints, session_id, lease, ts, events, ops, size)

        # a big payload (a long tool output, a compaction snapshot) is compressed and written on
        # the thread, where zlib and SQLite release the GIL and the loop keeps running
        run = self._run if is_big(events) else self._run_short
        out = await run(lambda db: transaction(db, lambda: body(db)))
        self._wal_pages += size[0] // PAGE_SIZE
        return out

    # ------------------------------------------------------------------ metadata (any process)

    async def _set_column(self, session_id: str, column: str, value: Any) -> None:
        await self._run_short(
            lambda db: db.execute(f"UPDATE session SET {column} = ? WHERE id = ?", (value, session_id))
        )

    async def set_cancel(self, session_id: str, value: bool, *, turn_id: str | None = None) -> SessionRow:
        """Set or clear the session's cancel flag (any process may set it; see :class:`Journal`)."""
        if turn_id is None:
            await self._set_column(session_id, "cancel_requested", int(value))
        else:
            await self._run_short(
                lambda db: db.execute(
                    "UPDATE session SET cancel_requested = ? WHERE id = ? AND turn_id = ?",
                    (int(value), session_id, turn_id),
                )
            )
        return await self.get_session(session_id)

    async def set_transcript_stat(self, session_id: str, stat: dict[str, int] | None) -> None:
        """Record (or forget) the transcript's state as its writer closed it."""
        await self._set_column(session_id, "transcript_stat", orjson.dumps(stat).decode() if stat else None)

    async def set_warnings(self, session_id: str, warnings: list[Any]) -> None:
        """Replace the session's warnings list (shown by ``GET /v1/sessions/{id}``)."""
        text = orjson.dumps(warnings).decode()
        await self._run(lambda db: set_session_text(db, session_id, WARNINGS, text))  # beside the row (m013)

    async def resolve_approval(
        self, session_id: str, tool_call_id: str, decision: str, *, note: str | None = None
    ) -> ToolCallRow:
        """Record the first decision on a pending approval (compare-and-set).

        Raises:
            ApprovalNotFound: unknown id, or already resolved (``detail`` names the winning
                decision and why).
        """

        tid = step_rid(session_id, tool_call_id)  # found by its hash (m017)
        found = f"key IN ({keys_sql(TOOL_CALLS)}) AND session_id = ? AND tool_call_id = ?"

        def tx(db: sqlite3.Connection) -> tuple[int, ToolCallRow | None]:
            where = (*num_range(db, session_id), tid, tid, session_id, tool_call_id)
            cur = db.execute(
                f"UPDATE tool_call SET approval = ?, approval_note = ? WHERE {found} AND {PENDING_APPROVAL}",
                (decision, note, *where),
            )
            row = db.execute(f"SELECT {TOOL_SELECT} FROM tool_call WHERE {found}", where).fetchone()
            return cur.rowcount, None if row is None else tool_row(db, row)

        changed, tc = await self._run(tx)
        if tc is None:
            raise ApprovalNotFound(f"no approval {tool_call_id!r} in session {session_id!r}")
        if not changed:
            raise ApprovalNotFound(
                f"approval {tool_call_id!r} is already resolved ({tc.approval})",
                detail={"decision": tc.approval, "note": tc.approval_note, "status": tc.status},
            )
        return tc
