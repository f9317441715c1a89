"""Usage rows: one per LLM call, written in the same transaction as its ``usage`` event.

The ``usage`` rows (one per paid LLM attempt, keyed by its ``request_id``) are what caps and ``acagent usage`` read (the ``usage`` events stay the
record of truth; the rows are an index of them kept in the same commit, so they never lag). On
SQLite ``usage`` is a view since m018: most rows are held by their step's own ``step_log`` row,
the others by ``usage_log`` (:mod:`acagent.store._usage_step`).
``day`` is the local calendar day of the commit (``YYYY-MM-DD``), which is what a daily cap
counts. ``cost_usd`` is the price at call time, or NULL when it was not looked up then (no USD
cap and no metrics: pricing costs an import a one-shot run should not pay); readers price NULL
rows late with a ``price`` function, and a model with no known price stays unknown (never 0).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from acagent._value import Frozen, init_fields
from acagent.store._usage_queries import (
    Pricer,
    UsageQueries,
    UsageTotals,
    query_totals,
    query_usage_report,
)

__all__ = [
    "CapsStore",
    "Pricer",
    "RecordUsage",
    "UsageQueries",
    "UsageTotals",
    "caps_store",
    "local_day",
    "m003_usage",
    "query_totals",
    "query_usage_report",
]


@runtime_checkable
class CapsStore(Protocol):
    """A journal that keeps per-session caps (:class:`UsageQueries`; not every backend does yet)."""

    async def session_limits(self, session_id: str) -> dict[str, Any]:
        """The session's own caps (``{}`` when it has none)."""
        ...

    async def set_session_limits(self, session_id: str, limits: dict[str, Any]) -> None:
        """Store the session's own caps (replacing earlier ones; ``{}`` clears them)."""
        ...


def caps_store(journal: object) -> CapsStore:
    """``journal`` as a :class:`CapsStore`.

    Raises:
        JournalError: the backend keeps no per-session caps (one line for the user, no traceback).
    """
    if isinstance(journal, CapsStore):
        return journal
    from acagent.errors import JournalError

    raise JournalError(f"this journal ({type(journal).__name__}) does not keep per-session caps")


def local_day(ts: float | None = None) -> str:
    """The local calendar day of ``ts`` (seconds since the epoch; default now) as ``YYYY-MM-DD``."""
    return time.strftime("%Y-%m-%d", time.localtime(time.time() if ts is None else ts))


def m003_usage(db: sqlite3.Connection) -> None:
    """Per-call usage rows (tokens, cost, model, local day) and per-session caps."""
    db.execute(
        """CREATE TABLE usage (
            session_id TEXT NOT NULL,
            request_id TEXT NOT NULL,
            ts TEXT NOT NULL,
            day TEXT NOT NULL,
            model TEXT NOT NULL,
            input_tokens INTEGER NOT NULL,
            cached_input_tokens INTEGER NOT NULL DEFAULT 0,
            output_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER NOT NULL DEFAULT 0,
            cost_usd REAL,
            PRIMARY KEY (session_id, request_id)
        )"""
    )
    db.execute("CREATE INDEX usage_day ON usage(day)")
    # Backfill from the usage events journaled before this table existed (cost unknown: the
    # price at the time was not recorded; day = the UTC day of the event).
    db.execute(
        """INSERT OR IGNORE INTO usage (session_id, request_id, ts, day, model, input_tokens, output_tokens)
           SELECT e.session_id, 'seq:' || e.seq, e.ts, substr(e.ts, 1, 10), COALESCE(s.model, ''),
                  COALESCE(json_extract(e.payload, '$.input_tokens'), 0),
                  COALESCE(json_extract(e.payload, '$.output_tokens'), 0)
           FROM event e LEFT JOIN session s ON s.id = e.session_id WHERE e.type = 'usage'"""
    )
    # limits: JSON of the session's own caps ({"session_usd": 2.0, ...}), NULL = config defaults.
    db.execute("ALTER TABLE session ADD COLUMN limits TEXT")


@dataclass(init=False, repr=False, eq=False)
class RecordUsage(Frozen):
    """Journal op: record one LLM call's usage row (and add its tokens to the session totals).

    Keyed by the step's ``request_id`` (one row per paid attempt), committed with the step's
    ``usage`` event and its ``FinishStep`` (which fails unless the step is inflight: a request
    id is recorded once; the table keeps no index of it, see ``m008_usage_by_session``).
    """

    request_id: str
    model: str
    input_tokens: int
    output_tokens: int
    cached_input_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float | None = None

    def __init__(
        self,
        request_id: str,
        model: str,
        input_tokens: int,
        output_tokens: int,
        cached_input_tokens: int = 0,
        reasoning_tokens: int = 0,
        cost_usd: float | None = None,
    ) -> None:
        init_fields(
            self,
            request_id=request_id,
            model=model,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cached_input_tokens=cached_input_tokens,
            reasoning_tokens=reasoning_tokens,
            cost_usd=cost_usd,
        )

    def apply(self, ctx: Any) -> None:
        """Record the usage inside the commit transaction (``ctx`` is a ``TxContext``): in the
        step's own row when the step finished in this commit (m018), else a ``usage_log`` row."""
        from acagent.store._usage_step import record_usage  # (it imports modules that import this one)

        values = {
            "request_id": self.request_id,
            "model": self.model,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost_usd": self.cost_usd,
        }
        record_usage(ctx.db, ctx.num, ctx.session_id, ctx.ts, local_day(ctx.now), values)
        ctx.add("input_tokens", self.input_tokens)  # in the commit's UPDATE session (TxContext.adds)
        ctx.add("output_tokens", self.output_tokens)
