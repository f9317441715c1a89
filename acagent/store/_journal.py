"""The SQLite journal: the single source of truth of every session.

Design (see docs/architecture.md):

- One write connection per process (aiosqlite, WAL, ``synchronous=NORMAL`` by default, FULL with
  ``durability="full"``), ``busy_timeout`` per connection so concurrent writers wait instead of
  failing with "database is locked"; a second connection serves reads (replay, listings) so an
  attacher's replay never queues behind a write.
- :meth:`SqliteJournal.commit` is the one choke point for durable writes: it assigns ``seq``
  (``last_seq + 1 …`` read under ``BEGIN IMMEDIATE``), appends the events, applies the guarded
  row operations (:mod:`acagent.store._ops`), checks the writer's fencing token and commits — all in
  one transaction run as one function on the connection's thread (one thread hop, not one per
  statement). A stale fencing token raises :class:`~acagent.errors.StaleLease` and nothing is
  written: a zombie worker's result is discarded, while a late commit by the last holder when
  nobody took over succeeds (the token still matches).
- Every status change goes through :class:`~acagent.store._ops.SetStatus`, which requires a
  non-empty whitelist of source states and appends the ``session.status`` event itself.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal, TypeVar

import aiosqlite
import orjson

from acagent._private import private_dir
from acagent.errors import ApprovalNotFound, JournalError, SessionBusy, SessionNotFound, StaleLease
from acagent.events import Event, make_payload, now_ts
from acagent.store._migrations import migrate
from acagent.store._ops import CONTEXT_TYPES, Op, SetStatus, TxContext
from acagent.store._usage import UsageQueries

__all__ = ["Lease", "SessionRow", "SqliteJournal", "StepRow", "ToolCallRow", "new_session_id"]

T = TypeVar("T")
HOSTNAME = socket.gethostname()


def new_session_id() -> str:
    """A new session id ``ses_<26 hex chars>`` (time-ordered prefix)."""
    return f"ses_{int(time.time() * 1000):011x}{uuid.uuid4().hex[:15]}"


@dataclass(frozen=True)
class Lease:
    """A held session lease: the worker id and the fencing token it was granted."""

    owner: str
    token: int


@dataclass
class SessionRow:
    """One ``session`` row (see the column comments in ``m001_initial``)."""

    id: str
    cwd: str
    title: str | None
    model: str | None
    status: str
    created_at: str
    updated_at: str
    last_seq: int
    turn_id: str | None
    lease_owner: str | None
    lease_host: str | None
    lease_pid: int | None
    lease_expires_at: float | None
    fencing_token: int
    cancel_requested: int
    input_tokens: int
    output_tokens: int
    llm_calls: int
    llm_retries: int
    approval_rules: str
    last_message: str | None
    checkpoint_seq: int
    checkpoint_bytes: int
    tail_bytes: int
    warnings: str | None
    transcript_stat: str | None

    def to_public(self) -> dict[str, Any]:
        """The fields shown by ``sessions list --json`` and the HTTP API."""
        return {
            "id": self.id,
            "status": self.status,
            "cwd": self.cwd,
            "title": self.title,
            "model": self.model,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "last_seq": self.last_seq,
            "turn_id": self.turn_id,
            "last_message": self.last_message,
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
                "llm_calls": self.llm_calls,
                "llm_retries": self.llm_retries,
            },
            "warnings": orjson.loads(self.warnings) if self.warnings else [],
        }


@dataclass
class StepRow:
    """One ``step`` row: an LLM call attempt."""

    session_id: str
    request_id: str
    step_id: str
    turn_id: str
    digest: str
    attempt: int
    status: str
    error: str | None
    started_at: str
    finished_at: str | None


@dataclass
class ToolCallRow:
    """One ``tool_call`` row: the intent and state of a tool call."""

    session_id: str
    tool_call_id: str
    turn_id: str
    step_id: str
    idx: int
    name: str
    arguments: str
    arguments_error: str | None
    status: str
    approval: str
    approval_note: str | None
    runner: str | None
    pid: int | None
    run_expires_at: float | None
    idempotent: int
    result_status: str | None

    @property
    def terminal(self) -> bool:
        """True once the call is done or failed (terminal rows never change)."""
        return self.status in ("done", "failed")


_SESSION_COLS = ", ".join(f.name for f in fields(SessionRow))
_STEP_COLS = ", ".join(f.name for f in fields(StepRow))
_TOOL_COLS = ", ".join(f.name for f in fields(ToolCallRow))


def _map_errors(exc: sqlite3.Error) -> JournalError:
    msg = str(exc)
    if "full" in msg:
        return JournalError(f"the journal's disk is full ({msg}); free space and retry — nothing was written")
    if "locked" in msg or "busy" in msg:
        return JournalError(f"the journal stayed locked past the busy timeout ({msg}); retry")
    return JournalError(f"journal error: {msg}")


class SqliteJournal(UsageQueries):
    """The SQLite implementation of the journal. Open with :meth:`open`; close with :meth:`aclose`."""

    def __init__(
        self, path: Path, write: aiosqlite.Connection, read: aiosqlite.Connection, busy_timeout_ms: int
    ):
        self.path = path
        self._w = write
        self._r = read
        self.busy_timeout_ms = busy_timeout_ms

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
                opened.append(
                    await aiosqlite.connect(path, isolation_level=None, timeout=busy_timeout_ms / 1000)
                )
            for conn in opened:
                await conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
                await conn.execute("PRAGMA journal_mode = WAL")
                await conn.execute(f"PRAGMA synchronous = {'FULL' if durability == 'full' else 'NORMAL'}")
                await conn.execute("PRAGMA foreign_keys = ON")
            journal = cls(path, opened[0], opened[1], busy_timeout_ms)
            await journal._run(migrate)
            for suffix in ("", "-wal", "-shm"):  # conversations are private: owner-only files
                with contextlib.suppress(OSError):
                    os.chmod(f"{path}{suffix}", 0o600)
        except BaseException as exc:
            for conn in opened:  # their threads would keep the process alive
                await conn.close()
            if isinstance(exc, sqlite3.Error):
                raise _map_errors(exc) from exc
            raise
        return journal

    async def aclose(self) -> None:
        """Close both connections."""
        await self._w.close()
        await self._r.close()

    async def _run(self, fn: Callable[[sqlite3.Connection], T], *, read: bool = False) -> T:
        """Run ``fn(raw_connection)`` on the connection's own thread: one hop per transaction.

        aiosqlite exposes no public "run this function" call; ``_execute`` is what all its methods
        use. Pinned to aiosqlite <0.23 in pyproject.toml.
        """
        conn = self._r if read else self._w
        raw: sqlite3.Connection = conn._conn  # type: ignore[attr-defined]  # see docstring
        try:
            return await conn._execute(fn, raw)  # type: ignore[attr-defined, no-any-return]  # see docstring
        except sqlite3.Error as exc:
            raise _map_errors(exc) from exc

    # ------------------------------------------------------------------ sessions

    async def create_session(
        self, *, cwd: str, model: str | None, title: str | None, session_id: str | None = None
    ) -> tuple[SessionRow, Event]:
        """Create a session in ``pending`` with its ``session.created`` event (seq 1)."""
        sid = session_id or new_session_id()
        ts = now_ts()
        payload = make_payload("session.created", cwd=cwd, model=model, title=title)

        def tx(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "INSERT INTO session (id, cwd, title, model, status, created_at, updated_at, last_seq)"
                    " VALUES (?, ?, ?, ?, 'pending', ?, ?, 1)",
                    (sid, cwd, title, model, ts, ts),
                )
                db.execute(
                    "INSERT INTO event (session_id, seq, ts, type, payload) VALUES (?, 1, ?, 'session.created', ?)",
                    (sid, ts, orjson.dumps(payload).decode()),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

        await self._run(tx)
        return await self.get_session(sid), Event(
            seq=1, ts=ts, session_id=sid, type="session.created", payload=payload
        )

    async def get_session(self, session_id: str) -> SessionRow:
        """The session row.

        Raises:
            SessionNotFound: no such id (the message says how to list sessions).
        """

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(f"SELECT {_SESSION_COLS} FROM session WHERE id = ?", (session_id,)).fetchone()

        row = await self._run(q, read=True)
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}; `acagent sessions list --all` lists them")
        return SessionRow(*row)

    async def find_session(self, prefix: str) -> SessionRow:
        """The session whose id is ``prefix`` or starts with it (unique).

        Raises:
            SessionNotFound: none, or the prefix is ambiguous.
        """

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(
                f"SELECT {_SESSION_COLS} FROM session WHERE id = ? OR id LIKE ? ESCAPE '\\' LIMIT 2",
                (prefix, prefix.replace("%", "\\%").replace("_", "\\_") + "%"),
            ).fetchall()

        rows = await self._run(q, read=True)
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

        def q(db: sqlite3.Connection) -> Any:
            sql = f"SELECT {_SESSION_COLS} FROM session"
            where: list[str] = []
            args: list[Any] = []
            if cwd is not None:
                where.append("cwd = ?")
                args.append(cwd)
            if statuses is not None:
                where.append(f"status IN ({','.join('?' * len(statuses))})")
                args.extend(statuses)
            if where:
                sql += " WHERE " + " AND ".join(where)
            sql += " ORDER BY updated_at DESC, id DESC"
            if limit is not None:
                sql += " LIMIT ?"
                args.append(limit)
            return db.execute(sql, args).fetchall()

        return [SessionRow(*r) for r in await self._run(q, read=True)]

    # ------------------------------------------------------------------ events

    async def events(
        self, session_id: str, since: int = 0, *, limit: int | None = None, until: int | None = None
    ) -> list[Event]:
        """Committed events with ``since < seq (<= until)``, ascending seq, at most ``limit``."""

        def q(db: sqlite3.Connection) -> Any:
            sql = "SELECT seq, ts, type, payload FROM event WHERE session_id = ? AND seq > ?"
            args: list[Any] = [session_id, since]
            if until is not None:
                sql += " AND seq <= ?"
                args.append(until)
            sql += " ORDER BY seq"
            if limit is not None:
                sql += " LIMIT ?"
                args.append(limit)
            return db.execute(sql, args).fetchall()

        rows = await self._run(q, read=True)
        return [
            Event(seq=seq, ts=ts, session_id=session_id, type=typ, payload=orjson.loads(payload))
            for seq, ts, typ, payload in rows
        ]

    async def context_events(self, session_id: str) -> list[Event]:
        """The latest checkpoint (if any) and the context-relevant events after it, ascending seq."""
        row = await self.get_session(session_id)
        types = ("checkpoint", *CONTEXT_TYPES)
        marks = ",".join("?" * len(types))

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(
                f"SELECT seq, ts, type, payload FROM event WHERE session_id = ? AND seq >= ? AND type IN ({marks})"
                " ORDER BY seq",
                (session_id, row.checkpoint_seq, *types),
            ).fetchall()

        return [
            Event(seq=seq, ts=ts, session_id=session_id, type=typ, payload=orjson.loads(payload))
            for seq, ts, typ, payload in await self._run(q, read=True)
        ]

    async def commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        lease: Lease | None = None,
        ops: Sequence[Op] = (),
    ) -> list[Event]:
        """Append ``events`` and apply ``ops`` in one transaction; return the committed events.

        Args:
            events: ``(type, payload)`` pairs, in order; payloads are already validated.
            lease: the writer's lease; when given, the transaction is rejected unless the
                session's fencing token still equals ``lease.token``.
            ops: guarded row operations; a :class:`SetStatus` adds its ``session.status``
                event before the given events.

        Raises:
            StaleLease: the fencing token was superseded (nothing written).
            InvalidTransition: a guarded operation's precondition failed (nothing written).
            SessionNotFound: no such session.
            JournalError: disk full, locked past the busy timeout.
        """
        ts = now_ts()
        now = time.time()

        def tx(db: sqlite3.Connection) -> list[Event]:
            db.execute("BEGIN IMMEDIATE")
            try:
                row = db.execute(
                    "SELECT last_seq, fencing_token, status, cancel_requested, tail_bytes FROM session WHERE id = ?",
                    (session_id,),
                ).fetchone()
                if row is None:
                    raise SessionNotFound(f"no session {session_id!r}")
                last_seq, token, status, cancel, tail_bytes = row
                if lease is not None and token != lease.token:
                    raise StaleLease(
                        f"session {session_id!r}: fencing token {lease.token} superseded by {token}; write discarded"
                    )
                ctx = TxContext(
                    db=db, session_id=session_id, now=now, ts=ts, status=status, cancel_requested=cancel
                )
                extra: list[tuple[str, dict[str, Any]]] = []
                for op in ops:
                    out = op.apply(ctx)
                    if out is not None:
                        extra.append(out)
                # Status changes lead their commit, so the commit's own events (a turn's end
                # event above all) come last and a client that stops there has seen everything.
                all_events = extra + list(events)
                committed: list[Event] = []
                rows = []
                last_message: str | None = None
                checkpoint: tuple[int, int] | None = None
                seq = last_seq
                for typ, payload in all_events:
                    seq += 1
                    text = orjson.dumps(payload).decode()
                    rows.append((session_id, seq, ts, typ, text))
                    committed.append(Event(seq=seq, ts=ts, session_id=session_id, type=typ, payload=payload))
                    if typ in CONTEXT_TYPES:
                        tail_bytes += len(text)
                        if typ != "tool.result" and payload.get("text"):
                            last_message = payload["text"]
                    elif typ == "checkpoint":
                        checkpoint = (seq, len(text))
                        tail_bytes = 0
                if rows:
                    db.executemany(
                        "INSERT INTO event (session_id, seq, ts, type, payload) VALUES (?, ?, ?, ?, ?)", rows
                    )
                sets = "last_seq = ?, updated_at = ?, tail_bytes = ?"
                args: list[Any] = [seq, ts, tail_bytes]
                if last_message is not None:
                    sets += ", last_message = ?"
                    args.append(last_message[:500])
                if checkpoint is not None:
                    sets += ", checkpoint_seq = ?, checkpoint_bytes = ?"
                    args.extend(checkpoint)
                if rows:
                    db.execute(f"UPDATE session SET {sets} WHERE id = ?", (*args, session_id))
                db.execute("COMMIT")
                return committed
            except BaseException:
                db.execute("ROLLBACK")
                raise

        return await self._run(tx)

    # ------------------------------------------------------------------ leases

    async def acquire_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float,
        pid: int | None = None,
        host: str = HOSTNAME,
        is_dead: Callable[[str | None, int | None], bool] | None = None,
    ) -> Lease:
        """Take the session's lease if it is free, expired, or held by a dead local process.

        One conditional UPDATE guarded by the observed fencing token, which it bumps. The lease
        does not look at the cancel flag (a cancelled running session must still be finishable).

        Raises:
            SessionBusy: a live holder has it (the message names its pid and points to attach).
        """
        pid = os.getpid() if pid is None else pid

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
            return Lease(owner=owner, token=token + 1)

        return await self._run(tx)

    async def renew_lease(self, session_id: str, lease: Lease, *, ttl_s: float) -> tuple[bool, bool]:
        """Extend the lease by ``ttl_s`` seconds.

        Returns:
            ``(still_held, cancel_requested)``.
        """

        def tx(db: sqlite3.Connection) -> tuple[bool, bool]:
            cur = db.execute(
                "UPDATE session SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? AND fencing_token = ?",
                (time.time() + ttl_s, session_id, lease.owner, lease.token),
            )
            flag = db.execute("SELECT cancel_requested FROM session WHERE id = ?", (session_id,)).fetchone()
            return cur.rowcount == 1, bool(flag and flag[0])

        return await self._run(tx)

    async def keep_leases(
        self, leases: Sequence[tuple[str, Lease]], *, ttl_s: float, renew: bool
    ) -> dict[str, tuple[bool, bool]]:
        """Renew (``renew=True``) or just check many leases in one transaction.

        One thread hop per call however many sessions a process runs (the registry's lease
        keeper calls it about once a second).

        Returns:
            ``{session_id: (still_held, cancel_requested)}``.
        """

        def tx(db: sqlite3.Connection) -> dict[str, tuple[bool, bool]]:
            out: dict[str, tuple[bool, bool]] = {}
            expires = time.time() + ttl_s
            if renew:
                db.execute("BEGIN IMMEDIATE")
            try:
                for sid, lease in leases:
                    if renew:
                        held = (
                            db.execute(
                                "UPDATE session SET lease_expires_at = ?"
                                " WHERE id = ? AND lease_owner = ? AND fencing_token = ?",
                                (expires, sid, lease.owner, lease.token),
                            ).rowcount
                            == 1
                        )
                    row = db.execute(
                        "SELECT lease_owner, fencing_token, cancel_requested FROM session WHERE id = ?",
                        (sid,),
                    ).fetchone()
                    if not renew:
                        held = row is not None and row[0] == lease.owner and row[1] == lease.token
                    out[sid] = (held, bool(row and row[2]))
                if renew:
                    db.execute("COMMIT")
            except BaseException:
                if renew:
                    db.execute("ROLLBACK")
                raise
            return out

        return await self._run(tx)

    async def release_lease(self, session_id: str, lease: Lease) -> None:
        """Give the lease up (no-op if it was superseded)."""

        def tx(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE session SET lease_owner = NULL, lease_expires_at = NULL"
                " WHERE id = ? AND lease_owner = ? AND fencing_token = ?",
                (session_id, lease.owner, lease.token),
            )

        await self._run(tx)

    async def cancel_requested(self, session_id: str) -> bool:
        """The session's cancel flag (read connection)."""

        def q(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT cancel_requested FROM session WHERE id = ?", (session_id,)).fetchone()
            return bool(row and row[0])

        return await self._run(q, read=True)

    async def set_cancel(self, session_id: str, value: bool) -> SessionRow:
        """Set or clear the session's cancel flag (any process may set it)."""

        def tx(db: sqlite3.Connection) -> None:
            db.execute("UPDATE session SET cancel_requested = ? WHERE id = ?", (int(value), session_id))

        await self._run(tx)
        return await self.get_session(session_id)

    async def set_transcript_stat(self, session_id: str, stat: dict[str, int] | None) -> None:
        """Record (or forget) the transcript's state as its writer closed it."""

        def tx(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE session SET transcript_stat = ? WHERE id = ?",
                (orjson.dumps(stat).decode() if stat is not None else None, session_id),
            )

        await self._run(tx)

    async def set_warnings(self, session_id: str, warnings: list[Any]) -> None:
        """Replace the session's warnings list (shown by ``GET /v1/sessions/{id}``)."""

        def tx(db: sqlite3.Connection) -> None:
            db.execute(
                "UPDATE session SET warnings = ? WHERE id = ?", (orjson.dumps(warnings).decode(), session_id)
            )

        await self._run(tx)

    # ------------------------------------------------------------------ steps and tool calls

    async def step_attempts(self, session_id: str, step_id: str) -> list[StepRow]:
        """Every attempt of one step, ascending attempt."""

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(
                f"SELECT {_STEP_COLS} FROM step WHERE session_id = ? AND step_id = ? ORDER BY attempt",
                (session_id, step_id),
            ).fetchall()

        return [StepRow(*r) for r in await self._run(q)]

    async def steps(self, session_id: str) -> list[StepRow]:
        """Every step attempt of the session, in start order."""

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(
                f"SELECT {_STEP_COLS} FROM step WHERE session_id = ? ORDER BY started_at, attempt",
                (session_id,),
            ).fetchall()

        return [StepRow(*r) for r in await self._run(q, read=True)]

    async def tool_calls(
        self, session_id: str, *, turn_id: str | None = None, open_only: bool = False
    ) -> list[ToolCallRow]:
        """Tool-call rows of the session (or one turn), in step and position order."""

        def q(db: sqlite3.Connection) -> Any:
            sql = f"SELECT {_TOOL_COLS} FROM tool_call WHERE session_id = ?"
            args: list[Any] = [session_id]
            if turn_id is not None:
                sql += " AND turn_id = ?"
                args.append(turn_id)
            if open_only:
                sql += " AND status NOT IN ('done', 'failed')"
            sql += " ORDER BY rowid"
            return db.execute(sql, args).fetchall()

        return [ToolCallRow(*r) for r in await self._run(q)]

    async def existing_tool_call_ids(self, session_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` already name a tool call of the session (providers may reuse ids)."""

        def q(db: sqlite3.Connection) -> Any:
            marks = ",".join("?" * len(ids))
            return db.execute(
                f"SELECT tool_call_id FROM tool_call WHERE session_id = ? AND tool_call_id IN ({marks})",
                (session_id, *ids),
            ).fetchall()

        return {r[0] for r in await self._run(q)}

    async def resolve_approval(
        self, session_id: str, tool_call_id: str, decision: str, *, note: str | None = None
    ) -> ToolCallRow:
        """Record the first decision on a pending approval (compare-and-set).

        Raises:
            ApprovalNotFound: unknown id, or already resolved (``detail`` names the winning
                decision and why).
        """

        def tx(db: sqlite3.Connection) -> Any:
            cur = db.execute(
                "UPDATE tool_call SET approval = ?, approval_note = ?"
                " WHERE session_id = ? AND tool_call_id = ? AND approval = 'pending' AND status = 'waiting_user'",
                (decision, note, session_id, tool_call_id),
            )
            row = db.execute(
                f"SELECT {_TOOL_COLS} FROM tool_call WHERE session_id = ? AND tool_call_id = ?",
                (session_id, tool_call_id),
            ).fetchone()
            return cur.rowcount, row

        changed, row = await self._run(tx)
        if row is None:
            raise ApprovalNotFound(f"no approval {tool_call_id!r} in session {session_id!r}")
        tc = ToolCallRow(*row)
        if not changed:
            raise ApprovalNotFound(
                f"approval {tool_call_id!r} is already resolved ({tc.approval})",
                detail={"decision": tc.approval, "note": tc.approval_note, "status": tc.status},
            )
        return tc

    async def pending_approval_events(self, session_id: str) -> list[Event]:
        """The ``approval.requested`` events of approvals still pending, ascending seq.

        Clients that attach after the request was made are sent these again (F14).
        """
        pending = {r.tool_call_id for r in await self.pending_approvals(session_id)}
        if not pending:
            return []

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(
                "SELECT seq, ts, type, payload FROM event WHERE session_id = ? AND type = 'approval.requested'"
                " ORDER BY seq",
                (session_id,),
            ).fetchall()

        out = []
        for seq, ts, typ, payload in await self._run(q, read=True):
            data = orjson.loads(payload)
            if data.get("tool_call_id") in pending:
                out.append(Event(seq=seq, ts=ts, session_id=session_id, type=typ, payload=data))
        return out

    async def pending_approvals(self, session_id: str) -> list[ToolCallRow]:
        """Tool calls waiting for the user's decision, in order."""
        return [r for r in await self.tool_calls(session_id, open_only=True) if r.approval == "pending"]

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
        return await self.commit(
            session_id, [], lease=lease, ops=[SetStatus(to, tuple(from_), reason=reason)]
        )
