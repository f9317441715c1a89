"""F140: a turn whose journal disk fills and frees again goes on in the same process, no call paid twice.

Before: the first commit refused with "disk is full" halted the turn; the lease (its release was
a write too) stayed until it expired, ``lease_ttl_s`` later, and the resumed step was retried as
"process died" — a second paid LLM call for a reply that had already streamed. Now the writer
retries the refused commit for ``[timing] journal_full_wait_s`` (runner/_writer.py): space back
within it, the same events land and the turn completes. Beyond it the turn stops as before (F54,
``tests/runner/test_faults.py``).
"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.bus import RunnerEventBus
from acagent.runner._context import ContextBuilder
from acagent.runner._writer import SessionWriter
from acagent.store import SqliteJournal
from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from acagent.store._sqlite_conn import map_errors
from tests.mockprovider import MockProvider, Script
from tests.runner.test_faults import PREFIX, _db, _fill, _openai_stream, small_disk

__all__ = ["small_disk"]  # the fixture, used by name


def test_space_back_within_the_wait_completes_the_turn_with_one_call_f140(
    cli: Any, mock: MockProvider, workspace: Path, small_disk: Path
) -> None:
    home = small_disk / "home"
    text = PREFIX * 40
    mock.script(Script(chunks=_openai_stream(text), pause_after=3))  # one reply: a second call gets a 500
    env = {"ACAGENT_HOME": str(home), "ACAGENT_TIMING_JOURNAL_FULL_WAIT_S": "15"}
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    proc = cli.popen("run", "--yes", *base, "hello", cwd=workspace, extra_env=env)
    try:
        mock.wait_paused(1, 60)
        filler = _fill(small_disk)
        mock.release()
        time.sleep(2.0)  # the reply's commits meet the full disk meanwhile (the checks hold either way)
        filler.unlink()
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert out == text.rstrip() + "\n" or out.strip() == text.strip(), out[-200:]
    assert len(mock.requests) == 1, [r.status for r in mock.requests]  # the reply was not asked for again
    db = _db(home)
    try:
        (sid, status, owner) = db.execute("SELECT id, status, lease_owner FROM session").fetchone()
        assert (status, owner) == ("done", None)
        rows = [(seq, typ, p) for _, seq, _, typ, p in stored_events(db, sid)]
    finally:
        db.close()
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    types = [t for _, t, _ in rows]
    assert types.count("turn.completed") == 1 and types.count("assistant.message") == 1
    assert "llm.retry" not in types
    (message,) = [json.loads(payload_text(p)) for _, t, p in rows if t == "assistant.message"]
    assert message["text"].strip() == text.strip()


@pytest.mark.anyio
async def test_a_cancel_ends_the_wait_and_a_refused_commit_leaves_nothing_behind_f140(tmp_path: Path) -> None:
    """Invariant 6 while waiting for space: the wait is outside the commit's shield. SQLite's own
    disk-full error (``map_errors``) for the first commits, then the real journal."""
    journal = await SqliteJournal.open(tmp_path / "j.db")
    try:
        row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
        bus = RunnerEventBus(row.id)
        bus.last_seq = row.last_seq
        writer = SessionWriter(journal, row.id, bus, ContextBuilder(), full_disk_wait_s=30)
        writer.lease = await journal.acquire_lease(row.id, "w", ttl_s=30)
        real, refused = journal.commit, []

        async def full(*a: Any, **kw: Any) -> Any:
            if len(refused) < 1000 and not space.is_set():
                refused.append(1)
                raise map_errors(sqlite3.OperationalError("database or disk is full"))
            return await real(*a, **kw)

        space = anyio.Event()
        journal.commit = full  # type: ignore[method-assign]
        writer.delta("assistant.delta", {"turn_id": "t", "text": "a"})
        with anyio.move_on_after(60) as guard:  # a bound for a broken wait, not a timing check
            async with anyio.create_task_group() as tg:
                tg.start_soon(writer.commit, [("usage", {"turn_id": "t"})])
                while len(refused) < 3:
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()  # ends the commit waiting for space
        assert not guard.cancelled_caught
        assert writer.buffered == 1 and (await journal.get_session(row.id)).last_seq == row.last_seq
        tries = len(refused)
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.commit, [("usage", {"turn_id": "t"})])
            while len(refused) == tries:
                await anyio.sleep(0.05)
            space.set()  # space is back: the same commit lands, once
        stored = [e.type for e in await journal.events(row.id) if e.seq > row.last_seq]
        assert stored == ["assistant.delta", "usage"] and writer.buffered == 0
    finally:
        await journal.aclose()
