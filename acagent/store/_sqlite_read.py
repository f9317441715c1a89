"""The read side of :class:`~acagent.store.SqliteJournal`: sessions, events, steps, tool calls.

Reads run on the journal's second connection (WAL readers never wait for the writer), except the
few that the turn's own writer depends on right after a commit (``step_attempts``, ``tool_calls``,
``existing_tool_call_ids``), which use the write connection so they see its last commit at once
(short reads: inline on the event loop when its thread is idle, see ``_sqlite_conn``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, TypeVar

from acagent.errors import SessionNotFound, check_session_prefix
from acagent.events import Event
from acagent.store._frames import select_events
from acagent.store._ops import CONTEXT_READ_TYPES
from acagent.store._payload import decode_payload
from acagent.store._row_ids import TOOL_CALLS, keys_sql, num_range
from acagent.store._rows import (
    PENDING_APPROVAL,
    STEP_COLS,
    TOOL_COLS,
    SessionRow,
    StepRow,
    ToolCallRow,
    latest_requests,
)
from acagent.store._session_text import SESSION_SELECT, session_row
from acagent.store._sqlite_ops import step_rid
from acagent.store._step_held import STEPS_OF
from acagent.store._tool_args import event_arguments

__all__ = ["TOOL_SELECT", "SqliteReads", "tool_row"]

T = TypeVar("T")
_SESSION = SESSION_SELECT  # the long texts from session_text (m013)
_STEP = ", ".join(STEP_COLS)
_TOOL = ", ".join(TOOL_COLS)


_NUM = "(SELECT num FROM session WHERE id = ?)"


TOOL_SELECT = ", ".join((*TOOL_COLS, "args_seq"))
"""The columns :func:`tool_row` reads (``SELECT {TOOL_SELECT} FROM tool_call``)."""


def tool_row(db: sqlite3.Connection, row: Sequence[Any]) -> ToolCallRow:
    """A :class:`ToolCallRow` from a ``SELECT {TOOL_SELECT}`` row: ``arguments`` is stored like an
    event payload (JSON text, or compressed since m007 — see :mod:`acagent.store._payload`), or,
    since m019, is the call's ``tool.call`` event's (:mod:`acagent.store._tool_args`).

    Raises:
        JournalError: the stored arguments, or that event, do not decode.
    """
    values = list(row[:-1])
    if row[-1] is not None:
        values[6] = event_arguments(db, values[0], row[-1], values[1])
        return ToolCallRow(*values)
    args = decode_payload(values[6], f"session {values[0]!r} tool call {values[1]!r}")
    values[6] = args if isinstance(args, str) else args.decode()
    return ToolCallRow(*values)


class SqliteReads:
    """Mixin: the queries of the SQLite journal (``_run`` comes from the journal class)."""

    async def _run(self, fn: Callable[[sqlite3.Connection], T], *, read: bool = False) -> T:
        raise NotImplementedError

    async def _run_short(self, fn: Callable[[sqlite3.Connection], T], *, writes: bool = True) -> T:
        raise NotImplementedError

    async def get_session(self, session_id: str) -> SessionRow:
        """The session row.

        Raises:
            SessionNotFound: no such id (the message says how to list sessions).
        """

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(f"SELECT {_SESSION} FROM session WHERE id = ?", (session_id,)).fetchone()

        row = await self._run(q, read=True)
        if row is None:
            raise SessionNotFound(f"no session {session_id!r}; `acagent sessions list --all` lists them")
        return session_row(row)

    async def find_session(self, prefix: str) -> SessionRow:
        """The session whose id is ``prefix`` or starts with it (unique).

        Raises:
            SessionNotFound: none, the prefix is ambiguous, or it is empty or has a character
                no id has (``errors.check_session_prefix``).
        """
        check_session_prefix(prefix)

        def q(db: sqlite3.Connection) -> Any:
            return db.execute(
                f"SELECT {_SESSION} FROM session WHERE id = ? OR id LIKE ? ESCAPE '\\' LIMIT 2",
                (prefix, prefix.replace("%", "\\%").replace("_", "\\_") + "%"),
            ).fetchall()

        rows = await self._run(q, read=True)
        exact = [r for r in rows if r[0] == prefix]
        if exact:
            return session_row(exact[0])
        if len(rows) != 1:
            what = "is ambiguous" if rows else "matches no session"
            raise SessionNotFound(f"session id {prefix!r} {what}; `acagent sessions list --all` lists them")
        return session_row(rows[0])

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int | None = None, statuses: Sequence[str] | None = None
    ) -> list[SessionRow]:
        """Sessions, newest ``updated_at`` first, optionally of one working directory or statuses."""

        def q(db: sqlite3.Connection) -> Any:
            sql = f"SELECT {_SESSION} FROM session"
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

        return [session_row(r) for r in await self._run(q, read=True)]

    async def cancel_requested(self, session_id: str) -> bool:
        """The session's cancel flag (read connection)."""

        def q(db: sqlite3.Connection) -> bool:
            row = db.execute("SELECT cancel_requested FROM session WHERE id = ?", (session_id,)).fetchone()
            return bool(row and row[0])

        return await self._run(q, read=True)

    # ------------------------------------------------------------------ events

    async def events(
        self, session_id: str, since: int = 0, *, limit: int | None = None, until: int | None = None
    ) -> list[Event]:
        """Committed events with ``since < seq (<= until)``, ascending seq, at most ``limit``."""

        def q(db: sqlite3.Connection) -> list[Event]:
            return select_events(db, session_id, since=since, until=until, limit=limit)

        return await self._run(q, read=True)

    async def iter_events(
        self, session_id: str, since: int = 0, *, batch: int = 1000
    ) -> AsyncIterator[Event]:
        """Every committed event after ``since``, read ``batch`` at a time (bounded memory)."""
        last = since
        while True:
            page = await self.events(session_id, last, limit=batch)
            for event in page:
                yield event
            if len(page) < batch:
                return
            last = page[-1].seq

    async def last_events(self, session_id: str, types: Sequence[str], limit: int) -> list[Event]:
        """The newest ``limit`` committed events of ``types``, newest first (an unknown session:
        none). The scan walks the session's key range down from its end."""

        def q(db: sqlite3.Connection) -> list[Event]:
            return select_events(db, session_id, types=types, limit=limit, newest_first=True)

        return await self._run(q, read=True)

    async def context_events(self, session_id: str) -> list[Event]:
        """The context events from the latest snapshot position on (``session.checkpoint_seq``:
        a ``checkpoint``'s seq, a ``context.compacted``'s ``first_kept_seq``), ascending seq, of
        :data:`~acagent.store._ops.CONTEXT_READ_TYPES`.

        One read transaction: the position and the events come from the same snapshot.
        """
        types = CONTEXT_READ_TYPES

        def q(db: sqlite3.Connection) -> list[Event] | None:
            db.execute("BEGIN")
            try:
                row = db.execute("SELECT checkpoint_seq FROM session WHERE id = ?", (session_id,)).fetchone()
                if row is None:
                    return None
                return select_events(db, session_id, since=row[0] - 1, types=types)
            finally:
                db.execute("COMMIT")

        events = await self._run(q, read=True)
        if events is None:
            raise SessionNotFound(f"no session {session_id!r}; `acagent sessions list --all` lists them")
        return events

    # ------------------------------------------------------------------ steps and tool calls

    async def step_attempts(self, session_id: str, step_id: str) -> list[StepRow]:
        """Every attempt of one step, ascending attempt."""

        def q(db: sqlite3.Connection) -> Any:
            # the session's key range (m009) and its held step (m020), then the step's attempts
            sql = STEPS_OF.format(cols=_STEP, where=" AND step_id = :step") + " ORDER BY attempt"
            return db.execute(sql, {"sid": session_id, "step": step_id}).fetchall()

        return [StepRow(*r) for r in await self._run_short(q, writes=False)]

    async def steps(self, session_id: str) -> list[StepRow]:
        """Every step attempt of the session, in start order."""

        def q(db: sqlite3.Connection) -> Any:
            sql = STEPS_OF.format(cols=_STEP, where="") + " ORDER BY started_at, attempt"
            return db.execute(sql, {"sid": session_id}).fetchall()

        return [StepRow(*r) for r in await self._run(q, read=True)]

    async def tool_calls(
        self, session_id: str, *, turn_id: str | None = None, open_only: bool = False
    ) -> list[ToolCallRow]:
        """Tool-call rows of the session (or one turn), in step and position order."""

        def q(db: sqlite3.Connection) -> list[ToolCallRow]:
            # the session's key range (m010), then its id
            sql = f"SELECT {TOOL_SELECT} FROM tool_call WHERE key > {_NUM} << 32 AND key < ({_NUM} + 1) << 32 AND session_id = ?"
            args: list[Any] = [session_id, session_id, session_id]
            if turn_id is not None:
                sql += " AND turn_id = ?"
                args.append(turn_id)
            if open_only:
                sql += " AND status NOT IN ('done', 'failed')"
            return [tool_row(db, r) for r in db.execute(sql + " ORDER BY key", args).fetchall()]

        return await self._run_short(q, writes=False)

    async def existing_tool_call_ids(self, session_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` already name a tool call of the session (providers may reuse ids)."""
        if not ids:
            return set()

        def q(db: sqlite3.Connection) -> Any:
            marks = ",".join("?" * len(ids))
            tids = [step_rid(session_id, i) for i in ids]
            return db.execute(  # the session's window, then tool_call_ids (m017)
                f"SELECT tool_call_id FROM tool_call WHERE key IN ({keys_sql(TOOL_CALLS, len(ids))})"
                f" AND session_id = ? AND tool_call_id IN ({marks})",
                (*num_range(db, session_id), *tids, *tids, session_id, *ids),
            ).fetchall()

        return {r[0] for r in await self._run_short(q, writes=False)}

    async def pending_approvals(self, session_id: str | None = None) -> list[ToolCallRow]:
        """Tool calls waiting for the user's decision (one session's, or every session's), in order
        (each session's in start order, sessions in creation order)."""

        def q(db: sqlite3.Connection) -> Any:
            if session_id is None:
                rows = db.execute(  # the partial index (m010; a scan in key order looks cheaper to the planner)
                    f"SELECT {TOOL_SELECT} FROM tool_call INDEXED BY tool_call_pending WHERE {PENDING_APPROVAL} ORDER BY key"
                ).fetchall()
            else:
                rows = db.execute(
                    f"SELECT {TOOL_SELECT} FROM tool_call INDEXED BY tool_call_pending WHERE session_id = ?"
                    f" AND {PENDING_APPROVAL} ORDER BY key",
                    (session_id,),
                ).fetchall()
            return [tool_row(db, r) for r in rows]

        return await self._run(q, read=True)

    async def pending_approval_events(self, session_id: str) -> list[Event]:
        """The latest ``approval.requested`` event of each pending approval, ascending seq.

        Clients that attach after the request was made are sent these again (F14).
        """
        pending = {r.tool_call_id for r in await self.pending_approvals(session_id)}
        if not pending:
            return []

        def q(db: sqlite3.Connection) -> list[Event]:
            return select_events(db, session_id, types=("approval.requested",))

        return latest_requests(pending, await self._run(q, read=True))
