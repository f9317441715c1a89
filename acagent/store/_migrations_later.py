"""The later schema migrations (m010 onwards), listed in order by
:data:`acagent.store._migrations.MIGRATIONS`.

Like the earlier ones they are applied once and never edited: a function's name is the name
recorded in a journal's ``migrations`` table, so it never changes. Most of them create what a
module of its own reads and writes (``_usage_day``, ``_step_row``, ``_session_text``) and call
that module's function of the same name.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

__all__ = [
    "LATER",
    "m010_tool_call_by_session",
    "m011_usage_by_day",
    "m012_compact_step",
    "m013_session_text",
    "m014_last_message_seq",
    "m015_step_id_by_turn",
    "m016_event_frames",
    "m017_id_windows",
    "m018_usage_in_step",
    "m019_tool_arguments_by_event",
    "m020_inflight_step_in_session",
]


def m010_tool_call_by_session(db: sqlite3.Connection) -> None:
    """``tool_call`` keyed by ``session.num << 32 | n``, its id unique through a compact index.

    The ``(session_id, tool_call_id)`` primary-key index held ~70-byte text keys that split a
    512-byte leaf across three siblings every few calls (figure 3: ~3 WAL frames per turn, ~1.5
    now for ``tool_call_tid``). As for ``step`` (m009): a session's calls are one key range in start
    order; ``tid``, :func:`acagent.store._sqlite_ops.step_rid` of ``(session_id, tool_call_id)``,
    keeps the id unique (a 64-bit collision of two different ids would fail the commit too).
    ``tool_call_pending``, a partial index of the rows :data:`acagent.store._rows.PENDING_APPROVAL`
    selects, answers every session's pending approvals; calls that never ask write nothing to it.
    Measured and not done: the arguments in a row of their own (the two status updates of a call
    rewrite the row's overflow page): that table started a leaf and rewrote its parent for nearly
    every call, as many frames again (59.4 per turn against 58.9).
    """
    from acagent.store._sqlite_ops import step_rid

    # (its own name: redefining m009's function fails while migrate's SELECT is open)
    db.create_function("acagent_tool_call_tid", 2, step_rid, deterministic=True)
    cols = [r[1] for r in db.execute("PRAGMA table_info(tool_call)")]
    db.execute(
        """CREATE TABLE tool_call_m010 (
            key             INTEGER PRIMARY KEY,    -- session.num << 32 | n (n = 1, 2, … per session)
            tid             INTEGER NOT NULL,       -- step_rid(session_id, tool_call_id)
            session_id      TEXT NOT NULL,
            tool_call_id    TEXT NOT NULL,
            turn_id         TEXT NOT NULL,
            step_id         TEXT NOT NULL,
            idx             INTEGER NOT NULL,
            name            TEXT NOT NULL,
            arguments       TEXT NOT NULL,          -- JSON text, or compressed (store/_payload.py)
            arguments_error TEXT,
            status          TEXT NOT NULL,
            approval        TEXT NOT NULL,
            approval_note   TEXT,
            runner          TEXT,
            pid             INTEGER,
            run_expires_at  REAL,
            idempotent      INTEGER NOT NULL,
            result_status   TEXT,
            host            TEXT,
            runner_pid      INTEGER
        )"""
    )
    db.execute(
        f"INSERT INTO tool_call_m010 (key, tid, {', '.join(cols)}) SELECT (s.num << 32)"
        " | ROW_NUMBER() OVER (PARTITION BY s.num ORDER BY t.rowid), acagent_tool_call_tid(t.session_id, t.tool_call_id),"
        f" {', '.join('t.' + c for c in cols)} FROM tool_call t JOIN session s ON s.id = t.session_id"
    )
    db.execute("DROP TABLE tool_call")
    db.execute("ALTER TABLE tool_call_m010 RENAME TO tool_call")
    db.execute("CREATE UNIQUE INDEX tool_call_tid ON tool_call (tid)")
    db.execute(
        "CREATE INDEX tool_call_pending ON tool_call (session_id)"
        " WHERE approval = 'pending' AND status = 'waiting_user'"
    )


def m011_usage_by_day(db: sqlite3.Connection) -> None:
    """Daily totals per ``(day, model)`` by a trigger, no ``usage_day`` (:mod:`acagent.store._usage_day`)."""
    from acagent.store._usage_day import m011_usage_by_day as create

    create(db)


def m012_compact_step(db: sqlite3.Connection) -> None:
    """``step`` rows stored compactly in ``step_log``; ``step`` is a view with the old columns.

    A step row was ~300 bytes, so a 512-byte page held one: every step started a new leaf and
    rewrote its parent (~10 WAL frames per benchmark turn for two steps, figure 3). ``step_log``
    drops what the key and the other columns already say (:mod:`acagent.store._step_row`), ~110
    bytes a row; the ``step`` view decodes it back (readers, and people with sqlite3, read it;
    writers use ``step_log``). ``step_log_rid`` is m009's ``step_rid`` on the new table.
    """
    from acagent.store._step_row import m012_compact_step as create

    create(db)


def m013_session_text(db: sqlite3.Connection) -> None:
    """The session's long texts in ``session_text``, beside its row (:mod:`acagent.store._session_text`)."""
    from acagent.store._session_text import m013_session_text as create

    create(db)


def m014_last_message_seq(db: sqlite3.Connection) -> None:
    """``last_message`` read from the message's own event (:mod:`acagent.store._session_text`)."""
    from acagent.store._session_text import m014_last_message_seq as create

    create(db)


def m015_step_id_by_turn(db: sqlite3.Connection) -> None:
    """Step ids ``session|turn|digest16`` packed to nothing (:mod:`acagent.store._step_row`).

    The runner's step id named the context's seq, which the journal assigns in the commit a
    step's intent now rides in (``runner/_stepstart.py``); it names the step's turn instead, which
    the row already holds, so the ``step`` view rebuilds it. Only the view changes: old rows keep
    their ``mid`` (or their ``step_id``) and read back as before.
    """
    from acagent.store._step_row import m015_step_id_by_turn as create

    create(db)


def m016_event_frames(db: sqlite3.Connection) -> None:
    """A commit's events in one ``event_log`` row, compressed together (:mod:`acagent.store._frames`).

    Nothing is rewritten: rows of one event stay as they are beside the frames. The ``event``
    view goes: a frame's events are not rows (``_frames.stored_events`` reads them with plain
    sqlite3); and an older acagent now refuses the journal (an unknown migration) instead of
    failing on its first frame.
    """
    from acagent.store._frames import m016_event_frames as create

    create(db)


def m017_id_windows(db: sqlite3.Connection) -> None:
    """Step and tool call ids unique without a hash index written per row (:mod:`acagent.store._row_ids`).

    ``step_log_rid`` and ``tool_call_tid`` made every insert rewrite a random leaf; a session's
    newest rows are now found in its own key range and older ones in ``step_ids`` /
    ``tool_call_ids``, filled a window of rows at a time.
    """
    from acagent.store._row_ids import m017_id_windows as create

    create(db)


def m018_usage_in_step(db: sqlite3.Connection) -> None:
    """An LLM call's usage in its step's row; ``usage`` a view of those and ``usage_log``
    (:mod:`acagent.store._usage_step`)."""
    from acagent.store._usage_step import m018_usage_in_step as create

    create(db)


def m019_tool_arguments_by_event(db: sqlite3.Connection) -> None:
    """A tool call's arguments read from its ``tool.call`` event (:mod:`acagent.store._tool_args`)."""
    from acagent.store._tool_args import m019_tool_arguments_by_event as create

    create(db)


def m020_inflight_step_in_session(db: sqlite3.Connection) -> None:
    """An inflight step held in its session's row, not in ``step_log``; ``step`` a view of both
    (:mod:`acagent.store._step_held`)."""
    from acagent.store._step_held import m020_inflight_step_in_session as create

    create(db)


LATER: list[Callable[[sqlite3.Connection], None]] = [
    m010_tool_call_by_session,
    m011_usage_by_day,
    m012_compact_step,
    m013_session_text,
    m014_last_message_seq,
    m015_step_id_by_turn,
    m016_event_frames,
    m017_id_windows,
    m018_usage_in_step,
    m019_tool_arguments_by_event,
    m020_inflight_step_in_session,
]
"""The migrations of this module, in the order they run (``MIGRATIONS`` ends with them)."""
