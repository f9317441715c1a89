"""The rows a journal returns: sessions, LLM step attempts, tool calls, and a held lease.

Backend-neutral plain dataclasses (their ``__eq__`` and ``__repr__`` written once in
:mod:`acagent._value`, not generated per class at import: issue 12): every :class:`~acagent.store.Journal` implementation returns
these, field for field (the SQLite columns of ``m001_initial`` carry the same names and comments).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import orjson

from acagent._value import Frozen, Record, init_fields
from acagent.events import Event

__all__ = [
    "PENDING_APPROVAL",
    "Lease",
    "SessionRow",
    "StepRow",
    "ToolCallRow",
    "latest_requests",
    "new_session_id",
]


def new_session_id() -> str:
    """A new session id ``ses_<26 hex chars>`` (time-ordered prefix)."""
    return f"ses_{int(time.time() * 1000):011x}{uuid.uuid4().hex[:15]}"


@dataclass(init=False, repr=False, eq=False)
class Lease(Frozen):
    """A held session lease: the worker id and the fencing token it was granted."""

    owner: str
    token: int

    def __init__(self, owner: str, token: int) -> None:
        init_fields(self, owner=owner, token=token)


@dataclass(repr=False, eq=False)
class SessionRow(Record):
    """One ``session`` row (see the column comments in ``m001_initial``)."""

    id: str
    cwd: str
    title: str | None
    model: str | None
    status: str
    created_at: str
    updated_at: str
    last_seq: int
    turn_id: str | None
    lease_owner: str | None
    lease_host: str | None
    lease_pid: int | None
    lease_expires_at: float | None
    fencing_token: int
    cancel_requested: int
    input_tokens: int
    output_tokens: int
    llm_calls: int
    llm_retries: int
    approval_rules: str
    last_message: str | None
    checkpoint_seq: int
    checkpoint_bytes: int
    tail_bytes: int
    warnings: str | None
    transcript_stat: str | None
    archived_at: str | None = None
    """When the session was archived (hidden from session lists; still resumable), else None."""

    def to_public(self) -> dict[str, Any]:
        """The fields shown by ``sessions list --json`` and the HTTP API."""
        return {
            "id": self.id,
            "status": self.status,
            "cwd": self.cwd,
            "title": self.title,
            "model": self.model,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "last_seq": self.last_seq,
            "turn_id": self.turn_id,
            "last_message": self.last_message,
            "usage": {
                "input_tokens": self.input_tokens,
                "output_tokens": self.output_tokens,
                "total_tokens": self.input_tokens + self.output_tokens,
                "llm_calls": self.llm_calls,
                "llm_retries": self.llm_retries,
            },
            "warnings": orjson.loads(self.warnings) if self.warnings else [],
            "archived": self.archived_at is not None,
            "archived_at": self.archived_at,
        }


@dataclass(repr=False, eq=False)
class StepRow(Record):
    """One ``step`` row: an LLM call attempt."""

    session_id: str
    request_id: str
    step_id: str
    turn_id: str
    digest: str
    attempt: int
    status: str
    error: str | None
    started_at: str
    finished_at: str | None


@dataclass(repr=False, eq=False)
class ToolCallRow(Record):
    """One ``tool_call`` row: the intent and state of a tool call."""

    session_id: str
    tool_call_id: str
    turn_id: str
    step_id: str
    idx: int
    name: str
    arguments: str
    arguments_error: str | None
    status: str
    approval: str
    approval_note: str | None
    runner: str | None
    pid: int | None
    run_expires_at: float | None
    idempotent: int
    result_status: str | None
    host: str | None = None
    """Hostname of the process that ran the tool (set with ``running``; recovery signals ``pid``
    only on that host)."""
    runner_pid: int | None = None
    """Pid of the acagent process that ran the tool."""

    @property
    def terminal(self) -> bool:
        """True once the call is done or failed (terminal rows never change)."""
        return self.status in ("done", "failed")

    def trusted_pgid(self, now: float | None = None) -> int | None:
        """The recorded process group while the call's run lease holds (``run_expires_at`` in the
        future, or unknown), else None.

        The lease outlasts any run of the tool (``tool_redelivery_idle_s`` > ``tool_timeout_s``);
        past it the pgid may have been reused by an unrelated group, so recovery kills only what
        carries the call's spawn marker (``acagent.tools.kill_call_processes``).
        """
        if self.pid is None or self.run_expires_at is None:
            return self.pid
        return self.pid if (time.time() if now is None else now) < self.run_expires_at else None

    @property
    def pending_approval(self) -> bool:
        """True while the call waits for the user's decision (the SQL twin: :data:`PENDING_APPROVAL`)."""
        return self.approval == "pending" and self.status == "waiting_user"

    def approval_view(self) -> dict[str, Any]:
        """The pending approval as clients see it (snapshot, ``GET /v1/sessions``, ``sessions show``):
        ``{tool_call_id, name, arguments, turn_id}``; ``arguments`` is the decoded object, or the raw
        text when it is not JSON (a model may send broken arguments)."""
        try:
            arguments: Any = orjson.loads(self.arguments)
        except orjson.JSONDecodeError:
            arguments = self.arguments
        return {
            "tool_call_id": self.tool_call_id,
            "name": self.name,
            "arguments": arguments,
            "turn_id": self.turn_id,
        }


PENDING_APPROVAL = "approval = 'pending' AND status = 'waiting_user'"
"""The one definition of a pending approval, as SQL over ``tool_call`` (every backend uses it)."""


def latest_requests(pending: set[str], requests: Iterable[Event]) -> list[Event]:
    """The latest ``approval.requested`` event of each tool call in ``pending``, ascending seq (F14).

    Args:
        pending: ids of the pending tool calls (:data:`PENDING_APPROVAL`).
        requests: the session's ``approval.requested`` events, ascending seq.
    """
    latest: dict[str, Event] = {}
    for event in requests:
        tcid = event.payload.get("tool_call_id")
        if tcid in pending:
            latest[tcid] = event
    return sorted(latest.values(), key=lambda e: e.seq)


SESSION_COLS = tuple(f.name for f in fields(SessionRow))
STEP_COLS = tuple(f.name for f in fields(StepRow))
TOOL_COLS = tuple(f.name for f in fields(ToolCallRow))
