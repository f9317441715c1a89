"""A synchronous, sqlite3-shaped view of one asyncpg connection, for code written against SQLite.

The guarded row operations (:mod:`acagent.store._ops`) call ``ctx.db.execute(sql, params)`` and
read ``rowcount`` synchronously; a few callers above the store still pass a ``fn(db)`` to the
journal's ``_run``. :class:`SyncBridge` lets that code run unchanged on PostgreSQL: the function
runs in a worker thread (``anyio.to_thread``) and every ``execute`` hops back to the event loop
(``anyio.from_thread.run``) to run the statement on the connection of the caller's transaction,
with real row counts. Written here (not a library) because no driver offers a sync facade over an
async connection that is already inside a transaction; the translation is deliberately small:
``?`` placeholders become ``$n``, ``BEGIN IMMEDIATE`` becomes ``BEGIN``, ``SUM(col IS NULL)``
(SQLite sums booleans) becomes a ``CASE``, and ``numeric`` sums come back as int/float — the SQL
of the callers (usage and cap queries, :mod:`acagent.store._usage`) is otherwise portable (the PostgreSQL schema keeps SQLite's column names, ``tool_call.rowid``
included).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from decimal import Decimal
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.to_thread

__all__ = ["SyncBridge", "run_sync_fn", "to_pg_sql"]

T = TypeVar("T")
_COUNT = re.compile(r"^(?:INSERT \d+|UPDATE|DELETE|SELECT|MERGE) ?(\d+)?$")
_SUM_IS_NULL = re.compile(r"SUM\(([\w.]+) IS NULL\)", re.IGNORECASE)


def _value(v: Any) -> Any:
    """PostgreSQL ``SUM(bigint)`` is ``numeric`` (a ``Decimal``); SQLite gives int or float."""
    if isinstance(v, Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    return v


def to_pg_sql(sql: str) -> str:
    """Translate SQLite-style SQL: ``?`` → ``$1, $2, …`` (outside quotes), ``BEGIN IMMEDIATE`` → ``BEGIN``."""
    stripped = sql.strip()
    if stripped.upper().startswith("BEGIN"):
        return "BEGIN"
    sql = _SUM_IS_NULL.sub(r"SUM(CASE WHEN \1 IS NULL THEN 1 ELSE 0 END)", sql)  # SQLite sums booleans
    out: list[str] = []
    n = 0
    quote: str | None = None
    for ch in sql:
        if quote is not None:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "?":
            n += 1
            out.append(f"${n}")
            continue
        out.append(ch)
    return "".join(out)


class _Cursor:
    """What ``sqlite3.Cursor`` offers the callers: ``rowcount``, ``fetchone``, ``fetchall``."""

    def __init__(self, rows: list[tuple[Any, ...]], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[tuple[Any, ...]]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Any:
        return iter(self.fetchall())


class SyncBridge:
    """``execute`` / ``executemany`` on an asyncpg connection, callable from a worker thread."""

    in_transaction = False
    """Read by SQLite-shaped error paths; transactions here are the caller's (asyncpg)."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    async def _exec(self, sql: str, params: Sequence[Any]) -> _Cursor:
        pg = to_pg_sql(sql)
        head = pg.lstrip().split(None, 1)[0].upper() if pg.strip() else ""
        if head in ("SELECT", "WITH", "VALUES") or " RETURNING " in pg.upper():
            records = await self._conn.fetch(pg, *params)
            return _Cursor([tuple(_value(v) for v in r) for r in records], len(records))
        status = await self._conn.execute(pg, *params)
        m = _COUNT.match(status or "")
        return _Cursor([], int(m.group(1)) if m and m.group(1) else -1)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        """Run one statement; returns a cursor with ``rowcount`` and the rows."""
        return anyio.from_thread.run(self._exec, sql, tuple(params))

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> _Cursor:
        """Run one statement per parameter tuple."""
        total = 0
        for params in seq:
            total += max(self.execute(sql, params).rowcount, 0)
        return _Cursor([], total)


async def run_sync_fn(conn: Any, fn: Callable[[SyncBridge], T]) -> T:
    """Run ``fn(bridge)`` in a worker thread against ``conn`` (see module docstring)."""
    bridge = SyncBridge(conn)
    return await anyio.to_thread.run_sync(fn, bridge)
