"""JSONL transcripts: ``$ACAGENT_HOME/sessions/<cwd bucket>/<session_id>.jsonl``.

A transcript is a derived view of the journal, written by a bus subscriber: one event envelope
per line, each record written with a single ``os.write`` of ``record + b"\\n"`` under an exclusive
``flock`` (no interleaving, no buffered half-records), without its own fsync (the journal is the
durable copy). Checkpoint events land in it too, so importing a transcript needs only the last
checkpoint and the tail.

Damage a crash can leave — a run of NUL bytes, a half-written last line — is handled by
:func:`read_transcript`: NUL runs and a torn last line are skipped with a warning naming the line
number and byte offset; any other unparseable line is a :class:`~acagent.errors.TranscriptError`
naming its line. When the journal holds the events, :meth:`TranscriptWriter.repair` rewrites the
transcript from it (moving the damaged file to a ``.corrupt`` sidecar).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from acagent.errors import TranscriptError
from acagent.events import Event

__all__ = ["TranscriptRead", "TranscriptWriter", "cwd_bucket", "read_transcript", "transcript_path"]


def cwd_bucket(cwd: str) -> str:
    """Directory name for a working directory: readable path slug + short hash (collision-free)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", cwd).strip("-")[-60:] or "root"
    return f"{slug}-{hashlib.sha256(cwd.encode()).hexdigest()[:8]}"


def transcript_path(sessions_dir: Path, cwd: str, session_id: str) -> Path:
    """``<sessions_dir>/<cwd bucket>/<session_id>.jsonl``."""
    return sessions_dir / cwd_bucket(cwd) / f"{session_id}.jsonl"


@dataclass
class TranscriptRead:
    """The result of reading a transcript."""

    events: list[Event]
    skipped: list[dict[str, Any]] = field(default_factory=list)
    """One entry per skipped line: ``line`` (1-based), ``offset`` (bytes), ``reason``."""
    torn_tail: bytes = b""
    """Bytes of an unterminated, unparseable last line."""

    def warning(self, path: Path) -> str | None:
        """One-line warning naming the file, skipped lines and offsets, or None."""
        if not self.skipped:
            return None
        where = ", ".join(f"line {s['line']} at byte offset {s['offset']} ({s['reason']})" for s in self.skipped)
        n = len(self.skipped)
        return f"transcript {str(path)!r}: skipped {n} damaged line{'s' if n != 1 else ''}: {where}"


def _parse(line: bytes) -> Event | None:
    try:
        obj = orjson.loads(line)
        return Event.model_validate(obj)
    except (orjson.JSONDecodeError, ValueError):
        return None


def read_transcript(path: Path) -> TranscriptRead:
    """Read every record of a transcript.

    Raises:
        TranscriptError: a line other than a NUL-damaged or torn-last line does not parse (the
            message names the file and line number), or seqs are not strictly increasing.
        OSError: the file cannot be read.
    """
    data = path.read_bytes()
    out = TranscriptRead(events=[])
    offset = 0
    lines = data.split(b"\n")
    last_index = len(lines) - 1
    for number, raw in enumerate(lines, start=1):
        start = offset
        offset += len(raw) + 1
        if number - 1 == last_index and raw == b"":
            break  # the file ended with a newline
        stripped = raw.lstrip(b"\x00")
        if not stripped.strip(b"\x00 \t\r"):
            if raw:
                out.skipped.append({"line": number, "offset": start, "reason": f"{len(raw)} NUL bytes"})
            continue
        event = _parse(stripped.rstrip(b"\x00\r"))
        if event is None:
            if number - 1 == last_index:
                out.skipped.append({"line": number, "offset": start, "reason": "torn last line"})
                out.torn_tail = raw
                continue
            raise TranscriptError(f"{str(path)!r} line {number} (byte offset {start}) is not a valid event record")
        if stripped is not raw and len(stripped) != len(raw):
            out.skipped.append(
                {"line": number, "offset": start, "reason": f"{len(raw) - len(stripped)} NUL bytes before a record"}
            )
        if out.events and event.seq <= out.events[-1].seq:
            raise TranscriptError(
                f"{str(path)!r} line {number}: seq {event.seq} does not follow seq {out.events[-1].seq}"
            )
        out.events.append(event)
    return out


class TranscriptWriter:
    """Appends events to one session's transcript file.

    Args:
        path: the transcript path (parents are created).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.last_seq = 0
        self._needs_newline = self._ends_without_newline()

    def _ends_without_newline(self) -> bool:
        size = os.fstat(self._fd).st_size
        if size == 0:
            return False
        with open(self.path, "rb") as f:
            f.seek(size - 1)
            return f.read(1) != b"\n"

    def write(self, events: Iterable[Event]) -> None:
        """Append events with seq > :attr:`last_seq` (older ones are skipped), one write each."""
        for event in events:
            if event.seq <= self.last_seq:
                continue
            record = event.to_json_bytes() + b"\n"
            if self._needs_newline:
                record = b"\n" + record  # never glue a record onto a torn fragment
                self._needs_newline = False
            self._write_all(record)
            self.last_seq = event.seq

    def _write_all(self, record: bytes) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            view = memoryview(record)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def rewrite(self, events: Iterable[Event], *, keep_damaged: bool) -> None:
        """Replace the whole file with ``events`` (tmp + rename), keeping the old one as ``.corrupt``."""
        tmp = self.path.with_suffix(".jsonl.tmp")
        with open(tmp, "wb") as f:
            last = 0
            for event in events:
                f.write(event.to_json_bytes() + b"\n")
                last = event.seq
        if keep_damaged and self.path.exists():
            os.replace(self.path, self.path.with_suffix(".jsonl.corrupt"))
        os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self.last_seq = last
        self._needs_newline = False

    def close(self) -> None:
        """Close the file descriptor (idempotent)."""
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = -1
