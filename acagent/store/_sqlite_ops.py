"""How :class:`~acagent.store.SqliteJournal` applies each op of :mod:`acagent.store._ops`.

One function per op class, run inside the commit's ``BEGIN IMMEDIATE`` transaction on the
connection's thread. The semantics are the ones documented on the op classes (the conformance
suite in ``tests/store/conformance`` checks them for every backend).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from acagent._value import Record
from acagent.errors import InvalidTransition
from acagent.store._ops import (
    AddUsage,
    FinishStep,
    InsertStep,
    InsertToolCall,
    Op,
    ReleaseLease,
    SetApprovalRules,
    SetCancel,
    SetStatus,
    SetTitle,
    SetTurn,
    UpdateToolCall,
)
from acagent.store._row_ids import STEPS, TOOL_CALLS, claim, keys_sql
from acagent.store._session_text import APPROVAL_RULES, set_text
from acagent.store._step_held import finish_held, hold_step
from acagent.store._step_row import insert_step_row, pack_ts
from acagent.store._usage import RecordUsage

__all__ = ["TxContext", "apply_op", "next_key", "session_sets", "step_rid"]

Extra = tuple[str, dict[str, Any]] | None


@dataclass(repr=False, eq=False)  # eq and repr: acagent._value.Record
class TxContext(Record):
    """State visible to ops inside one commit transaction."""

    db: sqlite3.Connection
    session_id: str
    ts: str
    status: str
    cancel_requested: int
    now: float = 0.0
    """Commit time, unix seconds (``RecordUsage`` takes its local day from it)."""
    num: int = 0
    """The session's ``num`` (the prefix of its ``event_log``, ``usage``, ``step`` and ``tool_call`` keys, m007–m010)."""
    sets: dict[str, tuple[str, tuple[Any, ...]]] = field(default_factory=dict)
    """Columns of the session row the ops set: ``column → (SQL expression, args)``, the last op's
    value winning; the commit applies them in its own ``UPDATE session`` (:func:`session_sets`)."""
    adds: dict[str, int] = field(default_factory=dict)
    """Counters of the session row the ops add to (``column → amount``), applied the same way."""
    arguments: dict[str, tuple[int, str]] = field(default_factory=dict)
    """The commit's tool-call intents whose arguments are still to be placed: ``tool call id →
    (row key, arguments JSON)``; :func:`acagent.store._tool_args.settle_arguments` places them
    once the commit's events are numbered (m019)."""
    held: Any = False
    """The inflight step the session's row holds (m020, :mod:`acagent.store._step_held`): False
    until read, then its ``(request_id, step_id, turn_id, digest, attempt, started_at)`` or None."""

    def add(self, column: str, amount: int) -> None:
        """Add ``amount`` to the session's ``column`` in the commit's ``UPDATE session``."""
        self.adds[column] = self.adds.get(column, 0) + amount


def session_sets(ctx: TxContext) -> tuple[list[str], list[Any]]:
    """The ``SET`` items and their args for what the ops changed in the session row.

    Why deferred: every op that touched the row ran its own ``UPDATE session`` (status, turn,
    cancel flag, the step and token counters, the lease release: ~11 statements a tool turn,
    benchmarks figure 1); the commit updates the row anyway, once, with all of them. In one
    ``UPDATE`` every expression sees the row as it was before it, which is what each op's own
    statement saw (none of them reads what another wrote).
    """
    items = [f"{column} = {expr}" for column, (expr, _) in ctx.sets.items()]
    args = [a for _, values in ctx.sets.values() for a in values]
    for column, amount in ctx.adds.items():
        items.append(f"{column} = {column} + ?")
        args.append(amount)
    return items, args


