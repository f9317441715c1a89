"""The daily usage totals of the SQLite journal (m011): one row per local day and model, kept by a trigger."""

from __future__ import annotations

import sqlite3

from acagent.store._usage_queries import _DAY_COLS, _SUMS, _UNPRICED_SUMS

__all__ = ["day_add", "m011_usage_by_day"]


def m011_usage_by_day(db: sqlite3.Connection) -> None:
    """The daily totals as one row per local day and model, kept by a trigger (replaces ``usage_day``).

    The daily cap sums one day of every session; the ``usage_day`` index on ``usage(day)`` made
    that a range read, and cost one more b-tree per LLM call whose 20-byte entries, appended at
    its right edge, rebalanced a 512-byte leaf across three siblings every few calls (~3.3 WAL
    frames per benchmark turn, figure 3). ``usage_by_day`` holds the same sums the query computed
    (:data:`_SUMS`, :data:`_UNPRICED_SUMS`) per ``(day, model)``; the ``AFTER INSERT`` trigger adds
    every new ``usage`` row in the same statement (whoever inserts it), so the day's totals never
    lag and a call rewrites one small leaf. ``usage`` rows are never updated or deleted (a removed
    session's rows stay: caps count what was spent); only the float sum of ``cost_usd`` may differ
    from a fresh ``SUM`` in its last bits (added in commit order instead of index order).
    """
    db.execute("DROP INDEX IF EXISTS usage_day")
    db.execute(
        """CREATE TABLE usage_by_day (
            day   TEXT NOT NULL,                    -- local calendar day, YYYY-MM-DD (usage.day)
            model TEXT NOT NULL,                    -- usage.model
            calls INTEGER NOT NULL,                 -- usage rows of that day and model
            input_tokens INTEGER NOT NULL,          -- their sums, tokens
            cached_input_tokens INTEGER NOT NULL,
            output_tokens INTEGER NOT NULL,
            reasoning_tokens INTEGER NOT NULL,
            cost_usd REAL NOT NULL,                 -- sum of the known costs, USD
            unpriced_calls INTEGER NOT NULL,        -- rows without a cost, and their tokens:
            unpriced_input_tokens INTEGER NOT NULL, -- priced late by the reader (_priced)
            unpriced_cached_input_tokens INTEGER NOT NULL,
            unpriced_output_tokens INTEGER NOT NULL,
            PRIMARY KEY (day, model)
        ) WITHOUT ROWID"""
    )
    db.execute(
        f"INSERT INTO usage_by_day (day, model, {_DAY_COLS}) SELECT day, model, {_SUMS}, {_UNPRICED_SUMS}"
        " FROM usage GROUP BY day, model"
    )
    new = [f"NEW.{c}" for c in ("day", "model", "input_tokens", "cached_input_tokens", "output_tokens")]
    new += ["NEW.reasoning_tokens", "NEW.cost_usd"]
    db.execute(f"CREATE TRIGGER usage_by_day_add AFTER INSERT ON usage BEGIN {day_add(*new)}; END")


def day_add(day: str, model: str, inp: str, cached: str, out: str, reasoning: str, cost: str) -> str:
    """The statement that adds one usage row to its ``usage_by_day`` row, from SQL expressions of
    the row's values (``NEW.day`` … in a trigger, ``?`` for parameters: ``m018_usage_in_step``)."""
    unpriced = f"{cost} IS NULL"
    return f"""INSERT INTO usage_by_day (day, model, {_DAY_COLS}) VALUES ({day}, {model}, 1, {inp}, {cached},
                {out}, {reasoning}, COALESCE({cost}, 0.0), {unpriced}, IIF({unpriced}, {inp}, 0),
                IIF({unpriced}, {cached}, 0), IIF({unpriced}, {out}, 0))
            ON CONFLICT (day, model) DO UPDATE SET calls = calls + 1,
                input_tokens = input_tokens + excluded.input_tokens,
                cached_input_tokens = cached_input_tokens + excluded.cached_input_tokens,
                output_tokens = output_tokens + excluded.output_tokens,
                reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
                cost_usd = cost_usd + excluded.cost_usd,
                unpriced_calls = unpriced_calls + excluded.unpriced_calls,
                unpriced_input_tokens = unpriced_input_tokens + excluded.unpriced_input_tokens,
                unpriced_cached_input_tokens = unpriced_cached_input_tokens + excluded.unpriced_cached_input_tokens,
                unpriced_output_tokens = unpriced_output_tokens + excluded.unpriced_output_tokens"""
