"""SqliteJournal's short calls on the event loop's thread (``acagent/store/_sqlite_conn.py``):
they never block the loop on another connection's lock, never overlap a job of the write
connection's thread, surface errors as before, and keep the WAL checkpointed."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.errors import JournalError, SessionNotFound, StaleLease
from acagent.store import InsertStep, InsertToolCall, SqliteJournal
from acagent.store._frames import stored_events
from acagent.store._sqlite_commit import INLINE_MAX_CHARS
from acagent.store._sqlite_conn import CHECKPOINT_PAGES

pytestmark = pytest.mark.anyio

_HOLD = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("LOCKED", flush=True)
sys.stdin.read()
db.execute("COMMIT")
"""


def _hold_write_lock(db: Path) -> subprocess.Popen[str]:
    """Another process holding the journal's write lock (``BEGIN IMMEDIATE``) until its stdin is
    closed (a fixed hold could end before a loaded machine made the call that must meet it)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "LOCKED"
    return proc


async def _session(j: SqliteJournal) -> tuple[str, Any]:
    row, _ = await j.create_session(cwd="/w", model=None, title=None)
    return row.id, await j.acquire_lease(row.id, "w1", ttl_s=60)


async def test_a_commit_runs_on_the_loop_thread_without_a_hop(tmp_path: Path) -> None:
    """durability normal: a commit (and the write connection's short reads) send no job to the
    write connection's thread; durability full: every write does (its fsync stays off the loop)."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    sid, lease = await _session(j)
    sent = j._sent
    out = await j.commit(sid, [("user.message", {"text": "hi"})], lease=lease)
    await j.commit(sid, [], lease=lease, ops=[InsertStep("r|1", "s", "t1", "d", 1)])
    assert [e.seq for e in out] == [2]
    assert [s.request_id for s in await j.step_attempts(sid, "s")] == ["r|1"]  # sees the commit at once
    assert j._sent == sent
    await j.aclose()
    f = await SqliteJournal.open(tmp_path / "f.db", durability="full")
    sid, lease = await _session(f)
    sent = f._sent
    await f.commit(sid, [("user.message", {"text": "hi"})], lease=lease)
    assert f._sent == sent + 1
    await f.aclose()


async def test_a_commit_with_a_big_payload_is_written_on_the_thread(tmp_path: Path) -> None:
    """A long tool output (nested in the payload or not) is compressed and written on the write
    connection's thread, where zlib and SQLite let the loop run; a small commit stays inline."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    sid, lease = await _session(j)
    big = "x" * (INLINE_MAX_CHARS + 1)
    for payload in ({"content": big}, {"message": {"parts": [{"kind": "text", "text": big}]}}):
        sent = j._sent
        out = await j.commit(sid, [("tool.result", payload)], lease=lease)
        assert j._sent == sent + 1
        assert (await j.events(sid, out[0].seq - 1))[0].payload == payload
    sent = j._sent
    await j.commit(sid, [("tool.result", {"content": "x" * (INLINE_MAX_CHARS // 2 + 1)})] * 2, lease=lease)
    assert j._sent == sent + 1  # the commit's payloads add up
    sent = j._sent
    await j.commit(sid, [("tool.result", {"content": "small"})], lease=lease)
    assert j._sent == sent
    await j.aclose()


@pytest.mark.parametrize(
    "call", ["commit", "commit with ops", "acquire_lease", "create_session", "set_cancel"]
)
async def test_a_lock_held_by_another_process_never_blocks_the_loop(tmp_path: Path, call: str) -> None:
    """Another process holds the write lock: the short call fails over to the write
    connection's thread at once (busy timeout 0 inline) and waits there, so the loop keeps
    running; the call then succeeds."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    sid, lease = await _session(j)
    calls = {
        "commit": lambda: j.commit(sid, [("user.message", {"text": "x"})], lease=lease),
        "commit with ops": lambda: j.commit(
            sid, [("step.started", {})], lease=lease, ops=[InsertStep("r|1", "s", "t1", "d", 1)]
        ),
        "acquire_lease": lambda: j.acquire_lease(sid, "w1", ttl_s=60),
        "create_session": lambda: j.create_session(cwd="/w", model=None, title=None),
        "set_cancel": lambda: j.set_cancel(sid, True),
    }
    ticks = 0
    done = anyio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await anyio.sleep(0.01)
            ticks += 1

    proc = _hold_write_lock(tmp_path / "a.db")
    sent = j._sent

    async def release_once_waiting() -> None:
        # the call went to the write connection's thread and the loop ran on while it waits there
        while j._sent == sent or ticks == 0:
            await anyio.sleep(0.01)
        assert proc.stdin is not None
        proc.stdin.close()

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        tg.start_soon(release_once_waiting)
        await anyio.sleep(0)
        ticks = 0
        await calls[call]()
        seen = ticks
        done.set()
    assert proc.wait() == 0
    assert j._sent == sent + 1  # it found the lock taken and went to the write connection's thread
    assert seen > 0  # the loop ran while the call waited there
    if call == "commit":
        assert [e.seq for e in await j.events(sid)] == [1, 2]
    await j.aclose()


async def test_a_short_call_never_overlaps_a_job_of_the_write_thread(tmp_path: Path) -> None:
    """A job of the write connection's thread holds a transaction open and its caller is
    cancelled: commits made meanwhile queue behind it (an inline ``BEGIN`` on the same
    connection would fail inside its transaction) and then run inline again."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    sid, lease = await _session(j)

    def slow(db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        time.sleep(0.5)
        db.execute("UPDATE session SET title = 'slow' WHERE id = ?", (sid,))
        db.execute("COMMIT")

    with anyio.move_on_after(0.1):
        await j._run(slow)  # cancelled while the thread still runs it
    out = await j.commit(sid, [("user.message", {"text": "after"})], lease=lease)
    assert [e.seq for e in out] == [2]
    assert (await j.get_session(sid)).title == "slow"
    sent = j._sent
    await j.commit(sid, [("user.message", {"text": "inline"})], lease=lease)
    assert j._sent == sent
    await j.aclose()


async def test_inline_errors_are_the_same_as_on_the_thread(tmp_path: Path) -> None:
    """Stale token, unknown session and a full disk raise what they always did, write nothing,
    and leave the connection usable (no transaction left open)."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    sid, old = await _session(j)
    await j.release_lease(sid, old)
    new = await j.acquire_lease(sid, "w2", ttl_s=60)
    with pytest.raises(StaleLease, match="superseded"):
        await j.commit(sid, [("user.message", {"text": "zombie"})], lease=old)
    with pytest.raises(SessionNotFound):
        await j.commit("ses_nope", [("user.message", {"text": "x"})], lease=new)
    with pytest.raises(SessionNotFound):
        await j.commit_unfenced("ses_nope", [("user.message", {"text": "x"})], reason="test")
    pages = await j._run(lambda db: db.execute("PRAGMA page_count").fetchone()[0])
    await j._run(lambda db: db.execute(f"PRAGMA max_page_count = {pages}"))
    big = {"text": "".join(f"{i:x}" for i in range(20000))}  # incompressible enough to need new pages
    with pytest.raises(JournalError, match="disk is full"):
        await j.commit(sid, [("user.message", big)], lease=new)
    with pytest.raises(JournalError, match="disk is full"):
        await j.commit(sid, [("step.started", big)], lease=new, ops=[InsertStep("r|1", "s", "t", "d", 1)])
    assert (await j.get_session(sid)).last_seq == 1
    await j._run(lambda db: db.execute("PRAGMA max_page_count = 1073741823"))
    out = await j.commit(sid, [("user.message", {"text": "ok"})], lease=new)
    assert [e.seq for e in out] == [2]
    assert [e.payload for e in await j.events(sid, 1)] == [{"text": "ok"}]
    await j.aclose()


async def test_the_write_readers_see_an_inline_commit(tmp_path: Path) -> None:
    """``tool_calls`` and ``existing_tool_call_ids`` (the write connection's readers) see the
    tool call an inline commit just wrote; the read connection sees it as well."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    sid, lease = await _session(j)
    call = InsertToolCall("c1", "t1", "s", 0, "shell", {"command": "ls"}, idempotent=False)
    await j.commit(sid, [("tool.call", {"tool_call_id": "c1"})], lease=lease, ops=[call])
    assert [r.tool_call_id for r in await j.tool_calls(sid, open_only=True)] == ["c1"]
    assert await j.existing_tool_call_ids(sid, ["c1", "c2"]) == {"c1"}
    assert [e.type for e in await j.events(sid)] == ["session.created", "tool.call"]
    await j.aclose()


async def test_inline_writes_keep_the_wal_checkpointed(tmp_path: Path) -> None:
    """Outside its thread's jobs the write connection's automatic checkpoint is off (it would
    fsync on the loop); the journal checkpoints on the read connection's thread instead, so the
    WAL does not keep growing: after 3 × CHECKPOINT_PAGES / 4 small commits it holds far fewer
    frames than they wrote."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    sid, lease = await _session(j)
    pragma = "PRAGMA wal_autocheckpoint"
    assert await j._run_short(lambda db: db.execute(pragma).fetchone()[0], writes=False) == 0
    assert await j._run(lambda db: db.execute(pragma).fetchone()[0]) == CHECKPOINT_PAGES
    for i in range(3 * CHECKPOINT_PAGES // 4):
        await j.commit(sid, [("user.message", {"text": f"m{i}"})], lease=lease)
    _, frames, _ = await j._run(lambda db: db.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone())
    assert 0 <= frames < CHECKPOINT_PAGES  # unchecked: ≥ 2 frames per commit, ~1,500
    await j.aclose()


async def test_a_big_write_on_the_thread_checkpoints_as_it_goes(tmp_path: Path) -> None:
    """An import (a job of the write connection's thread) keeps SQLite's automatic checkpoint:
    its pages reach the database file at its commit, not at some later inline commit."""
    from acagent.events import Event
    from acagent.store import ImportedSession

    j = await SqliteJournal.open(tmp_path / "a.db")
    before = (tmp_path / "a.db").stat().st_size
    text = "".join(f"{i:x}" for i in range(120))
    events = [
        Event(
            seq=i,
            ts="2026-01-01T00:00:00.000000Z",
            session_id="ses_imp",
            type="user.message",
            payload={"text": f"{i}{text}"},
        )
        for i in range(1, 3001)
    ]
    await j.import_session(ImportedSession(session_id="ses_imp", cwd="/w", last_seq=3000), iter(events))
    assert (tmp_path / "a.db").stat().st_size > before + 300_000  # ~700 KB of events, checkpointed
    assert len(await j.events("ses_imp")) == 3000
    await j.aclose()


async def test_a_commit_after_another_writer_numbers_from_the_row_not_from_its_hint(tmp_path: Path) -> None:
    """A commit without ops trusts the (num, last_seq) this journal wrote last only if its UPDATE
    finds the row so: after another process's commits, and after the session was removed and
    created again under the same id (a new num), the seqs come from the row."""
    from acagent.store._manage import remove_session

    a = await SqliteJournal.open(tmp_path / "a.db")
    b = await SqliteJournal.open(tmp_path / "a.db")
    sid, lease = await _session(a)
    await a.commit(sid, [("user.message", {"text": "a1"})], lease=lease)
    await b.commit_unfenced(sid, [("user.message", {"text": "b1"}), ("usage", {})], reason="test")
    out = await a.commit(sid, [("user.message", {"text": "a2"})], lease=lease)
    assert [e.seq for e in out] == [5]
    assert [e.payload.get("text") for e in await b.events(sid)] == [None, "a1", "b1", None, "a2"]
    await a.release_lease(sid, lease)
    await b.create_session(cwd="/w", model=None, title=None)  # so the re-created one gets a new num
    await remove_session(b, sid, tmp_path / "sessions")
    with pytest.raises(SessionNotFound):
        await a.commit(sid, [("user.message", {"text": "gone"})], lease=lease)
    await b.create_session(cwd="/w", model=None, title=None, session_id=sid)
    await b.commit_unfenced(sid, [("user.message", {"text": f"n{i}"}) for i in range(4)], reason="test")
    lease = await a.acquire_lease(sid, "w1", ttl_s=60)  # last_seq is 5 again, under a new num
    out = await a.commit(sid, [("user.message", {"text": "again"})], lease=lease)
    assert [e.seq for e in out] == [6]
    assert [e.seq for e in await b.events(sid)] == [1, 2, 3, 4, 5, 6]
    assert (await b.get_session(sid)).last_seq == 6
    db = sqlite3.connect(tmp_path / "a.db")
    assert len(stored_events(db)) == 7  # its 6 and the other's 1
    assert db.execute("SELECT COUNT(*) FROM event_log").fetchone()[0] == 4  # n0-n3 one frame (m016)
    db.close()
    await a.aclose()
    await b.aclose()
