"""How :class:`~acagent.store.pg.PostgresJournal` applies each guarded op, inside the commit's transaction.

One async function per op class, with the semantics documented on the op classes
(:mod:`acagent.store._ops`) — the conformance suite holds both backends to them. The session row
is locked (``SELECT … FOR UPDATE``) by the caller for the length of the transaction, which holds
only these statements (no LLM or tool await).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

import orjson

from acagent.errors import InvalidTransition
from acagent.store import _ops as ops_module

__all__ = ["PgTx", "apply_op"]

Extra = tuple[str, dict[str, Any]] | None


@dataclass
class PgTx:
    """State visible to ops inside one commit transaction."""

    conn: Any
    session_id: str
    ts: str
    status: str
    cancel_requested: int


def _rows(status: str) -> int:
    """Affected rows from an asyncpg command status (``"UPDATE 1"`` → 1)."""
    tail = status.rsplit(" ", 1)[-1]
    return int(tail) if tail.isdigit() else 0


async def _set_status(op: Any, tx: PgTx) -> Extra:
    if tx.status not in op.from_:
        raise InvalidTransition(
            f"session {tx.session_id!r} is {tx.status!r}; cannot become {op.to!r} (allowed from {', '.join(op.from_)})",
            detail={"status": tx.status, "to": op.to},
        )
    if op.worker and tx.cancel_requested and op.to not in ("cancelled", "failed"):
        raise InvalidTransition(
            f"session {tx.session_id!r} has a pending cancel; cannot become {op.to!r}",
            detail={"status": tx.status, "to": op.to, "cancel_requested": True},
        )
    if tx.status == op.to:
        return None
    await tx.conn.execute("UPDATE session SET status = $2 WHERE id = $1", tx.session_id, op.to)
    previous, tx.status = tx.status, op.to
    payload: dict[str, Any] = {"status": op.to, "previous": previous}
    if op.reason:
        payload["reason"] = op.reason
    if op.turn_id:
        payload["turn_id"] = op.turn_id
    return "session.status", payload


async def _set_turn(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute("UPDATE session SET turn_id = $2 WHERE id = $1", tx.session_id, op.turn_id)
    return None


async def _set_title(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute(
        "UPDATE session SET title = $2 WHERE id = $1 AND title IS NULL", tx.session_id, op.title
    )
    return None


async def _set_cancel(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute(
        "UPDATE session SET cancel_requested = $2 WHERE id = $1", tx.session_id, int(op.value)
    )
    tx.cancel_requested = int(op.value)
    return None


async def _insert_step(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute(
        "INSERT INTO step (session_id, request_id, step_id, turn_id, digest, attempt, status, started_at)"
        " VALUES ($1, $2, $3, $4, $5, $6, 'inflight', $7)",
        tx.session_id, op.request_id, op.step_id, op.turn_id, op.digest, op.attempt, tx.ts,
    )  # fmt: skip
    await tx.conn.execute(
        "UPDATE session SET llm_calls = llm_calls + 1, llm_retries = llm_retries + $2 WHERE id = $1",
        tx.session_id, 1 if op.attempt > 1 else 0,
    )  # fmt: skip
    return None


async def _finish_step(op: Any, tx: PgTx) -> Extra:
    status = await tx.conn.execute(
        "UPDATE step SET status = $3, error = $4, finished_at = $5"
        " WHERE session_id = $1 AND request_id = $2 AND status = 'inflight'",
        tx.session_id, op.request_id, op.status, op.error, tx.ts,
    )  # fmt: skip
    if _rows(status) != 1:
        raise InvalidTransition(f"step {op.request_id!r} is not inflight")
    return None


async def _insert_tool_call(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute(
        "INSERT INTO tool_call (session_id, tool_call_id, turn_id, step_id, idx, name, arguments,"
        " arguments_error, status, approval, idempotent) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        tx.session_id, op.tool_call_id, op.turn_id, op.step_id, op.idx, op.name,
        orjson.dumps(op.arguments).decode(), op.arguments_error, op.status, op.approval, int(op.idempotent),
    )  # fmt: skip
    return None


_TOOL_FIELDS = ops_module.UpdateToolCall.ALLOWED


async def _update_tool_call(op: Any, tx: PgTx) -> Extra:
    if not op.from_ or set(op.from_) & {"done", "failed"}:
        raise ValueError("tool-call updates need non-terminal source statuses")
    sets = ["status = $3"]
    args: list[Any] = [tx.session_id, op.tool_call_id, op.to, list(op.from_)]
    for name, value in op.fields:
        if name not in _TOOL_FIELDS:
            raise ValueError(f"tool_call column {name!r} is not updatable")
        args.append(value)
        sets.append(f"{name} = ${len(args)}")
    status = await tx.conn.execute(
        f"UPDATE tool_call SET {', '.join(sets)} WHERE session_id = $1 AND tool_call_id = $2"
        " AND status = ANY($4::text[])",
        *args,
    )
    if _rows(status) != 1:
        raise InvalidTransition(
            f"tool call {op.tool_call_id!r} is not in {op.from_}; cannot become {op.to!r}"
        )
    return None


async def _add_usage(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute(
        "UPDATE session SET input_tokens = input_tokens + $2, output_tokens = output_tokens + $3 WHERE id = $1",
        tx.session_id, op.input_tokens, op.output_tokens,
    )  # fmt: skip
    return None


async def _record_usage(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute(
        "INSERT INTO usage (session_id, request_id, ts, day, model, input_tokens, cached_input_tokens,"
        " output_tokens, reasoning_tokens, cost_usd) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)"
        " ON CONFLICT (session_id, request_id) DO UPDATE SET ts = EXCLUDED.ts, day = EXCLUDED.day,"
        " model = EXCLUDED.model, input_tokens = EXCLUDED.input_tokens,"
        " cached_input_tokens = EXCLUDED.cached_input_tokens, output_tokens = EXCLUDED.output_tokens,"
        " reasoning_tokens = EXCLUDED.reasoning_tokens, cost_usd = EXCLUDED.cost_usd",
        tx.session_id, op.request_id, tx.ts, time.strftime("%Y-%m-%d"), op.model, op.input_tokens,
        op.cached_input_tokens, op.output_tokens, op.reasoning_tokens, op.cost_usd,
    )  # fmt: skip
    return await _add_usage(op, tx)


async def _set_approval_rules(op: Any, tx: PgTx) -> Extra:
    await tx.conn.execute(
        "UPDATE session SET approval_rules = $2 WHERE id = $1", tx.session_id, orjson.dumps(op.rules).decode()
    )
    return None


async def _release_lease(op: Any, tx: PgTx) -> Extra:
    # the commit checked the fencing token before any op ran (as release_lease's WHERE does)
    await tx.conn.execute(
        "UPDATE session SET lease_owner = NULL, lease_expires_at = NULL, lease_daemon = NULL"
        " WHERE id = $1 AND lease_owner = $2",
        tx.session_id,
        op.owner,
    )
    return None


_BY_NAME: dict[str, Callable[[Any, PgTx], Awaitable[Extra]]] = {
    "SetStatus": _set_status,
    "SetTurn": _set_turn,
    "SetTitle": _set_title,
    "SetCancel": _set_cancel,
    "InsertStep": _insert_step,
    "FinishStep": _finish_step,
    "InsertToolCall": _insert_tool_call,
    "UpdateToolCall": _update_tool_call,
    "AddUsage": _add_usage,
    "RecordUsage": _record_usage,
    "SetApprovalRules": _set_approval_rules,
    "ReleaseLease": _release_lease,
}
_APPLY: dict[type, Callable[[Any, PgTx], Awaitable[Extra]]] = {}
for _name, _fn in _BY_NAME.items():
    _cls = getattr(ops_module, _name, None)
    if _cls is not None:
        _APPLY[cast(type, _cls)] = _fn
try:  # the usage op lives beside the usage queries
    from acagent.store._usage import RecordUsage as _RecordUsage

    _APPLY[_RecordUsage] = _record_usage
except ImportError:  # pragma: no cover - a tree without the usage module
    pass


async def apply_op(op: Any, tx: PgTx) -> Extra:
    """Apply ``op`` inside the transaction; raise to roll back; maybe return one extra event.

    Raises:
        TypeError: not an op this backend knows (a new op class needs a function here).
    """
    fn = _APPLY.get(type(op))
    if fn is None:
        raise TypeError(f"{type(op).__name__} is not a journal op the PostgreSQL journal knows")
    return await fn(op, tx)
