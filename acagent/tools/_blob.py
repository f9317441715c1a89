"""Big tool outputs: kept in full on disk, shown and sent as head + tail (case F44).

A tool call's output can be far larger than what the model should get (a 20 MiB build log).
:class:`OutputSpool` receives the raw bytes as they arrive; once they pass ``spill_bytes`` it
writes them to a *blob* file, so memory stays bounded whatever the size. When the call ends:

* if the output was cut for the model (more than the head + tail limit), the blob is kept:
  ``<sessions dir>/<cwd bucket>/<session_id>.blobs/<tool_call_id>.out``, next to the
  transcript, owner-only (``0600`` in a ``0700`` directory), fsynced before the ``tool.result``
  that references it is committed. The result's payload carries ``output_ref``:
  ``{"path": "<session_id>.blobs/<tool_call_id>.out", "bytes": N, "sha256": "<hex>"}`` — the path
  is relative to the transcript's directory;
* otherwise the spilled file (if any) is removed: the result holds the whole output.

A blob that cannot be written (disk full, read-only) does not fail the call: the result says
the full output could not be kept, and ``output_ref`` is absent. Blobs live in acagent's data dir,
which tools never read (:class:`~acagent.tools.PathPrivate`); the model is told to re-run the
command with a filter (``grep``, ``head``, ``tail``) to see other parts.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

__all__ = ["OutputSpool", "blob_dir_for"]


def blob_dir_for(transcript: Path) -> Path:
    """``<id>.blobs`` beside ``<id>.jsonl``: where a session's blobs go."""
    return transcript.with_name(transcript.stem + ".blobs")


class OutputSpool:
    """Raw output of one call: counted and hashed always, spilled to disk past ``spill_bytes``.

    Args:
        directory: the session's blob directory (None: never spill, count only).
        name: the blob's file name (``<tool_call_id>.out``).
        spill_bytes: bytes held in memory before the spool starts writing the file.
    """

    def __init__(self, directory: Path | None, name: str, spill_bytes: int) -> None:
        self.directory = directory
        self.name = name
        self.spill_bytes = max(spill_bytes, 0)
        self.total = 0
        self._sha = hashlib.sha256()
        self._pending: list[bytes] = []
        self._pending_bytes = 0
        self._fd: int | None = None
        self._tmp: Path | None = None
        self.error: str | None = None
        """Why the blob could not be kept (None if it could)."""

    def add(self, chunk: bytes) -> None:
        """Take the next raw chunk (never raises: a write failure is recorded in ``error``)."""
        if not chunk:
            return
        self.total += len(chunk)
        self._sha.update(chunk)
        if self.error is not None or self.directory is None:
            return
        if self._fd is None:
            self._pending.append(chunk)
            self._pending_bytes += len(chunk)
            if self._pending_bytes > self.spill_bytes:
                self._open()
            return
        self._write(chunk)

    def _open(self) -> None:
        assert self.directory is not None
        from acagent._private import private_dir

        try:
            private_dir(self.directory)
            self._tmp = self.directory / f".{self.name}.partial"
            self._fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            self._fail(exc)
            return
        pending, self._pending, self._pending_bytes = self._pending, [], 0
        for chunk in pending:
            self._write(chunk)

    def _write(self, chunk: bytes) -> None:
        assert self._fd is not None
        try:
            view = memoryview(chunk)
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:
            self._fail(exc)

    def _fail(self, exc: OSError) -> None:
        self.error = f"{exc.strerror or exc}"
        self._pending, self._pending_bytes = [], 0
        self.discard()

    def keep(self) -> dict[str, Any] | None:
        """Finish and keep the blob; returns the ``output_ref`` (None if it could not be kept)."""
        if self.directory is None:
            return None
        if self._fd is None and self.error is None:
            self._open()  # everything was still in memory
        if self._fd is None or self._tmp is None:
            return None
        final = self.directory / self.name
        try:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            os.replace(self._tmp, final)
        except OSError as exc:
            self._fail(exc)
            return None
        return {
            "path": f"{self.directory.name}/{self.name}",
            "bytes": self.total,
            "sha256": self._sha.hexdigest(),
        }

    def discard(self) -> None:
        """Drop the spilled file (the output was small enough, or the call was cancelled)."""
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        if self._tmp is not None:
            try:
                os.unlink(self._tmp)
            except OSError:
                pass
            self._tmp = None
        self._pending, self._pending_bytes = [], 0
