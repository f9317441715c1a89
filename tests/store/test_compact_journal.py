"""The compact event layout of m007 (benchmarks figure 3): one integer-keyed b-tree, compressed payloads.

A database written before m007–m009 (built here with the old migrations and the old row layout)
migrates and reads every event byte for byte; new events round-trip to their exact JSONL
envelope; a corrupt stored payload is one clear JournalError naming the session and seq; the
type queries still answer; and a small commit writes a pinned number of WAL frames.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pytest

from acagent.errors import JournalError
from acagent.events import Event
from acagent.store import FinishStep, InsertStep, RecordUsage, SqliteJournal
from acagent.store import _migrations as migrations
from acagent.store._frames import stored_events
from acagent.store._payload import FORMAT_DEFLATE_V1, decode_payload, encode_payload
from acagent.store._sqlite import PAGE_SIZE

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"
_PAYLOADS: list[tuple[str, dict[str, Any]]] = [
    ("session.status", {"status": "running", "previous": "pending", "turn_id": "turn_1"}),
    ("turn.started", {"turn_id": "turn_1"}),
    ("user.message", {"turn_id": "turn_1", "text": 'héllo ✓ — naïve "quotes" \\ back\nslash ' * 9}),
    ("approval.requested", {"turn_id": "turn_1", "tool_call_id": "call_a", "name": "bash", "arguments": {}}),
    ("usage", {"turn_id": "turn_1", "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.25, "x": None}),
    ("assistant.message", {"turn_id": "turn_1", "text": "done", "nested": {"a": [1, 2.5, True, None]}}),
    ("turn.started", {"turn_id": "turn_2"}),
]


def _old_database(path: Path) -> dict[str, list[bytes]]:
    """A journal file as acagent wrote it before m007: migrations m001–m006, old event rows.

    Returns the JSONL envelope bytes of every event, per session.
    """
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA page_size = 1024")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in migrations.MIGRATIONS[:6]:
        db.execute("BEGIN")
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, ?)", (fn.__name__, TS))
        db.execute("COMMIT")
    assert "m007_compact_journal" not in {fn.__name__ for fn in migrations.MIGRATIONS[:6]}
    envelopes: dict[str, list[bytes]] = {}
    for sid in ("ses_old_a", "ses_old_b"):
        rows = [("session.created", {"cwd": "/w", "model": None, "title": None}), *_PAYLOADS]
        db.execute(
            "INSERT INTO session (id, cwd, status, created_at, updated_at, last_seq) VALUES (?, '/w', 'done', ?, ?, ?)",
            (sid, TS, TS, len(rows)),
        )
        for seq, (typ, payload) in enumerate(rows, 1):
            db.execute(
                "INSERT INTO event (session_id, seq, ts, type, payload) VALUES (?, ?, ?, ?, ?)",
                (sid, seq, TS, typ, orjson.dumps(payload).decode()),
            )
            ev = Event(seq=seq, ts=TS, session_id=sid, type=typ, payload=payload)
            envelopes.setdefault(sid, []).append(ev.to_json_bytes())
    for sid, rid in (
        ("ses_old_a", "ses_old_a|4|d|1"),
        ("ses_gone", "ses_gone|4|d|1"),
        ("ses_old_a", "ses_old_a|9|d|1"),
    ):
        db.execute(  # usage rows as m003 wrote them; ses_gone was removed (its usage rows stay)
            "INSERT INTO usage (session_id, request_id, ts, day, model, input_tokens, output_tokens)"
            " VALUES (?, ?, ?, '2026-01-02', 'openai:m', 100, 10)",
            (sid, rid, TS),
        )
    for rid, attempt, status in (("ses_old_a|4|d|1", 1, "failed"), ("ses_old_a|4|d|2", 2, "inflight")):
        db.execute(  # step rows as m001 wrote them
            "INSERT INTO step (session_id, request_id, step_id, turn_id, digest, attempt, status, started_at)"
            " VALUES ('ses_old_a', ?, 'ses_old_a|4|d', 'turn_1', 'd', ?, ?, ?)",
            (rid, attempt, status, TS),
        )
    db.execute(
        "INSERT INTO tool_call (session_id, tool_call_id, turn_id, step_id, idx, name, arguments, status,"
        " approval, idempotent) VALUES ('ses_old_a', 'call_a', 'turn_1', 's', 0, 'bash', '{}', 'waiting_user',"
        " 'pending', 0)"
    )
    db.close()
    return envelopes


async def test_pre_m007_database_migrates_and_reads_every_event_identically(tmp_path: Path) -> None:
    """Old rows keep their JSON text; every API reads them byte for byte; new commits append after them."""
    path = tmp_path / "old.db"
    envelopes = _old_database(path)
    j = await SqliteJournal.open(path)
    try:
        for sid, expected in envelopes.items():
            got = [e.to_json_bytes() for e in await j.events(sid)]
            assert got == expected
            assert [e.seq for e in await j.events(sid, 2, until=4)] == [3, 4]
            assert await j.turns_started(sid) == 2
            ctx = [e.type for e in await j.context_events(sid)]
            assert ctx == [t for t, _ in _PAYLOADS if t in ("user.message", "assistant.message")]
        pending = await j.pending_approval_events("ses_old_a")
        assert [(e.seq, e.payload["tool_call_id"]) for e in pending] == [(5, "call_a")]
        # a new commit after the migration: compressed, numbered after the old rows
        new = await j.commit_unfenced("ses_old_a", [_PAYLOADS[2]], reason="test")
        assert new[0].seq == len(envelopes["ses_old_a"]) + 1
        assert [e.to_json_bytes() for e in await j.events("ses_old_a", new[0].seq - 1)] == [
            new[0].to_json_bytes()
        ]
        created, _ = await j.create_session(cwd="/w", model=None, title=None)
        assert [e.type for e in await j.events(created.id)] == ["session.created"]
        # steps (m009): old rows keep their order; the inflight one finishes; a duplicate id fails
        attempts = await j.step_attempts("ses_old_a", "ses_old_a|4|d")
        assert [(a.attempt, a.status) for a in attempts] == [(1, "failed"), (2, "inflight")]
        await j.commit_unfenced("ses_old_a", [], ops=[FinishStep("ses_old_a|4|d|2", "done")], reason="test")
        dup = InsertStep("ses_old_a|4|d|2", "ses_old_a|4|d", "turn_1", "d", 2)
        with pytest.raises(JournalError):
            await j.commit_unfenced("ses_old_a", [("step.started", {})], ops=[dup], reason="test")
        new_step = InsertStep("ses_old_a|4|d|3", "ses_old_a|4|d", "turn_1", "d", 3)
        await j.commit_unfenced("ses_old_a", [("step.started", {})], ops=[new_step], reason="test")
        assert [(s.attempt, s.status) for s in await j.steps("ses_old_a")] == [
            (1, "failed"),
            (2, "done"),
            (3, "inflight"),
        ]
        assert await j.steps("ses_old_b") == []
        # usage (m008): old rows keep their sessions, a removed session's rows stay countable
        await j.commit_unfenced("ses_old_a", [], ops=[RecordUsage("r-new", "openai:m", 1, 2)], reason="test")
        assert (await j.usage_totals(session_id="ses_old_a")).input_tokens == 201
        assert (await j.usage_totals(session_id="ses_gone")).calls == 0  # no such session any more
        assert (await j.usage_totals(day="2026-01-02")).input_tokens == 300
        by_session = {key: t.calls for key, _title, t in await j.usage_report(by="session")}
        assert by_session == {"ses_old_a": 3, "ses_gone": 1}
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA page_size").fetchone()[0] == 1024  # an existing file keeps its pages
    n_old = len(envelopes["ses_old_a"])
    kinds = dict(
        db.execute(
            "SELECT typeof(payload), COUNT(*) FROM event_log WHERE key & 4294967295 <= ?"
            " AND key >> 32 IN (SELECT num FROM session WHERE id LIKE 'ses_old_%') GROUP BY 1",
            (n_old,),
        ).fetchall()
    )
    assert kinds == {"text": 2 * n_old}  # copied as they were
    kinds = dict(db.execute("SELECT typeof(payload), COUNT(*) FROM event_log GROUP BY 1").fetchall())
    assert kinds.get("blob", 0) >= 1
    # the compatibility view is gone since m016 (frames are not rows); stored_events answers
    assert db.execute("SELECT name FROM sqlite_schema WHERE name = 'event'").fetchone() is None
    assert [(seq, typ) for _, seq, _, typ, _ in stored_events(db, "ses_old_b") if seq == 4] == [
        (4, "user.message")
    ]
    db.close()


async def test_events_round_trip_to_the_exact_jsonl_envelope(tmp_path: Path) -> None:
    """What commit returns, what the journal reads back and what the transcript writes are the same bytes."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    try:
        row, first = await j.create_session(cwd="/w", model="m", title=None)
        big = {"turn_id": "t", "text": "".join(chr(0x20 + (i * 7919) % 0x2FF0) for i in range(5000))}
        committed = [
            first,
            *await j.commit_unfenced(row.id, [*_PAYLOADS, ("tool.result", big)], reason="test"),
        ]
        read = await j.events(row.id)
        assert [e.to_json_bytes() for e in read] == [e.to_json_bytes() for e in committed]
    finally:
        await j.aclose()


