"""Unique step request ids and tool call ids without a hash index written per row (m017).

``step_log.rid`` and ``tool_call.tid`` (64 bits of a hash of the session and the id,
:func:`acagent.store._sqlite_ops.step_rid`) kept the ids unique through a UNIQUE index each (m009/m010). A hash key is random,
so every insert rewrote a random leaf of that index and split it often; with the WAL checkpoint
copying those scattered pages again, the two indexes cost ~5 WAL frames of 512 bytes per
benchmark turn (figure 3, bytes per turn; the step's own row, the last leaf of ``step_log``, costs
one).

Now a session's newest rows — at most :data:`WINDOW` of them, the rows whose key is above the
session's ``step_ids_to`` / ``tool_ids_to`` — are found by their hash in their own key range
(``num << 32 .. (num + 1) << 32``: a bounded range scan of the table's last leaves, which the
insert rewrites anyway), and older rows through ``step_ids`` / ``tool_call_ids`` (``rid INTEGER
PRIMARY KEY, key``: O(log n)). An insert that finds the window full first moves the whole window
into that table, one statement in the same transaction: a batch of :data:`WINDOW` hashes shares
leaves, so a row costs a fraction of a leaf there instead of one or more. Lookups
(:func:`keys_sql`) take the union of both places and then compare the real ids, so a hash
collision never picks the wrong row; an insert whose hash is already known (in the session's
window or anywhere in the table) is refused with the same ``UNIQUE constraint failed`` error the
indexes gave (the conformance suite expects a :class:`~acagent.errors.JournalError`).
"""

from __future__ import annotations

import sqlite3
from typing import NamedTuple

__all__ = [
    "STEPS",
    "TOOL_CALLS",
    "WINDOW",
    "IdSpec",
    "claim",
    "drop_session",
    "keys_sql",
    "known",
    "m017_id_windows",
    "num_range",
]

WINDOW = 128
"""Rows of a session found by a scan of its newest keys before they move into the id table.

A move inserts :data:`WINDOW` random hashes into the id table, so it rewrites up to that many of
its leaves (all of them while the table is small): the larger the window, the fewer moves share
those rewrites. Measured on the benchmark turn (figure 3, history 200, 100 turns): 32 → 128 took
``step_ids`` from 1.5 WAL frames per turn (it grows with the table: 0.3 at history 50) and the
bytes per turn from 34.0 to 32.8 KB (2.49× → 2.40× the turn's own events), and the CPU per turn
from ~6.0 to ~5.0 ms (fewer moves; the window's scan is one range of a session's newest keys).
A journal whose id table has many more leaves than the window still pays about one leaf per id
at each move."""


class IdSpec(NamedTuple):
    """Where one kind of id lives (fixed SQL names, never user input)."""

    table: str
    """The rows' table (keyed ``session.num << 32 | n``)."""
    column: str
    """Its hash column (``acagent.store._sqlite_ops.step_rid`` of the session and the id)."""
    ids: str
    """The id table: ``rid INTEGER PRIMARY KEY`` (the hash) → ``key`` of the row."""
    upto: str
    """The session's column: the last key moved into the id table (NULL: none yet)."""
    label: str
    """What a refused duplicate names (``UNIQUE constraint failed: <label>``, as the index said)."""


STEPS = IdSpec("step_log", "rid", "step_ids", "step_ids_to", "step_log.rid")
"""Step request ids (``step_log.rid``)."""
TOOL_CALLS = IdSpec("tool_call", "tid", "tool_call_ids", "tool_ids_to", "tool_call.tid")
"""Tool call ids (``tool_call.tid``)."""


def keys_sql(spec: IdSpec, n: int = 1) -> str:
    """SQL of the keys whose hash is one of ``n`` values: the session's window, then the id table.

    Parameters, in order: the session's ``num``, the end of its key range (``(num + 1) << 32``),
    the ``n`` hashes, the ``n`` hashes again. The caller compares the real ids of those rows.
    """
    marks = ",".join("?" * n)
    return (
        f"SELECT key FROM {spec.table} WHERE key > (SELECT COALESCE({spec.upto}, num << 32) FROM session"
        f" WHERE num = ?) AND key < ? AND {spec.column} IN ({marks})"
        f" UNION ALL SELECT key FROM {spec.ids} WHERE rid IN ({marks})"
    )


