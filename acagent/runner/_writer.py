"""SessionWriter: journal first, then fan-out — the one path events take.

Every event of a session passes through :meth:`SessionWriter.commit`: it commits the events (with
any guarded row ops, fenced by the writer's lease) in one journal transaction, then folds them
into the in-memory model context and publishes them on the bus, in seq order. Nothing reaches a
subscriber before it is durable.

Bursts (``assistant.delta``, ``tool.output``) are buffered by :meth:`SessionWriter.delta` and
committed in frames: the flush task waits ``frame_s`` (50 ms) after the first buffered delta,
then commits what accumulated, so a stream pays at most one transaction per frame instead of one
per token (each delta keeps its own event). A commit of other events first takes the buffered
deltas along (order is preserved), so a fast reply's deltas ride in its step commit. The buffer is
bounded: :meth:`SessionWriter.backpressure` makes the producer wait while it is over
``max_buffered`` (e.g. while another process holds the SQLite write lock).

A commit the journal refuses because its disk is full (``JournalError`` ``detail.reason ==
"disk_full"``: SQLite rolled the transaction back, nothing was written) is tried again, 0.1 s
doubling to 1 s apart, for up to ``full_disk_wait_s`` from the first refusal of the streak
(``[timing] journal_full_wait_s``, 10 s): when space returns within it, the same events land with
the same lease and the turn goes on — a reply already streamed is committed, not asked for again
(before, the turn halted, its lease expired after ``lease_ttl_s`` and the step was retried as
"process died": a second paid call, F140). Safe because a refused commit left nothing behind:
the deltas it carried are put back first in the buffer, the context and the bus saw nothing, the
journal's ``last_seq`` hint is re-checked by its next commit, and the retry is fenced by the same
token (a takeover meanwhile makes it ``StaleLease``). The wait is outside the commit's shield, so
a cancel ends it at once; the bound stays below ``lease_ttl_s - lease_renew_s`` (settings check),
so the lease keeper never aborts a turn that is only waiting here. After the bound the error is
raised as before (the turn halts; the streak's later commits are not retried).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from typing import Any

import anyio

from acagent._text import clean_value
from acagent.bus import RunnerEventBus
from acagent.errors import JournalError
from acagent.events import Event
from acagent.runner._context import ContextBuilder
from acagent.store import Journal, Lease, Op

__all__ = ["SessionWriter", "crash_point"]

CRASH_POINTS = frozenset(
    {
        "after_turn_accepted",
        "after_step_inflight",
        "mid_stream",
        "before_step_commit",
        "after_step_commit",
        "after_tool_intent",
        "mid_tool",
        "after_tool_result_before_wake",
        "waiting_approval",
        "compact_before_call",
        "compact_mid_summary",
        "compact_before_commit",
    }
)


def crash_point(name: str, crash_at: str | None) -> None:
    """SIGKILL this process if ``crash_at`` (``ACAGENT_CRASH_AT``) names this point (tests only)."""
    if crash_at is not None and crash_at == name:
        os.kill(os.getpid(), signal.SIGKILL)


class SessionWriter:
    """Commits one session's events and publishes them.

    Args:
        journal: the journal.
        session_id: the session.
        bus: the session's bus (events are published after commit).
        context: the in-memory model context, kept in step with the journal.
        max_buffered: bound on buffered deltas before the producer must wait.
        full_disk_wait_s: how long commits are retried while the journal's disk is full
            (module docstring), seconds; 0 = never.
    """

    def __init__(
        self,
        journal: Journal,
        session_id: str,
        bus: RunnerEventBus,
        context: ContextBuilder,
        *,
        max_buffered: int = 5000,
        frame_s: float = 0.05,
        full_disk_wait_s: float = 0.0,
    ) -> None:
        self.journal = journal
        self.session_id = session_id
        self.bus = bus
        self.context = context
        self.lease: Lease | None = None
        self._pending: list[tuple[str, dict[str, Any]]] = []
        self._lock_held: anyio.Lock | None = None
        self._wake_held: anyio.Event | None = None
        self._max_buffered = max_buffered
        self.frame_s = frame_s
        """How long the flush task lets deltas gather before committing them, seconds."""
        self.full_disk_wait_s = full_disk_wait_s
        self._full_since: float | None = None
        """When the current streak of disk-full refusals began (``anyio.current_time``), or None."""

    # The lock and the flush task's wake-up are made on first use: a runner that only serves
    # attaches never commits, and 10,000 of them each held both (issue 12 item 6).
    @property
    def _lock(self) -> anyio.Lock:
        if self._lock_held is None:
            # fast_acquire: an uncontended commit does not yield to the event loop first (one loop
            # iteration per commit, ~6 a turn: benchmarks figure 1); a cancel still raises at the acquire
            self._lock_held = anyio.Lock(fast_acquire=True)
        return self._lock_held

    @property
    def _wake(self) -> anyio.Event:
        if self._wake_held is None:
            self._wake_held = anyio.Event()
        return self._wake_held

    async def commit(
        self, events: Sequence[tuple[str, dict[str, Any]]], ops: Sequence[Op] = ()
    ) -> list[Event]:
        """Commit buffered deltas plus ``events`` (and ``ops``) in one transaction, then publish.

        Raises:
            StaleLease, InvalidTransition, JournalError: from :meth:`Journal.commit`;
                nothing was written and the buffered deltas are kept for the next commit.
        """
        return await self._commit(events, ops, None)

    async def commit_unfenced(
        self, events: Sequence[tuple[str, dict[str, Any]]], ops: Sequence[Op] = (), *, reason: str
    ) -> list[Event]:
        """:meth:`commit` for a writer that holds no lease (transcript repair of an idle session).

        Uses the held lease when there is one (a running turn), so a repair never bypasses fencing
        for a session this process is writing.
        """
        return await self._commit(events, ops, reason)

    async def _commit(
        self, events: Sequence[tuple[str, dict[str, Any]]], ops: Sequence[Op], unfenced: str | None
    ) -> list[Event]:
        # F25: the one rule for text that cannot travel (lone surrogates, NUL), applied here,
        # where every event of a running session becomes durable (acagent/_text.py).
        events = [(t, clean_value(p)) for t, p in events]
        ops = [clean_value(op) for op in ops]
        async with self._lock:
            if self.lease is None and unfenced is None:
                raise RuntimeError(f"session {self.session_id}: a fenced commit without a lease (a bug)")
            delay = 0.1
            while (committed := await self._try_commit(events, ops, unfenced)) is None:
                await anyio.sleep(delay)  # the disk is full: wait for space (module docstring)
                delay = min(1.0, delay * 2)
            return committed

    async def _try_commit(
        self, events: Sequence[tuple[str, dict[str, Any]]], ops: Sequence[Op], unfenced: str | None
    ) -> list[Event] | None:
        """One attempt of :meth:`_commit` (under its lock): the committed events, or None when the
        journal's disk is full and the streak is still within ``full_disk_wait_s``."""
        pending, self._pending = self._pending, []
        pending = [(t, clean_value(p)) for t, p in pending]
        # Shielded: a cancel arriving mid-commit must not leave a committed event unpublished
        # (subscribers would see a gap); the commit is bounded by the busy timeout.
        with anyio.CancelScope(shield=True):
            try:
                batch = [*pending, *events]
                if self.lease is not None:
                    committed = await self.journal.commit(self.session_id, batch, lease=self.lease, ops=ops)
                else:
                    assert unfenced is not None
                    committed = await self.journal.commit_unfenced(
                        self.session_id, batch, ops=ops, reason=unfenced
                    )
            except JournalError as exc:
                self._pending[:0] = pending
                if self._wait_for_space(exc):
                    return None
                raise
            except BaseException:
                self._pending[:0] = pending
                raise
            self._full_since = None
            for event in committed:
                self.context.apply(event)
                self.bus.publish(event)
        return committed

    def _wait_for_space(self, exc: JournalError) -> bool:
        """True if a commit refused with ``exc`` is to be tried again (module docstring)."""
        if not (isinstance(exc.detail, dict) and exc.detail.get("reason") == "disk_full"):
            return False
        now = anyio.current_time()
        if self._full_since is None:
            self._full_since = now
        return now - self._full_since < self.full_disk_wait_s

    async def build_context(self) -> None:
        """Rebuild an unloaded context from the journal (latest snapshot + the context events after it).

        Under the commit lock, so no commit of this writer lands between the read and the fold
        (it would be folded twice or not at all). A no-op when the context is loaded.

        Raises:
            SessionNotFound, JournalError: from :meth:`Journal.context_events`.
        """
        async with self._lock:
            if not self.context.loaded:
                self.context.rebuild(await self.journal.context_events(self.session_id))

    def delta(self, event_type: str, payload: dict[str, Any]) -> None:
        """Buffer a burst event (``assistant.delta``, ``tool.output``) for the flush task."""
        self._pending.append((event_type, payload))
        self._wake.set()

    @property
    def buffered(self) -> int:
        """Deltas waiting to be committed."""
        return len(self._pending)

    async def backpressure(self) -> None:
        """Wait while more than ``max_buffered`` deltas wait for their commit."""
        while len(self._pending) > self._max_buffered:
            await self.flush()

    async def flush(self) -> None:
        """Commit buffered deltas now (no-op when none)."""
        if self._pending:
            await self.commit([])

    async def flush_loop(self) -> None:
        """Run until cancelled: commit buffered deltas one frame (``frame_s``) after they start arriving."""
        while True:
            await self._wake.wait()
            if self.frame_s > 0:
                await anyio.sleep(self.frame_s)
            self._wake_held = anyio.Event()
            await self.flush()
