"""A commit's events are one ``event_log`` row, compressed together (m016 frames, benchmarks
figure 3), and every reader sees exactly the events it saw when each event had a row of its own.

The reference is the same commits written by the old code path (one row per event,
``_sqlite_commit.event_rows`` swapped for the per-event rows), compared read for read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acagent.errors import JournalError
from acagent.events import EVENT_TYPES
from acagent.store import SqliteJournal, _payload, _sqlite_commit
from acagent.store._frames import TYPE_CODES, stored_events
from acagent.store._ops import STATUSES, SetStatus
from acagent.store._payload import FORMAT_FRAME_V1, FORMAT_FRAME_V2, encode_payload, payload_text

pytestmark = pytest.mark.anyio

TURN = {"turn_id": "turn_1"}


def _message(text: str) -> dict[str, Any]:
    return {**TURN, "text": text, "message": {"role": "assistant", "parts": [{"kind": "text", "text": text}]}}


def _commits(n: int) -> Iterator[tuple[list[tuple[str, dict[str, Any]]], bool]]:
    """The commits of ``n`` benchmark-like turns: (events, with a status op)."""
    for t in range(n):
        text = f"question {t}: " + "how does the journal store a commit? " * (t + 1)
        yield [("turn.started", TURN), ("user.message", {**TURN, "text": text}), ("step.started", TURN)], True
        yield [("assistant.delta", {**TURN, "text": f"part {i} of {t}"}) for i in range(3)], False
        reply = _message(f"calling a tool in turn {t}")
        call = {**TURN, "tool_call_id": f"call_{t}", "name": "shell", "arguments": {"command": "ls"}}
        yield (
            [
                ("assistant.message", reply),
                ("tool.call", call),
                ("usage", {"input_tokens": t}),
                ("step.finished", TURN),
            ],
            False,
        )
        yield [("tool.result", {**TURN, "tool_call_id": f"call_{t}", "content": "a b c"})], False
        yield (
            [
                ("tool.started", TURN),
                ("tool.result", {**TURN, "tool_call_id": "x", "content": "d"}),
                ("step.started", TURN),
            ],
            False,
        )
        yield (
            [
                ("assistant.message", _message(f"the answer of turn {t}")),
                ("turn.completed", {**TURN, "text": "x"}),
            ],
            True,
        )


async def _journal(
    path: Path, turns: int, *, frames: bool, monkeypatch: pytest.MonkeyPatch
) -> tuple[SqliteJournal, str, int]:
    """A journal at ``path`` with the commits of ``turns`` turns (and the commits' count)."""
    if not frames:
        monkeypatch.setattr(_sqlite_commit, "event_rows", _rows_per_event)
    j = await SqliteJournal.open(path)
    row, _ = await j.create_session(cwd="/w", model=None, title=None)
    lease = await j.acquire_lease(row.id, "w1", ttl_s=60)
    n = 0
    for events, with_op in _commits(turns):
        ops = [SetStatus("running", STATUSES, turn_id="turn_1")] if with_op else []  # the general path
        await j.commit(row.id, events, lease=lease, ops=ops)
        n += 1
    monkeypatch.undo()
    return j, row.id, n


def _rows_per_event(num: int, first: int, ts: str, types: Any, texts: Any) -> list[tuple[Any, ...]]:
    """The event rows the code before m016 wrote: one per event."""
    return [
        ((num << 32) | (first + i), ts, t, encode_payload(p))
        for i, (t, p) in enumerate(zip(types, texts, strict=True))
    ]


def _plain(events: list[Any]) -> list[tuple[int, str, dict[str, Any]]]:
    return [(e.seq, e.type, e.payload) for e in events]


async def test_a_commit_of_several_events_is_one_row_and_a_single_event_keeps_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before m016 a commit of n events wrote n rows (each compressed alone)."""
    j, sid, commits = await _journal(tmp_path / "a.db", 2, frames=True, monkeypatch=monkeypatch)
    try:
        events = await j.events(sid)
    finally:
        await j.aclose()
    db = sqlite3.connect(tmp_path / "a.db")
    rows = db.execute(
        "SELECT key & 4294967295, ts, type, typeof(payload), substr(payload, 1, 1) FROM event_log ORDER BY key"
    ).fetchall()
    assert len(rows) == 1 + commits  # session.created, then one row per commit
    frames = [r for r in rows if r[2].isupper()]
    assert len(frames) == commits - 2  # the two lone tool.result commits keep a row of their own
    assert all(r[3] == "blob" and r[4] == bytes((FORMAT_FRAME_V2,)) for r in frames)
    by_seq = {e.seq: e for e in events}
    for seq, ts, codes, _, _ in frames:  # a frame: the first seq, the commit's ts, one letter per event
        inside = [by_seq[seq + i] for i in range(len(codes))]
        assert "".join(TYPE_CODES[e.type] for e in inside) == codes
        assert {e.ts for e in inside} == {ts}
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    db.close()


async def test_every_read_path_returns_the_events_the_rows_per_event_journal_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ranges whose ``since`` or ``until`` falls inside a frame, type filters with limits from
    either end, the context read, the last message (inside a frame) and the turn count."""
    new, sid_new, _ = await _journal(tmp_path / "new.db", 3, frames=True, monkeypatch=monkeypatch)
    old, sid_old, _ = await _journal(tmp_path / "old.db", 3, frames=False, monkeypatch=monkeypatch)
    try:
        both = [(new, sid_new), (old, sid_old)]
        every = [_plain(await j.events(s)) for j, s in both]
        assert every[0] == every[1]
        last = len(every[0])
        for since in range(0, last + 2):
            for until in (None, *range(since, last + 2, 3)):
                got = [_plain(await j.events(s, since, until=until)) for j, s in both]
                assert (
                    got[0]
                    == got[1]
                    == [e for e in every[1] if e[0] > since and (until is None or e[0] <= until)]
                )
            for limit in (1, 2, 5):
                got = [_plain(await j.events(s, since, limit=limit)) for j, s in both]
                assert got[0] == got[1], (since, limit)
        for types in (
            ("turn.started",),
            ("user.message",),
            ("tool.result", "assistant.message"),
            ("usage", "nope"),
        ):
            for limit in (1, 2, 4, 100):
                got = [_plain(await j.last_events(s, types, limit)) for j, s in both]
                assert got[0] == got[1] and len(got[0]) == min(limit, sum(e[1] in types for e in every[1]))
        paged = [[(e.seq, e.type, e.payload) async for e in j.iter_events(s, 2, batch=2)] for j, s in both]
        assert paged[0] == paged[1] == every[1][2:]
        assert _plain(await new.context_events(sid_new)) == _plain(await old.context_events(sid_old))
        rows = [await j.get_session(s) for j, s in both]
        assert rows[0].last_message == rows[1].last_message == "the answer of turn 2"
        assert [r.last_message for r in await new.list_sessions()] == ["the answer of turn 2"]
        assert await new.turns_started(sid_new) == await old.turns_started(sid_old) == 3
    finally:
        await new.aclose()
        await old.aclose()
    plain = []
    for name in ("new.db", "old.db"):
        db = sqlite3.connect(tmp_path / name)
        plain.append([(q, t, p) for _, q, _, t, p in stored_events(db)])
        db.close()
    assert plain[0] == plain[1]


async def test_a_journal_of_rows_per_event_upgraded_mid_session_reads_on_with_frames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows of the old code path (TEXT payloads of before m007, V1 blobs) and frames side by
    side in one session, the upgrade (m016) made between two turns: nothing is lost."""
    path = tmp_path / "a.db"
    j, sid, _ = await _journal(path, 2, frames=False, monkeypatch=monkeypatch)
    before = _plain(await j.events(sid))
    lease = await j.acquire_lease(sid, "w1", ttl_s=60)
    await j.release_lease(sid, lease)
    await j.aclose()
    db = sqlite3.connect(path, isolation_level=None)
    key, stored = db.execute(
        "SELECT key, payload FROM event_log WHERE type = 'assistant.delta' LIMIT 1"
    ).fetchone()
    db.execute(
        "UPDATE event_log SET payload = ? WHERE key = ?", (payload_text(stored), key)
    )  # as before m007
    db.execute("DELETE FROM migrations WHERE name = 'm016_event_frames'")  # a journal of before m016
    db.execute(
        "CREATE VIEW event (session_id, seq, ts, type, payload) AS SELECT s.id, e.key & 4294967295,"
        " e.ts, e.type, e.payload FROM event_log e JOIN session s ON s.num = e.key >> 32"
    )
    db.close()
    j = await SqliteJournal.open(path)  # migrates
    try:
        assert _plain(await j.events(sid)) == before
        lease = await j.acquire_lease(sid, "w2", ttl_s=60)
        added = await j.commit(
            sid, [("turn.started", TURN), ("user.message", {**TURN, "text": "after"})], lease=lease
        )
        assert _plain(await j.events(sid)) == before + _plain(added)
        assert _plain(await j.events(sid, len(before) - 1)) == before[-1:] + _plain(added)
        asked = [e for e in before if e[1] == "user.message"][-1]
        assert _plain(await j.last_events(sid, ("user.message",), 2)) == [_plain(added)[1], asked]
        assert (await j.get_session(sid)).last_message == "after"
        assert await j.turns_started(sid) == 3
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    kinds = {
        (kind, frame): n
        for kind, frame, n in db.execute(
            "SELECT typeof(payload), type GLOB '[A-Z]*', COUNT(*) FROM event_log GROUP BY 1, 2"
        )
    }
    assert kinds[("blob", 1)] == 1 and kinds[("text", 0)] >= 1  # the frame beside TEXT and V1 rows
    assert kinds[("blob", 0)] + kinds[("text", 0)] == len(before)
    assert db.execute("SELECT name FROM sqlite_schema WHERE name = 'event'").fetchone() is None
    db.close()


def v1_frame(stored: bytes) -> bytes:
    """The V1 frame (format byte 2, no CRC: written on main before V2) of a V2 frame's payloads."""
    return _payload._deflate(bytes((FORMAT_FRAME_V1,)), _payload.inflate(stored, "a frame", 5))


async def test_a_damaged_frame_is_one_clear_error_naming_the_session_and_its_seqs(tmp_path: Path) -> None:
    """Like a damaged event (test_payload_format): a JournalError, never a traceback; the events
    before the frame stay readable. A V2 frame's CRC covers its type letters (a V1 frame, still
    read, has none: its type column is only checked against its payloads)."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        lease = await j.acquire_lease(row.id, "w1", ttl_s=60)
        await j.commit(
            row.id,
            [("turn.started", TURN), ("user.message", {**TURN, "text": "hi"}), ("step.started", TURN)],
            lease=lease,
        )
        db = sqlite3.connect(path, isolation_level=None)
        key, codes, blob = db.execute(
            "SELECT key, type, payload FROM event_log WHERE type = 'CDM'"
        ).fetchone()
        assert blob[:1] == bytes((FORMAT_FRAME_V2,))
        where = f"session {row.id!r} events 2-4 (one frame)"
        crc = "stored frame is corrupt (its checksum does not match its types and payloads)"
        for frame, cases in (
            (
                v1_frame(blob),
                (
                    ("payload", "corrupt", f"{where}: stored payload is corrupt"),
                    ("payload", "short", f"{where}: stored payload is corrupt"),
                    (
                        "type",
                        "CD",
                        f"session {row.id!r} events 2-3 (one frame): stored frame holds 3 payloads, its type column names 2",
                    ),
                    ("type", "CDZ", f"{where}: event 4: unknown type letter 'Z'"),
                    ("type", b"CDM", f"session {row.id!r} event 2: a frame whose type column is a bytes"),
                ),
            ),
            (
                blob,
                (
                    ("payload", "corrupt", f"{where}: stored "),
                    ("payload", "short", f"{where}: stored "),
                    ("type", "CD", f"session {row.id!r} events 2-3 (one frame): {crc}"),
                    ("type", "CDZ", f"{where}: {crc}"),
                    ("type", "CMD", f"{where}: {crc}"),  # swapped letters: retyped events before V2
                    ("type", b"CDM", f"session {row.id!r} event 2: a frame whose type column is a bytes"),
                ),
            ),
        ):
            db.execute("UPDATE event_log SET payload = ? WHERE key = ?", (frame, key))
            assert [e.type for e in await j.events(row.id)][1:] == [
                "turn.started",
                "user.message",
                "step.started",
            ]
            for column, damaged, says in cases:
                if damaged == "corrupt":
                    damaged = frame[:-3] + b"\xff\xfe\xfd"
                elif damaged == "short":
                    damaged = frame[:6]
                db.execute(f"UPDATE event_log SET {column} = ? WHERE key = ?", (damaged, key))
                with pytest.raises(JournalError) as err:
                    await j.events(row.id)
                assert err.value.message.startswith(says), err.value.message
                assert err.value.detail["first_seq"] == 2, err.value.detail
                assert [e.type for e in await j.events(row.id, until=1)] == ["session.created"]
                db.execute("UPDATE event_log SET type = ?, payload = ? WHERE key = ?", (codes, frame, key))
        db.execute("UPDATE event_log SET payload = ? WHERE key = ?", (blob[:-3] + b"\xff\xfe\xfd", key))
        with pytest.raises(
            JournalError, match=r"the last message's event: stored (payload|frame) is corrupt"
        ):
            await j.get_session(row.id)  # the last message is in the frame
        db.execute("UPDATE event_log SET payload = ?, type = 'CMD' WHERE key = ?", (blob, key))
        with pytest.raises(JournalError, match=r"the last message's event: stored frame is corrupt"):
            await j.get_session(row.id)  # its CRC covers the type letters there too
        db.close()
    finally:
        await j.aclose()


def test_every_event_type_has_a_frame_letter_and_no_letter_is_used_twice() -> None:
    """A type without a letter is still journaled (one row per event), but costs the frame."""
    assert set(EVENT_TYPES) <= set(TYPE_CODES)
    assert len(set(TYPE_CODES.values())) == len(TYPE_CODES)
    assert all(len(c) == 1 and "A" <= c <= "Z" for c in TYPE_CODES.values())
