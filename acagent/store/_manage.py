"""Session housekeeping on the journal: rename, archive and remove (``acagent sessions
rename|archive|unarchive|rm``).

Rename and archive change one column of the session row (``title``, ``archived_at``) and nothing
else — not the status, the lease, the fencing token or ``last_seq`` — so they never disturb a turn
in progress, and an archived session resumes like any other (archiving only hides it from
session lists). They run on SQLite and, through the sync bridge, on PostgreSQL. Removing runs as
one transaction under ``BEGIN IMMEDIATE``. Removing refuses a session a live process
is working on (status active and the lease not expired): cancel it first. It deletes the
session's events, steps and tool calls and the session row, then its transcript files; usage
rows stay (spend limits count what was spent, whatever happened to the session since).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import time
from pathlib import Path
from typing import Any

from acagent.errors import SessionBusy, UserError
from acagent.store._ops import ACTIVE
from acagent.store._row_ids import drop_session
from acagent.store._transcript import transcript_path
from acagent.store._usage_step import keep_usage

__all__ = ["archive_session", "remove_session", "rename_session"]

TITLE_MAX = 200
"""Longest title accepted, characters."""


def _sqlite(journal: Any) -> Any:
    run = getattr(journal, "_run", None)
    if run is None:
        raise UserError("renaming and removing sessions needs the SQLite journal")
    return run


async def _update_row(journal: Any, session_id: str, sql: str, args: tuple[Any, ...]) -> str:
    """Run ``sql`` (its last placeholder is the id) on the session ``session_id`` names; its full id."""
    row = await journal.find_session(session_id)

    def tx(db: sqlite3.Connection) -> None:
        db.execute(sql, (*args, row.id))

    await _sqlite(journal)(tx)
    return str(row.id)


async def rename_session(journal: Any, session_id: str, title: str) -> str:
    """Give the session ``title`` (whitespace folded, at most :data:`TITLE_MAX` characters).

    Args:
        session_id: id or unique prefix.

    Returns:
        The session's full id.

    Raises:
        SessionNotFound: unknown or ambiguous id.
        UserError: an empty title.
    """
    title = " ".join(title.split())
    if not title:
        raise UserError("the title is empty; give the session a name")
    if len(title) > TITLE_MAX:
        raise UserError(f"the title is {len(title)} characters; at most {TITLE_MAX}")
    return await _update_row(journal, session_id, "UPDATE session SET title = ? WHERE id = ?", (title,))


async def archive_session(journal: Any, session_id: str, archived: bool = True) -> str:
    """Set (``archived``) or clear the session's ``archived_at``; returns its full id.

    Archiving again keeps the first time it was archived. Raises ``SessionNotFound`` for an
    unknown or ambiguous id (or prefix).
    """
    from acagent.events import now_ts

    if archived:
        sql = "UPDATE session SET archived_at = COALESCE(archived_at, ?) WHERE id = ?"
        return await _update_row(journal, session_id, sql, (now_ts(),))
    return await _update_row(journal, session_id, "UPDATE session SET archived_at = NULL WHERE id = ?", ())


async def remove_session(journal: Any, session_id: str, sessions_dir: Path) -> str:
    """Delete a session and its transcript (see module docstring).

    Returns:
        The removed session's full id.

    Raises:
        SessionNotFound: unknown or ambiguous id.
        SessionBusy: a live process is running the session's turn.
    """
    row = await journal.find_session(session_id)

    def tx(db: sqlite3.Connection) -> str | None:
        db.execute("BEGIN IMMEDIATE")
        try:
            found = db.execute(
                "SELECT status, lease_owner, lease_expires_at, lease_pid FROM session WHERE id = ?", (row.id,)
            ).fetchone()
            if found is None:
                db.execute("ROLLBACK")
                return "gone"
            status, owner, expires, pid = found
            if status in ACTIVE and owner and (expires or 0) > time.time():
                db.execute("ROLLBACK")
                return f"session {row.id!r} is {status} in pid {pid}; cancel it first (`acagent attach` or Ctrl-C)"
            num = db.execute("SELECT num FROM session WHERE id = ?", (row.id,)).fetchone()[0]
            if num is not None:  # its events, steps, tool calls: one key range each (m007, m012, m010)
                drop_session(db, num)  # their ids first (m017)
                keep_usage(db, num)  # the usage its steps hold stays, in usage_log (m018)
                for table in ("event_log", "step_log", "tool_call"):  # fixed table names
                    db.execute(f"DELETE FROM {table} WHERE key > ? AND key < ?", (num << 32, (num + 1) << 32))
                db.execute(
                    "DELETE FROM session_text WHERE key >= ? AND key < ?", (num << 2, (num + 1) << 2)
                )  # m013
            db.execute("DELETE FROM session WHERE id = ?", (row.id,))
            db.execute("COMMIT")
            return None
        except BaseException:
            if db.in_transaction:  # SQLite already rolled back on SQLITE_FULL/IOERR; keep that error
                db.execute("ROLLBACK")
            raise

    refused = await _sqlite(journal)(tx)
    if refused and refused != "gone":
        raise SessionBusy(refused)
    path = transcript_path(sessions_dir, row.cwd, row.id)
    for suffix in ("", ".corrupt", ".tmp"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}{suffix}")
    # big tool outputs kept beside the transcript (acagent/tools/_blob.py, F44)
    shutil.rmtree(path.with_name(path.stem + ".blobs"), ignore_errors=True)
    return str(row.id)
