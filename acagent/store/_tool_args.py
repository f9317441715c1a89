"""A tool call's arguments read from its own ``tool.call`` event (m019, benchmarks figure 3 bytes per turn).

The runner commits every ``InsertToolCall`` with the call's ``tool.call`` event, whose payload
holds the same arguments. Stored again in the ``tool_call`` row (compressed, ~420 bytes for the
benchmark's arguments) they put the row on an overflow page, written with the intent and again
by the status update (a row that changes size is rewritten whole): ~2 WAL frames of 512 bytes per
benchmark turn. Since m019 the row records the event's seq instead (``tool_call.args_seq``,
``arguments`` empty), when the commit holds a ``tool.call`` event of that id whose arguments
serialise to the same JSON (:func:`settle_arguments`, after the commit's events are numbered);
any other intent (no such event, other arguments) stores them in the row as before. Reads decode
that event (:func:`event_arguments`, through :func:`acagent.store._frames.select_events`): the
same JSON text as the row held.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import orjson

from acagent.errors import JournalError
from acagent.events import Event
from acagent.store._payload import encode_payload

__all__ = ["event_arguments", "m019_tool_arguments_by_event", "settle_arguments"]


def settle_arguments(
    db: sqlite3.Connection, pending: dict[str, tuple[int, str]], events: Sequence[Event]
) -> None:
    """Point each intent of the commit (``pending``: tool call id → (row key, arguments JSON)) at
    its ``tool.call`` event in ``events`` (the commit's, numbered), else store its arguments."""
    for event in events:
        if event.type != "tool.call":
            continue
        call_id = event.payload.get("tool_call_id")
        if not isinstance(call_id, str) or call_id not in pending or "arguments" not in event.payload:
            continue
        key, text = pending[call_id]
        if orjson.dumps(event.payload["arguments"]).decode() == text:
            db.execute("UPDATE tool_call SET args_seq = ? WHERE key = ?", (event.seq, key))
            del pending[call_id]
    for key, text in pending.values():
        db.execute("UPDATE tool_call SET arguments = ? WHERE key = ?", (encode_payload(text), key))
    pending.clear()


def event_arguments(db: sqlite3.Connection, session_id: str, seq: int, tool_call_id: str) -> str:
    """The arguments JSON of the ``tool.call`` event ``seq`` of the session.

    Raises:
        JournalError: the event is missing or does not decode.
    """
    from acagent.store._frames import select_events  # (a frame or a row of its own, m016)

    where = f"session {session_id!r} tool call {tool_call_id!r}: event {seq}"
    try:
        events = select_events(db, session_id, since=seq - 1, until=seq, types=("tool.call",))
    except JournalError as exc:  # its row, or the rows around it, are damaged
        raise JournalError(f"{where}: {exc.message}", detail=exc.detail) from exc
    if len(events) != 1 or "arguments" not in events[0].payload:
        raise JournalError(f"{where} does not hold the call's arguments")
    return orjson.dumps(events[0].payload["arguments"]).decode()


def m019_tool_arguments_by_event(db: sqlite3.Connection) -> None:
    """``tool_call.args_seq``: NULL for every row written before (their arguments are in the row)."""
    db.execute("ALTER TABLE tool_call ADD COLUMN args_seq INTEGER")
