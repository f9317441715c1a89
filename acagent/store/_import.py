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
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from acagent._private import private_file
from acagent.errors import SessionNotFound, TranscriptError
from acagent.events import Event
from acagent.store._import_plan import ImportPlan, plan_import
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
