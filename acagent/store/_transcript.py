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

Checkpoint events land in the file too, so importing a transcript needs only the last
checkpoint and the tail.

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

import contextlib
import fcntl
import hashlib
import json
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from acagent._private import private_dir, private_file
from acagent._value import Record
from acagent.errors import TranscriptError
from acagent.events import Event

__all__ = [
    "TranscriptRead",
    "TranscriptWriter",
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


def _tail_state(fd: int, size: int) -> tuple[int, bool]:
    """``(seq of the last recoverable record, ends with a newline)`` of the file open at ``fd``."""
    if size == 0:
        return 0, True
    ends_nl = os.pread(fd, 1, size - 1) == b"\n"
    window = 65536
    while True:
        window = min(window, size)
        lines = os.pread(fd, window, size - window).split(b"\n")
        if window < size:
            lines = lines[1:]  # the first line may start before the window
        for raw in reversed(lines):
            if not raw.strip(b"\x00 \t\r"):
                continue
            event = _parse_exact(raw)
            if event is None:
                found, _ = _salvage(raw)
                event = found[-1] if found else None
            if event is not None:
                return event.seq, ends_nl
        if window == size:
            return 0, ends_nl
        window *= 4


class TranscriptWriter:
    """Appends events to one session's transcript file (see the module docstring).

    Args:
        path: the transcript path (parents are created).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        private_dir(path.parent)
        self._fd = self._open()
        self.last_seq = 0
        """Seq of the last record in the file, as this writer last saw it."""
        self._size = -1  # unknown: the first write re-reads the file's tail
        self._needs_newline = False

    def _open(self) -> int:
        return os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)

    @contextlib.contextmanager
    def _locked(self, kind: int = fcntl.LOCK_EX) -> Any:
        """Hold ``kind`` on the file currently at :attr:`path` (reopening if it was replaced)."""
        while True:
            fcntl.flock(self._fd, kind)
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            mine = os.fstat(self._fd)
            if current is not None and (current.st_ino, current.st_dev) == (mine.st_ino, mine.st_dev):
                break
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = self._open()
            self._size = -1
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _sync(self) -> None:
        """Under the lock: if the file changed since this writer last wrote it, re-read the seq of
        its last record and whether it ends with a newline."""
        size = os.fstat(self._fd).st_size
        if size != self._size:
            self.last_seq, ends_nl = _tail_state(self._fd, size)
            self._needs_newline = not ends_nl
            self._size = size

    def sync(self) -> int:
        """Re-read the seq of the file's last record (another process may have appended)."""
        with self._locked():
            self._sync()
        return self.last_seq

    def read(self) -> TranscriptRead:
        """Read the file under a shared lock (never sees a record another writer is appending)."""
        with self._locked(fcntl.LOCK_SH):
            data = self.path.read_bytes()
        return parse_transcript(data)

    def write(self, events: Iterable[Event]) -> None:
        """Append the events whose seq is above the file's last seq, in one write, under the lock."""
        events = list(events)
        if not events:
            return
        with self._locked():
            self._sync()
            needs_newline = self._needs_newline
            chunks: list[bytes] = [b"\n"] if needs_newline else []
            last = self.last_seq
            for event in events:
                if event.seq <= last:
                    continue
                chunks.append(event.to_json_bytes() + b"\n")
                last = event.seq
            if len(chunks) == (1 if needs_newline else 0):
                return
            data = b"".join(chunks)
            view = memoryview(data)
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
            self._size += len(data)
            self.last_seq = last
            self._needs_newline = False

    def rewrite(self, events: Iterable[Event], *, keep_damaged: bool) -> None:
        """Replace the whole file with ``events`` (tmp + rename), keeping the old one as ``.corrupt``."""
        tmp = self.path.with_suffix(".jsonl.tmp")
        with self._locked():
            last = 0
            data = []
            for event in events:
                data.append(event.to_json_bytes() + b"\n")
                last = event.seq
            with private_file(tmp).open("wb") as f:
                f.write(b"".join(data))
            if keep_damaged and self.path.exists():
                os.replace(self.path, self.path.with_suffix(".jsonl.corrupt"))
            os.replace(tmp, self.path)
        os.close(self._fd)
        self._fd = self._open()
        self.last_seq = last
        self._size = os.fstat(self._fd).st_size
        self._needs_newline = False

    def stat_record(self) -> dict[str, int] | None:
        """The file as this writer leaves it: ``{ino, size, mtime_ns, last_seq}`` (None if unknown)."""
        try:
            with self._locked(fcntl.LOCK_SH):
                self._sync()
                st = os.fstat(self._fd)
        except OSError:
            return None
        return {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "last_seq": self.last_seq}

    def trust(self, record: dict[str, Any]) -> bool:
        """Adopt ``record`` (from :meth:`stat_record` of an earlier writer) if the file is unchanged
        since: same inode, size and mtime. Then no full scan is needed to know it is intact."""
        try:
            st = os.stat(self.path)
        except OSError:
            return False
        if (st.st_ino, st.st_size, st.st_mtime_ns) != (
            record.get("ino"),
            record.get("size"),
            record.get("mtime_ns"),
        ):
            return False
        self.last_seq = int(record.get("last_seq", 0))
        self._size = st.st_size
        self._needs_newline = False
        return True

    def close(self) -> None:
        """Close the file descriptor (idempotent)."""
        with contextlib.suppress(OSError):
            os.close(self._fd)
        self._fd = -1
