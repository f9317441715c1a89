"""The session's long texts beside its row (m013, benchmarks figure 3 bytes per turn), and
``last_message`` read from its own event (m014, figure 3 durable commit).

A journal written before m013 (sessions with a 500-character ``last_message``, a warnings list,
remembered approval rules) migrates with every session read — get, find, list, lease — returning
the same values; later writes of each text read back; an import keeps them; removal drops them;
and a commit that changes ``last_message`` writes one session leaf and one small text row, no
overflow page (the ~1.1 KB row spilled onto two and churned the freelist).
"""

from __future__ import annotations

import sqlite3
from dataclasses import asdict
from pathlib import Path

import orjson
import pytest

from acagent.events import Event
from acagent.store import SetApprovalRules, SqliteJournal
from acagent.store import _migrations as migrations
from acagent.store._manage import remove_session
from acagent.store._protocol import ImportedSession
from acagent.store._sqlite import PAGE_SIZE

pytestmark = pytest.mark.anyio

TS = "2026-01-02T03:04:05.678901Z"
LONG = ("héllo ✓ — naïve text " * 30)[:500]
WARN = orjson.dumps(
    [{"code": "context_window_unknown", "message": "the context window is unknown " * 8}]
).decode()
RULES = orjson.dumps({"bash": {"always": ["git status", "ls -la"]}}).decode()
# (id, num, last_message, warnings, approval_rules)
_SESSIONS = [
    ("ses_a", 1, LONG, WARN, RULES),
    ("ses_b", 2, "short", None, "{}"),
    ("ses_c", 3, None, None, "{}"),
]


def _pre_m013_database(path: Path) -> None:
    names = [fn.__name__ for fn in migrations.MIGRATIONS]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in migrations.MIGRATIONS[: names.index("m012_compact_step") + 1]:
        db.execute("BEGIN")
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, ?)", (fn.__name__, TS))
        db.execute("COMMIT")
    for sid, num, last, warnings, rules in _SESSIONS:
        db.execute(
            "INSERT INTO session (id, cwd, title, status, created_at, updated_at, num, last_message, warnings,"
            " approval_rules) VALUES (?, '/w', 'a title', 'done', ?, ?, ?, ?, ?, ?)",
            (sid, TS, TS, num, last, warnings, rules),
        )
    db.close()


async def test_pre_m013_database_reads_every_session_identically(tmp_path: Path) -> None:
    """Every read returns the old values; new values of each text read back; removal drops them."""
    path = tmp_path / "old.db"
    _pre_m013_database(path)
    j = await SqliteJournal.open(path)
    try:
        for sid, _num, last, warnings, rules in _SESSIONS:
            row = await j.get_session(sid)
            assert (row.last_message, row.warnings, row.approval_rules) == (last, warnings, rules)
            assert asdict(await j.find_session(sid)) == asdict(row)
        listed = {r.id: asdict(r) for r in await j.list_sessions()}
        assert listed == {sid: asdict(await j.get_session(sid)) for sid, *_ in _SESSIONS}
        _lease, leased, _limits = await j.lease_session("ses_a", "w1", ttl_s=30)
        assert (leased.last_message, leased.warnings, leased.approval_rules) == (LONG, WARN, RULES)
        # later writes: a message commit, the rules op, the warnings
        await j.commit_unfenced(
            "ses_b", [("user.message", {"turn_id": "t", "text": "new " * 200})], reason="test"
        )
        assert (await j.get_session("ses_b")).last_message == ("new " * 200)[:500]
        await j.commit_unfenced("ses_b", [], ops=[SetApprovalRules({"x": 1})], reason="test")
        assert (await j.get_session("ses_b")).approval_rules == '{"x":1}'
        await j.commit_unfenced("ses_a", [], ops=[SetApprovalRules({})], reason="test")
        assert (await j.get_session("ses_a")).approval_rules == "{}"
        await j.set_warnings("ses_c", [{"code": "w"}])
        assert (await j.get_session("ses_c")).to_public()["warnings"] == [{"code": "w"}]
        await j.set_warnings("ses_gone", [{"code": "w"}])  # no such session: nothing written
        assert await remove_session(j, "ses_c", tmp_path / "sessions") is not None
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    assert db.execute("SELECT DISTINCT last_message, warnings, approval_rules FROM session").fetchall() == [
        (None, None, "{}")
    ]
    assert db.execute("SELECT COUNT(*) FROM session_text WHERE key >> 2 = 3").fetchone() == (0,)
    texts = db.execute("SELECT key >> 2, key & 3 FROM session_text ORDER BY key").fetchall()
    assert texts == [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 3),
    ]  # a: message, warnings (rules cleared); b: message, rules
    db.close()


