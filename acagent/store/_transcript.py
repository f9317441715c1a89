"""JSONL transcripts: ``$ACAGENT_HOME/sessions/<cwd bucket>/<session_id>.jsonl``.

A transcript is a derived view of the journal, written by a bus subscriber: one event envelope
per line. Appends follow three rules (case F04):

- each batch of complete records is written with ``os.write`` of ``records + b"\\n"`` (looping
  only on a short write) under an exclusive ``flock`` of the file: no interleaving with another
  writer, no buffered half-records, no ``f.write(json); f.write("\\n")``;
- under that lock the writer first checks that the file is still the one it opened (a repair
  in another process may have replaced it: then it reopens) and still has the size it left it
  at (another writer appended: then it re-reads the last record's seq), so it never appends a
  seq the file already holds and never glues a record onto a torn fragment (a file that does
  not end with a newline gets one first);
- no fsync: the journal is the durable copy, and a transcript that lags after a crash is
  completed from it.

The appending side is :class:`acagent.store._transcript_writer.TranscriptWriter`; this module
names the files and reads them.

Compactions (``context.compacted``, a summary and the seq of the first event kept) and the
checkpoints of older versions land in the file too, so importing a transcript rebuilds the
context from the last of them and the records after it.

Damage a crash can leave — a run of NUL bytes (a file extended but never written), a half-written
last line, a torn fragment with the next record glued to it — is handled by
:func:`read_transcript`, which never refuses a whole file for a damaged line (case F03): every
record that can be recovered is kept, including records glued after NULs or after a torn
fragment on the same line, and every damaged line is reported with its 1-based line number, its
byte offset and what was wrong with it (:meth:`TranscriptRead.warning`). Records whose seq does
not increase (a duplicate from a second writer) or that belong to another session are skipped
and reported the same way.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from acagent._value import Record
from acagent.errors import TranscriptError
from acagent.events import Event

__all__ = [
    "TranscriptRead",
    "cwd_bucket",
    "parse_transcript",
    "read_transcript",
    "transcript_path",
]

_RECORD_START = b'{"seq":'
_DECODER = json.JSONDecoder()


def cwd_bucket(cwd: str) -> str:
    """Directory name for a working directory: readable path slug + short hash (collision-free)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", cwd).strip("-")[-60:] or "root"
    return f"{slug}-{hashlib.sha256(cwd.encode()).hexdigest()[:8]}"


SAFE_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
"""What a session id may be: it names a file (``<id>.jsonl``), so no separator, dot or control."""


def transcript_path(sessions_dir: Path, cwd: str, session_id: str) -> Path:
    """``<sessions_dir>/<cwd bucket>/<session_id>.jsonl``.

    Raises:
        TranscriptError: ``session_id`` is not a plain name (:data:`SAFE_SESSION_ID`): an id such
            as ``../../x`` would name a file outside the sessions directory.
    """
    if not SAFE_SESSION_ID.fullmatch(session_id):
        raise TranscriptError(
            f"session id {session_id[:80]!r} is not a plain name (letters, digits, _ and -)"
        )
    return sessions_dir / cwd_bucket(cwd) / f"{session_id}.jsonl"


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class TranscriptRead(Record):
    """The result of reading a transcript."""

    events: list[Event]
    """Every recovered record, ascending seq."""
    lines: list[int] = field(default_factory=list)
    """The 1-based line number of each record in :attr:`events`."""
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """One entry per damaged line: ``line`` (1-based), ``offset`` (bytes from the start of the
    file), ``length`` (bytes, without the newline), ``reason`` and ``kept`` (records recovered
    from the line; 0 means the whole line was skipped)."""
    torn_tail: bytes = b""
    """Bytes of an unterminated, unparseable last line."""
    damaged: list[bytes] = field(default_factory=list)
    """The raw bytes (NUL runs stripped) of each line holding torn or unparseable content, for a
    ``.corrupt`` sidecar."""

    @property
    def lines_skipped(self) -> int:
        """Number of damaged lines from which no record was recovered."""
        return sum(1 for s in self.skipped if not s["kept"])

    def warning(self, path: Path | str) -> str | None:
        """One-line warning naming the file, the damaged lines and their byte offsets, or None.

        For the F03 fixture: ``transcript '…/F03-torn-transcript.jsonl': skipped 2 damaged lines:
        line 4 at byte offset 394 (512 NUL bytes), line 7 at byte offset 1150 (torn last line,
        115 bytes)``.
        """
        if not self.skipped:
            return None
        skipped = [s for s in self.skipped if not s["kept"]]
        repaired = [s for s in self.skipped if s["kept"]]

        def where(items: list[dict[str, Any]]) -> str:
            return ", ".join(f"line {s['line']} at byte offset {s['offset']} ({s['reason']})" for s in items)

        parts = []
        if skipped:
            n = len(skipped)
            parts.append(f"skipped {n} damaged line{'s' if n != 1 else ''}: {where(skipped)}")
        if repaired:
            n = len(repaired)
            parts.append(
                f"recovered the records of {n} damaged line{'s' if n != 1 else ''}: {where(repaired)}"
            )
        return f"transcript {str(path)!r}: " + "; ".join(parts)


