"""A tool call's arguments read from its own ``tool.call`` event (m019, benchmarks figure 3 bytes per turn).

On real SQLite files: an intent committed with its event stores no arguments (no overflow page,
written neither by the intent nor by its status updates) and every read gives the same JSON
text; an intent without such an event, or whose event says other arguments, stores them as
before; rows written before m019 read back unchanged; a missing event is a JournalError.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import orjson
import pytest

from acagent.errors import JournalError
from acagent.store import InsertToolCall, SqliteJournal, UpdateToolCall
from tests.store._old_journal import journal_upto
from tests.store.test_compact_journal import _wal_btrees, _wal_frames

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"
ARGS = {"path": "a.txt", "text": "".join(f"line {n}: {n * 7919 % 10007}\n" for n in range(60))}  # > a page


def _intent(call_id: str, args: object = ARGS, **kw: object) -> InsertToolCall:
    return InsertToolCall(call_id, "turn_1", "s", 0, "write_file", args, idempotent=False, **kw)  # type: ignore[arg-type]


def _event(call_id: str, args: object = ARGS) -> tuple[str, dict[str, object]]:
    payload = {"turn_id": "turn_1", "tool_call_id": call_id, "name": "write_file", "arguments": args}
    return "tool.call", payload


def _stored(path: Path) -> dict[str, tuple[object, object]]:
    db = sqlite3.connect(path)
    try:
        return {
            r[0]: (r[1], r[2]) for r in db.execute("SELECT tool_call_id, arguments, args_seq FROM tool_call")
        }
    finally:
        db.close()


async def test_arguments_come_from_the_event_and_no_overflow_page_is_written(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    text = orjson.dumps(ARGS).decode()
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        lease = await j.acquire_lease(row.id, "w1", ttl_s=30)
        for n in range(3):  # the first rounds settle the leaves and the file size
            call = f"c{n}"
            ask = {"status": "waiting_user", "approval": "pending"} if n == 2 else {}
            message = ("assistant.message", {"text": "x"})
            start = _wal_frames(path)
            await j.commit(row.id, [message, _event(call)], lease=lease, ops=[_intent(call, **ask)])
            intent = _wal_btrees(path, start)
            if n < 2:
                start = _wal_frames(path)
                done = UpdateToolCall(call, "done", ("dispatched",), (("result_status", "ok"),))
                await j.commit(row.id, [("tool.result", {"tool_call_id": call})], lease=lease, ops=[done])
                update = _wal_btrees(path, start)
        assert intent.count("tool_call") == 1 and update.count("tool_call") == 1  # the leaf, no overflow
        db = sqlite3.connect(path)
        overflow = db.execute(
            "SELECT count(*) FROM dbstat WHERE name = 'tool_call' AND pagetype = 'overflow'"
        )
        assert overflow.fetchone() == (0,)
        db.close()
        assert _stored(path) == {"c0": ("", 3), "c1": ("", 6), "c2": ("", 9)}  # their tool.call events
        assert [c.arguments for c in await j.tool_calls(row.id)] == [text] * 3
        assert [c.arguments for c in await j.tool_calls(row.id, turn_id="turn_1", open_only=True)] == [text]
        assert [c.arguments for c in await j.pending_approvals()] == [text]
        assert [c.arguments for c in await j.pending_approvals(row.id)] == [text]
        assert (await j.resolve_approval(row.id, "c2", "allow")).arguments == text
    finally:
        await j.aclose()


async def test_an_intent_without_its_event_stores_its_arguments(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        await j.commit_unfenced(row.id, [], ops=[_intent("none")], reason="t")  # no events at all
        other = _event("other", {"x": 1})  # an event of another call
        await j.commit_unfenced(row.id, [other], ops=[_intent("c1", {"x": 2})], reason="t")
        differs = _event("c2", {"b": 1, "a": 2})  # the same dict, other key order: other JSON
        await j.commit_unfenced(row.id, [differs], ops=[_intent("c2", {"a": 2, "b": 1})], reason="t")
        stored = _stored(path)
        assert all(seq is None and isinstance(args, bytes | str) and args for args, seq in stored.values())
        got = {c.tool_call_id: c.arguments for c in await j.tool_calls(row.id)}
        assert got == {"none": orjson.dumps(ARGS).decode(), "c1": '{"x":2}', "c2": '{"a":2,"b":1}'}
        await j.commit_unfenced(row.id, [_event("c3")], ops=[_intent("c3")], reason="t")
        db = sqlite3.connect(path)
        seq = db.execute("SELECT args_seq FROM tool_call WHERE tool_call_id = 'c3'").fetchone()[0]
        num = db.execute("SELECT num FROM session").fetchone()[0]
        db.execute("DELETE FROM event_log WHERE key = ?", ((num << 32) | seq,))  # a damaged journal
        db.commit()
        db.close()
        with pytest.raises(JournalError, match="tool call 'c3'"):
            await j.tool_calls(row.id)
    finally:
        await j.aclose()


async def test_rows_from_before_m019_read_back_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = journal_upto(path, "m018_usage_in_step", TS)
    db.close()
    db = sqlite3.connect(path)  # a row of the m018 layout, its arguments in the row
    db.execute(
        "INSERT INTO session (id, cwd, status, created_at, updated_at, num) VALUES ('ses_a', '/w', 'done', ?, ?, 1)",
        (TS, TS),
    )
    db.execute(
        "INSERT INTO tool_call (key, tid, session_id, tool_call_id, turn_id, step_id, idx, name, arguments,"
        " status, approval, idempotent) VALUES (?, 1, 'ses_a', 'c0', 'turn_1', 's', 0, 'bash', '{\"cmd\":\"ls\"}',"
        " 'done', 'none', 0)",
        ((1 << 32) | 1,),
    )
    db.commit()
    db.close()
    j = await SqliteJournal.open(path)
    try:
        await j.commit_unfenced("ses_a", [_event("c1")], ops=[_intent("c1")], reason="t")
        got = [(c.tool_call_id, c.arguments) for c in await j.tool_calls("ses_a")]
        assert got == [("c0", '{"cmd":"ls"}'), ("c1", orjson.dumps(ARGS).decode())]
    finally:
        await j.aclose()
    assert _stored(path)["c0"] == ('{"cmd":"ls"}', None)
