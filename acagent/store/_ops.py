"""Guarded row operations: the data a :meth:`Journal.commit <acagent.store.Journal.commit>` applies.

An op is a frozen dataclass that says *what* to change and under which precondition; each backend
applies it inside the commit's transaction with exactly the semantics documented on the class
(SQLite: :mod:`acagent.store._sqlite_ops`). A precondition that does not hold raises
:class:`~acagent.errors.InvalidTransition` and rolls the whole commit back; an op may add one event
to the commit (``SetStatus`` adds ``session.status``), placed before the commit's own events.
Malformed ops (an empty whitelist, a terminal source status, an unknown column) raise
``ValueError`` when they are built, before any backend sees them.

The ops are frozen dataclasses whose ``__init__`` is written out over :class:`acagent._value.Frozen`
(no per-class code generation at import: issue 12, the one-shot ``run``'s start-up).

Terminal tool-call rows (``done``/``failed``) never change again: every update names its allowed
source statuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from acagent._value import Frozen, init_fields
from acagent.store._usage import RecordUsage

__all__ = [
    "ACTIVE",
    "CONTEXT_READ_TYPES",
    "CONTEXT_TYPES",
    "RESTING",
    "SNAPSHOT_TYPES",
    "STATUSES",
    "AddUsage",
    "FinishStep",
    "InsertStep",
    "InsertToolCall",
    "Op",
    "SetApprovalRules",
    "SetCancel",
    "SetStatus",
    "SetTitle",
    "SetTurn",
    "UpdateToolCall",
]

STATUSES = ("pending", "running", "waiting_tool", "waiting_user", "done", "cancelled", "failed")
RESTING = ("pending", "done", "cancelled", "failed")
ACTIVE = ("running", "waiting_tool", "waiting_user")
CONTEXT_TYPES = ("user.message", "assistant.message", "tool.result")
"""Event types the model context is rebuilt from (besides the snapshots, :data:`SNAPSHOT_TYPES`)."""
SNAPSHOT_TYPES = ("checkpoint", "context.compacted")
"""Events a context rebuild starts from: a ``checkpoint`` (a full copy of the context) at its own
seq, a ``context.compacted`` (a summary and a position) at its ``first_kept_seq``."""
CONTEXT_READ_TYPES = (*SNAPSHOT_TYPES, *CONTEXT_TYPES)
"""What ``Journal.context_events`` returns from the latest snapshot position on."""


@dataclass(init=False, repr=False, eq=False)
class SetStatus(Frozen):
    """The one status change: ``to`` only from a state in ``from_`` (non-empty whitelist).

    Semantics: the current status not in ``from_`` → ``InvalidTransition`` (``detail.status``,
    ``detail.to``). A worker transition (``worker=True``) into any state but ``cancelled`` /
    ``failed`` is also refused while the session's cancel flag is set (``detail.cancel_requested``
    = True): the cancel wins. ``to`` equal to the current status writes nothing and adds no event;
    otherwise the op adds ``session.status`` ``{status, previous[, reason][, turn_id]}``.
    """

    to: str
    from_: tuple[str, ...]
    reason: str | None = None
    turn_id: str | None = None
    worker: bool = True

    def __init__(
        self,
        to: str,
        from_: tuple[str, ...],
        reason: str | None = None,
        turn_id: str | None = None,
        worker: bool = True,
    ) -> None:
        if not from_:
            raise ValueError("a status transition needs a non-empty whitelist of source states")
        bad = [s for s in (to, *from_) if s not in STATUSES]
        if bad:
            raise ValueError(f"unknown status {bad[0]!r}")
        init_fields(self, to=to, from_=from_, reason=reason, turn_id=turn_id, worker=worker)


@dataclass(init=False, repr=False, eq=False)
class SetTurn(Frozen):
    """Make ``turn_id`` the session's current turn (``session.turn_id``)."""

    turn_id: str

    def __init__(self, turn_id: str) -> None:
        init_fields(self, turn_id=turn_id)


@dataclass(init=False, repr=False, eq=False)
class SetTitle(Frozen):
    """Set the session's title when it has none yet (an existing title is kept, no error)."""

    title: str

    def __init__(self, title: str) -> None:
        init_fields(self, title=title)


@dataclass(init=False, repr=False, eq=False)
class SetCancel(Frozen):
    """Set or clear the cancel flag; later ops of the same commit see the new value."""

    value: bool

    def __init__(self, value: bool) -> None:
        init_fields(self, value=value)


@dataclass(init=False, repr=False, eq=False)
class ReleaseLease(Frozen):
    """Give the commit's lease up in the commit's own transaction (the turn's last write: one
    transaction fewer than :meth:`Journal.release_lease` after it). Fenced commits only: the
    commit has already checked the token; the holder ``owner`` is cleared like ``release_lease``."""

    owner: str

    def __init__(self, owner: str) -> None:
        init_fields(self, owner=owner)


