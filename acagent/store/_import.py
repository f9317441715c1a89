"""``acagent import FILE``: load a JSONL transcript into the journal as a session.

The transcript is read with :func:`~acagent.store._transcript.read_transcript`, which keeps every
record it can recover and reports every damaged line (NUL runs, a torn last line, a torn fragment
glued to the next record) with its line number and byte offset (case F03). :func:`plan_import`
then turns the records into a session whose model context a strict provider accepts:

- each record's payload is checked against its event model (and a checkpoint's messages against
  the message model); a record that does not fit is skipped and reported with its line. An
  ``assistant.message`` that carries only ``text`` (older or hand-written transcripts) gets the
  equivalent one-text-part ``message``;
- events are re-sequenced from 1 (skipped lines leave no gap; a checkpoint's ``upto_seq`` is
  mapped to the new numbering);
- a tool call left without a result gets an "interrupted" result right after its step (before
  the next user or assistant message), a result whose call was lost is dropped, and an open turn
  gets ``turn.interrupted`` — so every ``tool.call`` has exactly one result where the provider
  wants it;
- a warning ``error`` event (code ``transcript_damaged``) and the session's ``warnings`` field
  name the file, the damaged lines, their byte offsets and how many lines were skipped.

The session's working directory — where its tools run — is chosen on this machine
(``store/_workspace.py`` :func:`choose_workspace`, F139); the imported ``session.created``
records the chosen ``cwd`` and, when it differs, the transcript's own as ``recorded_cwd``.

A clean copy of the transcript is written under the sessions directory; the bytes of torn or
unparseable lines go to a ``.corrupt`` sidecar beside it. The imported session's model context is
rebuilt from its latest snapshot like any other session's: the last ``checkpoint`` plus the tail,
or the last ``context.compacted`` (its summary, then the events from its ``first_kept_seq`` on).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
from pydantic import ValidationError

from acagent._private import private_file
from acagent.errors import SessionNotFound, TranscriptError
from acagent.events import EVENT_TYPES, Event, make_payload, now_ts
from acagent.messages import MESSAGES_ADAPTER, Message
from acagent.store._ops import CONTEXT_TYPES
from acagent.store._protocol import ImportedSession, Journal
from acagent.store._rows import new_session_id
from acagent.store._transcript import (
    SAFE_SESSION_ID,
    TranscriptRead,
    read_transcript,
    transcript_path,
)
from acagent.store._transcript_writer import TranscriptWriter
from acagent.store._workspace import with_workspace

__all__ = [
    "ImportPlan",
    "ImportProgress",
    "ImportResult",
    "import_transcript",
    "plan_import",
]

ImportProgress = Callable[[Literal["read", "journal"], int, int], None]
"""``progress(phase, done, total)`` of :func:`import_transcript`: ``read`` counts bytes of the
file parsed, ``journal`` counts events written to the journal (called from the journal's thread)."""

_TURN_END = {"turn.completed": "done", "turn.failed": "failed", "turn.interrupted": "cancelled"}
_INTERRUPTED = (
    "interrupted: the transcript ended before this call finished; it may or may not have taken effect"
)


@dataclass
class ImportResult:
    """Outcome of an import."""

    session_id: str
    events: int
    warning: str | None
    path: Path
    cwd: str = ""
    """The session's working directory (:func:`choose_workspace`)."""
    cwd_note: str | None = None
    """One line when the recorded working directory was not kept without being asked to."""


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


def _read_and_plan(file: Path, progress: ImportProgress | None) -> tuple[TranscriptRead, ImportPlan]:
    """The records of ``file`` and the import plan for them (``TranscriptError`` otherwise)."""
    try:
        if not stat.S_ISREG(file.stat().st_mode) and not file.is_dir():
            # /dev/zero never ends (it filled the memory, then a MemoryError traceback); a pipe
            # waits for a writer. A transcript is a file: `acagent export` writes one.
            raise TranscriptError(
                f"{str(file)!r} is not a regular file (a device, pipe or socket); save the transcript "
                "to a file and import that"
            )
        read = read_transcript(file, None if progress is None else lambda d, t: progress("read", d, t))
        return read, plan_import(read, file)
    except OSError as exc:
        raise TranscriptError(f"cannot read {str(file)!r}: {exc.strerror or exc}") from exc
    except MemoryError:
        raise TranscriptError(
            f"{str(file)!r} ({file.stat().st_size:,} bytes) does not fit in the memory this process "
            "may use; import it where more memory is free"
        ) from None


async def import_transcript(
    journal: Journal,
    file: Path,
    sessions_dir: Path,
    progress: ImportProgress | None = None,
    *,
    workspace: str | None = None,
    here: str | None = None,
) -> ImportResult:
    """Import ``file`` as a session (see module docstring); ``progress`` follows the long parts.

    ``workspace`` (``--cwd``) and ``here`` (default: the current directory) choose the session's
    working directory (``store/_workspace.py`` ``choose_workspace``); both absolute and canonical.

    Raises:
        UserError: the recorded working directory cannot be kept and there is no current one.
        TranscriptError: the file is unreadable, not a regular file, too big for the memory there
            is, or holds no recoverable session.
    """
    read, plan = _read_and_plan(file, progress)
    if not SAFE_SESSION_ID.fullmatch(plan.session_id):  # '../../x' would name a file outside: a new id
        plan = plan_import(read, file, session_id=new_session_id())
    try:
        await journal.get_session(plan.session_id)
        plan = plan_import(read, file, session_id=new_session_id())  # the id is taken: a new one
    except SessionNotFound:
        pass
    plan.cwd, cwd_note = with_workspace(plan.events, workspace, here or _here())
    rows = plan.events
    warnings = (
        [{"code": "transcript_damaged", "message": plan.warning, "file": str(file), "damaged": plan.damaged}]
        if plan.warning
        else []
    )
    session = ImportedSession(
        session_id=plan.session_id,
        cwd=plan.cwd,
        title=plan.title,
        model=plan.model,
        created_at=plan.created_at,
        status=plan.status,
        last_seq=len(rows),
        last_message=plan.last_message,
        checkpoint=plan.checkpoint,
        tail_bytes=plan.tail_bytes,
        warnings=warnings,
    )
    # The clean transcript first: its stat goes into the session row, so the first open trusts the
    # file (no full scan) exactly as for a session whose writer closed it cleanly.
    dest = transcript_path(sessions_dir, plan.cwd, plan.session_id)
    writer = TranscriptWriter(dest)
    try:
        writer.rewrite(rows, keep_damaged=False)
        session.transcript_stat = writer.stat_record()
    finally:
        writer.close()
    try:
        await journal.import_session(session, rows if progress is None else _counted(rows, progress))
    except BaseException:
        dest.unlink(missing_ok=True)  # no transcript without its session
        raise
    if read.damaged:
        private_file(dest.with_suffix(".jsonl.corrupt")).write_bytes(b"\n".join(read.damaged) + b"\n")
    return ImportResult(plan.session_id, len(rows), plan.warning, dest, plan.cwd, cwd_note)


def _here() -> str | None:
    """The current directory, canonical; None when it was removed."""
    try:
        return os.path.realpath(os.getcwd())
    except FileNotFoundError:
        return None


def _counted(rows: list[Event], progress: ImportProgress) -> Iterator[Event]:
    """``rows``, reporting ``journal`` progress every 1,000 events and at the end."""
    total = len(rows)
    for n, row in enumerate(rows):
        if n % 1000 == 0:
            progress("journal", n, total)
        yield row
    progress("journal", total, total)


def _first_user_text(events: list[Event]) -> str | None:
    """The session title acagent gives a session: its first user message, whitespace folded."""
    for event in events:
        if event.type == "user.message" and event.payload.get("text"):
            return " ".join(str(event.payload["text"]).split())[:80] or None
    return None
