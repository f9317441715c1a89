"""Conformance: replay since a seq, context events from the latest snapshot, import and export."""

from __future__ import annotations

import pytest

from acagent.errors import JournalError
from acagent.events import Event
from acagent.store import ImportedSession, Journal, SetCancel

pytestmark = pytest.mark.anyio


async def _fill(journal: Journal, h, n: int):
    row, lease = await h.leased()
    for i in range(n):
        await journal.commit(
            row.id, [("user.message", {"text": f"m{i}"}), ("assistant.delta", {"text": "d"})], lease=lease
        )
    return row, lease


async def test_replay_since_until_limit_and_iter(journal: Journal, h) -> None:
    """events(since, until, limit) and iter_events page through committed events in seq order."""
    row, _ = await _fill(journal, h, 10)  # seqs 1..21
    assert [e.seq for e in await journal.events(row.id, 5, limit=3)] == [6, 7, 8]
    assert [e.seq for e in await journal.events(row.id, 18, until=20)] == [19, 20]
    assert await journal.events(row.id, 21) == []
    assert await journal.events(row.id, 500) == []
    got = [e.seq async for e in journal.iter_events(row.id, 2, batch=4)]
    assert got == list(range(3, 22))
    first = (await journal.events(row.id, 0, limit=1))[0]
    assert (first.type, first.session_id, first.payload["cwd"]) == ("session.created", row.id, "/tmp")
    assert first.ts.endswith("Z")


async def test_last_events_are_the_newest_of_their_types_newest_first(journal: Journal, h) -> None:
    """last_events reads back from the session's end: what a retried message's key is looked up
    in (acagent.server._idempotency.journaled_turn)."""
    row, _ = await _fill(journal, h, 10)  # user.message at seqs 2, 4, …, 20
    got = await journal.last_events(row.id, ("user.message",), 3)
    assert [(e.seq, e.payload["text"]) for e in got] == [(20, "m9"), (18, "m8"), (16, "m7")]
    both = await journal.last_events(row.id, ("user.message", "session.created"), 50)
    assert [e.seq for e in both] == [*range(20, 0, -2), 1]
    assert await journal.last_events(row.id, ("turn.completed",), 5) == []
    assert await journal.last_events("ses_none", ("user.message",), 5) == []


async def test_context_events_start_at_the_latest_checkpoint(journal: Journal, h) -> None:
    """Only the latest checkpoint and the context events after it (no deltas, no status events)."""
    row, lease = await _fill(journal, h, 3)
    await journal.commit(
        row.id, [("checkpoint", {"upto_seq": 7, "messages": [{"role": "user", "parts": []}]})], lease=lease
    )
    await journal.commit(
        row.id,
        [("assistant.message", {"text": "a"}), ("usage", {}), ("user.message", {"text": "b"})],
        lease=lease,
    )
    ctx = await journal.context_events(row.id)
    assert [e.type for e in ctx] == ["checkpoint", "assistant.message", "user.message"]
    assert ctx[0].seq == 8


def _compacted(first_kept_seq: int) -> dict[str, object]:
    return {
        "summary": "s",
        "first_kept_seq": first_kept_seq,
        "tokens_before": 9,
        "tokens_after": 3,
        "model": "m:x",
    }


