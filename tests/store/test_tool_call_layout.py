"""``tool_call`` keyed by ``session.num << 32 | n`` (m010, benchmarks figure 3 bytes per turn).

A journal written before m010 (migrations m001–m009 applied, tool-call rows in their old
``(session_id, tool_call_id)``-keyed table, two sessions interleaved) migrates; every tool-call
query keeps its answer and order; ids stay unique per session; the pending-approval queries use
the partial index; and a tool call's intent writes no text index page.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acagent.errors import ApprovalNotFound, InvalidTransition, JournalError
from acagent.store import InsertToolCall, SqliteJournal, UpdateToolCall
from acagent.store._manage import remove_session
from acagent.store._row_ids import TOOL_CALLS, keys_sql
from acagent.store._rows import PENDING_APPROVAL, TOOL_COLS
from acagent.store._sqlite import PAGE_SIZE
from tests.store._old_journal import journal_upto

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"
# (session, tool call id, status, approval), in the order they were written
_CALLS = [
    ("ses_a", "call_1", "done", "none"),
    ("ses_b", "call_1", "done", "none"),
    ("ses_a", "call_2", "waiting_user", "pending"),
    ("ses_b", "call_2", "waiting_user", "pending"),
    ("ses_a", "call_3", "running", "none"),
]


def _pre_m010_database(path: Path) -> None:
    """A journal file as acagent wrote it with m001–m009: sessions with ``num``, old tool-call rows."""
    db = journal_upto(path, "m009_step_by_session", TS)
    for num, sid in ((1, "ses_a"), (2, "ses_b")):
        db.execute(
            "INSERT INTO session (id, cwd, status, created_at, updated_at, num) VALUES (?, '/w', 'done', ?, ?, ?)",
            (sid, TS, TS, num),
        )
    for idx, (sid, cid, status, approval) in enumerate(_CALLS):
        db.execute(  # the m001/m006 layout: (session_id, tool_call_id) primary key, rowid order
            "INSERT INTO tool_call (session_id, tool_call_id, turn_id, step_id, idx, name, arguments, status,"
            " approval, idempotent, host) VALUES (?, ?, 'turn_1', 's', ?, 'bash', '{\"n\":1}', ?, ?, 0, 'h')",
            (sid, cid, idx, status, approval),
        )
    assert db.execute("SELECT name FROM sqlite_schema WHERE name = 'sqlite_autoindex_tool_call_1'").fetchone()
    db.close()


def _ids(rows: list[object]) -> list[tuple[str, str]]:
    return [(r.session_id, r.tool_call_id) for r in rows]  # type: ignore[attr-defined]


async def test_pre_m010_database_migrates_and_every_tool_call_query_keeps_its_answer(tmp_path: Path) -> None:
    """Order, pending approvals (one session and all), existing ids, resolve, updates, uniqueness
    per session, appends after the old rows and removal all work on the migrated rows."""
    path = tmp_path / "old.db"
    _pre_m010_database(path)
    j = await SqliteJournal.open(path)
    try:
        a = await j.tool_calls("ses_a")
        assert _ids(a) == [("ses_a", "call_1"), ("ses_a", "call_2"), ("ses_a", "call_3")]
        assert [(c.idx, c.arguments, c.host) for c in a] == [
            (0, '{"n":1}', "h"),
            (2, '{"n":1}', "h"),
            (4, '{"n":1}', "h"),
        ]
        assert _ids(await j.tool_calls("ses_a", open_only=True)) == [("ses_a", "call_2"), ("ses_a", "call_3")]
        assert _ids(await j.pending_approvals()) == [("ses_a", "call_2"), ("ses_b", "call_2")]
        assert _ids(await j.pending_approvals("ses_b")) == [("ses_b", "call_2")]
        assert await j.existing_tool_call_ids("ses_a", ["call_1", "call_3", "zz"]) == {"call_1", "call_3"}
        assert await j.existing_tool_call_ids("ses_b", ["call_3"]) == set()
        assert (await j.resolve_approval("ses_a", "call_2", "allow", note="u")).approval == "allow"
        with pytest.raises(ApprovalNotFound) as err:
            await j.resolve_approval("ses_a", "call_2", "deny")
        assert err.value.detail["decision"] == "allow"
        with pytest.raises(ApprovalNotFound):
            await j.resolve_approval("ses_a", "call_1x", "deny")
        assert _ids(await j.pending_approvals()) == [("ses_b", "call_2")]
        done = UpdateToolCall("call_3", "done", ("running",), (("result_status", "ok"),))
        await j.commit_unfenced("ses_a", [], ops=[done], reason="test")
        with pytest.raises(InvalidTransition):
            await j.commit_unfenced("ses_a", [], ops=[done], reason="test")
        assert (await j.tool_calls("ses_a"))[-1].result_status == "ok"
        # ids are unique per session: a duplicate fails the commit, another session's id does not
        dup = InsertToolCall("call_1", "turn_2", "s", 0, "bash", {}, idempotent=True)
        with pytest.raises(JournalError):
            await j.commit_unfenced("ses_a", [("tool.call", {})], ops=[dup], reason="test")
        await j.commit_unfenced(
            "ses_b",
            [("tool.call", {})],
            ops=[InsertToolCall("call_3", "turn_2", "s", 0, "bash", {}, idempotent=True)],
            reason="test",
        )
        new = InsertToolCall("call_4", "turn_2", "s", 0, "bash", {"x": 1}, idempotent=True)
        await j.commit_unfenced("ses_a", [("tool.call", {})], ops=[new], reason="test")
        assert [c.tool_call_id for c in await j.tool_calls("ses_a")] == [
            "call_1",
            "call_2",
            "call_3",
            "call_4",
        ]
        assert [c.tool_call_id for c in await j.tool_calls("ses_a", turn_id="turn_2")] == ["call_4"]
        assert await remove_session(j, "ses_a", tmp_path / "sessions") is not None
        assert await j.tool_calls("ses_a") == []
        assert [c.tool_call_id for c in await j.tool_calls("ses_b")] == ["call_1", "call_2", "call_3"]
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    indexes = {
        r[0]
        for r in db.execute("SELECT name FROM sqlite_schema WHERE tbl_name = 'tool_call' AND type = 'index'")
    }
    assert indexes == {"tool_call_pending"}  # tool_call_tid until m017 (acagent/store/_row_ids.py)
    db.close()


async def test_pending_and_id_queries_use_the_small_indexes(tmp_path: Path) -> None:
    """The pending-approval queries can use the partial index (its condition is PENDING_APPROVAL:
    else INDEXED BY fails them); an id is found through its hash in the session's newest keys and
    ``tool_call_ids`` (m017), not a scan."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    await j.aclose()
    db = sqlite3.connect(path)
    cols = ", ".join(TOOL_COLS)

    def plan(sql: str) -> str:
        return " ".join(r[-1] for r in db.execute(f"EXPLAIN QUERY PLAN {sql}", (0,) * sql.count("?")))

    assert "tool_call_pending" in plan(
        f"SELECT {cols} FROM tool_call INDEXED BY tool_call_pending WHERE {PENDING_APPROVAL} ORDER BY key"
    )
    assert "tool_call_pending" in plan(
        f"SELECT {cols} FROM tool_call INDEXED BY tool_call_pending WHERE session_id = ? AND {PENDING_APPROVAL} ORDER BY key"
    )
    found = plan(
        f"UPDATE tool_call SET status = 'done' WHERE key IN ({keys_sql(TOOL_CALLS)}) AND session_id = ?"
        " AND tool_call_id = ?"
    )
    assert "SEARCH tool_call USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)" in found
    assert "SEARCH tool_call_ids USING INTEGER PRIMARY KEY (rowid=?)" in found
    assert "SCAN" not in found
    db.close()


