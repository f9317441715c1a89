"""Leases of :class:`~acagent.store.SqliteJournal`: take, renew, check and release.

Taking a lease is one conditional UPDATE guarded by the observed fencing token, which it bumps;
expiry is judged on this host's clock (one machine: one clock).
"""

from __future__ import annotations

import functools
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import orjson

from acagent.errors import SessionBusy, SessionNotFound
from acagent.obs import metrics
from acagent.store._protocol import IsDead
from acagent.store._rows import Lease, SessionRow
from acagent.store._session_text import SESSION_SELECT, session_row

__all__ = ["HOSTNAME", "SqliteLeases", "transaction"]

T = TypeVar("T")
SESSION_COLUMNS = SESSION_SELECT  # the long texts from session_text (m013)
HOSTNAME = socket.gethostname()


def transaction(db: sqlite3.Connection, fn: Callable[[], T]) -> T:
    """Run ``fn`` inside ``BEGIN IMMEDIATE`` … ``COMMIT``; roll back on any exception."""
    db.execute("BEGIN IMMEDIATE")
    try:
        out = fn()
        db.execute("COMMIT")
        return out
    except BaseException:
        if db.in_transaction:  # SQLite already rolled back on SQLITE_FULL/IOERR; keep that error
            db.execute("ROLLBACK")
        raise


_KEEP_INLINE = 32
"""``keep_leases`` of at most this many sessions runs inline (see ``_sqlite_conn``); more is
one longer transaction, sent to the write connection's thread."""


