"""A commit's events in one ``event_log`` row: a frame (m016, benchmarks figure 3).

Every commit rewrote the event b-tree's last leaf once per row it appended, and its events were
compressed one at a time although they repeat each other (an assistant reply's text sits in its
``assistant.delta``, its ``assistant.message`` and ``turn.completed``). A commit of two or more
events is now one row:

- ``key`` = ``session.num << 32 | first_seq``: the commit's events are seqs ``first_seq`` …
  ``first_seq + n - 1`` (a commit's seqs have no gap), so the next row's key follows the frame's
  last seq;
- ``ts``: the commit's one timestamp (every event of a commit has it);
- ``type``: the events' types as one letter each, in seq order (:data:`TYPE_CODES`, part of the
  file format: never change a letter, a new type gets a new one). Upper-case letters never
  begin an event type (they are dotted lower-case names), so SQL tells a frame from a one-event
  row and filters by type without decoding (``type GLOB '*[CD]*'``), and counts a type exactly;
- ``payload``: :func:`acagent.store._payload.encode_frame` (format byte
  :data:`~acagent.store._payload.FORMAT_FRAME_V2`): the payloads as one JSON array, compressed
  together, after a CRC32 of the type letters and that JSON (``FORMAT_FRAME_V1`` frames, without
  it, still read).

A one-event commit (and a commit with a type that has no letter) keeps one row per event, as
before: ``type`` the name, ``payload`` JSON text or a V1 BLOB (a frame of one event would store the
same deflate stream plus its brackets, and always as a BLOB). Rows of both kinds and of every
older format sit side by side in one session, so a journal upgraded mid-session reads unchanged.

Readers go through :func:`select_events`: a range ``since < seq`` starts at the row holding
``since + 1`` (a frame that begins at or before ``since`` may hold later events), and every row
is decoded to its events and cut to the range and the types asked for. As the rows are read their
seqs are checked against each other and ``session.last_seq`` (:mod:`acagent.store._frame_seqs`:
a key has no checksum, one flipped bit of it moved a frame's events to other seqs). The ``event`` view of m007
could not stay true (a frame's events are not rows); :func:`stored_events` is what reads a journal
with plain ``sqlite3`` now (``tests/``, people inspecting a file).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

from acagent.errors import JournalError
from acagent.events import Event
from acagent.store._frame_seqs import SeqCheck, row_span
from acagent.store._payload import (
    FRAME_BYTES,
    damaged,
    decode_payload,
    encode_frame,
    encode_payload,
    frame_json,
)

__all__ = [
    "INSERT_EVENT",
    "TYPE_CODES",
    "count_type",
    "event_rows",
    "frame_payload",
    "m016_event_frames",
    "row_events",
    "select_events",
    "stored_events",
]

INSERT_EVENT = "INSERT INTO event_log (key, ts, type, payload) VALUES (?, ?, ?, ?)"

TYPE_CODES: dict[str, str] = {
    "session.created": "A",
    "session.status": "B",
    "turn.started": "C",
    "user.message": "D",
    "assistant.delta": "E",
    "assistant.message": "F",
    "tool.call": "G",
    "tool.started": "H",
    "tool.output": "I",
    "tool.result": "J",
    "approval.requested": "K",
    "approval.resolved": "L",
    "step.started": "M",
    "step.finished": "N",
    "llm.retry": "O",
    "usage": "P",
    "error": "Q",
    "turn.completed": "R",
    "turn.interrupted": "S",
    "turn.failed": "T",
    "context.compacted": "U",
    "checkpoint": "V",
}
"""The letter of each event type in a frame's ``type`` column (file format: append only)."""
_TYPE_OF = {code: name for name, code in TYPE_CODES.items()}
_SEQ_MASK = (1 << 32) - 1


def event_rows(
    num: int, first_seq: int, ts: str, types: Sequence[str], texts: Sequence[str]
) -> list[tuple[int, str, str, str | bytes]]:
    """The ``event_log`` rows of one commit's events (``types`` and payload JSON ``texts`` in seq
    order from ``first_seq``): one frame for two or more events whose types all have a letter,
    else one row per event (key ``num << 32 | seq``, payload :func:`encode_payload`)."""
    base = num << 32
    if len(types) > 1:
        codes = "".join(TYPE_CODES.get(t, "") for t in types)
        if len(codes) == len(types):
            return [(base | first_seq, ts, codes, encode_frame(texts, codes))]
    return [
        (base | (first_seq + i), ts, t, encode_payload(p))
        for i, (t, p) in enumerate(zip(types, texts, strict=True))
    ]


def _frame_list(stored: bytes, codes: str, where: str) -> list[Any]:
    """The payloads of a stored frame (a JSON array) whose type letters are ``codes``.

    Raises:
        JournalError: it does not inflate or parse, is not an array, or its CRC (V2) does not
            match (names ``where``).
    """
    try:
        payloads = orjson.loads(frame_json(stored, codes, where))
    except orjson.JSONDecodeError as exc:
        raise damaged(f"{where}: stored frame is not JSON ({exc})") from exc
    if not isinstance(payloads, list):
        raise damaged(f"{where}: stored frame is a {type(payloads).__name__}, not a list")
    return payloads


