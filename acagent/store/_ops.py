"""Guarded row operations applied inside :meth:`SqliteJournal.commit`'s transaction.

Each op checks its precondition and raises (rolling the whole transaction back) when it does not
hold; an op may return one extra event to append (``SetStatus`` appends ``session.status``).
Terminal tool-call rows (``done``/``failed``) never change again: every update names its allowed
source statuses.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from acagent.errors import InvalidTransition

__all__ = [
    "CONTEXT_TYPES",
    "STATUSES",
    "AddUsage",
    "FinishStep",
    "InsertStep",
    "InsertToolCall",
    "Op",
    "SetApprovalRules",
    "SetCancel",
    "SetStatus",
    "SetTurn",
    "TxContext",
    "UpdateToolCall",
]

STATUSES = ("pending", "running", "waiting_tool", "waiting_user", "done", "cancelled", "failed")
RESTING = ("pending", "done", "cancelled", "failed")
ACTIVE = ("running", "waiting_tool", "waiting_user")
CONTEXT_TYPES = ("user.message", "assistant.message", "tool.result")
"""Event types the model context is rebuilt from (besides ``checkpoint``)."""


@dataclass
class TxContext:
    """State visible to ops inside one commit transaction."""

    db: sqlite3.Connection
    session_id: str
    now: float
    ts: str
    status: str
    cancel_requested: int


class Op(Protocol):
    """A guarded row operation."""

    def apply(self, ctx: TxContext) -> tuple[str, dict[str, Any]] | None:
        """Apply inside the transaction; raise to roll back; optionally return an event."""
        ...


@dataclass(frozen=True)
class SetStatus:
    """The one status change function: ``to`` only from a state in ``from_`` (non-empty).

    A worker transition (``worker=True``) into an active or ``done`` state is also refused while
    the session's cancel flag is set: the cancel wins.
    """

    to: str
    from_: tuple[str, ...]
    reason: str | None = None
    turn_id: str | None = None
    worker: bool = True

    def __post_init__(self) -> None:
        if not self.from_:
            raise ValueError("a status transition needs a non-empty whitelist of source states")
        bad = [s for s in (self.to, *self.from_) if s not in STATUSES]
        if bad:
            raise ValueError(f"unknown status {bad[0]!r}")

    def apply(self, ctx: TxContext) -> tuple[str, dict[str, Any]] | None:
        if ctx.status not in self.from_:
            raise InvalidTransition(
                f"session {ctx.session_id!r} is {ctx.status!r}; cannot become {self.to!r}"
                f" (allowed from {', '.join(self.from_)})",
                detail={"status": ctx.status, "to": self.to},
            )
        if self.worker and ctx.cancel_requested and self.to not in ("cancelled", "failed"):
            raise InvalidTransition(
                f"session {ctx.session_id!r} has a pending cancel; cannot become {self.to!r}",
                detail={"status": ctx.status, "to": self.to, "cancel_requested": True},
            )
        if ctx.status == self.to:
            return None
        ctx.db.execute("UPDATE session SET status = ? WHERE id = ?", (self.to, ctx.session_id))
        previous, ctx.status = ctx.status, self.to
        payload: dict[str, Any] = {"status": self.to, "previous": previous}
        if self.reason:
            payload["reason"] = self.reason
        if self.turn_id:
            payload["turn_id"] = self.turn_id
        return "session.status", payload


@dataclass(frozen=True)
class SetTurn:
    """Make ``turn_id`` the session's current turn."""

    turn_id: str

    def apply(self, ctx: TxContext) -> None:
        ctx.db.execute("UPDATE session SET turn_id = ? WHERE id = ?", (self.turn_id, ctx.session_id))


@dataclass(frozen=True)
class SetCancel:
    """Set or clear the cancel flag inside a commit."""

    value: bool

    def apply(self, ctx: TxContext) -> None:
        ctx.db.execute(
            "UPDATE session SET cancel_requested = ? WHERE id = ?", (int(self.value), ctx.session_id)
        )
        ctx.cancel_requested = int(self.value)