class SqliteLeases:
    """Mixin: the lease operations (``_run``/``_run_short`` come from ``SqliteConnections``)."""

    async def _run(self, fn: Callable[[sqlite3.Connection], T], *, read: bool = False) -> T:
        raise NotImplementedError

    async def _run_short(self, fn: Callable[[sqlite3.Connection], T], *, writes: bool = True) -> T:
        raise NotImplementedError

    async def acquire_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float,
        pid: int | None = None,
        host: str | None = None,
        is_dead: IsDead | None = None,
    ) -> Lease:
        """Take the session's lease if it is free, expired, held by ``owner`` or by a dead process.

        One conditional UPDATE guarded by the observed fencing token, which it bumps. The lease
        does not look at the cancel flag (a cancelled running session must still be finishable).

        Raises:
            SessionBusy: a live holder has it (the message names its pid and points to attach).
        """
        lease, _ = await self._acquire(session_id, owner, ttl_s, pid, host, is_dead, with_row=False)
        return lease

    async def lease_session(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float,
        pid: int | None = None,
        host: str | None = None,
        is_dead: IsDead | None = None,
    ) -> tuple[Lease, SessionRow, dict[str, Any]]:
        """:meth:`acquire_lease`, then the session row and its own caps, on the same thread hop."""
        lease, got = await self._acquire(session_id, owner, ttl_s, pid, host, is_dead, with_row=True)
        assert got is not None
        row, limits = got
        return lease, row, orjson.loads(limits) if limits else {}

    async def _acquire(
        self,
        session_id: str,
        owner: str,
        ttl_s: float,
        pid: int | None,
        host: str | None,
        is_dead: IsDead | None,
        *,
        with_row: bool,
    ) -> tuple[Lease, tuple[SessionRow, str | None] | None]:
        pid = os.getpid() if pid is None else pid
        host = HOSTNAME if host is None else host

        def tx(db: sqlite3.Connection) -> Lease:
            now = time.time()
            row = db.execute(
                "SELECT lease_owner, lease_host, lease_pid, lease_expires_at, fencing_token FROM session WHERE id = ?",
                (session_id,),
            ).fetchone()
            if row is None:
                raise SessionNotFound(f"no session {session_id!r}")
            cur_owner, cur_host, cur_pid, expires, token = row
            free = cur_owner is None or (expires or 0) < now or cur_owner == owner
            if not free and is_dead is not None and is_dead(cur_host, cur_pid):
                free = True
            if not free:
                where = f"pid {cur_pid}" + (f" on {cur_host}" if cur_host != HOSTNAME else "")
                raise SessionBusy(
                    f"session {session_id} is open in {where}; use `acagent attach {session_id}`",
                    detail={"holder_pid": cur_pid, "holder_host": cur_host},
                )
            cur = db.execute(
                "UPDATE session SET lease_owner = ?, lease_host = ?, lease_pid = ?, lease_expires_at = ?,"
                " fencing_token = fencing_token + 1 WHERE id = ? AND fencing_token = ?",
                (owner, host, pid, now + ttl_s, session_id, token),
            )
            if cur.rowcount != 1:
                raise SessionBusy(f"session {session_id} lease was taken concurrently; retry")
            taken_over[0] = cur_owner is not None and cur_owner != owner
            return Lease(owner=owner, token=token + 1)

        def tx_row(db: sqlite3.Connection) -> tuple[Lease, tuple[SessionRow, str | None] | None]:
            lease = tx(db)
            if not with_row:
                return lease, None
            row = db.execute(
                f"SELECT {SESSION_COLUMNS}, limits FROM session WHERE id = ?", (session_id,)
            ).fetchone()
            return lease, (session_row(row), row[-1])

        taken_over = [False]  # a holder that never released it (dead or expired): a takeover
        out = await self._run_short(tx_row)  # re-runnable: taken_over is set again
        if taken_over[0]:
            metrics().lease_takeover()
        return out

    async def renew_lease(self, session_id: str, lease: Lease, *, ttl_s: float) -> tuple[bool, bool]:
        """Extend the lease by ``ttl_s`` seconds; return ``(still_held, cancel_requested)``."""
        return (await self.keep_leases([(session_id, lease)], ttl_s=ttl_s, renew=True))[session_id]

    async def keep_leases(
        self, leases: Sequence[tuple[str, Lease]], *, ttl_s: float, renew: bool
    ) -> dict[str, tuple[bool, bool]]:
        """Renew (``renew=True``) or just check many leases in one transaction.

        One thread hop per call however many sessions a process runs (the registry's lease
        keeper calls it about once a second).

        Returns:
            ``{session_id: (still_held, cancel_requested)}``.
        """

        def body(db: sqlite3.Connection) -> dict[str, tuple[bool, bool]]:
            out: dict[str, tuple[bool, bool]] = {}
            expires = time.time() + ttl_s
            for sid, lease in leases:
                if renew:
                    db.execute(
                        "UPDATE session SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? AND fencing_token = ?",
                        (expires, sid, lease.owner, lease.token),
                    )
                row = db.execute(
                    "SELECT lease_owner, fencing_token, cancel_requested FROM session WHERE id = ?", (sid,)
                ).fetchone()
                held = row is not None and row[0] == lease.owner and row[1] == lease.token
                out[sid] = (held, bool(row and row[2]))
            return out

        run = self._run if len(leases) > _KEEP_INLINE else functools.partial(self._run_short, writes=renew)
        if renew:
            return await run(lambda db: transaction(db, lambda: body(db)))
        return await run(body)

    async def release_lease(self, session_id: str, lease: Lease) -> None:
        """Give the lease up (no-op if it was superseded)."""

        def tx(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE session SET lease_owner = NULL, lease_expires_at = NULL"
                " WHERE id = ? AND lease_owner = ? AND fencing_token = ?",
                (session_id, lease.owner, lease.token),
            )

        await self._run_short(tx)


def live_lease_holder(db: sqlite3.Connection) -> tuple[str, int] | None:
    """``(session_id, pid)`` of a session whose lease a live acagent process of this host other
    than this one holds (not expired), or None.

    Read by :func:`acagent.store._migrations.migrate` before it upgrades a journal: while a
    migration is pending only an older acagent can hold a lease (a current one migrates before
    it takes one), and it could not record its turn after the upgrade (F130).
    """
    from acagent._pids import pid_alive, runs_acagent

    rows = db.execute(
        "SELECT id, lease_pid FROM session WHERE lease_owner IS NOT NULL AND lease_expires_at > ? AND lease_host = ?",
        (time.time(), HOSTNAME),
    ).fetchall()
    for session_id, pid in rows:
        if isinstance(pid, int) and pid != os.getpid() and pid_alive(pid) and runs_acagent(pid):
            return session_id, pid
    return None
