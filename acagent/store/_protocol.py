"""The ``Journal`` protocol (PEP 544): what the runner, the registry and the daemon need from a store.

:class:`~acagent.store.SqliteJournal` is the first implementation; a PostgreSQL journal is the
second. Every implementation passes the conformance suite in ``tests/store/conformance`` (add a
backend to its ``BACKENDS`` table). Nothing above ``acagent.store`` may depend on more than this
protocol and the row/op/event types it names.

Rules every implementation keeps (the suite checks each one):

- **Fenced by default.** :meth:`Journal.commit` takes the writer's :class:`~acagent.store.Lease`;
  a token superseded by a later :meth:`~Journal.acquire_lease` raises
  :class:`~acagent.errors.StaleLease` and writes nothing, while a late commit by the last holder
  when nobody took over succeeds (the token still matches). The few writes without a lease are
  named for what they are: :meth:`~Journal.create_session`, :meth:`~Journal.import_session`,
  :meth:`~Journal.commit_unfenced` (repair and tests) and the session metadata setters
  (cancel flag, warnings, transcript stat), which any process may write.
- **One transaction per commit**: events get ``seq = last_seq + 1, …`` (per session, strictly
  increasing, never reused, no gaps, across processes), ops are applied with the semantics on
  their classes (:mod:`acagent.store._ops`), the events an op adds (``session.status``) come
  before the commit's own, and the session counters follow :mod:`acagent.store._numbering`.
  Any failure leaves nothing written.
- **Leases**: taking one bumps the fencing token; expiry is judged on the store's clock.
- **Reads see committed data only**, ascending seq.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from acagent._value import Record
from acagent.events import Event
from acagent.store._ops import Op
from acagent.store._rows import Lease, SessionRow, StepRow, ToolCallRow

__all__ = ["ImportedSession", "Journal"]

IsDead = Callable[[str | None, int | None], bool]
"""``(lease_host, lease_pid) -> True`` when that holder is known dead (a crashed local process)."""


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class ImportedSession(Record):
    """The session row of an import (:meth:`Journal.import_session`).

    The importer fills it while the journal consumes its events: fields are read only once the
    event iterable is exhausted. ``last_seq`` is the seq of the last event; ``checkpoint`` is
    ``(checkpoint_seq, payload bytes)`` of the last snapshot event (a checkpoint's seq, a
    compaction's ``first_kept_seq``) and ``tail_bytes`` the context bytes after it; ``transcript_stat`` is what a transcript writer records on close
    (``{ino, size, mtime_ns, last_seq}``), so the first open skips the transcript scan.
    """

    session_id: str
    cwd: str
    title: str | None = None
    model: str | None = None
    created_at: str = ""
    status: str = "done"
    last_seq: int = 0
    last_message: str | None = None
    checkpoint: tuple[int, int] = (0, 0)
    tail_bytes: int = 0
    warnings: list[dict[str, Any]] = field(default_factory=list)
    transcript_stat: dict[str, int] | None = None


@runtime_checkable
class Journal(Protocol):
    """The single source of truth of every session (see the module docstring for the rules)."""

    # ------------------------------------------------------------------ lifecycle

    async def aclose(self) -> None:
        """Release connections. Idempotent."""
        ...

    def info(self) -> dict[str, Any]:
        """What the store is, for ``doctor`` and the daemon state: at least ``{"backend": str}``."""
        ...

    def forget_session(self, session_id: str) -> None:
        """Drop what this journal object keeps in memory about one session (its runner hibernated).

        Only a cache: the next write of the session reads its row again. Unknown ids are a no-op.
        """
        ...

    # ------------------------------------------------------------------ sessions

    async def create_session(
        self, *, cwd: str, model: str | None, title: str | None, session_id: str | None = None
    ) -> tuple[SessionRow, Event]:
        """Create a session in ``pending`` with its ``session.created`` event (seq 1). Unfenced."""
        ...

    async def get_session(self, session_id: str) -> SessionRow:
        """The session row. Raises ``SessionNotFound`` (its message says how to list sessions)."""
        ...

    async def find_session(self, prefix: str) -> SessionRow:
        """The session whose id is ``prefix`` or starts with it (unique), else ``SessionNotFound``."""
        ...

    async def list_sessions(
        self, *, cwd: str | None = None, limit: int | None = None, statuses: Sequence[str] | None = None
    ) -> list[SessionRow]:
        """Sessions, newest ``updated_at`` first, optionally of one working directory or statuses."""
        ...

    async def set_cancel(self, session_id: str, value: bool, *, turn_id: str | None = None) -> SessionRow:
        """Set or clear the cancel flag (any process may set it; unfenced by design).

        With ``turn_id`` the flag is set only while that turn is the session's current turn (one
        conditional statement), so a cancel meant for a turn that is over never reaches the next
        one (the next turn's first commit clears the flag). The returned row shows whether it was
        set (``cancel_requested``) and which turn is current.
        """
        ...

    async def cancel_requested(self, session_id: str) -> bool:
        """The session's cancel flag."""
        ...

    async def set_warnings(self, session_id: str, warnings: list[Any]) -> None:
        """Replace the session's warnings list (JSON-able)."""
        ...

    async def set_transcript_stat(self, session_id: str, stat: dict[str, int] | None) -> None:
        """Record (or forget) the transcript's ``{ino, size, mtime_ns, last_seq}`` as its writer closed it."""
        ...

    # ------------------------------------------------------------------ events

    async def commit(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        lease: Lease,
        ops: Sequence[Op] = (),
    ) -> list[Event]:
        """Append ``events`` and apply ``ops`` in one fenced transaction; return the committed events.

        Raises:
            StaleLease: ``lease.token`` was superseded (nothing written).
            InvalidTransition: an op's precondition does not hold (nothing written).
            SessionNotFound: no such session.
            JournalError: the store failed (disk full, locked past the timeout…).
        """
        ...

    async def commit_unfenced(
        self,
        session_id: str,
        events: Sequence[tuple[str, dict[str, Any]]],
        *,
        ops: Sequence[Op] = (),
        reason: str,
    ) -> list[Event]:
        """:meth:`commit` without a lease, for repair and administration (``reason`` says which)."""
        ...

    async def events(
        self, session_id: str, since: int = 0, *, limit: int | None = None, until: int | None = None
    ) -> list[Event]:
        """Committed events with ``since < seq (<= until)``, ascending seq, at most ``limit``."""
        ...

    def iter_events(self, session_id: str, since: int = 0, *, batch: int = 1000) -> AsyncIterator[Event]:
        """Every committed event after ``since`` in pages of ``batch`` (export streams with it)."""
        ...

    async def context_events(self, session_id: str) -> list[Event]:
        """The context events from the latest snapshot position on, ascending seq
        (:data:`~acagent.store._ops.CONTEXT_READ_TYPES`): from ``session.checkpoint_seq``, the
        latest ``checkpoint``'s seq or ``context.compacted``'s ``first_kept_seq``, whichever was
        committed last (0: the whole session)."""
        ...

    async def last_events(self, session_id: str, types: Sequence[str], limit: int) -> list[Event]:
        """The newest ``limit`` committed events of ``types`` (event type names), newest first;
        none for an unknown session. Reads from the session's end: the cost is bounded by how
        far back the ``limit``-th such event lies, not by the session's length."""
        ...

    async def import_session(self, session: ImportedSession, events: Iterable[Event]) -> None:
        """Create ``session`` with ``events`` (seq 1…n, consumed once, may read a file) atomically. Unfenced.

        Raises:
            JournalError: the id exists or the store failed (nothing written).
        """
        ...

    # ------------------------------------------------------------------ leases

    async def acquire_lease(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float,
        pid: int | None = None,
        host: str | None = None,
        is_dead: IsDead | None = None,
    ) -> Lease:
        """Take the lease if free, expired, held by ``owner`` or by a dead holder; bump the token.

        Raises:
            SessionBusy: a live holder has it (the message names its pid and points to attach).
        """
        ...

    async def lease_session(
        self,
        session_id: str,
        owner: str,
        *,
        ttl_s: float,
        pid: int | None = None,
        host: str | None = None,
        is_dead: IsDead | None = None,
    ) -> tuple[Lease, SessionRow, dict[str, Any]]:
        """:meth:`acquire_lease`, the session row as it stands once the lease is taken (what
        :meth:`get_session` would read next) and the session's own caps (``session_limits``,
        ``{}`` when none) — one round trip where the backend can (a turn's start).

        Raises:
            SessionBusy, SessionNotFound: as :meth:`acquire_lease`.
        """
        ...

    async def renew_lease(self, session_id: str, lease: Lease, *, ttl_s: float) -> tuple[bool, bool]:
        """Extend the lease by ``ttl_s``; return ``(still_held, cancel_requested)``."""
        ...

    async def keep_leases(
        self, leases: Sequence[tuple[str, Lease]], *, ttl_s: float, renew: bool
    ) -> dict[str, tuple[bool, bool]]:
        """Renew (or only check) many leases at once: ``{session_id: (still_held, cancel_requested)}``."""
        ...

    async def release_lease(self, session_id: str, lease: Lease) -> None:
        """Give the lease up (a no-op if it was superseded)."""
        ...

    # ------------------------------------------------------------------ steps, tool calls, approvals

    async def step_attempts(self, session_id: str, step_id: str) -> list[StepRow]:
        """Every attempt of one step, ascending attempt."""
        ...

    async def steps(self, session_id: str) -> list[StepRow]:
        """Every step attempt of the session, in start order."""
        ...

    async def tool_calls(
        self, session_id: str, *, turn_id: str | None = None, open_only: bool = False
    ) -> list[ToolCallRow]:
        """Tool-call rows of the session (or one turn), in insertion order."""
        ...

    async def existing_tool_call_ids(self, session_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` already name a tool call of the session."""
        ...

    async def resolve_approval(
        self, session_id: str, tool_call_id: str, decision: str, *, note: str | None = None
    ) -> ToolCallRow:
        """Record the first decision on a pending approval (compare-and-set).

        Raises:
            ApprovalNotFound: unknown id, or already resolved (``detail`` names the winner).
        """
        ...

    async def pending_approvals(self, session_id: str | None = None) -> list[ToolCallRow]:
        """Tool calls waiting for the user's decision (of one session, or of all), in order.

        The one definition of "pending": ``approval = 'pending'`` and ``status = 'waiting_user'``.
        """
        ...

    async def pending_approval_events(self, session_id: str) -> list[Event]:
        """The latest ``approval.requested`` event of each pending approval, ascending seq (F14)."""
        ...
