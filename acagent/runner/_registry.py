"""SessionRegistry: ``{session_id → InProcessRunner}`` for one process.

The registry is the only way the CLI and the daemon reach sessions. It owns the task group in
which turns and transcript writers run, enforces one turn per session (the runner's busy flag in
process, the journal lease across processes → ``session_busy``) and the instance cap
(``max_sessions`` turns at once → ``concurrency_cap``), reconciles the data directory on open
(sessions a dead process left active are continued), and lets idle runners hibernate (dropped from
memory; rebuilt from the journal on demand).
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
from anyio.abc import TaskGroup

from acagent.errors import ConcurrencyCap, SessionBusy, TranscriptError, UserError
from acagent.events import make_payload
from acagent.providers._base import Provider
from acagent.runner._runner import InProcessRunner, pid_is_dead
from acagent.settings import Settings
from acagent.store import ACTIVE, SessionRow, SqliteJournal
from acagent.store._transcript import TranscriptWriter, read_transcript, transcript_path
from acagent.tools import Tool

__all__ = ["SessionRegistry", "canonical_cwd"]

log = logging.getLogger("acagent.registry")


def canonical_cwd(cwd: str | Path) -> str:
    """The absolute, canonical form of a session working directory.

    Raises:
        UserError: relative, missing, or not a directory.
    """
    p = Path(cwd)
    if not p.is_absolute():
        raise UserError(f"cwd must be an absolute path, got {str(cwd)!r}")
    try:
        resolved = p.resolve(strict=True)
    except (OSError, RuntimeError) as exc:
        raise UserError(f"cwd {str(cwd)!r} does not exist") from exc
    if not resolved.is_dir():
        raise UserError(f"cwd {str(cwd)!r} is not a directory")
    return str(resolved)


class SessionRegistry:
    """See module docstring. Build with :meth:`open`."""

    def __init__(
        self,
        journal: SqliteJournal,
        settings: Settings,
        task_group: TaskGroup,
        *,
        provider_factory: Callable[[str], Provider] | None = None,
        tools_factory: Callable[[], dict[str, Tool]] | None = None,
        interactive: bool = True,
    ) -> None:
        self.journal = journal
        self.settings = settings
        self.runners: dict[str, InProcessRunner] = {}
        self._tg = task_group
        self._provider_factory = provider_factory or self._default_provider_factory
        self._tools_factory = tools_factory
        self._interactive = interactive
        self._transcripts: dict[str, TranscriptWriter] = {}

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        provider_factory: Callable[[str], Provider] | None = None,
        tools_factory: Callable[[], dict[str, Tool]] | None = None,
        interactive: bool = True,
        journal: SqliteJournal | None = None,
    ) -> AsyncIterator[SessionRegistry]:
        """Open the journal (unless given) and a registry; on exit stop every runner."""
        own = journal is None
        if journal is None:
            journal = await SqliteJournal.open(
                settings.db_path, durability=settings.durability, busy_timeout_ms=settings.timing.busy_timeout_ms
            )
        try:
            async with anyio.create_task_group() as tg:
                registry = cls(
                    journal,
                    settings,
                    tg,
                    provider_factory=provider_factory,
                    tools_factory=tools_factory,
                    interactive=interactive,
                )
                try:
                    yield registry
                finally:
                    with anyio.CancelScope(shield=True):
                        await registry.aclose()
                    tg.cancel_scope.cancel()
        finally:
            if own:
                await journal.aclose()

    def _default_provider_factory(self, model: str) -> Provider:
        from acagent.providers import create_provider

        return create_provider(model, self.settings)

    # ------------------------------------------------------------------ sessions

    async def create_session(self, cwd: str | Path, *, model: str | None = None, title: str | None = None) -> SessionRow:
        """Create a session in ``cwd`` (made absolute and canonical once, here)."""
        row, _ = await self.journal.create_session(cwd=canonical_cwd(cwd), model=model, title=title)
        return row

    async def get_runner(self, session_id: str) -> InProcessRunner:
        """The runner of a session, created (and its transcript repaired) on first use.

        Raises:
            SessionNotFound: unknown id.
        """
        runner = self.runners.get(session_id)
        if runner is not None:
            return runner
        row = await self.journal.get_session(session_id)
        runner = self.runners.get(session_id)
        if runner is not None:
            return runner
        runner = InProcessRunner(
            self.journal,
            self.settings,
            row,
            self._tg,
            self._provider_factory,
            tools=self._tools_factory() if self._tools_factory else None,
            interactive=self._interactive,
        )
        self.runners[session_id] = runner
        await self._start_transcript(runner)
        return runner

    def busy_count(self) -> int:
        """Runners with a turn in progress."""
        return sum(1 for r in self.runners.values() if r.is_busy)

    async def start_turn(self, session_id: str, text: str | None) -> tuple[InProcessRunner, str]:
        """Start a turn (or finish an interrupted one when ``text`` is None).

        Raises:
            SessionBusy: a turn already runs on the session.
            ConcurrencyCap: ``max_sessions`` turns already run in this process.
        """
        runner = await self.get_runner(session_id)
        if runner.is_busy:
            raise SessionBusy(
                f"session {session_id} is running turn {runner.turn_id}; wait for it or cancel it",
                detail={"turn_id": runner.turn_id},
            )
        if self.busy_count() >= self.settings.max_sessions:
            raise ConcurrencyCap(
                f"{self.settings.max_sessions} sessions are already running a turn; retry when one finishes",
                detail={"max_sessions": self.settings.max_sessions},
            )
        turn_id = await runner.step(text)
        return runner, turn_id

    async def cancel(self, session_id: str, reason: str = "user") -> None:
        """Cancel the session's turn from any state (see :meth:`InProcessRunner.cancel`)."""
        runner = await self.get_runner(session_id)
        await runner.cancel(reason)

    async def orphaned_sessions(self) -> list[SessionRow]:
        """Sessions left active whose lease expired or whose holder is a dead local process."""
        now = time.time()
        out = []
        for row in await self.journal.list_sessions():
            if row.status not in ACTIVE or (row.id in self.runners and self.runners[row.id].is_busy):
                continue
            if row.lease_owner is None or (row.lease_expires_at or 0) < now or pid_is_dead(row.lease_host, row.lease_pid):
                out.append(row)
        return out

    async def recover(self) -> list[str]:
        """Continue every orphaned session's interrupted turn in the background.

        Returns:
            The ids of the sessions being continued.
        """
        started = []
        for row in await self.orphaned_sessions():
            try:
                await self.start_turn(row.id, None)
                started.append(row.id)
            except (SessionBusy, ConcurrencyCap, UserError) as exc:
                log.warning("recovery of %s deferred: %s", row.id, exc)
        return started

    async def hibernate_idle(self) -> int:
        """Drop idle runners without subscribers from memory. Returns how many were dropped."""
        dropped = 0
        for sid, runner in list(self.runners.items()):
            if runner.is_busy or len(runner.bus.subscribers) > 1:  # the transcript writer is one
                continue
            self.runners.pop(sid, None)
            await runner.aclose()
            writer = self._transcripts.pop(sid, None)
            if writer is not None:
                writer.close()
            dropped += 1
        return dropped

    async def aclose(self) -> None:
        """Interrupt running turns (reason ``shutdown``) and close every runner."""
        for runner in list(self.runners.values()):
            runner.interrupt("shutdown")
        with anyio.move_on_after(20):
            for runner in list(self.runners.values()):
                await runner.wait()
        for runner in list(self.runners.values()):
            await runner.aclose()
        self.runners.clear()
        for writer in self._transcripts.values():
            writer.close()
        self._transcripts.clear()

    # ------------------------------------------------------------------ transcripts

    def transcript_path(self, row: SessionRow) -> Path:
        """Where the session's transcript lives."""
        return transcript_path(self.settings.sessions_dir, row.cwd, row.id)

    async def _start_transcript(self, runner: InProcessRunner) -> None:
        row = runner.row
        path = self.transcript_path(row)
        writer = self._transcripts.get(row.id)
        if writer is None:
            writer = TranscriptWriter(path)
            self._transcripts[row.id] = writer
        await self._repair_transcript(row, writer)
        sub = runner.bus.subscribe("transcript", maxsize=65536)

        async def pump() -> None:
            try:
                async for event in sub:
                    if event.seq > writer.last_seq + 1:  # dropped: fill the gap from the journal
                        writer.write(await self.journal.events(row.id, writer.last_seq, until=event.seq - 1))
                    writer.write([event])
            except OSError:
                log.exception("transcript %s: write failed; it will be repaired from the journal", path)

        self._tg.start_soon(pump)

    async def _repair_transcript(self, row: SessionRow, writer: TranscriptWriter) -> None:
        """Make the transcript agree with the journal (append what lags, rewrite what is damaged)."""
        path = writer.path
        damaged_warning = None
        try:
            read = read_transcript(path) if path.exists() and path.stat().st_size else None
        except (TranscriptError, OSError) as exc:
            read = None
            damaged_warning = str(exc)
        if read is not None and read.skipped:
            damaged_warning = read.warning(path)
        journal_events = None
        if damaged_warning is not None:
            journal_events = await self.journal.events(row.id, 0)
            writer.rewrite(journal_events, keep_damaged=True)
            log.warning("%s; rewritten from the journal", damaged_warning)
            warnings = [{"code": "transcript_repaired", "message": damaged_warning, "at": time.time()}]
            await self.journal.set_warnings(row.id, warnings)
            runner = self.runners.get(row.id)
            if runner is not None and row.lease_owner is None:
                try:
                    await runner.writer.commit(
                        [
                            (
                                "error",
                                make_payload(
                                    "error",
                                    code="transcript_repaired",
                                    message=damaged_warning + "; rewritten from the journal",
                                    detail=read.skipped if read is not None else None,
                                ),
                            )
                        ]
                    )
                except Exception:
                    log.exception("could not record the transcript warning")
                writer.write(await self.journal.events(row.id, writer.last_seq))
            return
        writer.last_seq = read.events[-1].seq if read is not None and read.events else 0
        missing = await self.journal.events(row.id, writer.last_seq)
        writer.write(missing)

