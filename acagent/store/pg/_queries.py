"""Steps, tool calls and approvals on PostgreSQL (same rows and rules as the SQLite journal)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import fields
from typing import Any

import orjson

from acagent.errors import ApprovalNotFound
from acagent.events import Event
from acagent.store import StepRow, ToolCallRow
from acagent.store._rows import PENDING_APPROVAL, latest_requests

__all__ = ["QueryMixin"]

_STEP_COLS = ", ".join(f.name for f in fields(StepRow))
_TOOL_COLS = ", ".join(f.name for f in fields(ToolCallRow))


class QueryMixin:
    """Step / tool-call / approval methods of :class:`~acagent.store.pg.PostgresJournal`."""

    _fetch: Callable[..., Awaitable[list[Any]]]
    notify_inbox: Callable[..., Awaitable[None]]

    async def step_attempts(self, session_id: str, step_id: str) -> list[StepRow]:
        """Every attempt of one step, ascending attempt."""
        rows = await self._fetch(
            f"SELECT {_STEP_COLS} FROM step WHERE session_id = $1 AND step_id = $2 ORDER BY attempt",
            session_id,
            step_id,
        )
        return [StepRow(*r) for r in rows]

    async def steps(self, session_id: str) -> list[StepRow]:
        """Every step attempt of the session, in start order."""
        rows = await self._fetch(
            f"SELECT {_STEP_COLS} FROM step WHERE session_id = $1 ORDER BY started_at, attempt", session_id
        )
        return [StepRow(*r) for r in rows]

    async def tool_calls(
        self, session_id: str, *, turn_id: str | None = None, open_only: bool = False
    ) -> list[ToolCallRow]:
        """Tool-call rows of the session (or one turn), in insertion order."""
        rows = await self._fetch(
            f"SELECT {_TOOL_COLS} FROM tool_call WHERE session_id = $1 AND ($2::text IS NULL OR turn_id = $2)"
            " AND (NOT $3::bool OR status NOT IN ('done', 'failed')) ORDER BY rowid",
            session_id,
            turn_id,
            open_only,
        )
        return [ToolCallRow(*r) for r in rows]

    async def existing_tool_call_ids(self, session_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` already name a tool call of the session (providers may reuse ids)."""
        rows = await self._fetch(
            "SELECT tool_call_id FROM tool_call WHERE session_id = $1 AND tool_call_id = ANY($2::text[])",
            session_id,
            list(ids),
        )
        return {r[0] for r in rows}

    async def resolve_approval(
        self, session_id: str, tool_call_id: str, decision: str, *, note: str | None = None
    ) -> ToolCallRow:
        """Record the first decision on a pending approval (compare-and-set in one statement).

        Raises:
            ApprovalNotFound: unknown id, or already resolved (``detail`` names the winning
                decision and why).
        """
        changed = await self._fetch(
            f"UPDATE tool_call SET approval = $3, approval_note = $4 WHERE session_id = $1 AND tool_call_id = $2"
            f" AND {PENDING_APPROVAL} RETURNING {_TOOL_COLS}",
            session_id,
            tool_call_id,
            decision,
            note,
        )
        if changed:
            await self.notify_inbox(session_id, "approval", tool_call_id)
            return ToolCallRow(*changed[0])
        rows = await self._fetch(
            f"SELECT {_TOOL_COLS} FROM tool_call WHERE session_id = $1 AND tool_call_id = $2",
            session_id,
            tool_call_id,
        )
        if not rows:
            raise ApprovalNotFound(f"no approval {tool_call_id!r} in session {session_id!r}")
        tc = ToolCallRow(*rows[0])
        raise ApprovalNotFound(
            f"approval {tool_call_id!r} is already resolved ({tc.approval})",
            detail={"decision": tc.approval, "note": tc.approval_note, "status": tc.status},
        )

    async def pending_approvals(self, session_id: str | None = None) -> list[ToolCallRow]:
        """Tool calls waiting for the user's decision (one session's, or every session's), in order.

        The one definition of "pending" (:meth:`Journal.pending_approvals <acagent.store.Journal.pending_approvals>`).
        """
        rows = await self._fetch(
            f"SELECT {_TOOL_COLS} FROM tool_call WHERE {PENDING_APPROVAL}"
            " AND ($1::text IS NULL OR session_id = $1) ORDER BY rowid",
            session_id,
        )
        return [ToolCallRow(*r) for r in rows]

    async def pending_approval_events(self, session_id: str) -> list[Event]:
        """The latest ``approval.requested`` event of each pending approval, ascending seq (F14)."""
        pending = {r.tool_call_id for r in await self.pending_approvals(session_id)}
        if not pending:
            return []
        rows = await self._fetch(
            "SELECT seq, ts, type, payload FROM event WHERE session_id = $1 AND type = 'approval.requested'"
            " ORDER BY seq",
            session_id,
        )
        return latest_requests(
            pending,
            (
                Event(seq=seq, ts=ts, session_id=session_id, type=typ, payload=orjson.loads(payload))
                for seq, ts, typ, payload in rows
            ),
        )
