"""Usage rows: one per LLM call, written in the same transaction as its ``usage`` event.

The ``usage`` table (one row per paid LLM attempt, keyed by its ``request_id``) is what caps and ``acagent usage`` read (the ``usage`` events stay the
record of truth; this table is an index of them kept in the same commit, so it never lags).
``day`` is the local calendar day of the commit (``YYYY-MM-DD``), which is what a daily cap
counts. ``cost_usd`` is the price at call time, or NULL when it was not looked up then (no USD
cap and no metrics: pricing costs an import a one-shot run should not pay); readers price NULL
rows late with a ``price`` function, and a model with no known price stays unknown (never 0).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import orjson

from acagent._value import Frozen, init_fields

__all__ = [
    "CapsStore",
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
        """Insert the row inside the commit transaction (``ctx`` is a ``TxContext``)."""
        db: sqlite3.Connection = ctx.db
        from acagent.store._sqlite_ops import next_key  # (it imports this module)

        db.execute(
            "INSERT INTO usage (key, session_id, request_id, ts, day, model, input_tokens, cached_input_tokens,"
            " output_tokens, reasoning_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                next_key(db, "usage", ctx.num),  # the session's key range (m008)
                ctx.session_id,
                self.request_id,
                ctx.ts,
                local_day(ctx.now),
                self.model,
                self.input_tokens,
                self.cached_input_tokens,
                self.output_tokens,
                self.reasoning_tokens,
                self.cost_usd,
            ),
        )
        ctx.add("input_tokens", self.input_tokens)  # in the commit's UPDATE session (TxContext.adds)
        ctx.add("output_tokens", self.output_tokens)


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
            if _is_sqlite(db):
                # one range of event_log's key (m007), filtered by type without decoding a payload
                sql = (
                    "SELECT COUNT(*) FROM session s JOIN event_log e ON e.key > (s.num << 32)"
                    " AND e.key <= (s.num << 32) + 4294967295 WHERE s.id = ? AND e.type = 'turn.started'"
                )
            else:  # PostgreSQL, through its bridge (store/pg/_bridge.py): its own event table
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
