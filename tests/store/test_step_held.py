"""An inflight step held in its session's row, not in ``step_log`` (m020, benchmarks figure 3 bytes per turn).

On real SQLite files: the intent of a step with the runner's ids writes no ``step_log`` page (its
finish inserts the row once, with its usage); the held step reads back through every read path
exactly as a ``step_log`` row of the same step does; a duplicate request id is refused against
it; other ids, or a second inflight step, are rows as before; inflight rows written before m020
finish as before; removing a session removes its held step.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.errors import InvalidTransition, JournalError
from acagent.store import FinishStep, InsertStep, RecordUsage, SqliteJournal
from acagent.store._manage import remove_session
from acagent.store._step_row import insert_step_row
from tests.store._old_journal import journal_upto
from tests.store.test_compact_journal import _wal_btrees, _wal_frames
from tests.store.test_usage_step import _rows

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"
TURN = "turn_0123456789abcdef"


def _ids(sid: str, n: int, attempt: int = 1, turn: str = TURN) -> tuple[str, str, str, str, int]:
    digest = f"{n:02x}" * 32
    step_id = f"{sid}|{turn}|{digest[:16]}"
    return f"{step_id}|{attempt}", step_id, turn, digest, attempt


async def test_an_intent_writes_no_step_log_page_and_its_finish_one(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        lease = await j.acquire_lease(row.id, "w1", ttl_s=30)
        for n in range(1, 5):  # the first rounds settle the leaves and the file size
            ids = _ids(row.id, n)
            start = _wal_frames(path)
            await j.commit(row.id, [("step.started", {})], lease=lease, ops=[InsertStep(*ids)])
            intent = _wal_btrees(path, start)
            start = _wal_frames(path)
            ops = [FinishStep(ids[0], "done"), RecordUsage(ids[0], "m:a", 10, 5)]
            await j.commit(row.id, [("step.finished", {})], lease=lease, ops=ops)
            finish = _wal_btrees(path, start)
        assert "step_log" not in intent and "session" in intent
        assert finish.count("step_log") == 1 and "usage_log" not in finish
        assert _rows(path, "SELECT count(*), count(model) FROM step_log WHERE status = 'done'") == [(4, 4)]
        assert _rows(path, "SELECT step_digest FROM session") == [(None,)]
    finally:
        await j.aclose()


async def _read_all(j: SqliteJournal, sid: str, step_id: str) -> tuple[object, ...]:
    return tuple(await j.steps(sid)), tuple(await j.step_attempts(sid, step_id))


async def test_a_held_step_reads_back_as_its_step_log_row(tmp_path: Path) -> None:
    """The same two commits on a journal that holds the step and one that writes its row (the
    m019 layout, migrated before the step's finish): every read path gives the same rows."""
    got = []
    for name, hold in (("held.db", True), ("row.db", False)):
        path = tmp_path / name
        j = await SqliteJournal.open(path)
        try:
            row, _ = await j.create_session(cwd="/w", model=None, title=None)
            sid = row.id
            first = _ids(sid, 1)
            await j.commit_unfenced(sid, [("x", {})], ops=[InsertStep(*first)], reason="t")
            await j.commit_unfenced(sid, [], ops=[FinishStep(first[0], "failed", "boom")], reason="t")
            second = _ids(sid, 1, attempt=2)
            if not hold:  # the step's row as before m020 wrote it
                await j.commit_unfenced(sid, [], ops=[InsertStep(*_ids(sid, 9))], reason="t")  # holds one
            await j.commit_unfenced(sid, [("x", {})], ops=[InsertStep(*second)], reason="t")
            inflight = await _read_all(j, sid, second[1])
            in_log = _rows(path, "SELECT count(*) FROM step_log WHERE status = 'inflight'")
            assert in_log == [(0 if hold else 1,)]
            steps, attempts = inflight
            mine = [s for s in steps if s.step_id == second[1]]
            assert [(s.attempt, s.status, s.error, s.finished_at) for s in mine] == [
                (1, "failed", "boom", mine[0].finished_at),
                (2, "inflight", None, None),
            ]
            assert list(attempts) == mine
            assert (mine[1].request_id, mine[1].turn_id, mine[1].digest) == (second[0], TURN, second[3])
            await j.commit_unfenced(sid, [], ops=[FinishStep(second[0], "done")], reason="t")
            done = await _read_all(j, sid, second[1])
            got.append((inflight[1], done[1]))
        finally:
            await j.aclose()

    def fields(rows: tuple[object, ...]) -> list[tuple[object, ...]]:  # (the ids name each file's session)
        return [(a.turn_id, a.digest, a.attempt, a.status, a.error, a.finished_at is None) for a in rows]  # type: ignore[attr-defined]

    assert [fields(x) for x in got[0]] == [fields(x) for x in got[1]]


async def test_a_duplicate_request_id_is_refused_against_the_held_step(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        sid = row.id
        ids = _ids(sid, 1)
        await j.commit_unfenced(sid, [], ops=[InsertStep(*ids)], reason="t")
        with pytest.raises(JournalError):
            await j.commit_unfenced(sid, [], ops=[InsertStep(*ids)], reason="t")
        await j.commit_unfenced(sid, [], ops=[FinishStep(ids[0], "done")], reason="t")
        with pytest.raises(JournalError):  # and against its finished row
            await j.commit_unfenced(sid, [], ops=[InsertStep(*ids)], reason="t")
        with pytest.raises(InvalidTransition):
            await j.commit_unfenced(sid, [], ops=[FinishStep(ids[0], "done")], reason="t")
        other = InsertStep("r-free", "s-free", "t", "d", 1)  # not the runner's ids: a row as before
        await j.commit_unfenced(sid, [], ops=[other], reason="t")
        with pytest.raises(JournalError):
            await j.commit_unfenced(sid, [], ops=[other], reason="t")
        assert _rows(path, "SELECT step_digest FROM session") == [(None,)]
        held = _ids(sid, 2)
        await j.commit_unfenced(sid, [], ops=[InsertStep(*held)], reason="t")
        assert await remove_session(j, sid, tmp_path / "sessions") is not None
        assert _rows(path, "SELECT count(*) FROM step") == [(0,)]
    finally:
        await j.aclose()


async def test_inflight_rows_from_before_m020_finish_as_before(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = journal_upto(path, "m019_tool_arguments_by_event", TS)  # autocommit: one statement each
    db.execute(
        "INSERT INTO session (id, cwd, status, created_at, updated_at, num) VALUES ('ses_a', '/w', 'running', ?, ?, 1)",
        (TS, TS),
    )
    old = _ids("ses_a", 1)
    insert_step_row(db, 1, "ses_a", (*old[:4], 1, "inflight", None, TS, None))  # as m019 wrote it
    db.close()
    j = await SqliteJournal.open(path)  # migrates
    try:
        (before,) = await j.step_attempts("ses_a", old[1])
        assert (before.status, before.request_id, before.started_at) == ("inflight", old[0], TS)
        with pytest.raises(JournalError):
            await j.commit_unfenced("ses_a", [], ops=[InsertStep(*old)], reason="t")
        retry = _ids("ses_a", 1, attempt=2)
        ops = [FinishStep(old[0], "failed", "process died"), InsertStep(*retry)]
        await j.commit_unfenced("ses_a", [("llm.retry", {})], ops=ops, reason="t")
        attempts = await j.step_attempts("ses_a", old[1])
        assert [(a.attempt, a.status) for a in attempts] == [(1, "failed"), (2, "inflight")]
        assert _rows(path, "SELECT count(*) FROM step_log") == [(1,)]  # the retry is held
    finally:
        await j.aclose()


def test_the_step_reads_search_the_session_key_range(tmp_path: Path) -> None:
    """``step`` is a ``UNION ALL`` view (not flattened: a key range on it scans every row), so the
    journal's step reads name ``step_row`` and ``step_held`` (``STEPS_OF``)."""
    from acagent.store._sqlite_read import _STEP
    from acagent.store._step_held import STEPS_OF

    db = journal_upto(tmp_path / "a.db", "m020_inflight_step_in_session", TS)
    try:
        for where in ("", " AND step_id = :step"):
            sql = STEPS_OF.format(cols=_STEP, where=where) + " ORDER BY attempt"
            plan = [r[3] for r in db.execute(f"EXPLAIN QUERY PLAN {sql}", {"sid": "a", "step": "b"})]
            assert not [p for p in plan if p.startswith("SCAN")], plan
            assert any("rowid>? AND rowid<?" in p for p in plan), plan
    finally:
        db.close()