def _nul_count(data: bytes) -> int:
    return data.count(0)


def _event_from(obj: Any) -> Event | None:
    if not isinstance(obj, dict):
        return None
    try:
        event = Event.model_validate(obj)
        orjson.dumps(event.payload)  # lone surrogates from a damaged line are refused here
    except (ValueError, TypeError, orjson.JSONEncodeError):
        return None
    return event


def _parse_exact(raw: bytes) -> Event | None:
    try:
        return _event_from(orjson.loads(raw))
    except orjson.JSONDecodeError:
        return None


def _salvage(raw: bytes) -> tuple[list[Event], int]:
    """Recover the records of a damaged line.

    Scans for record starts (``{"seq":``) and parses one JSON value at each with
    ``raw_decode``; what lies between recovered records is damage.

    Returns:
        The recovered events and the number of damaged (non-NUL, non-record) bytes.
    """
    events: list[Event] = []
    garbage = 0
    pos = 0
    n = len(raw)
    while pos < n:
        start = raw.find(_RECORD_START, pos)
        if start < 0:
            garbage += n - pos - _nul_count(raw[pos:])
            break
        garbage += start - pos - _nul_count(raw[pos:start])
        text = raw[start:].decode("utf-8", "surrogateescape")
        try:
            obj, end_chars = _DECODER.raw_decode(text)
        except ValueError:
            obj, end_chars = None, 0
        event = _event_from(obj) if obj is not None else None
        if event is None:
            # Not a record here: skip this start and look for the next one.
            garbage += len(_RECORD_START)
            pos = start + len(_RECORD_START)
            continue
        events.append(event)
        pos = start + len(text[:end_chars].encode("utf-8", "surrogateescape"))
    return events, max(garbage, 0)


def parse_transcript(data: bytes, progress: Callable[[int, int], None] | None = None) -> TranscriptRead:
    """Parse transcript bytes (see :func:`read_transcript`).

    ``progress(bytes parsed, total bytes)`` is called every few thousand lines and at the end.
    """
    out = TranscriptRead(events=[])
    session_id: str | None = None
    offset = 0
    lines = data.split(b"\n")
    last_index = len(lines) - 1
    for index, raw in enumerate(lines):
        number = index + 1
        start = offset
        offset += len(raw) + 1
        if progress is not None and index % 4096 == 0:
            progress(min(offset, len(data)), len(data))
        is_last = index == last_index
        if is_last and raw == b"":
            break  # the file ended with a newline
        if not raw.strip(b" \t\r"):
            continue  # an empty line carries nothing and loses nothing
        event = _parse_exact(raw)
        if event is not None:
            found, garbage, nuls = [event], 0, 0
        else:
            found, garbage = _salvage(raw)
            nuls = _nul_count(raw)
        reasons: list[str] = []
        kept: list[Event] = []
        for ev in found:
            if session_id is None:
                session_id = ev.session_id
            if ev.session_id != session_id:
                reasons.append(f"a record of another session {ev.session_id!r} (seq {ev.seq})")
                continue
            if out.events and ev.seq <= out.events[-1].seq:
                reasons.append(f"a record whose seq {ev.seq} does not follow seq {out.events[-1].seq}")
                continue
            kept.append(ev)
        if nuls:
            reasons.insert(0, f"{nuls} NUL byte{'s' if nuls != 1 else ''}")
        if garbage:
            if is_last and not kept:
                reasons.insert(0, f"torn last line, {garbage} bytes")
            else:
                reasons.insert(0, f"{garbage} bytes of a torn or unparseable record")
        for ev in kept:
            out.events.append(ev)
            out.lines.append(number)
        if reasons or (not kept and event is None):
            if not reasons:
                reasons.append("no record")
            out.skipped.append(
                {
                    "line": number,
                    "offset": start,
                    "length": len(raw),
                    "reason": ", ".join(reasons),
                    "kept": len(kept),
                }
            )
            if garbage:
                out.damaged.append(raw.strip(b"\x00"))
            if is_last and not kept:
                out.torn_tail = raw
    if progress is not None:
        progress(len(data), len(data))
    return out


def read_transcript(path: Path, progress: Callable[[int, int], None] | None = None) -> TranscriptRead:
    """Read every recoverable record of a transcript (see the module docstring).

    Never raises for damaged content: an unreadable line is reported in
    :attr:`TranscriptRead.skipped`, the rest is kept. ``progress``: see :func:`parse_transcript`.

    Raises:
        OSError: the file cannot be read.
    """
    return parse_transcript(path.read_bytes(), progress)