def _set_status(op: SetStatus, ctx: TxContext) -> Extra:
    if ctx.status not in op.from_:
        raise InvalidTransition(
            f"session {ctx.session_id!r} is {ctx.status!r}; cannot become {op.to!r}"
            f" (allowed from {', '.join(op.from_)})",
            detail={"status": ctx.status, "to": op.to},
        )
    if op.worker and ctx.cancel_requested and op.to not in ("cancelled", "failed"):
        raise InvalidTransition(
            f"session {ctx.session_id!r} has a pending cancel; cannot become {op.to!r}",
            detail={"status": ctx.status, "to": op.to, "cancel_requested": True},
        )
    if ctx.status == op.to:
        return None
    ctx.sets["status"] = ("?", (op.to,))
    previous, ctx.status = ctx.status, op.to
    payload: dict[str, Any] = {"status": op.to, "previous": previous}
    if op.reason:
        payload["reason"] = op.reason
    if op.turn_id:
        payload["turn_id"] = op.turn_id
    return "session.status", payload


def _set_turn(op: SetTurn, ctx: TxContext) -> Extra:
    ctx.sets["turn_id"] = ("?", (op.turn_id,))
    return None


def _set_title(op: SetTitle, ctx: TxContext) -> Extra:
    ctx.db.execute("UPDATE session SET title = ? WHERE id = ? AND title IS NULL", (op.title, ctx.session_id))
    return None


def _set_cancel(op: SetCancel, ctx: TxContext) -> Extra:
    ctx.sets["cancel_requested"] = ("?", (int(op.value),))
    ctx.cancel_requested = int(op.value)
    return None


def step_rid(session_id: str, request_id: str) -> int:
    """The ``step.rid`` of a request id (m009), or the ``tool_call.tid`` of a tool call id (m010):
    64 bits (signed) of the blake2b hash of ``(session_id, request_id)``."""
    digest = hashlib.blake2b(f"{session_id}\0{request_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def next_key(db: sqlite3.Connection, table: str, num: int) -> int:
    """The next key of session ``num`` in ``table`` (``usage``, ``step_log``, ``tool_call``: ``num << 32 | n``)."""
    lo = num << 32
    last = db.execute(
        f"SELECT key FROM {table} WHERE key < ? ORDER BY key DESC LIMIT 1", (lo + (1 << 32),)
    ).fetchone()
    return int(last[0]) + 1 if last is not None and last[0] > lo else lo + 1


def _insert_step(op: InsertStep, ctx: TxContext) -> Extra:
    if not hold_step(ctx, op.request_id, op.step_id, op.turn_id, op.digest, op.attempt):  # m020
        row = (op.request_id, op.step_id, op.turn_id, op.digest, op.attempt, "inflight", None, ctx.ts, None)
        key, rid = next_key(ctx.db, "step_log", ctx.num), step_rid(ctx.session_id, op.request_id)
        claim(ctx.db, STEPS, ctx.num, key, rid)  # the request id is unique (m017)
        insert_step_row(ctx.db, ctx.num, ctx.session_id, row, key=key)  # the compact row of m012
    ctx.add("llm_calls", 1)
    ctx.add("llm_retries", 1 if op.attempt > 1 else 0)
    return None


def _finish_step(op: FinishStep, ctx: TxContext) -> Extra:
    if finish_held(ctx, op.request_id, op.status, op.error):  # the session row's step (m020)
        return None
    rid = step_rid(ctx.session_id, op.request_id)
    cur = ctx.db.execute(  # the row found by its rid (m017), its request id through the view (m012, step_row m020)
        f"UPDATE step_log SET status = ?, error = ?, finished_at = ? WHERE key = (SELECT key FROM step_row"
        f" WHERE key IN ({keys_sql(STEPS)}) AND session_id = ? AND request_id = ?) AND status = 'inflight'",
        (
            op.status,
            op.error,
            pack_ts(ctx.ts),
            ctx.num,
            (ctx.num + 1) << 32,
            rid,
            rid,
            ctx.session_id,
            op.request_id,
        ),
    )
    if cur.rowcount != 1:
        raise InvalidTransition(f"step {op.request_id!r} is not inflight")
    return None


def _insert_tool_call(op: InsertToolCall, ctx: TxContext) -> Extra:
    key, tid = next_key(ctx.db, "tool_call", ctx.num), step_rid(ctx.session_id, op.tool_call_id)
    claim(ctx.db, TOOL_CALLS, ctx.num, key, tid)  # the id is unique in the session (m017)
    ctx.arguments[op.tool_call_id] = (key, orjson.dumps(op.arguments).decode())
    ctx.db.execute(
        "INSERT INTO tool_call (key, tid, session_id, tool_call_id, turn_id, step_id, idx, name, arguments,"
        " arguments_error, status, approval, idempotent) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            key,  # the session's key range (m010)
            tid,
            ctx.session_id,
            op.tool_call_id,
            op.turn_id,
            op.step_id,
            op.idx,
            op.name,
            "",  # the tool.call event's, or stored here by settle_arguments (m019)
            op.arguments_error,
            op.status,
            op.approval,
            int(op.idempotent),
        ),
    )
    return None


