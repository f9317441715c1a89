"""The compact ``step_log`` row of m012: what a step's key and its other columns already say is not stored.

A step row was ~300 bytes (the session id three times, the request id holding the step id,
64 hex digits of digest, two 27-character times), so a 512-byte page held one and every step
started a new leaf (benchmarks figure 3, bytes per turn). :func:`pack_step` stores, only when
the value is exactly reproducible (anything else is stored as given):

- ``request_id``: NULL when it is ``step_id|attempt``;
- ``step_id``: NULL when it is ``session_id|mid|digest[:16]``, ``mid`` (the context seq, or
  ``compact|<seq>``) stored instead — the session id is the session whose ``num`` is
  ``key >> 32``; NULL and no ``mid`` either when it is ``session_id|turn_id|digest[:16]`` (the
  runner's step id since m015, ``runner/_stepstart.py``: the turn is the row's own);
- ``digest``: its bytes (BLOB) when it is lowercase hex; ``turn_id``: the 8 bytes after
  ``turn_`` when it is ``turn_`` + 16 lowercase hex digits;
- ``started_at`` / ``finished_at``: INTEGER microseconds since the epoch when the text is
  ``YYYY-MM-DDTHH:MM:SS.ffffffZ`` (what :func:`acagent.events.now_ts` writes).

The ``step`` view of m012 decodes them back in SQL (every reader reads the view); its
expressions and these functions are one format: ``tests/store/test_step_layout.py`` checks them
against each other.
"""

from __future__ import annotations

import re
import sqlite3
import time
from datetime import UTC, datetime

__all__ = [
    "create_step_view",
    "insert_step_row",
    "m012_compact_step",
    "m015_step_id_by_turn",
    "pack_step",
    "pack_ts",
    "unpack_ts",
]

_TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z")
_HEX = re.compile(r"(?:[0-9a-f]{2})+")
_TURN = re.compile(r"turn_[0-9a-f]{16}")


def unpack_ts(us: int) -> str:
    """The RFC 3339 text of ``us`` microseconds since the epoch (the view's decoding, in Python)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(us // 1_000_000)) + f".{us % 1_000_000:06d}Z"


_second: tuple[str, int | None] = ("", None)
"""The last ``YYYY-MM-DDTHH:MM:SS`` :func:`pack_ts` parsed and its seconds (``strptime`` was most
of a step commit's Python time, benchmarks figure 1; the steps of a turn share their second)."""


def _seconds(text: str) -> int | None:
    """Seconds since the epoch of ``YYYY-MM-DDTHH:MM:SS`` (UTC) when they reproduce ``text``
    exactly, else None (second 60, month 13, before 1970)."""
    global _second
    cached = _second
    if cached[0] == text:
        return cached[1]
    try:
        secs: int | None = int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp())
    except ValueError:  # e.g. second 60, month 13
        secs = None
    if secs is not None and (secs < 0 or time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) != text):
        secs = None
    _second = (text, secs)  # one tuple, replaced whole (a thread never pairs a text with another's seconds)
    return secs


def pack_ts(ts: str | None) -> int | str | None:
    """``ts`` as INTEGER microseconds when the text is reproduced exactly from them, else ``ts``."""
    if ts is None or not _TS.fullmatch(ts):
        return ts
    secs = _seconds(ts[:19])
    return ts if secs is None else secs * 1_000_000 + int(ts[20:26])


def pack_step(
    session_id: str, request_id: str, step_id: str, turn_id: str, digest: str, attempt: int
) -> tuple[str | None, str | None, str | None, str | bytes, str | bytes]:
    """``(request_id, step_id, mid, turn_id, digest)`` as ``step_log`` stores them (module docstring)."""
    stored_request: str | None = None if request_id == f"{step_id}|{attempt}" else request_id
    stored_step: str | None = step_id
    mid = None
    head, tail = f"{session_id}|", f"|{digest[:16]}"
    if step_id == f"{head}{turn_id}{tail}":
        stored_step = None  # m015: the view names the row's turn
    elif step_id.startswith(head) and step_id.endswith(tail) and len(step_id) > len(head) + len(tail):
        stored_step, mid = None, step_id[len(head) : -len(tail)]
    stored_digest: str | bytes = bytes.fromhex(digest) if _HEX.fullmatch(digest) else digest
    stored_turn: str | bytes = bytes.fromhex(turn_id[5:]) if _TURN.fullmatch(turn_id) else turn_id
    return stored_request, stored_step, mid, stored_turn, stored_digest