def _wal_btrees(path: Path) -> list[str]:
    """The b-trees of every WAL frame, sorted (``dbstat`` names)."""
    data = Path(f"{path}-wal").read_bytes()
    db = sqlite3.connect(path)
    names = {page: name for name, page in db.execute("SELECT name, pageno FROM dbstat")}
    db.close()
    frame = 24 + PAGE_SIZE
    return sorted(
        names.get(int.from_bytes(data[off : off + 4], "big"), "?")
        for off in range(32, len(data) - frame + 1, frame)
    )


async def test_tool_call_intent_writes_its_leaf_and_no_index(tmp_path: Path) -> None:
    """A tool call's intent writes the tool_call leaf (no text key index, and since m017 no hash
    index entry: its id is checked in the session's newest rows); only a call that waits for an
    approval adds a tool_call_pending entry."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        lease = await j.acquire_lease(row.id, "w1", ttl_s=30)
        seen = []
        for n in range(3):  # the first round settles the leaves and the file size
            ask = n == 2
            op = InsertToolCall(
                f"call_{n}",
                "turn_1",
                "s",
                0,
                "bash",
                {},
                idempotent=False,
                status="waiting_user" if ask else "dispatched",
                approval="pending" if ask else "none",
            )
            other = sqlite3.connect(path)
            assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
            other.close()
            await j.commit(row.id, [("tool.call", {"n": n})], lease=lease, ops=[op])
            seen.append(_wal_btrees(path))
        assert seen[1] == sorted(["event_log", "session", "tool_call"])
        assert seen[2] == sorted(["event_log", "session", "tool_call", "tool_call_pending"])
    finally:
        await j.aclose()
