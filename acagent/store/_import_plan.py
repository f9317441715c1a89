"""How ``acagent import`` turns a transcript's records into a session (:func:`plan_import`).

The rules (records checked against their event models, events re-sequenced from 1, a tool call
without a result given an "interrupted" one, an open turn ended, damaged lines reported) are in
:mod:`acagent.store._import`, which writes the plan into the journal.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pydantic import ValidationError

from acagent.errors import TranscriptError
from acagent.events import EVENT_TYPES, Event, make_payload, now_ts
from acagent.messages import MESSAGES_ADAPTER, Message
from acagent.store._ops import CONTEXT_TYPES
from acagent.store._transcript import (
    TranscriptRead,
)

__all__ = ["ImportPlan", "plan_import"]

_TURN_END = {"turn.completed": "done", "turn.failed": "failed", "turn.interrupted": "cancelled"}
_INTERRUPTED = (
    "interrupted: the transcript ended before this call finished; it may or may not have taken effect"
)


@dataclass
class ImportPlan:
    """What an import writes: the session's fields and its re-sequenced events."""

    session_id: str
    cwd: str
    title: str | None
    model: str | None
    created_at: str
    status: str
    events: list[Event]
    warning: str | None
    damaged: list[dict[str, Any]] = field(default_factory=list)
    """The reader's damaged lines plus the records skipped here (``line``, ``reason``)."""
    last_message: str | None = None
    checkpoint: tuple[int, int] = (0, 0)
    """``(checkpoint_seq, payload bytes)`` of the last snapshot event: a ``checkpoint``'s seq, a
    ``context.compacted``'s ``first_kept_seq``."""
    tail_bytes: int = 0


def _normalize(event: Event) -> dict[str, Any] | None:
    """The event's payload fitted to acagent's model, or None if it does not fit."""
    payload = dict(event.payload)
    typ = event.type
    model = EVENT_TYPES.get(typ)
    if model is None:
        return None
    if typ == "assistant.message" and "message" not in payload and isinstance(payload.get("text"), str):
        text = payload["text"]
        payload["message"] = {
            "role": "assistant",
            "parts": [{"part_kind": "text", "text": text}] if text else [],
        }
    check = {k: v for k, v in payload.items() if k != "type"}
    if typ == "turn.failed":
        check["type_"] = payload.get("type", "error")
    try:
        model.model_validate(check)
        if typ == "assistant.message":
            msg = Message.model_validate(payload["message"])
            if msg.role != "assistant":
                return None
        elif typ == "checkpoint":
            MESSAGES_ADAPTER.validate_python(payload["messages"])
    except (ValidationError, KeyError, TypeError):
        return None
    return payload


def _open_calls_after_checkpoint(messages: list[Message]) -> dict[str, str]:
    if not messages or messages[-1].role != "assistant":
        return {}
    return {c.tool_call_id: c.name for c in messages[-1].tool_calls}


class _Replay:
    """The records of a transcript, kept or dropped one by one (the state of :func:`plan_import`)."""

    def __init__(self) -> None:
        self.dropped: list[dict[str, Any]] = []
        self.items: list[tuple[str, dict[str, Any], str, int]] = []  # type, payload, ts, old seq
        self.open_calls: dict[str, tuple[str, str | None]] = {}  # id -> (name, turn_id), in call order
        self.answered: set[str] = set()
        self.open_turn: str | None = None

    def close_open_calls(self) -> None:
        """Give every open tool call its ``interrupted`` result."""
        for cid, (name, turn_id) in list(self.open_calls.items()):
            payload = make_payload(
                "tool.result",
                turn_id=turn_id,
                tool_call_id=cid,
                name=name,
                status="interrupted",
                content=_INTERRUPTED,
                is_error=True,
            )
            self.items.append(("tool.result", payload, now_ts(), 0))
        self.open_calls.clear()

    def drop(self, line: int, reason: str) -> None:
        self.dropped.append({"line": line, "reason": reason})

    def add(self, event: Event, line: int) -> None:
        """Keep ``event`` (read from ``line``), or record why it cannot be replayed."""
        payload = _normalize(event)
        typ = event.type
        if payload is None:
            return self.drop(line, f"a {typ} record (seq {event.seq}) that does not fit its model")
        if typ == "session.created" and self.items:
            return self.drop(line, f"a second session.created record (seq {event.seq})")
        if typ in ("user.message", "assistant.message"):
            self.close_open_calls()
        if typ == "checkpoint":
            messages = MESSAGES_ADAPTER.validate_python(payload["messages"])
            after = _open_calls_after_checkpoint(messages)
            self.open_calls = {cid: (name, self.open_turn) for cid, name in after.items()}
        elif typ == "assistant.message":
            for call in Message.model_validate(payload["message"]).tool_calls:
                self.open_calls[call.tool_call_id] = (call.name, payload.get("turn_id"))
        elif typ == "tool.call":
            cid = payload["tool_call_id"]
            if cid not in self.open_calls and cid not in self.answered:
                return self.drop(line, f"a tool.call {cid!r} whose assistant message was lost")
        elif typ == "tool.result":
            cid = payload["tool_call_id"]
            if cid not in self.open_calls:
                return self.drop(line, f"a tool.result for {cid!r}, whose tool call was lost")
            self.open_calls.pop(cid)
            self.answered.add(cid)
        elif typ == "turn.started":
            self.open_turn = payload.get("turn_id") or "turn_imported"
        elif typ in _TURN_END:
            self.close_open_calls()
            self.open_turn = None
        self.items.append((typ, payload, event.ts, event.seq))
        return None

    def finish(self) -> None:
        """Close what the transcript left open: tool calls, then the turn."""
        self.close_open_calls()
        if self.open_turn is not None:
            payload = make_payload("turn.interrupted", turn_id=self.open_turn, reason="import")
            self.items.append(("turn.interrupted", payload, now_ts(), 0))

    def warn(self, read: TranscriptRead, file: Path | str, damaged: list[dict[str, Any]]) -> str | None:
        """The damage warning (also appended as an ``error`` event), or None for a clean file."""
        warning = read.warning(file)
        if self.dropped:
            n = len(self.dropped)
            note = f"skipped {n} record{'s' if n != 1 else ''} that cannot be replayed: " + ", ".join(
                f"line {d['line']} ({d['reason']})" for d in self.dropped
            )
            warning = f"{warning}; {note}" if warning else f"transcript {str(file)!r}: {note}"
        if warning:
            detail = {
                "file": str(file),
                "skipped_lines": read.lines_skipped,
                "skipped_records": len(self.dropped),
                "damaged": damaged,
            }
            payload = make_payload("error", code="transcript_damaged", message=warning, detail=detail)
            self.items.append(("error", payload, now_ts(), 0))
        return warning

    def renumbered(self, session_id: str) -> list[Event]:
        """The kept records as events numbered from 1 (checkpoint positions follow)."""
        seq_map: dict[int, int] = {}
        events: list[Event] = []
        for new, (typ, payload, ts, old) in enumerate(self.items, start=1):
            if old:
                seq_map[old] = new
            if typ == "checkpoint":
                upto = max((n for o, n in seq_map.items() if o <= int(payload.get("upto_seq", 0))), default=0)
                payload = {**payload, "upto_seq": upto}
                if payload.get("message_seqs"):  # positions of the messages (compaction's cut)
                    payload["message_seqs"] = [seq_map.get(int(s or 0), 0) for s in payload["message_seqs"]]
            elif typ == "context.compacted":
                kept = int(payload.get("first_kept_seq", 0))  # the first kept line that survived
                payload = {
                    **payload,
                    "first_kept_seq": min((n for o, n in seq_map.items() if o >= kept), default=new),
                }
            events.append(Event(seq=new, ts=ts, session_id=session_id, type=typ, payload=payload))
        return events

    def status(self) -> str:
        """The session status the last turn end implies (``done`` without one)."""
        for typ, _, _, _ in reversed(self.items):
            if typ in _TURN_END:
                return _TURN_END[typ]
        return "done"