def num_range(db: sqlite3.Connection, session_id: str) -> tuple[int, int]:
    """The first two parameters of :func:`keys_sql` for a session (an unknown one matches nothing)."""
    found = db.execute("SELECT num FROM session WHERE id = ?", (session_id,)).fetchone()
    if found is None or found[0] is None:
        return -1, 0
    return int(found[0]), (int(found[0]) + 1) << 32


def _upto(db: sqlite3.Connection, spec: IdSpec, num: int) -> int:
    found = db.execute(f"SELECT {spec.upto} FROM session WHERE num = ?", (num,)).fetchone()
    return num << 32 if found is None or found[0] is None else int(found[0])


def known(db: sqlite3.Connection, spec: IdSpec, num: int, rid: int, upto: int | None = None) -> bool:
    """Whether session ``num`` (its window above ``upto``, default the session's) or the id
    table already has the hash ``rid``."""
    lo = _upto(db, spec, num) if upto is None else upto
    dup = db.execute(
        f"SELECT 1 FROM {spec.table} WHERE key > ? AND key < ? AND {spec.column} = ?"
        f" UNION ALL SELECT 1 FROM {spec.ids} WHERE rid = ? LIMIT 1",
        (lo, (num + 1) << 32, rid, rid),
    ).fetchone()
    return dup is not None


def claim(db: sqlite3.Connection, spec: IdSpec, num: int, key: int, rid: int) -> None:
    """Before the insert of the row ``key`` (session ``num``'s next) with hash ``rid``: refuse a
    known hash; move a full window into the id table.

    Raises:
        sqlite3.IntegrityError: the hash is known (``UNIQUE constraint failed: <label>``).
    """
    upto = _upto(db, spec, num)
    if known(db, spec, num, rid, upto):
        raise sqlite3.IntegrityError(f"UNIQUE constraint failed: {spec.label}")
    if key - 1 - upto >= WINDOW:
        db.execute(
            f"INSERT INTO {spec.ids} (rid, key) SELECT {spec.column}, key FROM {spec.table}"
            " WHERE key > ? AND key < ?",
            (upto, key),
        )
        # its own UPDATE: the session's page is in this transaction anyway (no extra WAL frame),
        # and what follows in the commit reads the new window
        db.execute(f"UPDATE session SET {spec.upto} = ? WHERE num = ?", (key - 1, num))


def drop_session(db: sqlite3.Connection, num: int) -> None:
    """Forget session ``num``'s ids (before its rows are deleted)."""
    lo, hi = num << 32, (num + 1) << 32
    for spec in (STEPS, TOOL_CALLS):  # fixed names
        db.execute(
            f"DELETE FROM {spec.ids} WHERE rid IN (SELECT {spec.column} FROM {spec.table}"
            " WHERE key > ? AND key < ?) AND key > ? AND key < ?",
            (lo, hi, lo, hi),
        )


def m017_id_windows(db: sqlite3.Connection) -> None:
    """The id tables replace the hash indexes; every existing row moves into them (module docstring)."""
    for spec, index in ((STEPS, "step_log_rid"), (TOOL_CALLS, "tool_call_tid")):
        db.execute(f"CREATE TABLE {spec.ids} (rid INTEGER PRIMARY KEY, key INTEGER NOT NULL)")
        db.execute(f"INSERT INTO {spec.ids} (rid, key) SELECT {spec.column}, key FROM {spec.table}")
        db.execute(f"DROP INDEX {index}")
        db.execute(f"ALTER TABLE session ADD COLUMN {spec.upto} INTEGER")  # NULL: none moved yet
        db.execute(
            f"UPDATE session SET {spec.upto} = (SELECT MAX(key) FROM {spec.table}"
            " WHERE key > session.num << 32 AND key < (session.num + 1) << 32) WHERE num IS NOT NULL"
        )
