"""The cancel paths of a runner: every cancel request is bound to the turn it targets.

:class:`CancelPaths` is the part of :class:`~acagent.runner._runner.InProcessRunner` that
takes a cancel from any source — in-process (:meth:`CancelPaths.interrupt`, the daemon's ``POST
…/cancel``, a terminal's Ctrl-C through a client), another process's journal flag
(:meth:`CancelPaths.on_lease_check`, read by the registry's lease keeper or a cluster hint) —
and applies it to the one turn it was meant for. A request names its turn (``turn_id``) or is
bound to the turn current when it is read; a request whose turn is over is ignored; the
cross-process flag is set only while its turn is the session's current turn (a conditional
update) and the next turn's first commit clears it. No interrupt state outlives its turn (F52,
F88).
"""

from __future__ import annotations

import enum
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from acagent._pids import pid_is_dead
from acagent.runner._turn import Turn
from acagent.store import ACTIVE

__all__ = ["CancelPaths", "RunnerParts", "RunnerState", "TurnEnded"]


class TurnEnded:
    """The turn-done signal of a runner between turns: always set, stateless, shared by every
    runner (one class attribute), so an idle runner holds no event of its own (issue 12 item 6:
    10,000 woken runners each held an ``anyio.Event`` for a turn they never ran). A turn replaces
    it with its own ``anyio.Event``; :meth:`wait` still yields once, like a set event's."""

    def is_set(self) -> bool:
        """Always True."""
        return True

    def set(self) -> None:
        """Nothing to do: already set."""

    async def wait(self) -> None:
        """Return at once (after one checkpoint, so a cancel is still delivered here)."""
        await anyio.lowlevel.checkpoint()


class RunnerState(enum.Enum):
    """The one lifecycle state of a runner (see :mod:`acagent.runner._runner`)."""

    IDLE = "idle"
    ACCEPTING = "accepting"
    """Taking the lease and committing the user message."""
    RUNNING = "running"
    FINISHING = "finishing"
    """The turn's end event is committed; checkpoint and lease release remain (a message may wait)."""


class RunnerParts:
    """What the runner's mixins (:class:`CancelPaths`, :class:`~acagent.runner._compactpath.CompactPath`)
    use of :class:`~acagent.runner._runner.InProcessRunner` (declarations for the type checker only)."""

    if TYPE_CHECKING:
        from acagent.runner._writer import SessionWriter
        from acagent.settings import Settings
        from acagent.store import Journal, SessionRow

        session_id: str
        journal: Journal
        settings: Settings
        worker_id: str
        writer: SessionWriter
        row: SessionRow
        state: RunnerState
        turn: Turn | None
        queued: list[str]
        _turn_done: anyio.Event | TurnEnded

        @property
        def is_busy(self) -> bool: ...
        def check_free(self, *, finishing_is_free: bool = True) -> None: ...
        def _new_turn(self, turn_id: str) -> Turn: ...
        async def _release(self) -> None: ...
        async def load(self, row: Any = None) -> Any: ...
        async def load_context(self, row: SessionRow | None = None) -> None: ...
        async def wait(self) -> None: ...


class CancelPaths(RunnerParts):
    """Cancel, interrupt and stop of :class:`~acagent.runner._runner.InProcessRunner` (a mixin)."""

    def on_lease_check(self, held: bool, cancel: bool, turn: Turn | None = None) -> None:
        """Called by the registry's lease keeper after renewing (or checking) this runner's lease.

        A lost lease aborts the turn without writing anything more (a zombie); a cancel flag set
        by another process interrupts the running turn like a local cancel — only ``turn``, the
        turn that was current when the flag was read (a flag read for a turn that has ended
        since is stale: the next turn's first commit cleared it, and a flag set for the next turn
        is seen on the next check).
        """
        current = self.turn
        if self.state is not RunnerState.RUNNING or current is None:
            return
        if not held:
            current.interrupt("lease_lost")
        elif cancel and (turn is None or turn is current):
            current.interrupt("user")

    def interrupt(self, reason: str = "user", *, turn_id: str | None = None) -> None:
        """Cancel the turn in progress (only ``turn_id`` when given): abort the provider request
        and running tools. A no-op when idle or when that turn already ended."""
        turn = self.turn
        if turn is None or (turn_id is not None and turn.turn_id != turn_id):
            return
        turn.interrupt(reason)

    async def cancel(self, reason: str = "user", *, turn_id: str | None = None) -> bool:
        """Cancel from any state: a running turn here is interrupted; an idle or orphaned session is
        closed (open tool calls get results) and marked ``cancelled``; another live process holding
        the lease sees the cancel flag on its next renewal.

        Every request is bound to one turn: ``turn_id`` (the turn the user saw running), else the
        turn current when the request is read. A request whose turn is over is ignored (no flag,
        no interrupt), so a cancel never reaches a later turn.

        Returns:
            False when the targeted turn was already over (nothing was cancelled).
        """
        if self.turn is not None:
            if turn_id is not None and self.turn.turn_id != turn_id:
                if self.queued[:1] != [turn_id]:
                    return False
                # The message queued behind the resumed turn in progress (``run --resume ID TEXT``
                # cancels the turn it was given): both stop, the message's turn records its end
                # without running (F133).
                self.queued.append(reason)
            self.interrupt(reason, turn_id=self.turn.turn_id)
            return True
        row = await self.journal.get_session(self.session_id)
        if turn_id is not None and (row.turn_id != turn_id or row.status not in ACTIVE):
            return False  # that turn is over (a later one may run: it is not the user's target)
        if row.status == "cancelled":
            return False
        held = row.lease_owner and (row.lease_expires_at or 0) > time.time()
        if held and not pid_is_dead(row.lease_host, row.lease_pid):
            target = turn_id or row.turn_id
            after = await self.journal.set_cancel(self.session_id, True, turn_id=target)
            return bool(after.cancel_requested) and after.turn_id == target
        if self.is_busy:  # a turn started here meanwhile: only a resume of the target is cancelled
            current: Turn | None = getattr(self, "turn")  # noqa: B009 (set by the awaits above)
            if current is not None and current.turn_id == row.turn_id:
                self.interrupt(reason, turn_id=row.turn_id)
                return True
            return False
        # Idle, or orphaned by a dead process: take the lease and close it ourselves, as a turn of
        # its own in the state machine (a message arriving meanwhile gets session_busy).
        self.state = RunnerState.ACCEPTING
        self._turn_done = anyio.Event()
        try:
            self.writer.lease = await self.journal.acquire_lease(
                self.session_id, self.worker_id, ttl_s=self.settings.timing.lease_ttl_s, is_dead=pid_is_dead
            )
            await self.load()
            if self.row.turn_id != row.turn_id:
                return False  # another process started a turn meanwhile: not the target
            self.turn = self._new_turn(self.row.turn_id or "")
            # A turn that already ended keeps its own end event: no turn.interrupted after it.
            await self.turn.finish_cancelled(reason, active=self.row.status in ACTIVE)
            return True
        finally:
            await self._release()

    async def stop(self) -> None:
        """Interrupt the running turn with reason ``shutdown`` and wait for it to end."""
        if self.is_busy:
            self.interrupt("shutdown")
            await self.wait()
