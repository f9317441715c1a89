"""Deltas are committed in frames of about 50 ms, not one transaction per token (issue 12 item 3,
F63): a stream of 40 deltas over ~200 ms costs a handful of journal commits, every delta is still
its own event, in order, durable before it is published."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from acagent.bus import RunnerEventBus
from acagent.runner._context import ContextBuilder
from acagent.runner._writer import SessionWriter
from acagent.store import SqliteJournal

pytestmark = pytest.mark.anyio


async def test_a_token_stream_costs_one_commit_per_frame(tmp_path: Path) -> None:
    journal = await SqliteJournal.open(tmp_path / "j.db")
    try:
        row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
        bus = RunnerEventBus(row.id)
        bus.last_seq = row.last_seq
        writer = SessionWriter(journal, row.id, bus, ContextBuilder())
        writer.lease = await journal.acquire_lease(row.id, "w", ttl_s=30)
        commits = 0
        real = journal.commit

        async def counting(*a, **kw):  # type: ignore[no-untyped-def]
            nonlocal commits
            commits += 1
            return await real(*a, **kw)

        journal.commit = counting  # type: ignore[method-assign]
        sub = bus.subscribe("t")
        async with anyio.create_task_group() as tg:
            tg.start_soon(writer.flush_loop)
            for i in range(40):
                writer.delta("assistant.delta", {"turn_id": "t", "text": f"tok{i} "})
                await anyio.sleep(0.005)
            await writer.commit([("usage", {"turn_id": "t"})])
            tg.cancel_scope.cancel()
        assert commits <= 8, f"{commits} commits for 40 deltas in ~200 ms"
        stored = [e for e in await journal.events(row.id) if e.type == "assistant.delta"]
        assert [e.payload["text"] for e in stored] == [f"tok{i} " for i in range(40)]
        bus.close()
        seen = [e.seq async for e in sub]
        assert seen == [e.seq for e in await journal.events(row.id, 1)]
    finally:
        await journal.aclose()
