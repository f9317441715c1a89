"""Usage reads: the totals of usage rows (:class:`UsageTotals`), the ``acagent usage`` report,
and the SQLite journal's usage and cap queries (:class:`UsageQueries`, mixed into
:class:`~acagent.store._sqlite.SqliteJournal`; PostgreSQL runs the same code through its bridge).

The rows themselves, their table (m003) and their write (``RecordUsage``) are in
:mod:`acagent.store._usage`, which re-exports these names.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson

from acagent._value import Frozen, init_fields
from acagent.store._frames import count_type

__all__ = ["Pricer", "UsageQueries", "UsageTotals", "query_totals", "query_usage_report"]


@dataclass(init=False, repr=False, eq=False)
class UsageTotals(Frozen):
    """Sums over usage rows: tokens, known cost in USD, and how many calls had no known price."""

    calls: int = 0
    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    unpriced_calls: int = 0

    def __init__(
        self,
        calls: int = 0,
        input_tokens: int = 0,
        cached_input_tokens: int = 0,
        output_tokens: int = 0,
        reasoning_tokens: int = 0,
        cost_usd: float = 0.0,
        unpriced_calls: int = 0,
    ) -> None:
        init_fields(
            self,
            calls=calls,
            input_tokens=input_tokens,
            cached_input_tokens=cached_input_tokens,
            output_tokens=output_tokens,
            reasoning_tokens=reasoning_tokens,
            cost_usd=cost_usd,
            unpriced_calls=unpriced_calls,
        )

    @property
    def total_tokens(self) -> int:
        """``input_tokens + output_tokens``."""
        return self.input_tokens + self.output_tokens

    def to_dict(self) -> dict[str, Any]:
        """JSON shape used by ``acagent usage --json``, ``sessions show`` and the HTTP API.

        ``cost_usd`` is ``None`` when every call was unpriced; ``cost_complete`` is False when any
        call had no known price (the cost shown is then a lower bound).
        """
        return {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "output_tokens": self.output_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "total_tokens": self.total_tokens,
            "cost_usd": None if self.calls and self.unpriced_calls == self.calls else round(self.cost_usd, 6),
            "cost_complete": self.unpriced_calls == 0,
        }


_SUMS = (
    "COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(cached_input_tokens), 0),"
    " COALESCE(SUM(output_tokens), 0), COALESCE(SUM(reasoning_tokens), 0), COALESCE(SUM(cost_usd), 0.0),"
    " COALESCE(SUM(cost_usd IS NULL), 0)"
)
# Tokens of the rows not priced at call time (priced now by the caller's price function).
_UNPRICED_SUMS = (
    "COALESCE(SUM(CASE WHEN cost_usd IS NULL THEN input_tokens END), 0),"
    " COALESCE(SUM(CASE WHEN cost_usd IS NULL THEN cached_input_tokens END), 0),"
    " COALESCE(SUM(CASE WHEN cost_usd IS NULL THEN output_tokens END), 0)"
)


_DAY_COLS = (
    "calls, input_tokens, cached_input_tokens, output_tokens, reasoning_tokens, cost_usd, unpriced_calls,"
    " unpriced_input_tokens, unpriced_cached_input_tokens, unpriced_output_tokens"
)


def _is_sqlite(db: object) -> bool:
    """True for the SQLite journal's connection; False for PostgreSQL's bridge (store/pg/_bridge.py),
    which runs the same query code on its own tables (no ``key`` columns)."""
    return isinstance(db, sqlite3.Connection)


_NUM = "(SELECT num FROM session WHERE id = ?)"

Pricer = Callable[[str, int, int, int], "float | None"]
"""``price(model, input_tokens, cached_input_tokens, output_tokens)`` → USD, or None if unknown."""


def _priced(rows: list[tuple[Any, ...]], price: Pricer | None) -> dict[Any, UsageTotals]:
    """Fold ``(key, model, *sums, *unpriced_sums)`` rows into totals per key, pricing late rows."""
    out: dict[Any, UsageTotals] = {}
    for key, model, calls, inp, cached, outp, reasoning, cost, unpriced, u_in, u_cached, u_out in rows:
        late = price(model, u_in, u_cached, u_out) if (price is not None and unpriced) else None
        if late is not None:
            cost, unpriced = cost + late, 0
        prev = out.get(key, UsageTotals())
        out[key] = UsageTotals(
            prev.calls + calls,
            prev.input_tokens + inp,
            prev.cached_input_tokens + cached,
            prev.output_tokens + outp,
            prev.reasoning_tokens + reasoning,
            prev.cost_usd + cost,
            prev.unpriced_calls + unpriced,
        )
    return out


def query_totals(
    db: sqlite3.Connection,
    *,
    session_id: str | None = None,
    day: str | None = None,
    price: Pricer | None = None,
) -> UsageTotals:
    """Sum the usage rows of one session, of one local day, or of both filters combined.

    Rows journaled without a cost (the price was not looked up at call time) are priced with
    ``price`` when given; rows still without a price count in ``unpriced_calls``.
    """
    where: list[str] = []
    args: list[Any] = []
    if session_id is None and day is not None and _is_sqlite(db):
        # SQLite (m011): the day's totals per model, kept by the usage_by_day_add trigger
        sql = f"SELECT 0, model, {_DAY_COLS} FROM usage_by_day WHERE day = ?"
        return _priced(db.execute(sql, (day,)).fetchall(), price).get(0, UsageTotals())
    if session_id is not None and _is_sqlite(db):
        # SQLite (m008): the session's key range, then its id (a num may be reused). PostgreSQL
        # runs this code through its bridge (store/pg/_bridge.py) on its own usage table.
        where.append(f"key > {_NUM} << 32 AND key < ({_NUM} + 1) << 32 AND session_id = ?")
        args.extend((session_id, session_id, session_id))
    elif session_id is not None:
        where.append("session_id = ?")
        args.append(session_id)
    if day is not None:
        where.append("day = ?")
        args.append(day)
    cond = (" WHERE " + " AND ".join(where)) if where else ""
    sql = f"SELECT 0, model, {_SUMS}, {_UNPRICED_SUMS} FROM usage{cond} GROUP BY model"
    return _priced(db.execute(sql, args).fetchall(), price).get(0, UsageTotals())


_GROUP_KEYS = {"session": "session_id", "model": "model", "day": "day"}


def query_usage_report(
    db: sqlite3.Connection, *, since_day: str | None = None, by: str = "session", price: Pricer | None = None
) -> list[tuple[str, str | None, UsageTotals]]:
    """Group usage rows by ``session``, ``model`` or ``day``, most recently used group first.

    Returns:
        ``(key, title, totals)`` rows; ``title`` is the session title for ``by="session"``.

    Raises:
        ValueError: ``by`` is not one of ``session``, ``model``, ``day``.
    """
    if by not in _GROUP_KEYS:
        raise ValueError(f"--by must be one of session, model, day (got {by!r})")
    key = _GROUP_KEYS[by]
    where = " WHERE day >= ?" if since_day else ""
    args = (since_day,) if since_day else ()
    sql = f"SELECT {key}, model, {_SUMS}, {_UNPRICED_SUMS} FROM usage{where} GROUP BY {key}, model"
    totals = _priced(db.execute(sql, args).fetchall(), price)
    order = db.execute(f"SELECT {key}, MAX(ts) AS t FROM usage{where} GROUP BY {key} ORDER BY t DESC", args)
    keys = [r[0] for r in order.fetchall()]
    titles: dict[str, str | None] = {}
    if by == "session" and keys:
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            titles.update(
                db.execute(f"SELECT id, title FROM session WHERE id IN ({marks})", chunk).fetchall()
            )
    return [(k, titles.get(k), totals[k]) for k in keys]


class UsageQueries:
    """Usage and cap queries of the SQLite journal (mixed into :class:`SqliteJournal`).

    Every method runs one statement batch on the journal's read connection, or one write
    transaction for :meth:`set_session_limits`.
    """

    async def _run(self, fn: Any, *, read: bool = False) -> Any:  # provided by SqliteJournal
        raise NotImplementedError

    async def usage_totals(
        self, *, session_id: str | None = None, day: str | None = None, price: Pricer | None = None
    ) -> UsageTotals:
        """Totals of one session (``session_id``), one local day (``day``, ``YYYY-MM-DD``), or both.

        ``price`` prices rows journaled without a cost (see :func:`query_totals`); it runs on the
        journal's thread, so it may do blocking lookups.
        """
        return await self._run(  # type: ignore[no-any-return]
            lambda db: query_totals(db, session_id=session_id, day=day, price=price), read=True
        )

    async def usage_report(
        self, *, since_day: str | None = None, by: str = "session", price: Pricer | None = None
    ) -> list[tuple[str, str | None, UsageTotals]]:
        """``acagent usage`` rows (see :func:`query_usage_report`).

        Raises:
            ValueError: unknown ``by``.
        """
        return await self._run(  # type: ignore[no-any-return]
            lambda db: query_usage_report(db, since_day=since_day, by=by, price=price), read=True
        )

    async def turns_started(self, session_id: str) -> int:
        """How many turns the session has started (``turn.started`` events)."""

        def q(db: sqlite3.Connection) -> int:
            if _is_sqlite(db):  # one key range, frames' type letters counted in SQL (m016)
                return count_type(db, session_id, "turn.started")
            # PostgreSQL, through its bridge (store/pg/_bridge.py): its own event table
            sql = "SELECT COUNT(*) FROM event WHERE session_id = ? AND type = 'turn.started'"
            row = db.execute(sql, (session_id,)).fetchone()
            return int(row[0])

        return await self._run(q, read=True)  # type: ignore[no-any-return]

    async def session_counts(self) -> dict[str, int]:
        """Sessions per status (every status present, zero when none)."""
        from acagent.store._ops import STATUSES

        def q(db: sqlite3.Connection) -> Any:
            return db.execute("SELECT status, COUNT(*) FROM session GROUP BY status").fetchall()

        counts = dict.fromkeys(STATUSES, 0)
        counts.update({status: int(n) for status, n in await self._run(q, read=True)})
        return counts

    async def session_limits(self, session_id: str) -> dict[str, Any]:
        """The session's own caps (``{}`` when it has none)."""

        def q(db: sqlite3.Connection) -> Any:
            return db.execute("SELECT limits FROM session WHERE id = ?", (session_id,)).fetchone()

        row = await self._run(q, read=True)
        return orjson.loads(row[0]) if row and row[0] else {}

    async def set_session_limits(self, session_id: str, limits: dict[str, Any]) -> None:
        """Store the session's own caps (replacing earlier ones; ``{}`` clears them).

        An unfenced write on purpose: caps are the user's settings, not a worker's state, and may
        be raised while a turn runs elsewhere.
        """

        def tx(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    "UPDATE session SET limits = ? WHERE id = ?",
                    (orjson.dumps(limits).decode() if limits else None, session_id),
                )
                db.execute("COMMIT")
            except BaseException:
                if db.in_transaction:  # SQLite already rolled back on SQLITE_FULL/IOERR; keep that error
                    db.execute("ROLLBACK")
                raise

        await self._run(tx)