@dataclass(frozen=True)
class InsertStep:
    """Write a step row ``inflight`` (LLM intent, before the provider is called)."""

    request_id: str
    step_id: str
    turn_id: str
    digest: str
    attempt: int

    def apply(self, ctx: TxContext) -> None:
        ctx.db.execute(
            "INSERT INTO step (session_id, request_id, step_id, turn_id, digest, attempt, status, started_at)"
            " VALUES (?, ?, ?, ?, ?, ?, 'inflight', ?)",
            (ctx.session_id, self.request_id, self.step_id, self.turn_id, self.digest, self.attempt, ctx.ts),
        )
        ctx.db.execute(
            "UPDATE session SET llm_calls = llm_calls + 1, llm_retries = llm_retries + ? WHERE id = ?",
            (1 if self.attempt > 1 else 0, ctx.session_id),
        )


@dataclass(frozen=True)
class FinishStep:
    """Mark an inflight step ``done`` or ``failed`` (only from ``inflight``)."""

    request_id: str
    status: str
    error: str | None = None

    def apply(self, ctx: TxContext) -> None:
        cur = ctx.db.execute(
            "UPDATE step SET status = ?, error = ?, finished_at = ?"
            " WHERE session_id = ? AND request_id = ? AND status = 'inflight'",
            (self.status, self.error, ctx.ts, ctx.session_id, self.request_id),
        )
        if cur.rowcount != 1:
            raise InvalidTransition(f"step {self.request_id!r} is not inflight")


@dataclass(frozen=True)
class InsertToolCall:
    """Write a tool-call intent row (``dispatched`` or ``waiting_user``)."""

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

    def apply(self, ctx: TxContext) -> None:
        ctx.db.execute(
            "INSERT INTO tool_call (session_id, tool_call_id, turn_id, step_id, idx, name, arguments,"
            " arguments_error, status, approval, idempotent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                ctx.session_id,
                self.tool_call_id,
                self.turn_id,
                self.step_id,
                self.idx,
                self.name,
                orjson.dumps(self.arguments).decode(),
                self.arguments_error,
                self.status,
                self.approval,
                int(self.idempotent),
            ),
        )


@dataclass(frozen=True)
class UpdateToolCall:
    """Move a tool call to ``to`` from one of ``from_``; terminal rows never change."""

    tool_call_id: str
    to: str
    from_: tuple[str, ...]
    fields: tuple[tuple[str, Any], ...] = ()

    _ALLOWED = frozenset({"runner", "pid", "run_expires_at", "result_status", "approval", "approval_note"})

    def apply(self, ctx: TxContext) -> None:
        if not self.from_ or set(self.from_) & {"done", "failed"}:
            raise ValueError("tool-call updates need non-terminal source statuses")
        sets = ["status = ?"]
        args: list[Any] = [self.to]
        for name, value in self.fields:
            if name not in self._ALLOWED:
                raise ValueError(f"tool_call column {name!r} is not updatable")
            sets.append(f"{name} = ?")
            args.append(value)
        marks = ",".join("?" * len(self.from_))
        cur = ctx.db.execute(
            f"UPDATE tool_call SET {', '.join(sets)} WHERE session_id = ? AND tool_call_id = ? AND status IN ({marks})",
            (*args, ctx.session_id, self.tool_call_id, *self.from_),
        )
        if cur.rowcount != 1:
            raise InvalidTransition(
                f"tool call {self.tool_call_id!r} is not in {self.from_}; cannot become {self.to!r}"
            )


@dataclass(frozen=True)
class AddUsage:
    """Add a step's tokens to the session totals."""

    input_tokens: int
    output_tokens: int

    def apply(self, ctx: TxContext) -> None:
        ctx.db.execute(
            "UPDATE session SET input_tokens = input_tokens + ?, output_tokens = output_tokens + ? WHERE id = ?",
            (self.input_tokens, self.output_tokens, ctx.session_id),
        )


@dataclass(frozen=True)
class SetApprovalRules:
    """Replace the session's remembered approval rules (JSON)."""

    rules: dict[str, Any]

    def apply(self, ctx: TxContext) -> None:
        ctx.db.execute(
            "UPDATE session SET approval_rules = ? WHERE id = ?",
            (orjson.dumps(self.rules).decode(), ctx.session_id),
        )
