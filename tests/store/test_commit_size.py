"""The commit's cheap paths: which commits run on the write connection's thread (the text their
payloads carry, ``is_big``), and the ops' session-row changes in the commit's one ``UPDATE session``."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from acagent.store import SqliteJournal
from acagent.store._ops import AddUsage, InsertStep, ReleaseLease, SetCancel, SetStatus, SetTurn
from acagent.store._sqlite_commit import INLINE_MAX_CHARS, is_big

N = INLINE_MAX_CHARS


def test_is_big_counts_every_string_value_at_every_depth() -> None:
    assert not is_big([("user.message", {"text": "x" * N})])
    assert is_big([("user.message", {"text": "x" * (N + 1)})])
    assert is_big([("a", {"text": "x" * (N // 2)}), ("b", {"text": "x" * (N // 2 + 1)})])  # across events
    nested = {"message": {"parts": [{"text": "x" * (N // 2)}, ("y" * (N // 2 + 1),)]}}
    assert is_big([("assistant.message", nested)])
    assert is_big([("m", {"short": "x", "deep": [[["x" * (N + 1)]]]})])
    assert not is_big([("m", {"k" * (N + 1): 1, "n": 12345678901234567890, "f": 1.5, "b": True, "z": None})])
    assert not is_big([])


@pytest.mark.anyio
async def test_ops_of_one_commit_change_the_row_as_their_own_updates_did(tmp_path: Path) -> None:
    """Counters add up over several ops of one commit, the last status and turn win, the lease is
    released only for its owner, and a commit without events still applies its ops' changes."""
    path = tmp_path / "a.db"
    j = await SqliteJournal.open(path)
    try:
        row, _ = await j.create_session(cwd="/w", model="m", title=None)
        sid = row.id
        lease = await j.acquire_lease(sid, "w1", ttl_s=30)
        statuses = ("pending", "running", "waiting_tool", "done")
        await j.commit(
            sid,
            [("turn.started", {"turn_id": "t1"})],
            lease=lease,
            ops=[
                SetTurn("t0"),
                SetTurn("t1"),
                SetStatus("running", statuses, turn_id="t1"),
                InsertStep("r1", "s1", "t1", "d" * 64, 1),
                InsertStep("r2", "s2", "t1", "e" * 64, 2),
                AddUsage(10, 5),
                AddUsage(1, 2),
                SetStatus("waiting_tool", statuses, turn_id="t1"),
                ReleaseLease("someone else"),
            ],
        )
        got = await j.get_session(sid)
        assert (got.status, got.turn_id, got.llm_calls, got.llm_retries) == ("waiting_tool", "t1", 2, 1)
        assert (got.input_tokens, got.output_tokens, got.lease_owner) == (11, 7, "w1")
        kinds = [(e.type, e.payload.get("status")) for e in await j.events(sid, 0)]
        assert kinds[-3:] == [
            ("session.status", "running"),
            ("session.status", "waiting_tool"),
            ("turn.started", None),
        ]
        await j.commit(sid, [], lease=lease, ops=[SetCancel(True), AddUsage(1, 1)])  # no event
        got = await j.get_session(sid)
        assert (got.cancel_requested, got.input_tokens) == (True, 12)
        await j.commit(sid, [], lease=lease, ops=[SetCancel(False), ReleaseLease("w1")])
        got = await j.get_session(sid)
        assert (got.cancel_requested, got.lease_owner, got.lease_expires_at) == (False, None, None)
    finally:
        await j.aclose()
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM step WHERE session_id = ?", (sid,)).fetchone() == (2,)
    db.close()
