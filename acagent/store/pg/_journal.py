"""PostgresJournal: the journal on PostgreSQL (asyncpg), for several daemons sharing sessions.

The same public methods as :class:`~acagent.store.SqliteJournal`, the same rows and the same
guarded operations, so nothing above the store changes. This module holds opening (migrate, check
the tables, take the liveness lock), the retry loop and the session/event reads; the rest is in
mixins:

- fenced appends, commit ids and hints after commit: :mod:`acagent.store.pg._append`;
- leases and liveness (database clock, advisory locks, claims): :mod:`acagent.store.pg._leases`;
- the inbox (input posted to any daemon): :mod:`acagent.store.pg._inbox`;
- reads of steps, tool calls and approvals: :mod:`acagent.store.pg._queries`.

**Retry after a lost connection** (terminated backend, server restart): every call retries on
transient errors for ``retry_s``.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import fields
from typing import Any, Literal, TypeVar

import anyio
import orjson

from acagent.errors import JournalError, SessionNotFound, check_session_prefix
from acagent.events import Event, make_payload, now_ts
from acagent.store import SessionRow, new_session_id
from acagent.store._ops import CONTEXT_READ_TYPES
from acagent.store._usage import UsageQueries
from acagent.store.pg._append import EVENTS_CHANNEL, AppendMixin
from acagent.store.pg._bridge import run_sync_fn
from acagent.store.pg._conn import (
    TRANSIENT_OR_TIMEOUT,
    describe,
    no_reset,
    pg_errors,
    redact_url,
    session_settings,
)
from acagent.store.pg._inbox import InboxMixin
from acagent.store.pg._leases import LeaseMixin
from acagent.store.pg._protocol_extras import ProtocolExtras
from acagent.store.pg._queries import QueryMixin
from acagent.store.pg._schema import check_tables, migrate_pg

__all__ = ["EVENTS_CHANNEL", "PostgresJournal"]

T = TypeVar("T")
log = logging.getLogger("acagent.store.pg")

_SESSION_COLS = ", ".join(f.name for f in fields(SessionRow))


class PostgresJournal(AppendMixin, LeaseMixin, InboxMixin, QueryMixin, ProtocolExtras, UsageQueries):
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
        settings = session_settings(daemon_id, busy_timeout_ms)
        with pg_errors(where):
            try:
                with anyio.fail_after(10):
                    pool = await asyncpg.create_pool(
                        url,
                        min_size=1,
                        max_size=max_connections,
                        server_settings=settings,
                        timeout=10,
                        reset=no_reset,
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

    async def _retry(self, fn: Callable[[Any], Awaitable[T]], *, budget_s: float | None = None) -> T:
        """Run ``fn(connection)``; on a lost connection retry (backoff) for ``retry_s`` seconds.

        Each attempt (acquire and call) is bounded by what is left of the budget (``budget_s``,
        default ``retry_s``): a server that stops answering (a blackholed network) is a timeout,
        not a hang. A timed-out connection is terminated (its protocol state is unknown); a
        commit retried after one finds its landed attempt by commit id. (No per-statement
        ``command_timeout`` or server ``statement_timeout``: this bound covers them, and each
        costs a timer per statement — 15–25 % of a trivial round trip here.)
        """
        budget = self.retry_s if budget_s is None else budget_s
        deadline = anyio.current_time() + budget
        delay = 0.05
        with pg_errors(self.where):
            while True:
                try:
                    # one cancel scope bounds the acquire and the call (a timeout on acquire
                    # would cost asyncio.wait_for's extra task on every call)
                    with anyio.fail_after(max(0.05, deadline - anyio.current_time())) as scope:
                        async with self._pool.acquire() as conn:
                            try:
                                return await fn(conn)
                            except BaseException:
                                if scope.cancel_called:
                                    conn.terminate()
                                raise
                except TRANSIENT_OR_TIMEOUT as exc:
                    if anyio.current_time() + delay > deadline:
                        raise
                    log.warning("journal %s: %s; retrying", self.where, describe(exc))
                    await anyio.sleep(delay)
                    delay = min(delay * 2, 0.5)

    async def _fetch(self, sql: str, *args: Any, budget_s: float | None = None) -> list[Any]:
        return await self._retry(lambda c: c.fetch(sql, *args), budget_s=budget_s)

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
            SessionNotFound: none, the prefix is ambiguous, or it is empty or has a character
                no id has (``errors.check_session_prefix``).
        """
        check_session_prefix(prefix)
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

    async def last_events(self, session_id: str, types: Sequence[str], limit: int) -> list[Event]:
        """The newest ``limit`` committed events of ``types``, newest first."""
        rows = await self._fetch(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = $1 AND type = ANY($2::text[])"
            " ORDER BY seq DESC LIMIT $3",
            session_id,
            list(types),
            limit,
        )
        return [
            Event(seq=s, ts=ts, session_id=session_id, type=t, payload=orjson.loads(p))
            for s, ts, t, p in rows
        ]

    async def context_events(self, session_id: str) -> list[Event]:
        """The context events from the latest snapshot position on, ascending seq (as SQLite's)."""
        row = await self.get_session(session_id)
        rows = await self._fetch(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = $1 AND seq >= $2"
            " AND type = ANY($3::text[]) ORDER BY seq",
            session_id,
            row.checkpoint_seq,
            list(CONTEXT_READ_TYPES),
        )
        return [
            Event(seq=s, ts=ts, session_id=session_id, type=t, payload=orjson.loads(p))
            for s, ts, t, p in rows
        ]

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
