"""The transaction of :meth:`SqliteJournal.commit <acagent.store.SqliteJournal.commit>`.

Under ``BEGIN IMMEDIATE`` (the caller's ``transaction``) it checks the writer's fencing token,
applies the guarded ops (:mod:`acagent.store._sqlite_ops`), numbers and appends the events
(:mod:`acagent.store._numbering`) and updates the session row. A commit without ops whose
session this journal wrote last (the common case: a turn's deltas, messages and results) skips
reading the session row: its ``UPDATE`` checks the expected ``last_seq`` and the token itself
(:func:`_append`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from typing import Any

from acagent.errors import SessionNotFound, StaleLease
from acagent.events import Event
from acagent.store._frames import INSERT_EVENT, event_rows
from acagent.store._numbering import commit_order, fold_events, make_events, number_events
from acagent.store._ops import Op
from acagent.store._payload import encode_payload
from acagent.store._rows import Lease
from acagent.store._sqlite_ops import TxContext, apply_op, session_sets
from acagent.store._tool_args import settle_arguments

__all__ = ["INLINE_MAX_CHARS", "INSERT_EVENT", "commit_tx", "event_row", "is_big"]

HINTS_MAX = 4096
"""Sessions whose ``(num, last_seq)`` a journal remembers (a hint per session it wrote)."""

_APPEND: dict[tuple[bool, bool, bool], str] = {}
"""The ``UPDATE session`` of a commit without ops, by (checkpoint, fenced, message)."""


def _append_sql(checkpoint: bool, fenced: bool, message: bool) -> str:
    key = (checkpoint, fenced, message)
    sql = _APPEND.get(key)
    if sql is None:
        sets = "last_seq = ?, updated_at = ?, tail_bytes = " + ("?" if checkpoint else "tail_bytes + ?")
        sets += ", checkpoint_seq = ?, checkpoint_bytes = ?" if checkpoint else ""
        sets += ", last_message_seq = ?" if message else ""
        where = "id = ? AND num = ? AND last_seq = ?" + (" AND fencing_token = ?" if fenced else "")
        sql = _APPEND[key] = f"UPDATE session SET {sets} WHERE {where}"
    return sql


INLINE_MAX_CHARS = 16384
"""A commit whose payloads hold more text than this (characters) runs on the write connection's
thread, not inline (compressing and writing it takes longer than a thread hop)."""


def is_big(events: Sequence[tuple[str, dict[str, Any]]]) -> bool:
    """True when the strings in ``events``' payloads add up to more than :data:`INLINE_MAX_CHARS`
    (a walk over the payloads' containers, stopping once over: no serialisation)."""
    total = 0
    stack: list[Any] = []
    for _, payload in events:  # the top level without the stack: most values are short strings
        for value in payload.values():
            if type(value) is str:
                total += len(value)
            elif isinstance(value, dict | list | tuple):
                stack.append(value)
    if total > INLINE_MAX_CHARS:
        return True
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
            if total > INLINE_MAX_CHARS:
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False


def event_row(num: int, seq: int, ts: str, typ: str, payload: str) -> tuple[int, str, str, str | bytes]:
    """The ``event_log`` row of one event alone (key ``num << 32 | seq``, see ``m007_compact_journal``)."""
    return ((num << 32) | seq, ts, typ, encode_payload(payload))


def _stale(session_id: str, lease: Lease, token: int) -> StaleLease:
    return StaleLease(
        f"session {session_id!r}: fencing token {lease.token} superseded by {token}; write discarded"
    )


def _append(
    db: sqlite3.Connection,
    session_id: str,
    lease: Lease | None,
    ts: str,
    events: Sequence[tuple[str, dict[str, Any]]],
    hint: tuple[int, int],
    size: list[int],
) -> list[Event] | None:
    """A commit of ``events`` without ops, when the session's ``(num, last_seq)`` is believed to
    be ``hint``: one ``UPDATE`` that checks the hint and the fencing token in its ``WHERE``
    (a compare-and-set under the write lock, so the seqs are right whenever it matches), then
    the ``INSERT`` — no SELECT of the session row, no ``RETURNING`` (which cost as much as the
    SELECT it saved). Returns None, having written nothing, when the row did not match (another
    writer moved ``last_seq``, a stale token, no such session): the caller takes the general path,
    which tells those apart.
    """
    num, last_seq = hint
    f = fold_events(events)
    args: list[Any] = [last_seq + len(events), ts, f.tail_bytes]
    if f.checkpoint is not None:
        args.extend((f.snapshot_seq(last_seq), f.checkpoint[1]))
    if f.last_message_at is not None:  # the message's seq, not a copy of its text (m014)
        args.append(last_seq + f.last_message_at)
    args.extend((session_id, num, last_seq))
    if lease is not None:
        args.append(lease.token)
    sql = _append_sql(f.checkpoint is not None, lease is not None, f.last_message_at is not None)
    if db.execute(sql, args).rowcount != 1:
        return None
    if len(events) == 1:  # most commits (a message, a result): no batch to build
        (typ, payload), text = events[0], f.payloads[0]
        db.execute(INSERT_EVENT, event_row(num, last_seq + 1, ts, typ, text))
        size[0] = len(text)
        return [Event.trusted(last_seq + 1, ts, session_id, typ, dict(payload))]  # a copy, as make_events
    rows = event_rows(num, last_seq + 1, ts, [typ for typ, _ in events], f.payloads)  # one frame (m016)
    db.executemany(INSERT_EVENT, rows)
    size[0] = sum(map(len, f.payloads))
    return make_events(session_id, last_seq, ts, events)


def commit_tx(
    db: sqlite3.Connection,
    hints: dict[str, tuple[int, int]],
    session_id: str,
    lease: Lease | None,
    ts: str,
    events: Sequence[tuple[str, dict[str, Any]]],
    ops: Sequence[Op],
    size: list[int],
) -> list[Event]:
    """The body of one commit (inside the caller's transaction): the committed events.

    Args:
        hints: ``session id → (num, last_seq)`` as this journal last wrote them (updated here).
        size: ``size[0]`` is set to the payloads' bytes (the caller's WAL estimate).

    Raises:
        SessionNotFound, StaleLease, InvalidTransition: see :meth:`SqliteJournal.commit`.
    """
    hint = hints.get(session_id) if events and not ops else None
    if hint is not None:
        appended = _append(db, session_id, lease, ts, events, hint, size)
        if appended is not None:
            hints[session_id] = (hint[0], appended[-1].seq)
            return appended
    row = db.execute(
        "SELECT last_seq, fencing_token, status, cancel_requested, tail_bytes, num FROM session WHERE id = ?",
        (session_id,),
    ).fetchone()
    if row is None:
        raise SessionNotFound(f"no session {session_id!r}")
    last_seq, token, status, cancel, tail_bytes, num = row
    if lease is not None and token != lease.token:
        raise _stale(session_id, lease, token)
    ctx = TxContext(
        db=db,
        session_id=session_id,
        ts=ts,
        status=status,
        cancel_requested=cancel,
        now=time.time(),
        num=num,
    )
    extra = [out for out in (apply_op(op, ctx) for op in ops) if out is not None]
    n = number_events(session_id, last_seq, tail_bytes, ts, commit_order(extra, events))
    if ctx.arguments:  # the intents' arguments: their tool.call events' (m019)
        settle_arguments(db, ctx.arguments, n.events)
    if len(hints) >= HINTS_MAX and session_id not in hints:
        hints.clear()
    hints[session_id] = (num, n.last_seq)  # verified by the next _append
    items, values = session_sets(ctx)  # what the ops changed in the row, in the commit's UPDATE
    if not n.events:
        if items:
            db.execute(f"UPDATE session SET {', '.join(items)} WHERE id = ?", (*values, session_id))
        return []
    rows = event_rows(num, n.events[0].seq, ts, [e.type for e in n.events], n.payloads)  # one frame (m016)
    db.executemany(INSERT_EVENT, rows)
    size[0] = sum(map(len, n.payloads))
    sets = "last_seq = ?, updated_at = ?, tail_bytes = ?"
    args: list[Any] = [n.last_seq, ts, n.tail_bytes]
    if n.last_message_seq is not None:  # the message's seq, not a copy of its text (m014)
        sets += ", last_message_seq = ?"
        args.append(n.last_message_seq)
    if n.checkpoint is not None:
        sets += ", checkpoint_seq = ?, checkpoint_bytes = ?"
        args.extend(n.checkpoint)
    if items:
        sets += ", " + ", ".join(items)
        args.extend(values)
    db.execute(f"UPDATE session SET {sets} WHERE id = ?", (*args, session_id))
    return n.events