async def test_import_keeps_last_message_and_warnings(tmp_path: Path) -> None:
    """``import_session`` stores the texts beside the row; every read returns them."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    try:
        s = ImportedSession(
            "ses_imp", "/w", last_seq=1, last_message=LONG * 2, warnings=[{"code": "transcript_damaged"}]
        )
        ev = Event(seq=1, ts=TS, session_id="ses_imp", type="session.created", payload={"cwd": "/w"})
        await j.import_session(s, [ev])
        row = await j.get_session("ses_imp")
        assert row.last_message == (LONG * 2)[:500]
        assert orjson.loads(row.warnings or "") == [{"code": "transcript_damaged"}]
    finally:
        await j.aclose()


def _wal_btrees(path: Path) -> list[str]:
    data = Path(f"{path}-wal").read_bytes()
    db = sqlite3.connect(path)
    names = {
        page: f"{name}:{kind}" for name, page, kind in db.execute("SELECT name, pageno, pagetype FROM dbstat")
    }
    db.close()
    frame = 24 + PAGE_SIZE
    return sorted(
        names.get(int.from_bytes(data[off : off + 4], "big"), "?")
        for off in range(32, len(data) - frame + 1, frame)
    )


async def test_message_commit_writes_one_session_leaf_and_no_overflow(tmp_path: Path) -> None:
    """With a 500-character last message and a warnings list, a commit writes the session leaf (no
    overflow page) and, since m014, no session_text page (the row names the message's seq); the
    session b-tree has no overflow page at all."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model="m", title="t" * 80)
        await j.set_warnings(row.id, orjson.loads(WARN))
        lease = await j.acquire_lease(row.id, "w1", ttl_s=30)
        seen = []
        for n in range(2):  # the first round settles the leaves and the file size
            other = sqlite3.connect(path)
            assert other.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0
            other.close()
            text = f"{n} " + "the answer, in prose that is long enough to fill the field " * 10
            await j.commit(row.id, [("assistant.message", {"turn_id": "t", "text": text})], lease=lease)
            seen.append(_wal_btrees(path))
        assert [p for p in seen[1] if p.startswith("session")] == ["session:leaf"]
        assert (await j.get_session(row.id)).last_message == text[:500]
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    assert db.execute(
        "SELECT COUNT(*) FROM dbstat WHERE name = 'session' AND pagetype = 'overflow'"
    ).fetchone() == (0,)
    db.close()


async def test_last_message_is_the_text_of_the_latest_message_event(tmp_path: Path) -> None:
    """m014: every read gives the text of the commit's last user or assistant message with text (cut
    to 500 characters; a tool result or a message without text leaves it), through the fast path
    (no ops) and the general one (ops), fenced and not, and a journal closed and reopened."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model="m", title=None)
        assert (await j.get_session(row.id)).last_message is None
        lease = await j.acquire_lease(row.id, "w1", ttl_s=30)
        await j.commit(row.id, [("user.message", {"turn_id": "t", "text": LONG + "tail"})], lease=lease)
        assert (await j.get_session(row.id)).last_message == LONG
        await j.commit(  # the last with text wins; a tool result and an empty text do not count
            row.id,
            [
                ("assistant.message", {"turn_id": "t", "text": "first"}),
                ("assistant.message", {"turn_id": "t", "text": "second"}),
                ("tool.result", {"turn_id": "t", "text": "not a message"}),
                ("user.message", {"turn_id": "t", "text": ""}),
            ],
            lease=lease,
        )
        assert (await j.get_session(row.id)).last_message == "second"
        await j.commit(
            row.id,
            [("user.message", {"turn_id": "t", "text": "ops"})],
            lease=lease,
            ops=[SetApprovalRules({"x": 1})],
        )  # the general path
        _lease, leased, _limits = await j.lease_session(row.id, "w1", ttl_s=30)
        assert leased.last_message == "ops" and leased.approval_rules == '{"x":1}'
        await j.commit_unfenced(row.id, [("usage", {"turn_id": "t"})], reason="test")
        assert [r.last_message for r in await j.list_sessions()] == ["ops"]
        assert (await j.find_session(row.id[:8])).last_message == "ops"
    finally:
        await j.aclose()
    db = sqlite3.connect(path)  # no copy of the text: the row names the event
    assert db.execute("SELECT COUNT(*) FROM session_text WHERE key & 3 = 1").fetchone() == (0,)
    assert db.execute("SELECT last_message_seq FROM session").fetchone()[0] is not None
    db.close()
    j = await SqliteJournal.open(path)
    try:
        assert (await j.get_session(row.id)).last_message == "ops"
    finally:
        await j.aclose()


async def test_pre_m014_last_message_reads_until_the_next_message(tmp_path: Path) -> None:
    """A session_text ``last_message`` (an import, a journal before m014) is read while the session
    has no message commit since; the next one replaces it."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    try:
        s = ImportedSession("ses_imp", "/w", last_seq=1, last_message="imported text")
        ev = Event(seq=1, ts=TS, session_id="ses_imp", type="session.created", payload={"cwd": "/w"})
        await j.import_session(s, [ev])
        await j.commit_unfenced("ses_imp", [("usage", {"turn_id": "t"})], reason="test")
        assert (await j.get_session("ses_imp")).last_message == "imported text"
        await j.commit_unfenced(
            "ses_imp", [("assistant.message", {"turn_id": "t", "text": "new"})], reason="t"
        )
        assert (await j.get_session("ses_imp")).last_message == "new"
    finally:
        await j.aclose()


async def test_a_damaged_text_names_its_session_and_field(tmp_path: Path) -> None:
    """Tester F10: the error said only "a stored payload: stored payload is corrupt"."""
    from acagent.errors import JournalError

    path = tmp_path / "acagent.db"
    journal = await SqliteJournal.open(path)
    try:
        row, _ = await journal.create_session(cwd=str(tmp_path), model=None, title=None)
        db = sqlite3.connect(path)
        (num,) = db.execute("SELECT num FROM session WHERE id = ?", (row.id,)).fetchone()
        db.execute(  # approval_rules is text 3 of the session (m013); a truncated deflate stream
            "INSERT OR REPLACE INTO session_text (key, value) VALUES (?, ?)",
            (num << 2 | 3, bytes.fromhex("01ab562affffffff0011")),
        )
        db.commit()
        db.close()
        with pytest.raises(JournalError) as caught:
            await journal.get_session(row.id)
        assert row.id in caught.value.message and "approval_rules" in caught.value.message
        assert caught.value.detail == {"reason": "corrupt"}
    finally:
        await journal.aclose()