def plan_import(read: TranscriptRead, file: Path | str, *, session_id: str | None = None) -> ImportPlan:
    """Turn the records of a transcript into an importable session (see the module docstring).

    Raises:
        TranscriptError: no record could be recovered, or the first one is not ``session.created``.
    """
    if not read.events:
        raise TranscriptError(f"{str(file)!r} holds no event records" + _why(read))
    first = read.events[0]
    where = f"{str(file)!r} line {read.lines[0]}"
    if first.type != "session.created":
        raise TranscriptError(
            f"{where}: the first record is a {first.type} record, not session.created" + _why(read)
        )
    cwd = first.payload.get("cwd")
    if not isinstance(cwd, str):
        raise TranscriptError(
            f"{where}: the session.created record lacks its working directory (cwd)" + _why(read)
        )
    if _normalize(first) is None:
        raise TranscriptError(
            f"{where}: the session.created record does not fit its event model" + _why(read)
        )
    if not os.path.isabs(cwd):
        # A relative one would move with the directory each later command runs in (the tools'
        # workspace and the transcript's bucket with it); the daemon refuses one too (F124).
        raise TranscriptError(f"{where}: the session's working directory {cwd!r} is not an absolute path")
    replay = _Replay()
    for event, line in zip(read.events, read.lines, strict=True):
        replay.add(event, line)
    replay.finish()
    damaged = sorted([*(dict(s) for s in read.skipped), *replay.dropped], key=lambda d: d["line"])
    warning = replay.warn(read, file, damaged)
    sid = session_id or first.session_id
    events = replay.renumbered(sid)
    plan = ImportPlan(
        session_id=sid,
        cwd=cwd,
        title=first.payload.get("title") or _first_user_text(events),
        model=first.payload.get("model"),
        created_at=first.ts,
        status=replay.status(),
        events=events,
        warning=warning,
        damaged=damaged,
    )
    for ev in events:  # the session counters as a commit keeps them (store/_numbering.py)
        size = len(orjson.dumps(ev.payload))
        if ev.type == "checkpoint":
            plan.checkpoint, plan.tail_bytes = (ev.seq, size), 0
        elif ev.type == "context.compacted":  # a position: the rebuild starts at its first kept event
            plan.checkpoint, plan.tail_bytes = (int(ev.payload["first_kept_seq"]), size), 0
        elif ev.type in CONTEXT_TYPES:
            plan.tail_bytes += size
            if ev.type != "tool.result" and ev.payload.get("text"):
                plan.last_message = ev.payload["text"]
    return plan


def _why(read: TranscriptRead) -> str:
    return f" ({read.lines_skipped} damaged lines skipped)" if read.skipped else ""


def _first_user_text(events: list[Event]) -> str | None:
    """The session title acagent gives a session: its first user message, whitespace folded."""
    for event in events:
        if event.type == "user.message" and event.payload.get("text"):
            return " ".join(str(event.payload["text"]).split())[:80] or None
    return None
