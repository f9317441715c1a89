"""The session's long texts, kept beside its row in ``session_text`` (m013): ``last_message``,
``warnings`` and ``approval_rules``.

Every commit updates the session row (``last_seq``, ``updated_at``, ``tail_bytes``). With the
500-character ``last_message`` and a warnings list in it, the row was ~1.1 KB: past the ~480 bytes
a 512-byte page keeps in the leaf, so most columns lived on overflow pages, and a commit rewrote
them, or — the row's size having changed — freed and reallocated them, writing the freelist too
(~17 of ~74 WAL frames per benchmark turn, figure 3). In their own rows (``key = num << 2 |
field``, the value stored like an event payload, compressed when that is smaller,
:mod:`acagent.store._payload`) the session row stays ~300 bytes in its leaf, and a commit that
changes ``last_message`` rewrites one small row.

The columns of the same names in ``session`` stay NULL (``approval_rules`` ``'{}'``) since m013;
:data:`SESSION_SELECT` reads the texts in their place, :func:`session_row` decodes them.

Since m014 a commit does not copy ``last_message`` at all: the text is the ``text`` of one of the
session's own events (a ``user.message`` or ``assistant.message``, cut to
:data:`~acagent.store._numbering.LAST_MESSAGE_CHARS`), so the commit's ``UPDATE session`` — which
it runs anyway — records that event's seq in ``session.last_message_seq``, and a read decodes the
event. That took a statement, a second compression of the message and a page write off every
message commit (benchmarks figure 3: the durable commit against the raw WAL commit). The
``session_text`` row of ``last_message`` remains what an import (or a journal before m014)
recorded, read while ``last_message_seq`` is NULL.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

import orjson

from acagent.store._frames import frame_payload
from acagent.store._numbering import LAST_MESSAGE_CHARS
from acagent.store._payload import FRAME_BYTES, damaged, decode_payload, encode_payload
from acagent.store._rows import SESSION_COLS, SessionRow

__all__ = [
    "APPROVAL_RULES",
    "LAST_MESSAGE",
    "SESSION_SELECT",
    "WARNINGS",
    "session_row",
    "set_session_text",
    "set_text",
]

LAST_MESSAGE, WARNINGS, APPROVAL_RULES = 1, 2, 3
"""The ``field`` part of a ``session_text`` key."""

_FIELDS = {"last_message": LAST_MESSAGE, "warnings": WARNINGS, "approval_rules": APPROVAL_RULES}
_AT = {name: SESSION_COLS.index(name) for name in _FIELDS}

_MESSAGE_ROW = (
    "WHERE key <= session.num << 32 | session.last_message_seq AND key > session.num << 32"
    " ORDER BY key DESC LIMIT 1"
)
SESSION_SELECT = (
    ", ".join(
        f"(SELECT value FROM session_text WHERE key = session.num << 2 | {_FIELDS[c]})" if c in _FIELDS else c
        for c in SESSION_COLS
    )
    + f", (SELECT payload FROM event_log {_MESSAGE_ROW}), session.last_message_seq - (SELECT key & 4294967295 FROM event_log {_MESSAGE_ROW})"
    + f", (SELECT type FROM event_log {_MESSAGE_ROW})"
)
"""The :class:`SessionRow` columns of ``SELECT … FROM session`` (rows for :func:`session_row`), then
the stored payload of the row holding the event ``last_message`` comes from and the event's place
in it (0 for a row of its own; NULL before the session's first message commit since m014), since
m016 maybe a frame that begins before it (:mod:`acagent.store._frames`), and that row's ``type``
(a frame's letters, which its CRC covers)."""

_MESSAGE_AT = len(SESSION_COLS)


def session_row(row: Sequence[Any]) -> SessionRow:
    """A :class:`SessionRow` from a ``SELECT {SESSION_SELECT} FROM session`` row (columns after
    those of :data:`SESSION_SELECT` ignored).

    Raises:
        JournalError: a stored text, or the payload of the last message's event, does not decode.
    """
    values = list(row[:_MESSAGE_AT])
    for name, at in _AT.items():
        if values[at] is not None:  # the error names the session and the text (tester F10)
            text = decode_payload(values[at], f"session {values[0]!r}: its stored {name}")
            values[at] = text if isinstance(text, str) else text.decode()
    if values[_AT["approval_rules"]] is None:
        values[_AT["approval_rules"]] = "{}"
    if row[_MESSAGE_AT] is not None:  # m014: the text of the event last_message_seq names
        values[_AT["last_message"]] = _message_text(
            row[_MESSAGE_AT], row[_MESSAGE_AT + 1], row[_MESSAGE_AT + 2], values[0]
        )
    return SessionRow(*values)


def _message_text(stored: str | bytes, at: int, codes: Any, session_id: str) -> str:
    where = f"session {session_id!r}: the last message's event"
    if type(stored) is bytes and stored[:1] in FRAME_BYTES:  # in a commit's frame (m016)
        if not isinstance(codes, str):
            raise damaged(f"{where}: a frame whose type column is a {type(codes).__name__}")
        payload = frame_payload(stored, codes, at, where)
    else:
        try:
            payload = orjson.loads(decode_payload(stored, where)) if at == 0 else None
        except orjson.JSONDecodeError as exc:
            raise damaged(f"{where}: stored payload is not JSON ({exc})") from exc
    if not isinstance(payload, dict) or payload.get("text") is None:
        raise damaged(f"{where} has no text")
    return str(payload["text"])[:LAST_MESSAGE_CHARS]


def set_text(db: sqlite3.Connection, num: int, field: int, value: str | None) -> None:
    """Store (or, for None and an empty ``approval_rules``, drop) one text of session ``num``."""
    key = num << 2 | field
    if value is None or (field == APPROVAL_RULES and value == "{}"):
        db.execute("DELETE FROM session_text WHERE key = ?", (key,))
        return
    db.execute(
        "INSERT INTO session_text (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (key, encode_payload(value)),
    )


def set_session_text(db: sqlite3.Connection, session_id: str, field: int, value: str) -> None:
    """Store one text of the session ``session_id`` (nothing when there is no such session), in one statement."""
    db.execute(
        "INSERT INTO session_text (key, value) SELECT num << 2 | ?, ? FROM session WHERE id = ?"
        " ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (field, encode_payload(value), session_id),
    )


def m013_session_text(db: sqlite3.Connection) -> None:
    """Move ``last_message``, ``warnings`` and ``approval_rules`` into ``session_text`` (module docstring)."""
    db.execute(
        """CREATE TABLE session_text (
            key   INTEGER PRIMARY KEY,  -- session.num << 2 | field (1 last_message, 2 warnings, 3 approval_rules)
            value NOT NULL              -- the text, or its compressed BLOB (store/_payload.py)
        )"""
    )
    rows = db.execute("SELECT num, last_message, warnings, approval_rules FROM session WHERE num IS NOT NULL")
    for num, last_message, warnings, rules in rows.fetchall():
        set_text(db, num, LAST_MESSAGE, last_message)
        set_text(db, num, WARNINGS, warnings)
        set_text(db, num, APPROVAL_RULES, rules)
    db.execute("UPDATE session SET last_message = NULL, warnings = NULL, approval_rules = '{}'")


def m014_last_message_seq(db: sqlite3.Connection) -> None:
    """``session.last_message_seq``: the seq of the event ``last_message`` comes from (module docstring)."""
    db.execute("ALTER TABLE session ADD COLUMN last_message_seq INTEGER")
