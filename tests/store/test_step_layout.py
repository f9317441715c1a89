"""The compact ``step_log`` rows of m012 (benchmarks figure 3 bytes per turn) and their ``step`` view.

What :mod:`acagent.store._step_row` packs the view decodes back to the same text, for the shapes
the runner writes and for any other value; a journal written before m012 (steps of two sessions
interleaved, in m009's table) migrates with every step read back identically and in order; and
a 512-byte page holds several steps of the runner's shape (it held one).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acagent.errors import InvalidTransition, JournalError
from acagent.events import now_ts
from acagent.store import FinishStep, InsertStep, SqliteJournal
from acagent.store import _migrations as migrations
from acagent.store._manage import remove_session
from acagent.store._sqlite import PAGE_SIZE
from acagent.store._step_row import insert_step_row, pack_ts

pytestmark = pytest.mark.anyio

SID = "ses_1a235bb60146d501508f3db467"
DIGEST = "4b8b68014dc36f800a16700198c64df13c64a71fec100d1c5d7371c40baf5202"
TS = "2026-01-02T03:04:05.678901Z"
# (request_id, step_id, turn_id, digest, attempt, status, error, started_at, finished_at)
_STEPS = [
    (
        f"{SID}|1014|4b8b68014dc36f80|1",
        f"{SID}|1014|4b8b68014dc36f80",
        "turn_66a7104a20ef4bf3",
        DIGEST,
        1,
        "done",
        None,
        now_ts(),
        now_ts(),
    ),
    (
        f"{SID}|compact|1009|49022301fc3ca475|2",
        f"{SID}|compact|1009|49022301fc3ca475",
        "turn_66a7104a20ef4bf3",
        "49022301fc3ca475",
        2,
        "inflight",
        None,
        TS,
        None,
    ),
    (
        "r1",
        "s1",
        "turn_1",
        "d",
        1,
        "failed",
        "boom",
        "1970-01-01T00:00:00.000000Z",
        "2024-02-29T23:59:59.999999Z",
    ),
    (
        f"{SID}|7|ABCDEF0123456789|1",
        f"{SID}|7|ABCDEF0123456789",
        "turn_ABCDEF0123456789",
        "ABCDEF0123456789ab",
        1,
        "done",
        None,
        "9999-12-31T23:59:59.999999Z",
        "2026-13-01T00:00:00.000000Z",
    ),
    (
        f"{SID}||4b8b|3",
        f"{SID}||4b8b",
        "turn_66a7104a20ef4bf",
        "4b8b",
        3,
        "done",
        None,
        "2026-01-02T03:04:60.000000Z",
        "2026-01-02 03:04:05.678901Z",
    ),
    (
        f"{SID}|1|abc|1",
        f"{SID}|1|abc",
        "x",
        "abc",
        1,
        "done",
        None,
        "2026-01-02T03:04:05.678901+00:00",
        "1969-12-31T23:59:59.999999Z",
    ),
    ("", f"{SID}|2|", "", "", 0, "done", "", "", ""),
    # the runner's step ids since m015: session|turn|digest16 (runner/_stepstart.py)
    (
        f"{SID}|turn_66a7104a20ef4bf3|4b8b68014dc36f80|1",
        f"{SID}|turn_66a7104a20ef4bf3|4b8b68014dc36f80",
        "turn_66a7104a20ef4bf3",
        DIGEST,
        1,
        "inflight",
        None,
        TS,
        None,
    ),
    (f"{SID}|compact_0a1b|abc|2", f"{SID}|compact_0a1b|abc", "compact_0a1b", "abc", 2, "done", None, TS, TS),
]
LATEST = migrations.MIGRATIONS[-1].__name__


def _database_with_steps(path: Path, upto: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute(f"PRAGMA page_size = {PAGE_SIZE}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    names = [fn.__name__ for fn in migrations.MIGRATIONS]
    for fn in migrations.MIGRATIONS[: names.index(upto) + 1]:
        db.execute("BEGIN")
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, ?)", (fn.__name__, TS))
        db.execute("COMMIT")
    for num, sid in ((1, SID), (2, "ses_b")):
        db.execute(
            "INSERT INTO session (id, cwd, status, created_at, updated_at, num) VALUES (?, '/w', 'done', ?, ?, ?)",
            (sid, TS, TS, num),
        )
    return db


def test_every_packed_value_reads_back_through_the_view(tmp_path: Path) -> None:
    """Derivable ids, hex digests and turn ids and RFC 3339 times are packed, anything else kept; the
    ``step`` view returns every value exactly as given, in key order."""
    db = _database_with_steps(tmp_path / "a.db", LATEST)
    for row in _STEPS:
        insert_step_row(db, 1, SID, row)
    got = db.execute(
        "SELECT request_id, step_id, turn_id, digest, attempt, status, error, started_at, finished_at"
        " FROM step WHERE session_id = ? ORDER BY key",
        (SID,),
    ).fetchall()
    assert got == _STEPS
    packed = db.execute(
        "SELECT request_id, step_id, mid, typeof(turn_id), typeof(digest), typeof(started_at) FROM step_log ORDER BY key"
    ).fetchall()
    assert packed[0] == (None, None, "1014", "blob", "blob", "integer")
    assert packed[1] == (None, None, "compact|1009", "blob", "blob", "integer")
    assert packed[2] == ("r1", "s1", None, "text", "text", "integer")
    assert packed[3][3:5] == ("text", "text")  # upper-case hex is kept as text
    assert packed[-2] == (None, None, None, "blob", "blob", "integer")  # the turn is the row's own
    assert packed[-1] == (None, None, None, "text", "text", "integer")
    db.close()
    assert pack_ts("2026-02-30T00:00:00.000000Z") == "2026-02-30T00:00:00.000000Z"


async def test_pre_m012_database_migrates_every_step_identically(tmp_path: Path) -> None:
    """Old rows (two sessions interleaved) read back field for field and in order; an inflight one
    finishes; a duplicate request id still fails; new steps follow the old; removal deletes them."""
    path = tmp_path / "old.db"
    db = _database_with_steps(path, "m011_usage_by_day")
    from acagent.store._sqlite_ops import step_rid

    rows = [(SID, r) for r in _STEPS[:4]] + [("ses_b", _STEPS[2])] + [(SID, r) for r in _STEPS[4:]]
    counts = {SID: 0, "ses_b": 0}
    for sid, r in rows:  # m009's layout: every column as text, key = num << 32 | n
        counts[sid] += 1
        num = 1 if sid == SID else 2
        db.execute(
            "INSERT INTO step (key, rid, session_id, request_id, step_id, turn_id, digest, attempt, status, error,"
            " started_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            ((num << 32) | counts[sid], step_rid(sid, r[0]), sid, *r),
        )
    db.close()
    j = await SqliteJournal.open(path)
    try:
        got = [
            (
                s.request_id,
                s.step_id,
                s.turn_id,
                s.digest,
                s.attempt,
                s.status,
                s.error,
                s.started_at,
                s.finished_at,
            )
            for s in await j.steps(SID)
        ]
        assert sorted(got, key=lambda r: _STEPS.index(r)) == list(_STEPS)
        assert [s.session_id for s in await j.steps("ses_b")] == ["ses_b"]
        attempts = await j.step_attempts(SID, f"{SID}|compact|1009|49022301fc3ca475")
        assert [(a.attempt, a.status) for a in attempts] == [(2, "inflight")]
        await j.commit_unfenced(SID, [], ops=[FinishStep(_STEPS[1][0], "done")], reason="test")
        with pytest.raises(InvalidTransition):
            await j.commit_unfenced(SID, [], ops=[FinishStep(_STEPS[1][0], "done")], reason="test")
        with pytest.raises(InvalidTransition):  # a request id of the other session
            await j.commit_unfenced("ses_b", [], ops=[FinishStep(_STEPS[1][0], "done")], reason="test")
        (done,) = await j.step_attempts(SID, f"{SID}|compact|1009|49022301fc3ca475")
        assert done.status == "done" and done.finished_at is not None and done.finished_at >= TS
        dup = InsertStep(_STEPS[0][0], _STEPS[0][1], "turn_x", DIGEST, 1)
        with pytest.raises(JournalError):
            await j.commit_unfenced(SID, [("step.started", {})], ops=[dup], reason="test")
        new = InsertStep(
            f"{SID}|2000|{DIGEST[:16]}|1", f"{SID}|2000|{DIGEST[:16]}", "turn_66a7104a20ef4bf3", DIGEST, 1
        )
        await j.commit_unfenced(SID, [("step.started", {})], ops=[new], reason="test")
        (last,) = [s for s in await j.steps(SID) if s.request_id == new.request_id]
        assert (last.step_id, last.turn_id, last.digest, last.status, last.finished_at) == (
            new.step_id,
            new.turn_id,
            DIGEST,
            "inflight",
            None,
        )
        assert await remove_session(j, "ses_b", tmp_path / "sessions") is not None
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM step_log WHERE key >> 32 = 2").fetchone() == (0,)
    assert db.execute("SELECT type FROM sqlite_schema WHERE name = 'step'").fetchone() == ("view",)
    db.close()


def test_a_page_holds_several_runner_steps(tmp_path: Path) -> None:
    """Twelve steps shaped like the runner's fit in at most four 512-byte leaves (m009: one a leaf),
    with the step ids of m014 (``session|turn|digest16``) as with the older ones."""
    db = _database_with_steps(tmp_path / "a.db", LATEST)
    for n in range(12):
        turn = f"turn_66a7104a20ef4b{n:02x}"
        step_id = f"{SID}|{1000 + n}|{DIGEST[:16]}" if n % 2 else f"{SID}|{turn}|{DIGEST[:16]}"
        insert_step_row(
            db, 1, SID, (f"{step_id}|1", step_id, turn, DIGEST, 1, "done", None, now_ts(), now_ts())
        )
    leaves = db.execute(
        "SELECT COUNT(*) FROM dbstat WHERE name = 'step_log' AND pagetype = 'leaf'"
    ).fetchone()[0]
    assert leaves <= 4
    db.close()


def test_pack_ts_parses_each_second_once_and_packs_only_what_reads_back() -> None:
    """The cached second (pack_ts parses ``YYYY-MM-DDTHH:MM:SS`` once per second) gives every time
    of that second its own microseconds, and a text that does not read back stays text."""
    from acagent.store._step_row import unpack_ts

    for ts in (
        "2026-12-02T11:07:19.859952Z",
        "2026-12-02T11:07:19.000001Z",  # same second, from the cache
        "2026-12-02T11:07:20.000000Z",
        "1970-01-01T00:00:00.000000Z",
        "9999-12-31T23:59:59.999999Z",
    ):
        us = pack_ts(ts)
        assert isinstance(us, int) and unpack_ts(us) == ts
    for ts in (
        "2026-02-30T00:00:00.000000Z",  # no such day
        "2026-12-31T23:59:60.000000Z",  # leap second
        "1969-12-31T23:59:59.500000Z",  # before the epoch
        "2026-12-02T11:07:19.859952",  # no Z
        "2026-12-02 11:07:19.859952Z",
    ):
        assert pack_ts(ts) == ts
        assert pack_ts(ts) == ts  # and again, from the cache
    assert pack_ts(None) is None