def _frame_events(session_id: str, first: int, ts: str, codes: Any, stored: bytes) -> list[Event]:
    if not isinstance(codes, str):  # a damaged type column (another storage class)
        raise damaged(
            f"session {session_id!r} event {first}: a frame whose type column is a {type(codes).__name__}"
        )
    where = f"session {session_id!r} events {first}-{first + len(codes) - 1} (one frame)"
    payloads = _frame_list(stored, codes, where)
    if len(payloads) != len(codes):
        raise damaged(
            f"{where}: stored frame holds {len(payloads)} payloads, its type column names {len(codes)}"
        )
    out = []
    for i, (code, payload) in enumerate(zip(codes, payloads, strict=True)):
        typ = _TYPE_OF.get(code)
        if typ is None or not isinstance(payload, dict):
            what = (
                f"unknown type letter {code!r}"
                if typ is None
                else f"a {type(payload).__name__}, not a JSON object"
            )  # every event of the frame is unreadable then: the message names the frame's seqs
            raise damaged(f"{where}: event {first + i}: {what}")
        out.append(Event.trusted(first + i, ts, session_id, typ, payload))
    return out


def frame_payload(stored: bytes, codes: str, at: int, where: str) -> Any:
    """The payload at place ``at`` (0-based) of a stored frame whose type letters are ``codes``,
    or None when it has no such place.

    Raises:
        JournalError: the frame does not decode or its CRC does not match (names ``where``).
    """
    payloads = _frame_list(stored, codes, where)
    return payloads[at] if 0 <= at < len(payloads) else None


def row_events(session_id: str, rows: Iterable[Sequence[Any]]) -> list[Event]:
    """The events of ``event_log`` rows ``(key, ts, type, payload)`` of one session, in row order
    (a frame's events ascending).

    Raises:
        JournalError: a stored payload or frame does not decode, is not a JSON object, or a frame
            disagrees with its type column (names the session and the seq or seq range; its
            ``detail`` is ``{"session_id", "first_seq", "last_seq", "reason": "corrupt"}``).
    """
    out: list[Event] = []
    for key, ts, typ, stored in rows:
        seq = key & _SEQ_MASK
        try:
            out.extend(_row_events(session_id, seq, ts, typ, stored))
        except JournalError as exc:
            detail = exc.detail if isinstance(exc.detail, dict) else {}
            if "first_seq" not in detail:  # the row's seqs, for a reader that goes on after them (export)
                n = row_span(typ, stored)
                exc.detail = {
                    **detail,
                    "session_id": session_id,
                    "first_seq": seq,
                    "last_seq": seq + n - 1,
                    "reason": "corrupt",
                }
            raise
    return out


def _row_events(session_id: str, seq: int, ts: str, typ: Any, stored: Any) -> list[Event]:
    if type(stored) is bytes and stored[:1] in FRAME_BYTES:
        return _frame_events(session_id, seq, ts, typ, stored)
    try:
        payload = orjson.loads(decode_payload(stored, f"session {session_id!r} event {seq}"))
    except orjson.JSONDecodeError as exc:
        raise damaged(f"session {session_id!r} event {seq}: stored payload is not JSON ({exc})") from exc
    if not isinstance(payload, dict):  # a damaged row that still parses ([1,2], 42, "x")
        raise damaged(
            f"session {session_id!r} event {seq}: stored payload is not a JSON object"
            f" (a {type(payload).__name__})"
        )
    return [Event.trusted(seq, ts, session_id, typ, payload)]


def _type_sql(types: Sequence[str]) -> tuple[str, list[Any]]:
    """The ``WHERE`` term of rows holding an event of ``types``: its name (one-event rows) or its
    letter (frames)."""
    sql = f"type IN ({','.join('?' * len(types))})"
    codes = "".join(sorted({TYPE_CODES[t] for t in types if t in TYPE_CODES}))
    if codes:
        sql = f"({sql} OR type GLOB '*[{codes}]*')"  # the letters are A-Z: nothing to escape
    return sql, list(types)