def insert_step_row(
    db: sqlite3.Connection,
    num: int,
    session_id: str,
    row: tuple[str, str, str, str, int, str, str | None, str, str | None],
    *,
    key: int | None = None,
) -> None:
    """Insert one step of session ``num`` into ``step_log`` (m012), at the end of its key range.

    Args:
        row: ``(request_id, step_id, turn_id, digest, attempt, status, error, started_at,
            finished_at)`` as the ``step`` view reads them back.
        key: the row's key (default: the session's next; ``InsertStep`` has checked the request
            id's uniqueness for it, :func:`acagent.store._row_ids.claim`).

    Raises:
        sqlite3.IntegrityError: before m017, the journal already has that request id (``step_log_rid``).
    """
    from acagent.store._sqlite_ops import next_key, step_rid  # (it imports this module)

    request_id, step_id, turn_id, digest, attempt, status, error, started_at, finished_at = row
    packed_request, packed_step, mid, packed_turn, packed_digest = pack_step(
        session_id, request_id, step_id, turn_id, digest, attempt
    )
    db.execute(
        "INSERT INTO step_log (key, rid, request_id, step_id, mid, turn_id, digest, attempt, status, error,"
        " started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            next_key(db, "step_log", num) if key is None else key,
            step_rid(session_id, request_id),
            packed_request,
            packed_step,
            mid,
            packed_turn,
            packed_digest,
            attempt,
            status,
            error,
            pack_ts(started_at),
            pack_ts(finished_at),
        ),
    )


def m012_compact_step(db: sqlite3.Connection) -> None:
    """Copy m009's ``step`` rows into ``step_log``, packed, and replace the table with the ``step`` view."""
    db.execute(
        """CREATE TABLE step_log (
            key         INTEGER PRIMARY KEY,        -- session.num << 32 | n (n = 1, 2, … per session)
            rid         INTEGER NOT NULL,           -- step_rid(session_id, request_id)
            request_id  TEXT,                       -- NULL: step_id || '|' || attempt
            step_id     TEXT,                       -- NULL: session id || '|' || mid || '|' || digest[:16]
            mid         TEXT,                       -- the middle of that step id (context seq, compact|seq)
            turn_id     NOT NULL,                   -- text, or the 8 bytes of turn_<16 hex>
            digest      NOT NULL,                   -- text, or the bytes of a lowercase hex digest
            attempt     INTEGER NOT NULL,
            status      TEXT NOT NULL,              -- inflight|done|failed
            error       TEXT,
            started_at  NOT NULL,                   -- RFC 3339 text, or INTEGER µs since the epoch
            finished_at                             -- the same; NULL until finished
        )"""
    )
    rows = db.execute(
        "SELECT s.num, t.session_id, t.request_id, t.step_id, t.turn_id, t.digest, t.attempt, t.status, t.error,"
        " t.started_at, t.finished_at FROM step t JOIN session s ON s.id = t.session_id ORDER BY t.key"
    ).fetchall()
    for num, session_id, *row in rows:
        insert_step_row(db, num, session_id, tuple(row))
    db.execute("DROP TABLE step")
    db.execute("CREATE UNIQUE INDEX step_log_rid ON step_log (rid)")
    create_step_view(db, by_turn=False)


def m015_step_id_by_turn(db: sqlite3.Connection) -> None:
    """The ``step`` view of m012, and a row with neither ``step_id`` nor ``mid`` names the step
    ``session|turn|digest16`` (the runner's step id from now on: ``runner/_stepstart.py``)."""
    db.execute("DROP VIEW step")
    create_step_view(db, by_turn=True)


def create_step_view(db: sqlite3.Connection, *, by_turn: bool, name: str = "step") -> None:
    """The ``step`` view over ``step_log`` (m012; ``by_turn``: with m015's step ids), named
    ``name`` (since m020 ``step_row``: ``step`` adds the steps the session rows hold)."""
    digest = "CASE WHEN typeof(t.digest) = 'blob' THEN lower(hex(t.digest)) ELSE t.digest END"
    turn = "CASE WHEN typeof(t.turn_id) = 'blob' THEN 'turn_' || lower(hex(t.turn_id)) ELSE t.turn_id END"
    mid = f"COALESCE(t.mid, {turn})" if by_turn else "t.mid"
    step_id = f"COALESCE(t.step_id, s.id || '|' || {mid} || '|' || substr({digest}, 1, 16))"

    def ts(col: str) -> str:
        return (
            f"CASE WHEN typeof({col}) = 'integer' THEN strftime('%Y-%m-%dT%H:%M:%S', {col} / 1000000, 'unixepoch')"
            f" || printf('.%06dZ', {col} % 1000000) ELSE {col} END"
        )

    db.execute(
        f"CREATE VIEW {name} (key, rid, session_id, request_id, step_id, turn_id, digest, attempt, status, error,"
        f" started_at, finished_at) AS SELECT t.key, t.rid, s.id, COALESCE(t.request_id, {step_id} || '|' || t.attempt),"
        f" {step_id}, {turn},"
        f" {digest}, t.attempt, t.status, t.error, {ts('t.started_at')}, {ts('t.finished_at')}"
        " FROM step_log t JOIN session s ON s.num = t.key >> 32"
    )
