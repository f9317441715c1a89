"""Step request ids and tool call ids stay unique without a hash index per row (m017, benchmarks figure 3).

A session's newest ids (its window, :data:`acagent.store._row_ids.WINDOW` rows) are found in its
own key range, older ones in ``step_ids`` / ``tool_call_ids``, filled a window at a time. On real
SQLite files: duplicates are refused wherever the first one is, in one commit too; every lookup
(finish a step, update a call, ``existing_tool_call_ids``, ``resolve_approval``) finds rows on
both sides; another session's equal id is accepted; removal forgets the ids; a batch move writes
a fraction of a page per row; a journal from before m017 upgrades with every id kept.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acagent.errors import InvalidTransition, JournalError
from acagent.store import FinishStep, InsertStep, InsertToolCall, SqliteJournal, UpdateToolCall
from acagent.store._manage import remove_session
from acagent.store._row_ids import WINDOW
from acagent.store._sqlite_ops import step_rid
from acagent.store._step_row import insert_step_row
from tests.store._old_journal import journal_upto
from tests.store.test_compact_journal import _wal_btrees, _wal_frames

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"
N = 2 * WINDOW + 3  # two windows moved, three rows in the window


def _step(n: int) -> InsertStep:
    return InsertStep(f"s{n}|1", f"s{n}", "turn_1", "d", 1)


def _call(n: int, *, ask: bool = False) -> InsertToolCall:
    status, approval = ("waiting_user", "pending") if ask else ("dispatched", "none")
    return InsertToolCall(
        f"c{n}", "turn_1", "s", 0, "bash", {"n": n}, idempotent=False, status=status, approval=approval
    )


async def _two_sessions(j: SqliteJournal) -> tuple[str, str]:
    a, _ = await j.create_session(cwd="/w", model=None, title=None)
    b, _ = await j.create_session(cwd="/w", model=None, title=None)
    return a.id, b.id


async def _fail(j: SqliteJournal, sid: str, op: object, message: str) -> None:
    before = (await j.get_session(sid)).last_seq
    with pytest.raises(JournalError, match=message):
        await j.commit_unfenced(sid, [("x", {})], ops=[op], reason="test")
    assert (await j.get_session(sid)).last_seq == before  # nothing of the commit was written


async def test_ids_are_unique_and_found_on_both_sides_of_the_window(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        a, b = await _two_sessions(j)
        for n in range(N):  # one per commit, as a turn writes them
            await j.commit_unfenced(a, [("x", {})], ops=[_step(n), _call(n, ask=n in (0, N - 1))], reason="t")
        db = sqlite3.connect(path)
        assert db.execute(
            "SELECT step_ids_to & 0xffffffff, tool_ids_to & 0xffffffff FROM session WHERE id = ?", (a,)
        ).fetchone() == (2 * WINDOW, 2 * WINDOW)
        assert db.execute("SELECT count(*) FROM step_ids").fetchone() == (2 * WINDOW,)
        assert db.execute("SELECT count(*) FROM tool_call_ids").fetchone() == (2 * WINDOW,)
        db.close()
        for n in (0, WINDOW, N - 1):  # moved, moved, in the window
            await _fail(j, a, _step(n), "UNIQUE constraint failed: step_log.rid")
            await _fail(j, a, _call(n), "UNIQUE constraint failed: tool_call.tid")
        two = [_call(N), _call(N)]  # a duplicate within one commit
        with pytest.raises(JournalError, match=r"tool_call\.tid"):
            await j.commit_unfenced(a, [("x", {})], ops=two, reason="t")
        await j.commit_unfenced(b, [("x", {})], ops=[_step(0), _call(0)], reason="t")  # another session's
        for n in (0, N - 1):
            await j.commit_unfenced(a, [], ops=[FinishStep(f"s{n}|1", "done")], reason="t")
            with pytest.raises(InvalidTransition):
                await j.commit_unfenced(a, [], ops=[FinishStep(f"s{n}|1", "done")], reason="t")
            await j.commit_unfenced(
                a, [], ops=[UpdateToolCall(f"c{n}", "failed", ("waiting_user",))], reason="t"
            )
        with pytest.raises(InvalidTransition):
            await j.commit_unfenced(a, [], ops=[FinishStep("s-none|1", "done")], reason="t")
        assert {s.request_id for s in await j.steps(a) if s.status == "done"} == {"s0|1", f"s{N - 1}|1"}
        asked = ["c0", f"c{WINDOW + 1}", f"c{N - 1}", "c-none"]
        assert await j.existing_tool_call_ids(a, asked) == {"c0", f"c{WINDOW + 1}", f"c{N - 1}"}
        assert await j.existing_tool_call_ids(b, asked) == {"c0"}
        assert await j.existing_tool_call_ids("ses_none", asked) == set()
        await j.commit_unfenced(
            b, [], ops=[UpdateToolCall("c0", "waiting_user", ("dispatched",))], reason="t"
        )
        assert (await j.tool_calls(b))[0].status == "waiting_user"
        assert [c.status for c in await j.tool_calls(a)][:1] == ["failed"]
        assert await remove_session(j, a, tmp_path / "sessions") is not None
        db = sqlite3.connect(path)
        assert db.execute("SELECT count(*) FROM step_ids").fetchone() == (0,)  # b's are in its window
        db.close()
        await _fail(j, b, _step(0), "step_log.rid")
    finally:
        await j.aclose()


async def test_moving_a_window_writes_a_fraction_of_a_page_per_row(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The commit that moves WINDOW hashes into step_ids writes far fewer of its pages than rows;
    the commits between write none of them."""
    # the frames are read from the WAL, which a checkpoint would restart mid-test (3 windows of
    # commits are more than CHECKPOINT_PAGES frames)
    monkeypatch.setattr("acagent.store._sqlite_conn.CHECKPOINT_PAGES", 10**9)
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        a, _ = await _two_sessions(j)
        pages = []
        for n in range(3 * WINDOW + 1):
            start = _wal_frames(path)
            await j.commit_unfenced(a, [("x", {})], ops=[_step(n)], reason="t")
            pages.append(_wal_btrees(path, start).count("step_ids"))
        moves = [n for n, p in enumerate(pages) if p]
        assert moves[-2:] == [2 * WINDOW, 3 * WINDOW]  # the inserts that found the window full
        assert max(pages) <= WINDOW // 4  # (a hash index: at least one page per row)
    finally:
        await j.aclose()


