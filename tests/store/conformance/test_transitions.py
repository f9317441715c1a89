"""Conformance: guarded status transitions, the cancel flag, and what a commit records."""

from __future__ import annotations

from typing import Any

import pytest

from acagent.errors import InvalidTransition, SessionNotFound
from acagent.store import ACTIVE, RESTING, STATUSES, Journal, SetCancel, SetStatus, SetTitle, SetTurn

pytestmark = pytest.mark.anyio


async def test_status_transition_requires_whitelist(journal: Journal, h) -> None:
    """A transition from outside the whitelist is refused and writes nothing; an empty whitelist is a bug."""
    row, lease = await h.leased()
    with pytest.raises(ValueError, match="non-empty"):
        SetStatus("running", ())
    with pytest.raises(ValueError, match="unknown status"):
        SetStatus("sleeping", ("pending",))
    with pytest.raises(InvalidTransition) as info:
        await journal.commit(
            row.id, [("user.message", {"text": "lost"})], lease=lease, ops=[SetStatus("done", ACTIVE)]
        )
    assert info.value.detail == {"status": "pending", "to": "done"}
    assert (await journal.get_session(row.id)).last_seq == 1
    events = await journal.commit(
        row.id,
        [("turn.started", {"turn_id": "t1"})],
        lease=lease,
        ops=[SetStatus("running", ("pending",), turn_id="t1")],
    )
    # the status change leads the commit; the commit's own events follow
    assert [e.type for e in events] == ["session.status", "turn.started"]
    assert events[0].payload == {"status": "running", "previous": "pending", "turn_id": "t1"}
    same = await journal.commit(row.id, [], lease=lease, ops=[SetStatus("running", ACTIVE)])
    assert same == []  # no change, no event


async def test_worker_transition_refused_while_cancel_pending(journal: Journal, h) -> None:
    """The cancel flag wins over a worker's transition into an active state; cancel still works."""
    row, lease = await h.leased()
    await journal.commit(row.id, [], lease=lease, ops=[SetStatus("running", ("pending",))])
    await journal.set_cancel(row.id, True)
    with pytest.raises(InvalidTransition, match="cancel") as info:
        await journal.commit(row.id, [], lease=lease, ops=[SetStatus("waiting_tool", ACTIVE)])
    assert info.value.detail["cancel_requested"] is True
    await journal.commit(row.id, [], lease=lease, ops=[SetStatus("failed", ACTIVE)])  # cancelled/failed pass
    # clearing the flag in the same commit lets a later op through (ops see earlier ops' effects)
    await journal.commit(row.id, [], lease=lease, ops=[SetCancel(False), SetStatus("running", RESTING)])
    assert (await journal.get_session(row.id)).cancel_requested == 0


@pytest.mark.parametrize("status", STATUSES)
async def test_every_status_reaches_cancelled_and_revives(journal: Journal, h, status: str) -> None:
    """From each status, cancelled is reachable through the guarded op, and a new turn revives it."""
    row, lease = await h.leased()
    await journal.commit(row.id, [], lease=lease, ops=[SetStatus(status, STATUSES, worker=False)])
    not_cancelled = tuple(s for s in STATUSES if s != "cancelled")
    if status != "cancelled":
        await journal.commit(
            row.id, [], lease=lease, ops=[SetStatus("cancelled", not_cancelled, worker=False)]
        )
    assert (await journal.get_session(row.id)).status == "cancelled"
    await journal.commit(row.id, [], lease=lease, ops=[SetStatus("running", RESTING)])
    assert (await journal.get_session(row.id)).status == "running"


async def test_commit_keeps_the_session_counters(journal: Journal, h) -> None:
    """last_seq, last_message, turn, title, tail bytes and the checkpoint position follow each commit."""
    row, lease = await h.leased()
    await journal.commit(
        row.id,
        [("user.message", {"turn_id": "t1", "text": "hello there"})],
        lease=lease,
        ops=[SetTurn("t1"), SetTitle("hello there")],
    )
    await journal.commit(row.id, [], lease=lease, ops=[SetTitle("ignored: a title is kept")])
    s = await journal.get_session(row.id)
    assert (s.last_seq, s.turn_id, s.title, s.last_message) == (2, "t1", "hello there", "hello there")
    assert s.tail_bytes > 0 and s.checkpoint_seq == 0
    await journal.commit(row.id, [("checkpoint", {"upto_seq": 2, "messages": []})], lease=lease)
    s = await journal.get_session(row.id)
    assert (s.checkpoint_seq, s.tail_bytes) == (3, 0) and s.checkpoint_bytes > 0
    await journal.commit(
        row.id, [("tool.result", {"tool_call_id": "c", "name": "x", "content": "y"})], lease=lease
    )
    s = await journal.get_session(row.id)
    assert s.tail_bytes > 0 and s.last_message == "hello there"  # a tool result is not a message
    assert s.updated_at >= s.created_at


async def test_sessions_list_and_find(journal: Journal, h) -> None:
    """Listing filters by cwd and status, newest first; find takes a unique prefix."""
    a = await h.session(cwd="/a")
    b = await h.session(cwd="/b")
    assert [r.id for r in await journal.list_sessions(cwd="/a")] == [a.id]
    assert {r.id for r in await journal.list_sessions(statuses=["pending"])} >= {a.id, b.id}
    assert await journal.list_sessions(statuses=["failed"]) == []
    assert len(await journal.list_sessions(limit=1)) == 1
    assert (await journal.find_session(a.id[:-2])).id == a.id
    with pytest.raises(Exception, match="ambiguous"):
        await journal.find_session("ses_")
    for hostile in ("", " ", f"{a.id}/events", "../x", f"{a.id}%"):  # F119: no id starts with these
        with pytest.raises(SessionNotFound, match="matches no session"):
            await journal.find_session(hostile)
    public = (await journal.get_session(a.id)).to_public()
    assert public["status"] == "pending" and public["usage"]["total_tokens"] == 0


async def test_a_commit_without_ops_keeps_the_counters_a_commit_with_ops_keeps(journal: Journal, h) -> None:
    """The same events committed with and without an op (a commit without ops may take another
    path: SQLite checks the token in its ``UPDATE … RETURNING``) leave the same counters:
    last_seq, last_message, tail bytes and a checkpoint's position among the commit's events."""
    batches: list[list[tuple[str, dict[str, Any]]]] = [
        [("user.message", {"turn_id": "t1", "text": "first"}), ("assistant.delta", {"text": "x"})],
        [
            ("assistant.message", {"turn_id": "t1", "text": "answer"}),
            ("checkpoint", {"upto_seq": 3, "messages": []}),
            ("tool.result", {"tool_call_id": "c", "name": "x", "content": "after the checkpoint"}),
        ],
        [("assistant.delta", {"text": "no context bytes"})],
    ]
    rows = []
    for with_ops in (False, True):
        row, lease = await h.leased()
        for batch in batches:
            out = await journal.commit(row.id, batch, lease=lease, ops=[SetCancel(False)] if with_ops else [])
            assert [e.type for e in out] == [t for t, _ in batch]
        s = await journal.get_session(row.id)
        rows.append((s.last_seq, s.last_message, s.tail_bytes, s.checkpoint_seq, s.checkpoint_bytes))
        assert [e.seq for e in await journal.events(row.id)] == list(range(1, 8))
    assert rows[0] == rows[1]
    assert rows[0][:2] == (7, "answer") and rows[0][3] == 5 and rows[0][2] > 0
