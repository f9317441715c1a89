"""An LLM call's usage in its step's row (m018, benchmarks figure 3 bytes per turn).

On real SQLite files: a ``RecordUsage`` in its step's finishing commit sets the step row (no
``usage_log`` row; the ``usage`` view reads it with the old columns); every other one is a
``usage_log`` row as before; the daily totals get each call once; a local day other than the
commit's UTC day is kept; removing a session keeps its usage; a journal from before m018 keeps
its rows.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acagent.store import FinishStep, InsertStep, RecordUsage, SqliteJournal
from acagent.store import _usage as usage_module
from acagent.store._manage import remove_session
from acagent.store._usage import local_day
from tests.store._old_journal import journal_upto

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"


def _rows(path: Path, sql: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


async def test_usage_rides_in_the_step_row_and_reads_back_as_before(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        sid = row.id

        async def step(n: int, *ops: object) -> None:
            await j.commit_unfenced(
                sid, [("x", {})], ops=[InsertStep(f"r{n}", f"s{n}", "t", "d", 1)], reason="t"
            )
            if ops:
                await j.commit_unfenced(sid, [("usage", {})], ops=list(ops), reason="t")

        await step(1, FinishStep("r1", "done"), RecordUsage("r1", "m:a", 10, 5, 2, 1, cost_usd=0.25))
        await step(2, RecordUsage("r2", "m:a", 1, 1), FinishStep("r2", "done"))  # before its finish
        await step(3, FinishStep("r3", "failed", "x"))
        await j.commit_unfenced(sid, [], ops=[RecordUsage("r3", "m:b", 2, 2)], reason="t")  # finished earlier
        await j.commit_unfenced(sid, [], ops=[RecordUsage("r1", "m:a", 3, 3)], reason="t")  # a second record
        await j.commit_unfenced(sid, [], ops=[RecordUsage("no-step", "m:b", 4, 4)], reason="t")
        in_steps = _rows(path, "SELECT model, input_tokens, day FROM step_log WHERE model IS NOT NULL")
        assert in_steps == [("m:a", 10, None)]  # the local day is the UTC day here: not stored
        logged = _rows(path, "SELECT request_id, model, input_tokens FROM usage_log ORDER BY key")
        assert logged == [("r2", "m:a", 1), ("r3", "m:b", 2), ("r1", "m:a", 3), ("no-step", "m:b", 4)]
        (first,) = _rows(path, "SELECT * FROM usage WHERE request_id = 'r1' AND input_tokens = 10")
        (finished,) = [s.finished_at for s in await j.steps(sid) if s.request_id == "r1"]
        assert first[1:] == (sid, "r1", finished, finished[:10], "m:a", 10, 2, 5, 1, 0.25)
        totals = await j.usage_totals(session_id=sid)
        assert (totals.calls, totals.input_tokens, totals.output_tokens, totals.unpriced_calls) == (
            5,
            20,
            15,
            4,
        )
        day = await j.usage_totals(day=local_day())
        assert (day.calls, day.input_tokens, day.cached_input_tokens, day.reasoning_tokens) == (5, 20, 2, 1)
        assert day.cost_usd == 0.25
        by_model = {k: t.calls for k, _t, t in await j.usage_report(by="model")}
        assert by_model == {"m:a": 3, "m:b": 2}
        assert await remove_session(j, sid, tmp_path / "sessions") is not None
        assert {k: t.calls for k, _t, t in await j.usage_report(by="model")} == by_model  # kept
        assert (await j.usage_totals(day=local_day())).calls == 5  # and counted once
        assert _rows(path, "SELECT count(*) FROM usage_log") == [(5,)]
    finally:
        await j.aclose()


async def test_a_local_day_other_than_the_utc_day_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(usage_module, "local_day", lambda ts=None: "1999-12-31")
    j = await SqliteJournal.open(tmp_path / "a.db")
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        await j.commit_unfenced(row.id, [], ops=[InsertStep("r1", "s1", "t", "d", 1)], reason="t")
        ops = [FinishStep("r1", "done"), RecordUsage("r1", "m", 10, 5)]
        await j.commit_unfenced(row.id, [("usage", {})], ops=ops, reason="t")
        assert (await j.usage_totals(day="1999-12-31")).calls == 1
        assert _rows(tmp_path / "a.db", "SELECT day FROM usage") == [("1999-12-31",)]
        assert _rows(tmp_path / "a.db", "SELECT count(*) FROM usage_log") == [(0,)]
    finally:
        await j.aclose()


async def test_a_journal_from_before_m018_keeps_its_usage_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = journal_upto(path, "m017_id_windows", TS)
    db.execute(
        "INSERT INTO session (id, cwd, status, created_at, updated_at, num) VALUES ('ses_a', '/w', 'done', ?, ?, 1)",
        (TS, TS),
    )
    db.execute(  # the m008 table, its m011 trigger adds the day
        "INSERT INTO usage (key, session_id, request_id, ts, day, model, input_tokens, output_tokens, cost_usd)"
        " VALUES (?, 'ses_a', 'r0', ?, '2026-01-02', 'm', 7, 3, 0.5)",
        ((1 << 32) | 1, TS),
    )
    db.close()
    j = await SqliteJournal.open(path)
    try:
        day = await j.usage_totals(day="2026-01-02")
        assert (day.calls, day.input_tokens, day.cost_usd) == (1, 7, 0.5)
        assert (await j.usage_totals(session_id="ses_a")).input_tokens == 7
        await j.commit_unfenced("ses_a", [], ops=[InsertStep("r1", "s1", "t", "d", 1)], reason="t")
        ops = [FinishStep("r1", "done"), RecordUsage("r1", "m", 10, 5)]
        await j.commit_unfenced("ses_a", [("usage", {})], ops=ops, reason="t")
        assert (await j.usage_totals(session_id="ses_a")).calls == 2
    finally:
        await j.aclose()
    assert _rows(path, "SELECT request_id FROM usage_log") == [("r0",)]
    assert _rows(path, "SELECT request_id FROM usage ORDER BY ts") == [("r0",), ("r1",)]
