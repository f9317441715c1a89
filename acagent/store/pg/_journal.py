"""PostgresJournal: the journal on PostgreSQL (asyncpg), for several daemons sharing sessions.

The same public methods as :class:`~acagent.store.SqliteJournal`, the same rows and the same
guarded operations, so nothing above the store changes. What differs, and why:

- **Fenced appends in one statement.** :meth:`PostgresJournal.commit` without row operations is
  one ``UPDATE session … WHERE id = $1 AND fencing_token = $2 RETURNING`` joined (CTE) to the
  ``INSERT INTO event``: the fence, the seq assignment and the append are one statement, so a
  zombie writer (its lease epoch superseded) writes nothing. With row operations the session row
  is locked (``SELECT … FOR UPDATE``) for the length of one transaction — never across an LLM or
  tool await: the transaction only holds statements.
- **Retry after a lost connection** (terminated backend, server restart): every call retries on
  transient errors for ``retry_s``. A commit carries a commit id on its first event, so a retry
  whose previous attempt did land returns those events instead of appending twice.
- **Hints after commit.** Each commit reports ``(session_id, last_seq)`` to ``on_commit`` (the
  cluster's batched NOTIFY, :mod:`acagent.store.pg._cluster`), never inside the transaction; a
  journal without a cluster sends one ``pg_notify`` itself after the transaction.
- Leases and liveness (database clock, advisory locks, claims) live in
  :mod:`acagent.store.pg._leases`; reads of steps, tool calls and approvals in
  :mod:`acagent.store.pg._queries`.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import fields
from typing import Any, Literal, TypeVar

import anyio
import orjson

from acagent.errors import JournalError, SessionNotFound, StaleLease
from acagent.events import Event, make_payload, now_ts
from acagent.store import CONTEXT_TYPES, Lease, Op, SessionRow, SetStatus, new_session_id
from acagent.store._numbering import commit_order
from acagent.store._usage import UsageQueries
from acagent.store.pg._bridge import run_sync_fn
from acagent.store.pg._conn import TRANSIENT, describe, pg_errors, redact_url
from acagent.store.pg._leases import LeaseMixin
from acagent.store.pg._ops import PgTx, apply_op
from acagent.store.pg._protocol_extras import ProtocolExtras
from acagent.store.pg._queries import QueryMixin
from acagent.store.pg._schema import check_tables, migrate_pg

__all__ = ["EVENTS_CHANNEL", "PostgresJournal"]

T = TypeVar("T")
log = logging.getLogger("acagent.store.pg")
EVENTS_CHANNEL = "acagent_events"
"""NOTIFY channel: payload ``"sid:seq sid:seq …"`` = "read the journal after seq X" (hints only)."""

_SESSION_COLS = ", ".join(f.name for f in fields(SessionRow))

_APPEND = """
WITH s AS (
    UPDATE session SET
        last_seq = last_seq + $3,
        updated_at = CASE WHEN $3 > 0 THEN $4 ELSE updated_at END,
        tail_bytes = CASE WHEN $5 > 0 THEN $6 ELSE tail_bytes + $6 END,
        last_message = COALESCE($7, last_message),
        checkpoint_seq = CASE WHEN $5 > 0 THEN last_seq + $5 ELSE checkpoint_seq END,
        checkpoint_bytes = CASE WHEN $5 > 0 THEN $8 ELSE checkpoint_bytes END
    WHERE id = $1 AND ($2::bigint IS NULL OR fencing_token = $2::bigint)
    RETURNING last_seq - $3 AS base
), ins AS (
    INSERT INTO event (session_id, seq, ts, type, payload, commit_id)
    SELECT $1, s.base + e.ord, $4, e.type, e.payload, CASE WHEN e.ord = 1 THEN $9 END
    FROM s, unnest($10::text[], $11::text[]) WITH ORDINALITY AS e(type, payload, ord)
)
SELECT base FROM s
"""


def _fold(all_events: Sequence[tuple[str, dict[str, Any]]]) -> tuple[list[str], int, int, int, str | None]:
    """Payload texts and the session counters a batch moves (same rules as SQLite's commit).

    Returns:
        ``(texts, tail_bytes_added, checkpoint_position (1-based, 0 = none), checkpoint_bytes,
        last_message)``.
    """
    texts: list[str] = []
    tail = ckpt_pos = ckpt_bytes = 0
    last_message: str | None = None
    for i, (typ, payload) in enumerate(all_events, start=1):
        text = orjson.dumps(payload).decode()
        texts.append(text)
        if typ in CONTEXT_TYPES:
            tail += len(text)
            if typ != "tool.result" and payload.get("text"):
                last_message = payload["text"]
        elif typ == "checkpoint":
            ckpt_pos, ckpt_bytes, tail = i, len(text), 0
    return texts, tail, ckpt_pos, ckpt_bytes, last_message[:500] if last_message is not None else None


class PostgresJournal(LeaseMixin, QueryMixin, ProtocolExtras, UsageQueries):
    """The PostgreSQL implementation of the journal. Open with :meth:`open`; close with :meth:`aclose`.

    Attributes:
        daemon_id: this process's id in the cluster (its advisory lock is its liveness).
        where: the URL without the password, for messages.
        on_commit: set by the cluster to batch NOTIFY hints; ``None`` = notify after each commit.
    """

    def __init__(
        self, pool: Any, *, where: str, daemon_id: str, retry_s: float, busy_timeout_ms: int
    ) -> None:
        self._pool = pool
        self.where = where
        self.daemon_id = daemon_id
        self.retry_s = retry_s
        self.busy_timeout_ms = busy_timeout_ms
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.on_commit: Callable[[str, int], None] | None = None
        self._liveness: Any = None

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        daemon_id: str | None = None,
        durability: Literal["normal", "full"] = "normal",
        busy_timeout_ms: int = 10000,
        retry_s: float = 15.0,
        max_connections: int = 8,
    ) -> PostgresJournal:
        """Connect, migrate, check the tables and take this daemon's liveness lock.

        Args:
            url: ``postgresql://user:password@host:port/db``.
            daemon_id: the cluster id (default ``host:pid``); another live process holding the
                same id is refused.
            durability: accepted for symmetry with SQLite; PostgreSQL commits are durable
                (``synchronous_commit``) as the server is configured.
            busy_timeout_ms: the lock wait bound (``lock_timeout``), milliseconds.
            retry_s: how long calls retry after a lost connection, seconds.
            max_connections: pool size.

        Raises:
            JournalError: unreachable, refused credentials, a newer schema, a missing table, or
                the daemon id is live elsewhere — one line naming the URL without the password.
        """
        import asyncpg

        where = redact_url(url)
        daemon_id = daemon_id or f"{socket.gethostname()}:{os.getpid()}"
        settings = {
            "application_name": f"acagent:{daemon_id}"[:63],
            "lock_timeout": str(int(busy_timeout_ms)),
        }
        with pg_errors(where):
            try:
                with anyio.fail_after(10):
                    pool = await asyncpg.create_pool(
                        url, min_size=1, max_size=max_connections, server_settings=settings, timeout=10
                    )
            except TimeoutError as exc:
                raise JournalError(
                    f"cannot reach the PostgreSQL journal at {where}: timed out after 10 s"
                ) from exc
        journal = cls(
            pool, where=where, daemon_id=daemon_id, retry_s=retry_s, busy_timeout_ms=busy_timeout_ms
        )
        try:
            with pg_errors(where):
                async with pool.acquire() as conn:
                    await migrate_pg(conn, where)
                    await check_tables(conn, where)
                await journal._take_liveness(url, settings)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await journal.aclose()
            raise
        return journal

    async def aclose(self) -> None:
        """Release the liveness lock (closing its connection) and close the pool."""
        with anyio.CancelScope(shield=True), anyio.move_on_after(5):
            if self._liveness is not None:
                conn, self._liveness = self._liveness, None
                try:
                    await conn.close(timeout=2)
                except Exception:
                    conn.terminate()
            try:
                await self._pool.close()
            except Exception:
                self._pool.terminate()

    async def _retry(self, fn: Callable[[Any], Awaitable[T]]) -> T:
        """Run ``fn(connection)``; on a lost connection retry (backoff) for ``retry_s`` seconds."""
        deadline = anyio.current_time() + self.retry_s
        delay = 0.05
        with pg_errors(self.where):
            while True:
                try:
                    async with self._pool.acquire(timeout=self.retry_s) as conn:
                        return await fn(conn)
                except TRANSIENT as exc:
                    if anyio.current_time() + delay > deadline:
                        raise
                    log.warning("journal %s: %s; retrying", self.where, describe(exc))
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 0.5)

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        return await self._retry(lambda c: c.fetch(sql, *args))

    async def _run(self, fn: Callable[[Any], T], *, read: bool = False) -> T:
        """Run a SQLite-shaped ``fn(db)`` (``db.execute(sql, params)``) on one connection.

        For code above the store written against :meth:`SqliteJournal._run` (see
        :mod:`acagent.store.pg._bridge`); new code uses the public methods.
        """
        return await self._retry(lambda c: run_sync_fn(c, fn))

    # ------------------------------------------------------------------ sessions

    async def create_session(
        self, *, cwd: str, model: str | None, title: str | None, session_id: str | None = None
    ) -> tuple[SessionRow, Event]:
        """Create a session in ``pending`` with its ``session.created`` event (seq 1)."""
        sid = session_id or new_session_id()
        ts = now_ts()
        payload = make_payload("session.created", cwd=cwd, model=model, title=title)

        async def tx(conn: Any) -> None:
            async with conn.transaction():
                if await conn.fetchval("SELECT 1 FROM session WHERE id = $1", sid):
                    return  # a retry whose first attempt landed
                await conn.execute(
                    "INSERT INTO session (id, cwd, title, model, status, created_at, updated_at, last_seq)"
                    " VALUES ($1, $2, $3, $4, 'pending', $5, $5, 1)",
                    sid,
                    cwd,
                    title,
                    model,
                    ts,
                )
                await conn.execute(
                    "INSERT INTO event (session_id, seq, ts, type, payload) VALUES ($1, 1, $2, 'session.created', $3)",
                    sid,
                    ts,
                    orjson.dumps(payload).decode(),
                )

        await self._retry(tx)
        self._hint(sid, 1)
        return await self.get_session(sid), Event(
            seq=1, ts=ts, session_id=sid, type="session.created", payload=payload
        )

    async def get_session(self, session_id: str) -> SessionRow:
        """The session row.

        Raises:
            SessionNotFound: no such id (the message says how to list sessions).
        """
        rows = await self._fetch(f"SELECT {_SESSION_COLS} FROM session WHERE id = $1", session_id)
        if not rows:
            raise SessionNotFound(f"no session {session_id!r}; `acagent sessions list --all` lists them")
        return SessionRow(*rows[0])

    async def find_session(self, prefix: str) -> SessionRow:
        """The session whose id is ``prefix`` or starts with it (unique).

        Raises:
            SessionNotFound: none, or the prefix is ambiguous.
        """
        like = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        rows = await self._fetch(
            f"SELECT {_SESSION_COLS} FROM session WHERE id = $1 OR id LIKE $2 LIMIT 2", prefix, like
        )
        exact = [r for r in rows if r[0] == prefix]
        if exact:
            return SessionRow(*exact[0])
        if len(rows) != 1:
            what = "is ambiguous" if rows else "matches no session"
            raise SessionNotFound(f"session id {prefix!r} {what}; `acagent sessions list --all` lists them")
        return SessionRow(*rows[0])

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int | None = None, statuses: Sequence[str] | None = None
    ) -> list[SessionRow]:
        """Sessions, newest ``updated_at`` first, optionally of one working directory or statuses."""
        rows = await self._fetch(
            f"SELECT {_SESSION_COLS} FROM session WHERE ($1::text IS NULL OR cwd = $1)"
            " AND ($2::text[] IS NULL OR status = ANY($2::text[])) ORDER BY updated_at DESC, id DESC LIMIT $3",
            cwd,
            list(statuses) if statuses is not None else None,
            limit,
        )
        return [SessionRow(*r) for r in rows]

    # ------------------------------------------------------------------ events

    async def events(
        self, session_id: str, since: int = 0, *, limit: int | None = None, until: int | None = None
    ) -> list[Event]:
        """Committed events with ``since < seq (<= until)``, ascending seq, at most ``limit``."""
        rows = await self._fetch(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = $1 AND seq > $2"
            " AND ($3::bigint IS NULL OR seq <= $3::bigint) ORDER BY seq LIMIT $4",
            session_id,
            since,
            until,
            limit,
        )
        return [
            Event(seq=s, ts=ts, session_id=session_id, type=t, payload=orjson.loads(p))
            for s, ts, t, p in rows
        ]

    async def context_events(self, session_id: str) -> list[Event]:
        """The latest checkpoint (if any) and the context-relevant events after it, ascending seq."""
        row = await self.get_session(session_id)
        rows = await self._fetch(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = $1 AND seq >= $2"
            " AND type = ANY($3::text[]) ORDER BY seq",
            session_id,
            row.checkpoint_seq,
            ["checkpoint", *CONTEXT_TYPES],
        )
        return [
            Event(seq=s, ts=ts, session_id=session_id, type=t, payload=orjson.loads(p))
            for s, ts, t, p in rows
        ]

    async def commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        lease: Lease,
        ops: Sequence[Op] = (),
    ) -> list[Event]:
        """Append ``events`` and apply ``ops`` in one transaction, fenced; return the committed events.

        Same contract as :meth:`Journal.commit <acagent.store.Journal.commit>` (unfenced writes:
        :meth:`commit_unfenced`).
        """
        if not isinstance(lease, Lease):
            raise TypeError("commit needs the writer's Lease; unfenced writes use commit_unfenced")
        return await self._commit(session_id, events, lease=lease, ops=ops)

    async def _commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        lease: Lease | None,
        ops: Sequence[Op] = (),
    ) -> list[Event]:
        """:meth:`commit` with an optional lease (``None``: unfenced).

        Raises:
            StaleLease: the fencing token was superseded (nothing written).
            InvalidTransition: a guarded operation's precondition failed (nothing written).
            SessionNotFound: no such session.
            JournalError: the server stayed unreachable for ``retry_s``.
        """
        ts = now_ts()
        cid = uuid.uuid4().hex
        token = lease.token if lease is not None else None
        attempts = 0

        async def tx(conn: Any) -> list[Event]:
            nonlocal attempts
            attempts += 1
            if attempts > 1:
                landed = await self._landed(conn, session_id, cid)
                if landed is not None:
                    return landed
            if not ops:
                return await self._append(conn, session_id, token, list(events), ts, cid)
            async with conn.transaction():
                row = await conn.fetchrow(
                    "SELECT fencing_token, status, cancel_requested FROM session WHERE id = $1 FOR UPDATE",
                    session_id,
                )
                if row is None:
                    raise SessionNotFound(f"no session {session_id!r}")
                if token is not None and row[0] != token:
                    raise StaleLease(
                        f"session {session_id!r}: fencing token {token} superseded by {row[0]}; write discarded"
                    )
                tx_state = PgTx(conn, session_id, ts, status=row[1], cancel_requested=row[2])
                extra = [e for op in ops if (e := await apply_op(op, tx_state)) is not None]
                ordered = commit_order(extra, events)  # the same order as SQLite
                return await self._append(conn, session_id, token, ordered, ts, cid)

        committed = await self._retry(tx)
        if committed:
            self._hint(session_id, committed[-1].seq)
            await self._notify_now(session_id, committed[-1].seq)
        return committed

    async def _append(
        self,
        conn: Any,
        session_id: str,
        token: int | None,
        all_events: list[tuple[str, dict[str, Any]]],
        ts: str,
        cid: str,
    ) -> list[Event]:
        """The one fenced append statement (see module docstring)."""
        texts, tail, ckpt_pos, ckpt_bytes, last_message = _fold(all_events)
        base = await conn.fetchval(
            _APPEND,
            session_id,
            token,
            len(all_events),
            ts,
            ckpt_pos,
            tail,
            last_message,
            ckpt_bytes,
            cid,
            [t for t, _ in all_events],
            texts,
        )
        if base is None:
            current = await conn.fetchval("SELECT fencing_token FROM session WHERE id = $1", session_id)
            if current is None:
                raise SessionNotFound(f"no session {session_id!r}")
            raise StaleLease(
                f"session {session_id!r}: fencing token {token} superseded by {current}; write discarded"
            )
        return [
            Event(seq=base + i, ts=ts, session_id=session_id, type=typ, payload=payload)
            for i, (typ, payload) in enumerate(all_events, start=1)
        ]

    async def _landed(self, conn: Any, session_id: str, cid: str) -> list[Event] | None:
        """The events of commit ``cid`` if an earlier attempt landed (its first event carries the id)."""
        first = await conn.fetchval(
            "SELECT seq FROM event WHERE session_id = $1 AND commit_id = $2", session_id, cid
        )
        if first is None:
            return None
        rows = await conn.fetch(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = $1 AND seq >= $2 AND seq < COALESCE("
            "(SELECT min(seq) FROM event WHERE session_id = $1 AND seq > $2 AND commit_id IS NOT NULL),"
            " 9223372036854775807) ORDER BY seq",
            session_id,
            first,
        )
        return [
            Event(seq=s, ts=ts, session_id=session_id, type=t, payload=orjson.loads(p))
            for s, ts, t, p in rows
        ]

    def _hint(self, session_id: str, seq: int) -> None:
        """Report a commit to the cluster's batched notifier (after the transaction, never in it)."""
        if self.on_commit is not None:
            self.on_commit(session_id, seq)

    async def _notify_now(self, session_id: str, seq: int) -> None:
        """Without a cluster (``acagent run`` on a shared journal): one NOTIFY after the commit, best effort."""
        if self.on_commit is None:
            try:
                await self._pool.execute("SELECT pg_notify($1, $2)", EVENTS_CHANNEL, f"{session_id}:{seq}")
            except Exception as exc:  # a hint only: the listeners' 1 s poll covers a lost one
                log.debug("notify failed: %s", exc)

    async def status_transition(
        self,
        session_id: str,
        to: str,
        from_: Sequence[str],
        *,
        reason: str | None = None,
        lease: Lease | None = None,
    ) -> list[Event]:
        """Commit a bare status change (with its ``session.status`` event)."""
        return await self._commit(
            session_id, [], lease=lease, ops=[SetStatus(to, tuple(from_), reason=reason)]
        )

    # ------------------------------------------------------------------ small row updates

    async def cancel_requested(self, session_id: str) -> bool:
        """The session's cancel flag."""
        rows = await self._fetch("SELECT cancel_requested FROM session WHERE id = $1", session_id)
        return bool(rows and rows[0][0])

    async def set_cancel(self, session_id: str, value: bool, *, turn_id: str | None = None) -> SessionRow:
        """Set or clear the session's cancel flag (any daemon may set it; the owner is hinted).
        With ``turn_id``, only while that turn is current (see :class:`Journal`)."""
        await self._retry(
            lambda c: c.execute(
                "UPDATE session SET cancel_requested = $2 WHERE id = $1 AND ($3::text IS NULL OR turn_id = $3)",
                session_id,
                int(value),
                turn_id,
            )
        )
        if value:
            await self.notify_inbox(session_id, "cancel")
        return await self.get_session(session_id)

    async def set_transcript_stat(self, session_id: str, stat: dict[str, int] | None) -> None:
        """Record (or forget) the transcript's state as its writer closed it."""
        text = orjson.dumps(stat).decode() if stat is not None else None
        await self._retry(
            lambda c: c.execute("UPDATE session SET transcript_stat = $2 WHERE id = $1", session_id, text)
        )

    async def set_warnings(self, session_id: str, warnings: list[Any]) -> None:
        """Replace the session's warnings list (shown by ``GET /v1/sessions/{id}``)."""
        text = orjson.dumps(warnings).decode()
        await self._retry(
            lambda c: c.execute("UPDATE session SET warnings = $2 WHERE id = $1", session_id, text)
        )