def select_events(
    db: sqlite3.Connection,
    session_id: str,
    *,
    since: int = 0,
    until: int | None = None,
    types: Sequence[str] = (),
    limit: int | None = None,
    newest_first: bool = False,
) -> list[Event]:
    """Events of one session with ``since < seq (<= until)``, of ``types`` if given, ascending seq
    (descending with ``newest_first``), at most ``limit``: one range of the integer key, from
    the row holding ``since + 1`` (no index).

    Raises:
        JournalError: a row in the range does not decode (:func:`row_events`), or the rows' seqs
            do not follow each other or pass ``session.last_seq`` (:mod:`~acagent.store._frame_seqs`).
    """
    row = db.execute("SELECT num, last_seq FROM session WHERE id = ?", (session_id,)).fetchone()
    if row is None or row[0] is None:
        return []
    base = row[0] << 32
    top = _SEQ_MASK if until is None else min(max(until, 0), _SEQ_MASK)
    first = base + min(max(since, 0), _SEQ_MASK - 1) + 1
    # the row holding seq since + 1: a frame may begin before it (one probe of the key), and the
    # two rows before it: the read's rows continue from the one before, if that one follows its own
    # (else it is the damaged one, named by the reads that read it, not this one's floor)
    probe = [
        (k & _SEQ_MASK, (k & _SEQ_MASK) + row_span(t, h) - 1)
        for k, t, h in db.execute(
            "SELECT key, type, substr(payload, 1, 1) FROM event_log WHERE key > ? AND key <= ?"
            " ORDER BY key DESC LIMIT 3",
            (base, first),
        )
    ]
    lo, hi = base + (probe[0][0] if probe else first - base), base + top
    floor: int | None = 0  # none before: the session's first row, which must begin at seq 1
    if len(probe) > 1:
        floor = probe[1][1] if probe[1][0] == (probe[2][1] + 1 if len(probe) > 2 else 1) else None
    check = SeqCheck(db, session_id, row[1], floor=floor, top=top, descending=newest_first)
    # every row of the range is read, its seqs checked (a filtered read too: the type filter picks
    # the rows to decode, ``hit``; the others give only their first byte, which tells a frame)
    if types:
        where, targs = _type_sql(types)
        cols, args = (
            f"CASE WHEN {where} THEN payload ELSE substr(payload, 1, 1) END, {where}",
            [*targs, *targs],
        )
    else:
        cols, args = "payload, 1", []
    sql = f"SELECT key, ts, type, {cols} FROM event_log WHERE key >= ? AND key <= ?"
    sql += " ORDER BY key DESC" if newest_first else " ORDER BY key"
    wanted = set(types)

    def read(rows: list[Any]) -> Iterator[list[Event]]:
        for key, ts, typ, stored, hit in rows:  # one row at a time: the first fault in seq order is named
            check.row(key & _SEQ_MASK, row_span(typ, stored))
            if hit:
                yield [
                    e
                    for e in row_events(session_id, ((key, ts, typ, stored),))
                    if since < e.seq <= top and (not wanted or e.type in wanted)
                ]

    out: list[Event] = []
    pages = 0
    while lo <= hi and (limit is None or len(out) < limit):
        # a page of limit + 2 rows nearly always suffices unfiltered (every row holds an event of
        # the range but the two end ones), else the next page goes on past its last row; filtered,
        # rows of other types come too (their seqs are checked): each next page is 4x as long
        want = -1 if limit is None else (limit - len(out) + 2) << min(2 * pages, 8)
        pages += 1
        rows = db.execute(sql + " LIMIT ?", [*args, lo, hi, want]).fetchall()
        for events in read(rows):  # a damaged row past the limit is never decoded
            out.extend(reversed(events) if newest_first else events)
            if limit is not None and len(out) >= limit:
                return out[:limit]
        if want < 0 or len(rows) < want:
            check.end(since)
            break
        if newest_first:
            hi = rows[-1][0] - 1
        else:
            lo = rows[-1][0] + 1
    return out if limit is None else out[:limit]


def count_type(db: sqlite3.Connection, session_id: str, typ: str) -> int:
    """How many events of type ``typ`` the session has (its one-event rows and its frames' letters,
    counted in SQL without decoding)."""
    code = TYPE_CODES.get(typ)
    if code is None:
        sql, args = "SUM(e.type = ?)", [typ]
        cond = "e.type = ?"
    else:
        sql = "SUM(CASE WHEN e.type = ? THEN 1 ELSE length(e.type) - length(replace(e.type, ?, '')) END)"
        args, cond = [typ, code], f"(e.type = ? OR e.type GLOB '*{code}*')"
    row = db.execute(
        f"SELECT {sql} FROM session s JOIN event_log e ON e.key > (s.num << 32)"
        f" AND e.key <= (s.num << 32) + {_SEQ_MASK} WHERE s.id = ? AND {cond}",
        (*args, session_id, typ),
    ).fetchone()
    return int(row[0] or 0)


def stored_events(
    db: sqlite3.Connection, session_id: str | None = None
) -> list[tuple[str, int, str, str, str]]:
    """Every event of the journal (or of one session) as ``(session_id, seq, ts, type, payload
    JSON text)``, by session then seq: what the ``event`` view of m007 gave (with the payload
    decoded), for code that reads the file with plain ``sqlite3``.

    Raises:
        JournalError: a row does not decode.
    """
    sessions = db.execute(
        "SELECT id FROM session WHERE num IS NOT NULL"
        + (" AND id = ?" if session_id else "")
        + " ORDER BY num",
        (session_id,) if session_id else (),
    ).fetchall()
    return [
        (sid, e.seq, e.ts, e.type, orjson.dumps(e.payload).decode())
        for (sid,) in sessions
        for e in select_events(db, sid)
    ]


def m016_event_frames(db: sqlite3.Connection) -> None:
    """Frames from now on (module docstring): the rows already written stay as they are; the
    ``event`` view goes (it would list a frame as one event), :func:`stored_events` replaces it."""
    db.execute("DROP VIEW IF EXISTS event")