@pytest.mark.parametrize("with_ops", [False, True])
async def test_context_events_start_at_a_compactions_first_kept_event(
    journal: Journal, h, with_ops: bool
) -> None:
    """A ``context.compacted`` is a position: the rebuild starts at its ``first_kept_seq`` (the
    kept messages are the events from there, not a copy) and reads the compaction itself; a
    compaction committed with its ``checkpoint`` (the previous format) starts at that checkpoint.
    With and without ops (SQLite and PostgreSQL each take another path without)."""
    row, lease = await _fill(journal, h, 3)  # user.message at 2, 4, 6; deltas at 3, 5, 7
    ops = [SetCancel(False)] if with_ops else []
    await journal.commit(row.id, [("usage", {}), ("context.compacted", _compacted(4))], lease=lease, ops=ops)
    s = await journal.get_session(row.id)
    assert (s.checkpoint_seq, s.tail_bytes) == (4, 0) and s.checkpoint_bytes > 0
    await journal.commit(row.id, [("user.message", {"text": "after"})], lease=lease, ops=ops)
    ctx = await journal.context_events(row.id)
    assert [(e.seq, e.type) for e in ctx] == [
        (4, "user.message"),
        (6, "user.message"),
        (9, "context.compacted"),
        (10, "user.message"),
    ]
    assert (await journal.get_session(row.id)).tail_bytes > 0
    old = [("context.compacted", _compacted(6)), ("checkpoint", {"upto_seq": 10, "messages": []})]
    await journal.commit(row.id, old, lease=lease, ops=ops)
    assert (await journal.get_session(row.id)).checkpoint_seq == 12
    assert [(e.seq, e.type) for e in await journal.context_events(row.id)] == [(12, "checkpoint")]


def _imported(session_id: str, n: int) -> tuple[ImportedSession, list[Event]]:
    events = [
        Event(
            seq=1,
            ts="2026-01-01T00:00:00.000000Z",
            session_id=session_id,
            type="session.created",
            payload={"cwd": "/x"},
        )
    ]
    for i in range(2, n + 1):
        events.append(
            Event(
                seq=i,
                ts="2026-01-01T00:00:01.000000Z",
                session_id=session_id,
                type="user.message",
                payload={"text": f"u{i}"},
            )
        )
    imp = ImportedSession(session_id=session_id, cwd="/x")
    return imp, events


async def test_import_session_streams_events_and_records_resume_state(journal: Journal) -> None:
    """import_session consumes an iterator once, reads the row's fields after it, and is atomic."""
    sid = "ses_imported0000000000000001"
    imp, events = _imported(sid, 1200)

    def stream():
        yield from events
        # fields completed only once the stream is exhausted (as a streaming importer does)
        imp.title, imp.status, imp.last_seq, imp.last_message = "T", "done", len(events), "u1200"
        imp.checkpoint, imp.tail_bytes = (0, 0), 123
        imp.transcript_stat = {"ino": 1, "size": 2, "mtime_ns": 3, "last_seq": len(events)}
        imp.warnings = [{"code": "transcript_damaged", "message": "m"}]

    await journal.import_session(imp, stream())
    s = await journal.get_session(sid)
    assert (s.title, s.status, s.last_seq, s.last_message, s.tail_bytes, s.cwd) == (
        "T",
        "done",
        1200,
        "u1200",
        123,
        "/x",
    )
    assert s.transcript_stat is not None and '"last_seq":1200' in s.transcript_stat.replace(" ", "")
    assert s.to_public()["warnings"][0]["code"] == "transcript_damaged"
    exported = [e async for e in journal.iter_events(sid)]
    assert [(e.seq, e.type, e.payload) for e in exported] == [(e.seq, e.type, e.payload) for e in events]
    # a second import of the same id fails and writes nothing more
    imp2, events2 = _imported(sid, 3)
    with pytest.raises(JournalError, match="already exists"):
        await journal.import_session(imp2, events2)
    assert (await journal.get_session(sid)).last_seq == 1200


async def test_import_failing_midway_writes_nothing(journal: Journal) -> None:
    """An exception from the event stream rolls the whole import back."""
    sid = "ses_imported0000000000000002"
    imp, events = _imported(sid, 800)

    def broken():
        yield from events[:700]
        raise OSError("disk went away")

    with pytest.raises((OSError, JournalError)):  # the source's error, or the backend's wrapping of it
        await journal.import_session(imp, broken())
    with pytest.raises(Exception, match="no session"):
        await journal.get_session(sid)
    imp.last_seq = len(events)
    await journal.import_session(imp, events)  # and the id is free again
    assert len(await journal.events(sid)) == 800
