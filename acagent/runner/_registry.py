"""SessionRegistry: ``{session_id → InProcessRunner}`` for one process.

The registry is the only way the CLI and the daemon reach sessions. It owns the task group in
which turns and transcript writers run, enforces one turn per session (the runner's busy flag in
process, the journal lease across processes → ``session_busy``) and the instance cap
(``max_sessions`` turns at once → ``concurrency_cap``), reconciles the data directory on open
(sessions a dead process left active are continued), and lets idle runners hibernate (dropped from
memory; rebuilt from the journal on demand).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup

from acagent._pids import pid_is_dead
from acagent.errors import AcagentError, ConcurrencyCap, UserError
from acagent.providers._base import Provider
from acagent.runner._hibernate import Hibernation
from acagent.runner._pins import pinned
from acagent.runner._runner import BusyCount, InProcessRunner
from acagent.runner._sdk import prewarm
from acagent.settings import Settings
from acagent.store import ACTIVE, Journal, SessionRow
from acagent.store._transcript_writer import TranscriptWriter
from acagent.tools import Tool, default_tools

__all__ = ["SessionRegistry", "ToolSource", "canonical_cwd"]

log = logging.getLogger("acagent.registry")


class ToolSource(Protocol):
    """Extra tools per working directory (``acagent.mcp.McpManager``: the MCP servers of a cwd)."""

    def toolset(self, cwd: str, builtins: dict[str, Tool]) -> dict[str, Tool]:
        """The tools of a session in ``cwd``; may have an async ``refresh()`` (see ``refresh_tools``)."""
        ...


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


class SessionRegistry(Hibernation):
    """See module docstring. Build with :meth:`open`."""

    def __init__(
        self,
        journal: Journal,
        settings: Settings,
        task_group: TaskGroup,
        *,
        provider_factory: Callable[[str], Provider] | None = None,
        tools_factory: Callable[[], dict[str, Tool]] | None = None,
        interactive: bool = True,
        tool_source: ToolSource | None = None,
        prewarm: bool | None = None,
    ) -> None:
        self.journal = journal
        self._prewarm = provider_factory is None if prewarm is None else prewarm
        """Import a session's provider SDK off the loop as soon as its runner exists."""
        self.settings = settings
        self.runners: dict[str, InProcessRunner] = {}
        self._tg = task_group
        self._provider_factory = provider_factory or self._default_provider_factory
        self._tools_factory = tools_factory
        self.tool_source = tool_source
        """Adds each session's extra tools (MCP servers of its cwd) to the built-in ones."""
        self._interactive = interactive
        self._transcripts: dict[str, TranscriptWriter] = {}
        self._pumps: dict[str, anyio.Event] = {}
        self._transcript_started: set[str] = set()
        self._held_since: dict[Any, float] = {}  # lease → last renewed (or first seen held), monotonic
        self._busy = BusyCount()
        """Runners accepting or running a turn, kept by the runners themselves."""
        self.runners_built = 0  # since open: sessions woken into memory (GET /v1/debug/stats)
        self.runners_hibernated = 0  # since open: runners hibernate_idle dropped
        self._closing: dict[str, anyio.Event] = {}  # sessions whose runner a pass is dropping now

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        settings: Settings,
        *,
        provider_factory: Callable[[str], Provider] | None = None,
        tools_factory: Callable[[], dict[str, Tool]] | None = None,
        interactive: bool = True,
        journal: Journal | None = None,
        tool_source: ToolSource | None = None,
        prewarm: bool | None = None,
    ) -> AsyncIterator[SessionRegistry]:
        """Open the journal (unless given) and a registry; on exit stop every runner.

        ``prewarm`` (default: only with the default provider factory) imports a session's
        provider SDK in a worker thread when its runner is created.
        """
        if settings.tracing:
            from acagent.obs import configure_tracing

            configure_tracing(True, content=settings.trace_content)
        own = journal is None
        if journal is None:
            from acagent.store._select import open_journal

            journal = await open_journal(settings)
        try:
            async with anyio.create_task_group() as tg:
                registry = cls(
                    journal,
                    settings,
                    tg,
                    provider_factory=provider_factory,
                    tools_factory=tools_factory,
                    interactive=interactive,
                    tool_source=tool_source,
                    prewarm=prewarm,
                )
                tg.start_soon(registry._lease_keeper)
                try:
                    yield registry
                finally:
                    with anyio.CancelScope(shield=True):
                        await registry.aclose()
                    tg.cancel_scope.cancel()
        finally:
            if own:
                await journal.aclose()
            if settings.tracing:
                from acagent.obs import flush_tracing

                await anyio.to_thread.run_sync(flush_tracing)

    async def _lease_keeper(self) -> None:
        """Renew the leases of every running turn every ``lease_renew_s`` and look for
        cross-process cancels about once a second — one journal call for all sessions."""
        timing = self.settings.timing
        poll_s = min(timing.lease_renew_s, 1.0)
        last_renew = anyio.current_time()
        while True:
            await anyio.sleep(poll_s)
            held = [
                (r, r.writer.lease, r.turn)  # the turn a cancel flag read now is for
                for r in list(self.runners.values())
                if r.is_busy and r.writer.lease is not None
            ]
            if not held:
                last_renew = anyio.current_time()
                continue
            renew = anyio.current_time() - last_renew >= timing.lease_renew_s - poll_s / 2
            try:
                states = await self.journal.keep_leases(
                    [(r.session_id, lease) for r, lease, _ in held],
                    ttl_s=timing.lease_ttl_s,
                    renew=renew,
                )
            except AcagentError as exc:
                # A full disk is the turn's to name (its commit waits for space, then fails in one
                # line, F54): not a second line on stderr. Any other failure is a warning.
                full = isinstance(exc.detail, dict) and exc.detail.get("reason") == "disk_full"
                (log.info if full else log.warning)("lease renewal failed: %s", exc.message)
                # Unrenewed for a whole TTL (journal unreachable, a blackholed network): the lease
                # may be another's by now — stop writing (the fence would refuse it anyway) and
                # never start a tool under a lease that may be gone.
                for runner, lease, turn in held:
                    if (
                        anyio.current_time() - self._held_since.setdefault(lease, last_renew)
                        >= timing.lease_ttl_s
                    ):
                        runner.on_lease_check(False, False, turn)
                continue
            if renew:
                last_renew = anyio.current_time()
                self._held_since = {lease: last_renew for _, lease, _ in held}
            for runner, lease, turn in held:
                if runner.writer.lease is not lease:
                    continue  # the turn ended (or re-leased) meanwhile
                ok, cancel = states.get(runner.session_id, (True, False))
                runner.on_lease_check(ok, cancel, turn)

    def _default_provider_factory(self, model: str) -> Provider:
        from acagent.providers import create_provider

        return create_provider(model, self.settings)

    # ------------------------------------------------------------------ sessions

    async def create_session(
        self, cwd: str | Path, *, model: str | None = None, title: str | None = None
    ) -> SessionRow:
        """Create a session in ``cwd`` (made absolute and canonical once, here)."""
        row, _ = await self.journal.create_session(cwd=canonical_cwd(cwd), model=model, title=title)
        return row

    async def get_runner(self, session_id: str) -> InProcessRunner:
        """The runner of a session, created (and its transcript repaired) on first use; its tools
        are built now, so MCP servers start in the background while the user types (docs/mcp.md).

        Raises:
            SessionNotFound: unknown id.
        """
        runner = await self.attach_runner(session_id)
        if session_id not in self._transcript_started:
            self._transcript_started.add(session_id)
            runner.pins += 1  # a hibernation pass during the transcript's repair skips it (F11)
            try:
                await self._start_transcript(runner)
            finally:
                runner.pins -= 1
        runner.build_tools()
        return runner

    async def attach_runner(self, session_id: str) -> InProcessRunner:
        """The runner of a session for a stream attach: its bus, nothing more.

        Creating it costs one session-row read, whatever the session's size: no transcript read
        or repair (that happens when the session is next driven, through :meth:`get_runner`,
        before anything is published) and no context rebuild (a turn loads the context).

        Raises:
            SessionNotFound: unknown id.
        """
        runner = self.runners.get(session_id)
        if runner is not None:
            return runner
        await self._hibernated(session_id)  # the old runner is still being dropped: wait for it
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
            tools=functools.partial(self._session_tools, row.cwd),  # built when a turn first needs them
            interactive=self._interactive,
            busy=self._busy,
        )
        self.runners[session_id] = runner
        self.runners_built += 1
        if self._prewarm:
            self._tg.start_soon(prewarm, runner.model_id)  # the SDK import, off the loop, early
        return runner

    def _session_tools(self, cwd: str) -> dict[str, Tool]:
        """The tools of a session in ``cwd``: the factory's (else the defaults), plus MCP tools."""
        tools = self._tools_factory() if self._tools_factory else default_tools()
        return self.tool_source.toolset(cwd, tools) if self.tool_source is not None else tools

    def busy_count(self) -> int:
        """Runners with a turn in progress (accepting or running; O(1): a running count)."""
        return self._busy.value

    async def start_turn(
        self, session_id: str, text: str | None, *, idempotency_key: str | None = None
    ) -> tuple[InProcessRunner, str]:
        """Start a turn (or finish an interrupted one when ``text`` is None); ``idempotency_key``
        is stored with its user message (:meth:`InProcessRunner.step`).

        Raises:
            SessionBusy: a turn already runs on the session.
            ConcurrencyCap: ``max_sessions`` turns already run in this process.
        """
        async with pinned(self, session_id) as runner:  # no hibernation pass closes it meanwhile
            runner.check_free()
            if self.busy_count() >= self.settings.max_sessions:
                raise ConcurrencyCap(
                    f"{self.settings.max_sessions} sessions are already running a turn; retry when one finishes",
                    detail={"max_sessions": self.settings.max_sessions},
                )
            return runner, await runner.step(text, idempotency_key=idempotency_key)

    async def compact(self, session_id: str) -> dict[str, Any]:
        """Compact a resting session's context now (see :meth:`InProcessRunner.compact`)."""
        async with pinned(self, session_id) as runner:
            return await runner.compact()

    async def cancel(self, session_id: str, reason: str = "user", *, turn_id: str | None = None) -> bool:
        """Cancel the session's turn (``turn_id``: only that turn) from any state; False when the
        targeted turn was already over (see :meth:`InProcessRunner.cancel`)."""
        async with pinned(self, session_id) as runner:
            return await runner.cancel(reason, turn_id=turn_id)

    async def orphaned_sessions(self) -> list[SessionRow]:
        """Sessions left active whose lease expired or whose holder is a dead local process."""
        now = time.time()
        out = []
        for row in await self.journal.list_sessions(statuses=ACTIVE):
            if row.id in self.runners and self.runners[row.id].is_busy:
                continue
            if (
                row.lease_owner is None
                or (row.lease_expires_at or 0) < now
                or pid_is_dead(row.lease_host, row.lease_pid)
            ):
                out.append(row)
        return out

    async def reap_orphans(self) -> int:
        """Kill the tool process groups that dead processes left running (no state change).

        The turn itself is continued by :meth:`recover` (daemon) or ``run --resume``; this only
        makes sure no orphaned command keeps running meanwhile. Returns how many groups were
        signalled.
        """
        from acagent.tools import kill_call_processes

        killed = 0
        for row in await self.orphaned_sessions():
            for call in await self.journal.tool_calls(row.id, open_only=True):
                if call.status == "running":  # recorded group or not: the spawn marker finds it (F45)
                    grace = self.settings.timing.tool_kill_grace_s
                    killed += await kill_call_processes(row.id, call.tool_call_id, call.trusted_pgid(), grace)
        return killed

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
            except AcagentError as exc:  # busy, capped, or its data damaged: the others go on (F7)
                log.warning("recovery of %s deferred: %s", row.id, exc.message)
            except Exception:  # a bug in one session's recovery must not stop the others'
                log.exception("recovery of %s failed", row.id)
        return started

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
        with anyio.move_on_after(10):  # let each transcript writer take what was published
            for done in list(self._pumps.values()):
                await done.wait()
        self._pumps.clear()
        for sid in list(self._transcripts):
            await self._close_transcript(sid)
