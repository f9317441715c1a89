"""The appending side of a JSONL transcript: :class:`TranscriptWriter` (the rules it follows are in
:mod:`acagent.store._transcript`'s docstring: one ``os.write`` per batch under an exclusive
``flock``, a check that the file is still the one opened and the size it was left at, no fsync)."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from acagent._private import private_dir, private_file
from acagent.events import Event
from acagent.store._transcript import TranscriptRead, _parse_exact, _salvage, parse_transcript

__all__ = ["TranscriptWriter"]


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
        self._locked_size = -1
        """The file's size as :meth:`_locked` found it, while the lock is held (else -1)."""
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
                self._locked_size = mine.st_size  # for _sync: no second fstat under the same lock
                break
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = self._open()
            self._size = -1
        try:
            yield
        finally:
            self._locked_size = -1
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _sync(self) -> None:
        """Under the lock: if the file changed since this writer last wrote it, re-read the seq of
        its last record and whether it ends with a newline."""
        size = self._locked_size  # the file's size when the lock was taken (nothing writes it since)
        if size < 0:
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
            self._append(events)

    def append_next(self, events: Sequence[Event]) -> bool:
        """Append ``events`` (ascending seq) if the file's last record is just before the first of
        them (or at or after it: what is already there is skipped); False, writing nothing, when
        records are missing in between (the caller fills the gap from the journal first).

        One lock and one check of the file per call: :meth:`sync` followed by :meth:`write`
        locked and checked the file twice for each batch the transcript pump wrote.
        """
        if not events:
            return True
        with self._locked():
            self._sync()
            if events[0].seq > self.last_seq + 1:
                return False
            self._append(events)
        return True

    def _append(self, events: Sequence[Event]) -> None:
        """Under the lock, after :meth:`_sync`: write the events above :attr:`last_seq` at once."""
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