async def test_a_journal_from_before_m017_keeps_every_id(tmp_path: Path) -> None:
    """Rows written with the m009/m010 hash indexes move into the id tables; duplicates of them are
    refused, an old inflight step finishes, an old call is resolved; the indexes are gone."""
    path = tmp_path / "old.db"
    db = journal_upto(path, "m015_step_id_by_turn", TS)
    for num, sid in ((1, "ses_a"), (2, "ses_b")):
        db.execute(
            "INSERT INTO session (id, cwd, status, created_at, updated_at, num) VALUES (?, '/w', 'done', ?, ?, ?)",
            (sid, TS, TS, num),
        )
        for n in range(3):
            status = "inflight" if n == 2 else "done"
            insert_step_row(db, num, sid, (f"s{n}|1", f"s{n}", "turn_1", "d", 1, status, None, TS, None))
            db.execute(
                "INSERT INTO tool_call (key, tid, session_id, tool_call_id, turn_id, step_id, idx, name, arguments,"
                " status, approval, idempotent) VALUES (?, ?, ?, ?, 'turn_1', 's', 0, 'bash', '{}', ?, ?, 0)",
                (
                    (num << 32) | (n + 1),
                    step_rid(sid, f"c{n}"),
                    sid,
                    f"c{n}",
                    *(("waiting_user", "pending") if n == 2 else ("done", "none")),
                ),
            )
    db.close()
    j = await SqliteJournal.open(path)
    try:
        for sid in ("ses_a", "ses_b"):
            for n in range(3):
                await _fail(j, sid, _step(n), "step_log.rid")
                await _fail(j, sid, _call(n), "tool_call.tid")
        await j.commit_unfenced("ses_a", [], ops=[FinishStep("s2|1", "done")], reason="t")
        assert (await j.resolve_approval("ses_b", "c2", "allow")).approval == "allow"
        assert await j.existing_tool_call_ids("ses_a", ["c0", "c9"]) == {"c0"}
        await j.commit_unfenced("ses_a", [("x", {})], ops=[_step(3), _call(3)], reason="t")
        assert [s.request_id for s in await j.steps("ses_a")] == ["s0|1", "s1|1", "s2|1", "s3|1"]
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_schema")}
    assert {"step_ids", "tool_call_ids"} <= names and not {"step_log_rid", "tool_call_tid"} & names
    assert db.execute("SELECT count(*) FROM step_ids").fetchone() == (6,)
    assert db.execute(
        "SELECT step_ids_to & 0xffffffff, tool_ids_to & 0xffffffff FROM session ORDER BY num"
    ).fetchall() == [(3, 3), (3, 3)]
    db.close()