def _update_tool_call(op: UpdateToolCall, ctx: TxContext) -> Extra:
    sets = ["status = ?", *(f"{name} = ?" for name, _ in op.fields)]
    args: list[Any] = [op.to, *(value for _, value in op.fields)]
    marks = ",".join("?" * len(op.from_))
    tid = step_rid(ctx.session_id, op.tool_call_id)
    cur = ctx.db.execute(  # the row found by its tid (m017)
        f"UPDATE tool_call SET {', '.join(sets)} WHERE key IN ({keys_sql(TOOL_CALLS)}) AND session_id = ?"
        f" AND tool_call_id = ? AND status IN ({marks})",
        (*args, ctx.num, (ctx.num + 1) << 32, tid, tid, ctx.session_id, op.tool_call_id, *op.from_),
    )
    if cur.rowcount != 1:
        raise InvalidTransition(
            f"tool call {op.tool_call_id!r} is not in {op.from_}; cannot become {op.to!r}"
        )
    return None


def _add_usage(op: AddUsage, ctx: TxContext) -> Extra:
    ctx.add("input_tokens", op.input_tokens)
    ctx.add("output_tokens", op.output_tokens)
    return None


def _set_approval_rules(op: SetApprovalRules, ctx: TxContext) -> Extra:
    set_text(ctx.db, ctx.num, APPROVAL_RULES, orjson.dumps(op.rules).decode())  # beside the row (m013)
    return None


def _release_lease(op: ReleaseLease, ctx: TxContext) -> Extra:
    # the commit checked the fencing token before any op ran (as release_lease's WHERE does); only
    # the owner's lease is released (both CASEs see the owner before the commit's UPDATE)
    ctx.sets["lease_owner"] = ("CASE WHEN lease_owner = ? THEN NULL ELSE lease_owner END", (op.owner,))
    ctx.sets["lease_expires_at"] = (
        "CASE WHEN lease_owner = ? THEN NULL ELSE lease_expires_at END",
        (op.owner,),
    )
    return None


def _record_usage(op: RecordUsage, ctx: TxContext) -> Extra:
    op.apply(ctx)  # the usage row's SQL lives beside the usage queries (acagent/store/_usage.py)
    return None


_APPLY: dict[type, Callable[[Any, TxContext], Extra]] = {
    RecordUsage: _record_usage,
    SetStatus: _set_status,
    SetTurn: _set_turn,
    SetTitle: _set_title,
    SetCancel: _set_cancel,
    InsertStep: _insert_step,
    FinishStep: _finish_step,
    InsertToolCall: _insert_tool_call,
    UpdateToolCall: _update_tool_call,
    AddUsage: _add_usage,
    SetApprovalRules: _set_approval_rules,
    ReleaseLease: _release_lease,
}


def apply_op(op: Op, ctx: TxContext) -> Extra:
    """Apply ``op`` inside the transaction; raise to roll back; maybe return one extra event.

    Raises:
        TypeError: not an op of :mod:`acagent.store._ops`.
    """
    fn = _APPLY.get(type(op))
    if fn is None:
        raise TypeError(f"{type(op).__name__} is not a journal op")
    return fn(op, ctx)