@dataclass(init=False, repr=False, eq=False)
class InsertStep(Frozen):
    """Write a step row ``inflight`` (LLM intent, before the provider is called).

    Also counts the call in ``session.llm_calls`` (and ``llm_retries`` when ``attempt > 1``). A
    second insert of the same ``request_id`` fails the commit (the backend's unique-key error).
    """

    request_id: str
    step_id: str
    turn_id: str
    digest: str
    attempt: int

    def __init__(self, request_id: str, step_id: str, turn_id: str, digest: str, attempt: int) -> None:
        init_fields(
            self, request_id=request_id, step_id=step_id, turn_id=turn_id, digest=digest, attempt=attempt
        )


@dataclass(init=False, repr=False, eq=False)
class FinishStep(Frozen):
    """Mark a step ``done`` or ``failed`` — only from ``inflight``, else ``InvalidTransition``."""

    request_id: str
    status: str
    error: str | None = None

    def __init__(self, request_id: str, status: str, error: str | None = None) -> None:
        if status not in ("done", "failed"):
            raise ValueError(f"a step finishes done or failed, not {status!r}")
        init_fields(self, request_id=request_id, status=status, error=error)


@dataclass(init=False, repr=False, eq=False)
class InsertToolCall(Frozen):
    """Write a tool-call intent row (``dispatched``, or ``waiting_user`` with ``approval="pending"``)."""

    tool_call_id: str
    turn_id: str
    step_id: str
    idx: int
    name: str
    arguments: dict[str, Any]
    idempotent: bool
    arguments_error: str | None = None
    status: str = "dispatched"
    approval: str = "none"

    def __init__(
        self,
        tool_call_id: str,
        turn_id: str,
        step_id: str,
        idx: int,
        name: str,
        arguments: dict[str, Any],
        idempotent: bool,
        arguments_error: str | None = None,
        status: str = "dispatched",
        approval: str = "none",
    ) -> None:
        init_fields(
            self,
            tool_call_id=tool_call_id,
            turn_id=turn_id,
            step_id=step_id,
            idx=idx,
            name=name,
            arguments=arguments,
            idempotent=idempotent,
            arguments_error=arguments_error,
            status=status,
            approval=approval,
        )


@dataclass(init=False, repr=False, eq=False)
class UpdateToolCall(Frozen):
    """Move a tool call to ``to`` from one of ``from_`` (non-terminal) and set ``fields``.

    The row not in ``from_`` (terminal rows never are) → ``InvalidTransition``. ``fields`` are
    ``(column, value)`` pairs from :attr:`ALLOWED`.
    """

    tool_call_id: str
    to: str
    from_: tuple[str, ...]
    fields: tuple[tuple[str, Any], ...] = ()

    ALLOWED = frozenset(
        {
            "runner",
            "pid",
            "run_expires_at",
            "result_status",
            "approval",
            "approval_note",
            "host",
            "runner_pid",
        }
    )

    def __init__(
        self, tool_call_id: str, to: str, from_: tuple[str, ...], fields: tuple[tuple[str, Any], ...] = ()
    ) -> None:
        if not from_ or set(from_) & {"done", "failed"}:
            raise ValueError("tool-call updates need non-terminal source statuses")
        for name, _ in fields:
            if name not in self.ALLOWED:
                raise ValueError(f"tool_call column {name!r} is not updatable")
        init_fields(self, tool_call_id=tool_call_id, to=to, from_=from_, fields=fields)


@dataclass(init=False, repr=False, eq=False)
class AddUsage(Frozen):
    """Add a step's tokens to the session totals (``input_tokens``, ``output_tokens``)."""

    input_tokens: int
    output_tokens: int

    def __init__(self, input_tokens: int, output_tokens: int) -> None:
        init_fields(self, input_tokens=input_tokens, output_tokens=output_tokens)


@dataclass(init=False, repr=False, eq=False)
class SetApprovalRules(Frozen):
    """Replace the session's remembered approval rules (stored as JSON)."""

    rules: dict[str, Any]

    def __init__(self, rules: dict[str, Any]) -> None:
        init_fields(self, rules=rules)


Op = (
    RecordUsage
    | SetStatus
    | SetTurn
    | SetTitle
    | SetCancel
    | InsertStep
    | FinishStep
    | InsertToolCall
    | UpdateToolCall
    | AddUsage
    | SetApprovalRules
    | ReleaseLease
)
"""Every op a commit accepts (a closed set: backends implement each one; ``RecordUsage`` is in
:mod:`acagent.store._usage`)."""
