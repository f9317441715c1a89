"""TranscriptKeeper: the registry's JSONL transcripts — one writer per session, fed by a bus
subscriber, repaired from the journal on open (case F03), owned by the lease holder (F04 (b)).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from acagent._pids import pid_is_dead
from acagent.errors import AcagentError
from acagent.events import make_payload
from acagent.runner._runner import InProcessRunner
from acagent.settings import Settings
from acagent.store import Journal, SessionRow
from acagent.store._transcript import transcript_path
from acagent.store._transcript_writer import TranscriptWriter

__all__ = ["TranscriptKeeper"]

log = logging.getLogger("acagent.registry")


class TranscriptKeeper:
    """Mixin of :class:`~acagent.runner._registry.SessionRegistry`: its transcript writers."""

    journal: Journal
    settings: Settings
    runners: dict[str, InProcessRunner]
    _tg: TaskGroup
    _transcripts: dict[str, TranscriptWriter]
    _pumps: dict[str, anyio.Event]

    def transcript_path(self, row: SessionRow) -> Path:
        """Where the session's transcript lives."""
        return transcript_path(self.settings.sessions_dir, row.cwd, row.id)

    async def _close_transcript(self, session_id: str) -> None:
        """Close a session's transcript writer, recording the file's state for a cheap reopen."""
        writer = self._transcripts.pop(session_id, None)
        if writer is None:
            return
        record = writer.stat_record()
        writer.close()
        try:
            await self.journal.set_transcript_stat(session_id, record)
        except AcagentError as exc:
            log.info("could not record the transcript state of %s: %s", session_id, exc.message)

    async def _start_transcript(self, runner: InProcessRunner) -> None:
        row = runner.row
        path = self.transcript_path(row)
        writer = self._transcripts.get(row.id)
        if writer is None:
            writer = TranscriptWriter(path)
            self._transcripts[row.id] = writer
        await self._repair_transcript(row, writer)
        sub = runner.bus.subscribe("transcript", maxsize=65536)
        done = anyio.Event()
        self._pumps[row.id] = done

        async def pump() -> None:
            try:
                while True:
                    try:
                        batch = await sub.receive_batch()  # a burst of deltas: one locked write
                    except anyio.EndOfStream:
                        break
                    if not writer.append_next(batch):  # one lock per batch (figures 1 and 5)
                        # dropped, or the file lags (cut by a crash or by hand): fill the gap from the journal
                        writer.write(
                            await self.journal.events(row.id, writer.last_seq, until=batch[0].seq - 1)
                        )
                        writer.write(batch)  # drops only happen at a full queue: a batch has no gap
            except OSError as exc:  # disk full, read-only: one line, never a traceback
                log.warning(
                    "transcript %s: write failed (%s); it will be repaired from the journal", path, exc
                )
            finally:
                sub.close()
                done.set()

        self._tg.start_soon(pump)

    def _held_elsewhere(self, row: SessionRow) -> bool:
        """True while a live process other than this one holds the session's lease."""
        if row.lease_owner is None or (row.lease_expires_at or 0) < time.time():
            return False
        if any(r.worker_id == row.lease_owner for r in self.runners.values()):
            return False
        return not pid_is_dead(row.lease_host, row.lease_pid)

    async def _repair_transcript(self, row: SessionRow, writer: TranscriptWriter) -> None:
        """Make the transcript agree with the journal (case F03).

        The lease holder owns the file: while another live process holds the session's lease,
        this process neither repairs nor appends (case F04 (b): the file never has two writers);
        the holder's writer completes it. Otherwise a transcript that merely lags the journal is
        completed by appending, and a damaged one (NUL runs, torn or unparseable lines, records
        missing from the middle) is rewritten from the journal — the old file is kept as
        ``.corrupt`` — with a warning naming the file, the damaged lines and their byte offsets:
        logged, added to the session's ``warnings`` and committed as an ``error`` event
        (code ``transcript_repaired``) that ``attach`` and ``run --json`` show.
        """
        row = await self.journal.get_session(row.id)
        if self._held_elsewhere(row):
            log.info(
                "transcript %s: session %s is held by pid %s; not touching it",
                writer.path,
                row.id,
                row.lease_pid,
            )
            return
        path = writer.path
        if row.transcript_stat and writer.trust(json.loads(row.transcript_stat)):
            # Unchanged since its last writer closed it cleanly: no full scan (resume stays cheap).
            writer.write(await self.journal.events(row.id, writer.last_seq))
            return
        # A full read of a possibly huge file: off the event loop.
        read = await anyio.to_thread.run_sync(writer.read) if path.exists() and path.stat().st_size else None
        warning = read.warning(path) if read is not None else None
        detail: dict[str, Any] = {"file": str(path)}
        if read is not None:
            detail.update(skipped_lines=read.lines_skipped, damaged=read.skipped)
            seqs = [e.seq for e in read.events]
            if seqs != list(range(1, len(seqs) + 1)) or (seqs and seqs[-1] > row.last_seq):
                have = set(seqs)
                missing = [s for s in range(1, (seqs[-1] if seqs else 0) + 1) if s not in have]
                extra = [s for s in seqs if s > row.last_seq]
                note = (
                    f"records missing from the middle (seq {_ranges(missing)})"
                    if missing
                    else f"records the journal does not hold (seq {_ranges(extra)})"
                )
                warning = f"{warning}; {note}" if warning else f"transcript {str(path)!r}: {note}"
                detail["missing_seqs"] = missing
        if warning is None:
            writer.last_seq = read.events[-1].seq if read is not None and read.events else 0
            writer.write(await self.journal.events(row.id, writer.last_seq))
            return
        writer.rewrite(await self.journal.events(row.id, 0), keep_damaged=True)
        message = f"{warning}; rewritten from the journal (the damaged file is kept as {path.name}.corrupt)"
        log.warning("%s", message)
        warnings = json.loads(row.warnings) if row.warnings else []
        warnings.append({"code": "transcript_repaired", "message": message, "at": time.time(), **detail})
        await self.journal.set_warnings(row.id, warnings)
        runner = self.runners.get(row.id)
        if runner is not None:
            try:
                await runner.writer.commit_unfenced(
                    [
                        (
                            "error",
                            make_payload("error", code="transcript_repaired", message=message, detail=detail),
                        )
                    ],
                    reason="transcript repair",
                )
            except AcagentError:
                log.exception("could not record the transcript warning")
            writer.write(await self.journal.events(row.id, writer.last_seq))


def _ranges(seqs: list[int]) -> str:
    """``[1, 2, 3, 7]`` → ``"1-3, 7"``."""
    spans: list[list[int]] = []
    for s in seqs:
        if spans and spans[-1][1] == s - 1:
            spans[-1][1] = s
        else:
            spans.append([s, s])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
