"""How :class:`~acagent.store.SqliteJournal` runs its SQL: two connections, a thread each, and the
short calls of the write connection on the event loop's own thread.

- ``_run(fn)`` sends ``fn(connection)`` to the connection's aiosqlite thread: one thread hop per
  transaction. ``read=True`` uses the read connection (WAL readers never wait for the writer).
- ``_run_short(fn)`` runs ``fn`` on the **calling** (event-loop) thread with the write
  connection's stdlib handle, when that is safe, and otherwise exactly as ``_run``. Why: on this
  kind of machine a thread hop (queue → worker wakes → ``call_soon_threadsafe`` → the loop wakes)
  costs 50–250 µs, a WAL commit with ``synchronous=NORMAL`` (no fsync) 15–40 µs, so the hop was
  most of a commit (benchmarks figure 3). Inline only when:

  * the write connection's thread has nothing queued or running (``_sent == _done``: the loop
    thread counts jobs sent, the worker counts jobs finished — each counter has one writer);
  * ``fn`` writes and durability is ``"normal"`` (a ``"full"`` commit fsyncs: it stays on the
    thread), or ``fn`` only reads;
  * nothing can make it wait: the write connection's ``busy_timeout`` is 0 except while one of
    its thread's jobs runs (the job sets the configured timeout and resets it). An inline call
    that finds the database locked by another connection (a CLI next to the daemon, another
    journal) gets ``SQLITE_BUSY`` at once, has written nothing (``BEGIN IMMEDIATE`` failed, or
    ``transaction`` rolled back), and is sent to the thread, where it waits the busy timeout as
    before. So ``fn`` must be re-runnable after a busy failure: a pure read, one statement, or
    one ``transaction`` whose Python side effects are redone on a re-run;
  * ``fn`` is short (indexed statements on one session; no scans that grow without bound, no
    migrations, no imports, no big payloads: the caller picks ``_run`` for those).

- WAL checkpoints fsync, so they must not run inline: with inline writes on, the write
  connection's automatic checkpoint is on only while one of its thread's jobs runs (a big import
  checkpoints as it goes, as before), and after about :data:`CHECKPOINT_PAGES` pages of inline
  writes (an estimate: Python's sqlite3 exposes no WAL hook that counts them) the next short
  write first runs a ``PASSIVE`` checkpoint on the read connection's thread (errors ignored, as
  SQLite ignores an automatic checkpoint's), so the WAL stays as small as with SQLite's default.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from typing import Any, Literal, TypeVar

import aiosqlite

from acagent.errors import JournalError

__all__ = ["CHECKPOINT_PAGES", "SqliteConnections", "map_errors"]

T = TypeVar("T")
log = logging.getLogger("acagent.store")

CHECKPOINT_PAGES = 1000
"""WAL pages written by this connection after which a checkpoint runs (SQLite's own default)."""
WRITE_PAGES = 4
"""Estimated WAL pages of one small write transaction (the session row's page, the event
b-tree's last leaf, page 1 when the file grows, one more row's page); a commit adds its
payloads' bytes (``_wal_pages``)."""

_FULL_DISK_CODES = frozenset({"SQLITE_FULL", "SQLITE_IOERR_SHMSIZE"})
"""SQLite's answers to a full disk: SQLITE_FULL, and "disk I/O error" when the WAL index (-shm)
cannot grow (what a command opening the journal on a disk already full gets)."""
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def map_errors(exc: sqlite3.Error) -> JournalError:
    """The :class:`JournalError` of a SQLite error (one line: disk full, locked, or the message)."""
    msg = str(exc)
    if "full" in msg or getattr(exc, "sqlite_errorname", "") in _FULL_DISK_CODES:
        return JournalError(
            f"the journal's disk is full ({msg}); free space and retry — nothing was written",
            detail={"reason": "disk_full"},  # what SessionWriter waits out (runner/_writer.py)
        )
    if getattr(exc, "sqlite_errorname", "") in ("SQLITE_CORRUPT", "SQLITE_NOTADB"):
        return JournalError(f"journal error: {msg}", detail={"reason": "corrupt"})  # not retryable
    if "locked" in msg or "busy" in msg:
        return JournalError(f"the journal stayed locked past the busy timeout ({msg}); retry")
    return JournalError(f"journal error: {msg}")


def _is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF in _BUSY_CODES


async def open_connection(path: Any, busy_timeout_ms: int) -> aiosqlite.Connection:
    """An aiosqlite connection whose stdlib handle may also be used from the event-loop thread
    (``check_same_thread=False``; :class:`SqliteConnections` never uses it from two threads at once)."""
    return await aiosqlite.connect(
        path, isolation_level=None, timeout=busy_timeout_ms / 1000, check_same_thread=False
    )


class SqliteConnections:
    """Mixin of :class:`~acagent.store.SqliteJournal`: its connections and how calls reach them."""

    def __init__(
        self,
        write: aiosqlite.Connection,
        read: aiosqlite.Connection,
        busy_timeout_ms: int,
        durability: Literal["normal", "full"] = "normal",
    ):
        self._w = write
        self._r = read
        self.busy_timeout_ms = busy_timeout_ms
        self._closed = False
        self._raw: sqlite3.Connection = write._conn  # aiosqlite's handle (see open_connection)
        self._inline_writes = durability == "normal"
        self._timeout_sql = f"PRAGMA busy_timeout = {int(busy_timeout_ms)}"
        self._job_start: tuple[str, ...] = (self._timeout_sql,)
        """What a job of the write connection's thread runs first (and ``_job_end`` after it):
        the busy timeout, and with inline writes the automatic checkpoint, are on only there."""
        self._job_end: tuple[str, ...] = ("PRAGMA busy_timeout = 0",)
        self._sent = 0
        """Jobs sent to the write connection's thread (written on the loop thread only)."""
        self._done = 0
        """Jobs the write connection's thread finished (written by that thread only)."""
        self._wal_pages = 0

    async def _start_inline(self) -> None:
        """Make the write connection ready for inline calls (after the migrations ran)."""
        if self._inline_writes:
            self._job_start = (self._timeout_sql, f"PRAGMA wal_autocheckpoint = {CHECKPOINT_PAGES}")
            self._job_end = ("PRAGMA busy_timeout = 0", "PRAGMA wal_autocheckpoint = 0")
            await self._run(lambda db: None)  # leaves the connection in the inline state

    def _job(self, fn: Callable[[sqlite3.Connection], T]) -> Callable[[sqlite3.Connection], T]:
        """``fn`` as a job of the write connection's thread: with the busy timeout, then counted."""

        def job(db: sqlite3.Connection) -> T:
            try:
                for sql in self._job_start:
                    db.execute(sql)
                try:
                    return fn(db)
                finally:
                    for sql in self._job_end:
                        db.execute(sql)
            finally:
                self._done += 1  # after the last use of the connection by this thread

        return job

    async def _run(self, fn: Callable[[sqlite3.Connection], T], *, read: bool = False) -> T:
        """Run ``fn(raw_connection)`` on the connection's own thread: one hop per transaction.

        aiosqlite exposes no public "run this function" call; ``_execute`` is what all its methods
        use. Pinned to aiosqlite <0.23 in pyproject.toml. Private to the store: nothing outside
        ``acagent/store`` runs SQL.

        Raises:
            JournalError: SQLite failed (see :func:`map_errors`).
        """
        try:
            if read:
                return await self._r._execute(fn, self._r._conn)  # type: ignore[no-untyped-call, no-any-return]
            raw = self._w._conn  # ValueError once closed, as aiosqlite's own calls
            if not self._w._running:
                raise ValueError("Connection closed")
            self._sent += 1  # _execute queues the job now: it will run and count itself done
            return await self._w._execute(self._job(fn), raw)  # type: ignore[no-untyped-call, no-any-return]
        except sqlite3.Error as exc:
            raise map_errors(exc) from exc

    async def _run_short(self, fn: Callable[[sqlite3.Connection], T], *, writes: bool = True) -> T:
        """Run a short, re-runnable ``fn`` on the calling thread when safe, else as :meth:`_run`
        (the conditions are in the module docstring).

        Args:
            writes: ``fn`` may write (``False``: it only reads).

        Raises:
            JournalError: SQLite failed (see :func:`map_errors`); whatever ``fn`` raises.
        """
        if self._closed or self._sent != self._done or (writes and not self._inline_writes):
            return await self._run(fn)
        if writes and self._wal_pages >= CHECKPOINT_PAGES:
            self._wal_pages = 0
            await self._checkpoint()
            return await self._run_short(fn, writes=writes)
        try:
            out = fn(self._raw)
        except sqlite3.Error as exc:
            if _is_busy(exc) and not self._raw.in_transaction:
                return await self._run(fn)  # locked by another connection: wait on the thread
            raise map_errors(exc) from exc
        if writes:
            self._wal_pages += WRITE_PAGES
        return out

    async def _checkpoint(self) -> None:
        try:
            await self._run(lambda db: db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone(), read=True)
        except JournalError as exc:  # as SQLite's automatic checkpoint: the next write surfaces it
            log.debug("WAL checkpoint failed: %s", exc)

    async def aclose(self) -> None:
        """Close both connections (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await self._w.close()
        await self._r.close()
