"""The daily usage totals of m011 (benchmarks figure 3 bytes per turn): ``usage_by_day`` replaces the
``usage_day`` index.

A journal written before m011 (usage rows of several days, models, sessions, priced and not,
one of a removed session) migrates to the same daily totals a ``SUM`` over its rows gives; every
later row — through ``RecordUsage`` or inserted by hand — is added by the trigger in its own
statement; and an LLM call's commit writes one leaf of it, no ``usage_day`` index page.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acagent.store import RecordUsage, SqliteJournal
from acagent.store._usage import UsageTotals, local_day
from tests.store._old_journal import journal_upto

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"
# (session num, day, model, input, cached, output, reasoning, cost)
_ROWS = [
    (1, "2026-01-01", "openai:a", 100, 10, 20, 1, 0.25),
    (2, "2026-01-01", "openai:a", 50, 0, 5, 0, None),
    (1, "2026-01-01", "openai:b", 7, 0, 3, 0, 0.5),
    (0, "2026-01-01", "openai:a", 1000, 0, 100, 0, 0.125),  # a removed session's row
    (2, "2026-01-02", "openai:b", 9, 1, 2, 0, None),
    (1, "2026-01-02", "openai:a", 11, 0, 4, 2, 1.0),
]


_SIDS = {0: "ses_gone", 1: "ses_a", 2: "ses_b"}


def _price(model: str, inp: int, cached: int, out: int) -> float | None:
    return None if model == "openai:b" else inp * 0.001 + out * 0.002


def _pre_m011_database(path: Path) -> None:
    """A journal file as acagent wrote it with m001–m010: usage rows in the m008 layout, ``usage_day``."""
    db = journal_upto(path, "m010_tool_call_by_session", TS)
    for num, sid in ((1, "ses_a"), (2, "ses_b")):
        db.execute(
            "INSERT INTO session (id, cwd, status, created_at, updated_at, num) VALUES (?, '/w', 'done', ?, ?, ?)",
            (sid, TS, TS, num),
        )
    for n, (num, day, model, inp, cached, out, reasoning, cost) in enumerate(_ROWS, 1):
        db.execute(
            "INSERT INTO usage (key, session_id, request_id, ts, day, model, input_tokens, cached_input_tokens,"
            " output_tokens, reasoning_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                (num << 32) | n,
                _SIDS[num],
                f"r{n}",
                f"{day}T00:00:0{n}Z",
                day,
                model,
                inp,
                cached,
                out,
                reasoning,
                cost,
            ),
        )
    assert db.execute("SELECT 1 FROM sqlite_schema WHERE name = 'usage_day'").fetchone()
    db.close()


def _summed(rows: list[tuple[object, ...]], day: str) -> UsageTotals:
    """What the old query computed: a SUM over the day's rows, unpriced rows priced late per model."""
    calls = inp = cached = out = reasoning = unpriced = 0
    cost = 0.0
    for _num, d, model, i, c, o, r, usd in rows:
        if d != day:
            continue
        calls, inp, cached, out, reasoning = calls + 1, inp + i, cached + c, out + o, reasoning + r  # type: ignore[operator]
        if usd is None:
            late = _price(model, i, c, o)  # type: ignore[arg-type]
            cost, unpriced = (cost + late, unpriced) if late is not None else (cost, unpriced + 1)
        else:
            cost += usd  # type: ignore[operator]
    return UsageTotals(calls, inp, cached, out, reasoning, cost, unpriced)


async def test_pre_m011_database_keeps_its_daily_totals_and_adds_new_calls(tmp_path: Path) -> None:
    """Migrated totals equal the SUM over the old rows (per model, priced late); a new call and a
    row inserted by hand are added at once; session totals and the report still read the rows."""
    path = tmp_path / "old.db"
    _pre_m011_database(path)
    j = await SqliteJournal.open(path)
    try:
        for day in ("2026-01-01", "2026-01-02", "2026-01-03"):
            got = await j.usage_totals(day=day, price=_price)
            assert got.to_dict() == _summed(_ROWS, day).to_dict()
        assert (await j.usage_totals(day="2026-01-01")).unpriced_calls == 1
        assert (await j.usage_totals(session_id="ses_a", day="2026-01-01")).input_tokens == 107
        today = local_day()
        before = await j.usage_totals(day=today)
        await j.commit_unfenced(
            "ses_a", [], ops=[RecordUsage("r-new", "openai:a", 3, 2, cost_usd=0.5)], reason="test"
        )
        after = await j.usage_totals(day=today)
        assert (after.calls, after.input_tokens, after.output_tokens, after.cost_usd) == (
            before.calls + 1,
            before.input_tokens + 3,
            before.output_tokens + 2,
            before.cost_usd + 0.5,
        )
        by_day = {key: t.calls for key, _title, t in await j.usage_report(by="day")}
        assert by_day == {today: 1, "2026-01-02": 2, "2026-01-01": 4}
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    db.execute(  # a row written by hand (a benchmark seed, a future migration): the trigger adds it too
        "INSERT INTO usage (key, session_id, request_id, ts, day, model, input_tokens, output_tokens)"
        " VALUES (?, 'ses_a', 'r-hand', ?, '2026-01-02', 'openai:b', 5, 1)",
        ((1 << 32) | 99, TS),
    )
    db.commit()
    assert db.execute("SELECT 1 FROM sqlite_schema WHERE name = 'usage_day'").fetchone() is None
    db.close()
    j = await SqliteJournal.open(path)
    try:
        rows = [*_ROWS, (1, "2026-01-02", "openai:b", 5, 0, 1, 0, None)]
        assert (await j.usage_totals(day="2026-01-02", price=_price)).to_dict() == _summed(
            rows, "2026-01-02"
        ).to_dict()
    finally:
        await j.aclose()