def test_encode_keeps_text_that_does_not_shrink_and_decodes_both() -> None:
    """Short payloads stay JSON text (TEXT); longer ones become a format-1 BLOB; both decode."""
    short = '{"a":1}'
    assert encode_payload(short) == short
    long_text = orjson.dumps({"turn_id": "turn_x", "text": "the same words again " * 20}).decode()
    packed = encode_payload(long_text)
    assert isinstance(packed, bytes) and packed[0] == FORMAT_DEFLATE_V1 and len(packed) < len(long_text)
    assert decode_payload(packed, "x") == long_text.encode()
    assert decode_payload(short, "x") == short


async def test_corrupt_stored_payload_is_one_clear_journal_error(tmp_path: Path) -> None:
    """A damaged BLOB fails the read with a JournalError naming the session and seq (no zlib traceback)."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        await j.commit_unfenced(row.id, [_PAYLOADS[2]], reason="test")
        db = sqlite3.connect(path)
        key, blob = db.execute("SELECT key, payload FROM event_log WHERE key & 4294967295 = 2").fetchone()
        for damaged in (
            blob[:1] + bytes(b ^ 0x5A for b in blob[1:]),
            blob[: len(blob) // 2],
            b"\x09" + blob[1:],
        ):
            with db:
                db.execute("UPDATE event_log SET payload = ? WHERE key = ?", (damaged, key))
            with pytest.raises(JournalError) as err:
                await j.events(row.id)
            assert f"session {row.id!r} event 2" in err.value.message
            assert err.value.__cause__ is None or not isinstance(err.value.__cause__, JournalError)
        db.close()
    finally:
        await j.aclose()


def _wal_frames(path: Path) -> int:
    size = Path(f"{path}-wal").stat().st_size
    return 0 if size == 0 else (size - 32) // (24 + PAGE_SIZE)


async def test_small_commit_writes_two_wal_frames(tmp_path: Path) -> None:
    """A commit of two small events writes the session row's page and the event b-tree's last leaf:
    two WAL frames (before m007: a third for the (session_id, seq) key's b-tree)."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        lease = await j.acquire_lease(row.id, "w1", ttl_s=30)
        small = [("turn.started", {"turn_id": "turn_1"}), ("session.status", {"status": "x"})]
        await j.commit(row.id, small, lease=lease)  # the leaf and the file size settle
        other = sqlite3.connect(path)
        assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
        other.close()
        assert _wal_frames(path) == 0
        await j.commit(row.id, small, lease=lease)
        assert _wal_frames(path) == 2
    finally:
        await j.aclose()


async def test_long_tool_call_arguments_are_stored_compressed_and_read_back_as_json(tmp_path: Path) -> None:
    """``tool_call.arguments`` uses the payload format: a long argument is a BLOB; every read
    (``tool_calls``, ``pending_approvals``, ``resolve_approval``) returns the same JSON text."""
    from acagent.store import InsertToolCall

    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        args = {"command": "grep -rn 'needle' src/ | sort | uniq -c | sort -rn | head -50 " * 8}
        op = InsertToolCall(
            "c1", "t1", "s", 0, "bash", args, idempotent=False, status="waiting_user", approval="pending"
        )
        await j.commit_unfenced(row.id, [("tool.call", {"tool_call_id": "c1"})], ops=[op], reason="test")
        text = orjson.dumps(args).decode()
        assert [c.arguments for c in await j.tool_calls(row.id)] == [text]
        assert [c.arguments for c in await j.pending_approvals(row.id)] == [text]
        assert (await j.resolve_approval(row.id, "c1", "allow")).arguments == text
        db = sqlite3.connect(path)
        assert db.execute("SELECT typeof(arguments) FROM tool_call").fetchone() == ("blob",)
        db.close()
    finally:
        await j.aclose()


def _wal_btrees(path: Path, first_frame: int = 0, end_frame: int | None = None) -> list[str]:
    """The b-trees of WAL frames ``first_frame`` to ``end_frame``, sorted (``dbstat`` names)."""
    data = Path(f"{path}-wal").read_bytes()
    db = sqlite3.connect(path)
    names = {page: name for name, page in db.execute("SELECT name, pageno FROM dbstat")}
    db.close()
    frame = 24 + PAGE_SIZE
    pages = [int.from_bytes(data[off : off + 4], "big") for off in range(32, len(data) - frame + 1, frame)]
    return sorted(names.get(p, "?") for p in pages[first_frame:end_frame])


async def test_step_and_usage_commits_write_one_page_per_table(tmp_path: Path) -> None:
    """m008/m009/m012/m017: a step's intent writes the session row, the event leaf and the
    ``step_log`` leaf (its request id is checked in the session's newest rows and ``step_ids``,
    written a window of rows at a time: no hash-index leaf per step); its finish with usage the
    session row, the event leaf, the step leaf (which holds the usage since m018: no ``usage_log``
    leaf) and its day's ``usage_by_day`` row (m011) — no text index anywhere."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model=None, title=None)
        lease = await j.acquire_lease(row.id, "w1", ttl_s=30)
        for n in (1, 2):  # the first round settles the leaves and the file size
            insert = InsertStep(f"{row.id}|{n}|d|1", f"{row.id}|{n}|d", "turn_1", "d", 1)
            finish = [FinishStep(insert.request_id, "done"), RecordUsage(insert.request_id, "m", 10, 5)]
            other = sqlite3.connect(path)
            assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
            other.close()
            await j.commit(row.id, [("step.started", {"n": n})], lease=lease, ops=[insert])
            after_insert = _wal_frames(path)
            await j.commit(row.id, [("usage", {"n": n})], lease=lease, ops=finish)
        assert _wal_btrees(path, 0, after_insert) == sorted(["event_log", "session", "step_log"])
        assert _wal_btrees(path, after_insert) == sorted(["event_log", "session", "step_log", "usage_by_day"])
    finally:
        await j.aclose()
