"""``acagent import FILE``: load a JSONL transcript into the journal as a session.

The transcript is read with :func:`read_transcript` (NUL runs and a torn last line are skipped and
reported; any other damage is an error naming the line). Events are re-sequenced from 1 (skipped
lines leave no gap), tool calls left without a result get an "interrupted" result and an open turn
gets ``turn.interrupted`` (so the context stays valid for a strict provider), a warning ``error``
event records what was skipped, and a clean copy of the transcript is written under the sessions
directory (the torn tail, if any, goes to a ``.corrupt`` sidecar). The model context of the
imported session is its last checkpoint plus the tail, like any other session.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from acagent.errors import TranscriptError
from acagent.events import Event, make_payload, now_ts
from acagent.store._journal import SqliteJournal, new_session_id
from acagent.store._ops import CONTEXT_TYPES
from acagent.store._transcript import TranscriptWriter, read_transcript, transcript_path

__all__ = ["ImportResult", "import_transcript"]


@dataclass
class ImportResult:
    """Outcome of an import."""

    session_id: str
    events: int
    warning: str | None
    path: Path


def _close_open_calls(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
    calls: dict[str, dict[str, Any]] = {}
    open_turn: str | None = None
    for typ, p in events:
        if typ == "tool.call":
            calls[p["tool_call_id"]] = p
        elif typ == "tool.result":
            calls.pop(p.get("tool_call_id", ""), None)
        elif typ == "turn.started":
            open_turn = p.get("turn_id") or "turn_imported"
        elif typ in ("turn.completed", "turn.failed", "turn.interrupted"):
            open_turn = None
    extra: list[tuple[str, dict[str, Any]]] = []
    for cid, p in calls.items():
        extra.append(
            (
                "tool.result",
                make_payload(
                    "tool.result",
                    turn_id=p.get("turn_id"),
                    tool_call_id=cid,
                    name=p.get("name", "unknown"),
                    status="interrupted",
                    content="interrupted: the transcript ended before this call finished; it may or may not have taken effect",
                    is_error=True,
                ),
            )
        )
    if open_turn is not None:
        extra.append(("turn.interrupted", make_payload("turn.interrupted", turn_id=open_turn, reason="import")))
    return extra


async def import_transcript(journal: SqliteJournal, file: Path, sessions_dir: Path) -> ImportResult:
    """Import ``file`` as a session (see module docstring).

    Raises:
        TranscriptError: the file is empty, unreadable, or damaged beyond the recoverable kinds.
    """
    try:
        read = read_transcript(file)
    except OSError as exc:
        raise TranscriptError(f"cannot read {str(file)!r}: {exc.strerror or exc}") from exc
    if not read.events:
        raise TranscriptError(f"{str(file)!r} holds no event records")
    first = read.events[0]
    if first.type != "session.created":
        raise TranscriptError(f"{str(file)!r} line 1 is not a session.created record")
    sid = first.session_id
    try:
        await journal.get_session(sid)
        sid = new_session_id()
    except TranscriptError:
        raise
    except Exception:
        pass
    warning = read.warning(file)
    items: list[tuple[str, dict[str, Any]]] = [(e.type, e.payload) for e in read.events]
    items += _close_open_calls(items)
    if warning:
        items.append(
            ("error", make_payload("error", code="transcript_damaged", message=warning, detail=read.skipped))
        )
    created = first.payload
    cwd = str(created.get("cwd") or "/")
    status = "done"
    for typ, _ in reversed(items):
        if typ in ("turn.completed", "turn.failed", "turn.interrupted"):
            status = {"turn.completed": "done", "turn.failed": "failed", "turn.interrupted": "cancelled"}[typ]
            break
    ts = now_ts()
    rows: list[Event] = []
    for i, (typ, payload) in enumerate(items, start=1):
        original = read.events[i - 1].ts if i <= len(read.events) else ts
        rows.append(Event(seq=i, ts=original, session_id=sid, type=typ, payload=payload))
    last_message = None
    checkpoint: tuple[int, int] = (0, 0)
    tail = 0
    for ev in rows:
        size = len(orjson.dumps(ev.payload))
        if ev.type == "checkpoint":
            checkpoint, tail = (ev.seq, size), 0
        elif ev.type in CONTEXT_TYPES:
            tail += size
            if ev.type != "tool.result" and ev.payload.get("text"):
                last_message = ev.payload["text"]

    def tx(db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "INSERT INTO session (id, cwd, title, model, status, created_at, updated_at, last_seq,"
                " last_message, checkpoint_seq, checkpoint_bytes, tail_bytes, warnings)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    cwd,
                    created.get("title"),
                    created.get("model"),
                    status,
                    first.ts,
                    ts,
                    len(rows),
                    (last_message or "")[:500] or None,
                    checkpoint[0],
                    checkpoint[1],
                    tail,
                    orjson.dumps([{"code": "transcript_damaged", "message": warning}]).decode() if warning else None,
                ),
            )
            db.executemany(
                "INSERT INTO event (session_id, seq, ts, type, payload) VALUES (?, ?, ?, ?, ?)",
                [(sid, e.seq, e.ts, e.type, orjson.dumps(e.payload).decode()) for e in rows],
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    await journal._run(tx)
    dest = transcript_path(sessions_dir, cwd, sid)
    writer = TranscriptWriter(dest)
    try:
        writer.rewrite(rows, keep_damaged=False)
    finally:
        writer.close()
    if read.torn_tail:
        dest.with_suffix(".jsonl.corrupt").write_bytes(read.torn_tail)
    return ImportResult(session_id=sid, events=len(rows), warning=warning, path=dest)
