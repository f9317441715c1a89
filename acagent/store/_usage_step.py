"""An LLM call's usage in its own ``step_log`` row (m018, benchmarks figure 3 bytes per turn).

``RecordUsage`` rides in the commit of its step's ``FinishStep``, which rewrites the step's row
(the last leaf of ``step_log``) anyway; a ``usage`` row of its own (~110 bytes: session id,
request id and time as text) cost that table's last leaf, and a new leaf and its parent every
few calls (3.2 WAL frames of 512 bytes per benchmark turn). Since m018 the step row holds its
usage (``model`` NOT NULL marks it; ``day`` NULL when the local day is the commit's UTC day):
:func:`record_usage` sets it when the step with that request id finished in this very commit
(its ``finished_at`` is the usage row's ``ts``) and has none yet; any other ``RecordUsage`` — no
such step, a step finished earlier, a second record for one request id — inserts a
``usage_log`` row as before (the m008 table, renamed). ``usage`` is a view of both with the old
columns, so every reader (:mod:`acagent.store._usage_queries`, people with ``sqlite3``) and a
row inserted by hand (its ``INSTEAD OF`` trigger) work as before; ``usage_by_day`` gets each call
once either way (the trigger of ``usage_log``'s inserts is replaced by that one and by
:func:`record_usage`'s own statement). Usage is never deleted: removing a session moves the
usage of its steps into ``usage_log`` first (:func:`keep_usage`).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from acagent.store._row_ids import STEPS, keys_sql
from acagent.store._step_row import pack_ts
from acagent.store._usage_day import day_add

__all__ = ["create_usage_view", "keep_usage", "m018_usage_in_step", "record_usage"]

_COLS = (
    "key, session_id, request_id, ts, day, model, input_tokens, cached_input_tokens, output_tokens,"
    " reasoning_tokens, cost_usd"
)
_TOKENS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_tokens", "cost_usd")
_FROM_STEPS = (  # (since m020 ``step_row``, not ``step``: :func:`create_usage_view`)
    "SELECT v.key, v.session_id, v.request_id, v.finished_at AS ts,"
    " COALESCE(t.day, substr(v.finished_at, 1, 10)) AS day,"
    " t.model, t.input_tokens, t.cached_input_tokens, t.output_tokens, t.reasoning_tokens, t.cost_usd"
    " FROM step_log t JOIN step v ON v.key = t.key WHERE t.model IS NOT NULL"
)
"""The usage rows the steps hold, in ``usage``'s columns (``ts`` is the step's ``finished_at``)."""


def _from_steps(steps: str) -> str:
    """:data:`_FROM_STEPS` reading the step view ``steps``."""
    return _FROM_STEPS.replace(" JOIN step v ", f" JOIN {steps} v ")


_DAY_ADD = day_add(
    ":day",
    ":model",
    ":input_tokens",
    ":cached_input_tokens",
    ":output_tokens",
    ":reasoning_tokens",
    ":cost_usd",
)
_SET = (
    "UPDATE step_log SET model = :model, input_tokens = :input_tokens, cached_input_tokens = :cached_input_tokens,"
    " output_tokens = :output_tokens, reasoning_tokens = :reasoning_tokens, cost_usd = :cost_usd, day = :stored_day"
    " WHERE key = :key AND model IS NULL AND finished_at IS :finished"
)
_INSERT = f"INSERT INTO usage_log ({_COLS}) VALUES (:key, :session_id, :request_id, :ts, :day, :model, :input_tokens, :cached_input_tokens, :output_tokens, :reasoning_tokens, :cost_usd)"


def record_usage(
    db: sqlite3.Connection, num: int, session_id: str, ts: str, day: str, values: dict[str, Any]
) -> None:
    """Record one call's usage inside the commit (module docstring).

    Args:
        num: the session's ``num``; ``ts``: the commit's time; ``day``: its local day.
        values: ``request_id``, ``model`` and the token and cost columns of ``usage``.
    """
    from acagent.store._sqlite_ops import next_key, step_rid  # (it imports this module's importers)

    rid = step_rid(session_id, values["request_id"])
    found = db.execute(
        f"SELECT key FROM step_row WHERE key IN ({keys_sql(STEPS)}) AND session_id = ? AND request_id = ?",
        (num, (num + 1) << 32, rid, rid, session_id, values["request_id"]),
    ).fetchone()
    row = {**values, "day": day, "session_id": session_id, "ts": ts}
    if found is not None:
        stored_day = None if day == ts[:10] else day
        cur = db.execute(_SET, {**row, "key": found[0], "stored_day": stored_day, "finished": pack_ts(ts)})
        if cur.rowcount == 1:
            db.execute(_DAY_ADD, row)
            return
    db.execute(_INSERT, {**row, "key": next_key(db, "usage_log", num)})
    db.execute(_DAY_ADD, row)


def keep_usage(db: sqlite3.Connection, num: int) -> None:
    """Move session ``num``'s step usage into ``usage_log`` (before its steps are deleted), after its
    own ``usage_log`` rows; ``usage_by_day`` has it already."""
    from acagent.store._sqlite_ops import next_key

    lo, hi = num << 32, (num + 1) << 32
    first = next_key(db, "usage_log", num)
    db.execute(
        f"INSERT INTO usage_log ({_COLS}) SELECT ? + ROW_NUMBER() OVER (ORDER BY key) - 1, {_COLS.split(', ', 1)[1]}"
        f" FROM ({_from_steps('step_row')}) WHERE key > ? AND key < ?",
        (first, lo, hi),
    )


def m018_usage_in_step(db: sqlite3.Connection) -> None:
    """The usage columns of ``step_log``; ``usage`` becomes ``usage_log`` and a view of both."""
    for column, kind in (
        ("model", "TEXT"),
        *((c, "INTEGER") for c in _TOKENS[:4]),
        ("cost_usd", "REAL"),
        ("day", "TEXT"),
    ):
        db.execute(f"ALTER TABLE step_log ADD COLUMN {column} {kind}")  # NULL: no usage in this row
    db.execute("DROP TRIGGER usage_by_day_add")  # (m011) replaced by usage_add and record_usage
    db.execute("ALTER TABLE usage RENAME TO usage_log")
    create_usage_view(db, steps="step")


def create_usage_view(db: sqlite3.Connection, *, steps: str) -> None:
    """The ``usage`` view of ``usage_log`` and the steps' usage (read through the view ``steps``:
    ``step`` in m018, ``step_row`` since m020), and its ``INSTEAD OF INSERT`` trigger."""
    db.execute(f"CREATE VIEW usage ({_COLS}) AS SELECT {_COLS} FROM usage_log UNION ALL {_from_steps(steps)}")
    new = {c: f"NEW.{c}" for c in _COLS.split(", ")}
    new.update(cached_input_tokens="COALESCE(NEW.cached_input_tokens, 0)")  # the table's defaults
    new.update(reasoning_tokens="COALESCE(NEW.reasoning_tokens, 0)")
    added = day_add(*(new[c] for c in ("day", "model", *_TOKENS)))
    db.execute(
        f"CREATE TRIGGER usage_add INSTEAD OF INSERT ON usage BEGIN INSERT INTO usage_log ({_COLS})"
        f" VALUES ({', '.join(new.values())}); {added}; END"
    )
