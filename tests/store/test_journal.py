"""SqliteJournal: migrations, fencing, guarded status transitions, approvals compare-and-set."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import pytest

from acagent.errors import ApprovalNotFound, InvalidTransition, SessionBusy, SessionNotFound, StaleLease
from acagent.store import (
    ACTIVE,
    STATUSES,
    InsertToolCall,
    SetStatus,
    SqliteJournal,
    UpdateToolCall,
)
from acagent.store._migrations import MIGRATIONS

pytestmark = pytest.mark.anyio


@pytest.fixture
async def journal(tmp_path: Path):
    j = await SqliteJournal.open(tmp_path / "acagent.db")
    yield j
    await j.aclose()


async def test_migrate_empty_file_creates_tables_and_wal(tmp_path: Path) -> None:
    """An empty file is migrated; WAL mode and the expected columns exist; re-open is a no-op."""
    j = await SqliteJournal.open(tmp_path / "a.db")
    await j.aclose()
    db = sqlite3.connect(tmp_path / "a.db")
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    names = [r[0] for r in db.execute("SELECT name FROM migrations")]
    assert names == [m.__name__ for m in MIGRATIONS]
    cols = {r[1] for r in db.execute("PRAGMA table_info(session)")}
    assert {"status", "lease_owner", "fencing_token", "cancel_requested", "last_seq"} <= cols
    assert {r[1] for r in db.execute("PRAGMA table_info(event)")} == {"session_id", "seq", "ts", "type", "payload"}
    assert {"request_id", "attempt", "status", "digest"} <= {r[1] for r in db.execute("PRAGMA table_info(step)")}
    assert {"status", "idempotent", "run_expires_at", "pid"} <= {r[1] for r in db.execute("PRAGMA table_info(tool_call)")}
    j = await SqliteJournal.open(tmp_path / "a.db")
    await j.aclose()


async def test_zombie_worker_write_is_rejected(journal: SqliteJournal) -> None:
    """After a takeover, the old holder's commit raises StaleLease and writes nothing."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    old = await journal.acquire_lease(row.id, "w1", ttl_s=0.01)
    await anyio.sleep(0.05)
    new = await journal.acquire_lease(row.id, "w2", ttl_s=30)
    assert new.token == old.token + 1
    with pytest.raises(StaleLease):
        await journal.commit(row.id, [("user.message", {"text": "zombie"})], lease=old)
    assert [e.type for e in await journal.events(row.id)] == ["session.created"]
    await journal.commit(row.id, [("user.message", {"text": "ok"})], lease=new)


async def test_late_commit_by_last_holder_without_takeover_succeeds(journal: SqliteJournal) -> None:
    """An expired lease nobody took over still lets its holder commit (token unchanged)."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    lease = await journal.acquire_lease(row.id, "w1", ttl_s=0.01)
    await anyio.sleep(0.05)
    events = await journal.commit(row.id, [("user.message", {"text": "late"})], lease=lease)
    assert events[0].seq == 2


async def test_live_holder_makes_second_acquire_busy(journal: SqliteJournal) -> None:
    """A live lease holder → SessionBusy naming the pid and pointing at attach."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    await journal.acquire_lease(row.id, "w1", ttl_s=30)
    with pytest.raises(SessionBusy, match="acagent attach"):
        await journal.acquire_lease(row.id, "w2", ttl_s=30)
    # a dead holder is taken over at once
    lease = await journal.acquire_lease(row.id, "w2", ttl_s=30, is_dead=lambda h, p: True)
    assert lease.owner == "w2"


async def test_status_transition_requires_whitelist(journal: SqliteJournal) -> None:
    """A transition from a state outside the whitelist is refused; an empty whitelist is a bug."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    with pytest.raises(ValueError, match="non-empty"):
        SetStatus("running", ())
    with pytest.raises(InvalidTransition):
        await journal.status_transition(row.id, "done", ACTIVE)
    events = await journal.status_transition(row.id, "running", ("pending",))
    assert events[-1].type == "session.status"
    assert events[-1].payload == {"status": "running", "previous": "pending"}


async def test_worker_transition_refused_while_cancel_pending(journal: SqliteJournal) -> None:
    """The cancel flag wins over a worker's transition into an active state; cancel still works."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    await journal.status_transition(row.id, "running", ("pending",))
    await journal.set_cancel(row.id, True)
    with pytest.raises(InvalidTransition, match="cancel"):
        await journal.status_transition(row.id, "waiting_tool", ACTIVE)
    await journal.commit(row.id, [], ops=[SetStatus("cancelled", ACTIVE, worker=False)])


async def test_every_status_reaches_a_resting_state_and_cancel(journal: SqliteJournal) -> None:
    """From each status, cancelled (and a resting state) is reachable through the guarded function."""
    for status in STATUSES:
        row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
        db_set = f"UPDATE session SET status = '{status}' WHERE id = '{row.id}'"
        await journal._run(lambda db, q=db_set: db.execute(q))
        if status != "cancelled":
            await journal.commit(
                row.id, [], ops=[SetStatus("cancelled", tuple(s for s in STATUSES if s != "cancelled"), worker=False)]
            )
        assert (await journal.get_session(row.id)).status == "cancelled"
        # and a new message revives it
        await journal.status_transition(row.id, "running", ("pending", "done", "cancelled", "failed"))


async def test_terminal_tool_call_never_changes(journal: SqliteJournal) -> None:
    """done/failed rows refuse any update; updates name their source statuses."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    await journal.commit(row.id, [], ops=[InsertToolCall("c1", "t", "s", 0, "shell", {}, idempotent=False)])
    await journal.commit(row.id, [], ops=[UpdateToolCall("c1", "running", ("dispatched",))])
    await journal.commit(row.id, [], ops=[UpdateToolCall("c1", "done", ("running",))])
    with pytest.raises(InvalidTransition):
        await journal.commit(row.id, [], ops=[UpdateToolCall("c1", "running", ("running", "dispatched"))])
    with pytest.raises(ValueError):
        UpdateToolCall("c1", "running", ("done",)).apply(None)  # type: ignore[arg-type]


async def test_concurrent_approval_answers_first_wins(journal: SqliteJournal) -> None:
    """allow and deny at the same moment: exactly one wins, the other gets 404 naming the winner."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    await journal.commit(
        row.id, [], ops=[InsertToolCall("c1", "t", "s", 0, "shell", {}, idempotent=False, status="waiting_user",
                                        approval="pending")]
    )
    results: list[object] = []

    async def answer(decision: str) -> None:
        try:
            results.append(await journal.resolve_approval(row.id, "c1", decision))
        except ApprovalNotFound as exc:
            results.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer, "allow")
        tg.start_soon(answer, "deny")
    errors = [r for r in results if isinstance(r, ApprovalNotFound)]
    assert len(errors) == 1
    winner = next(r for r in results if not isinstance(r, ApprovalNotFound))
    assert errors[0].detail["decision"] == winner.approval  # type: ignore[union-attr]
    with pytest.raises(ApprovalNotFound):
        await journal.resolve_approval(row.id, "nope", "allow")


async def test_unknown_session_is_clear_error(journal: SqliteJournal) -> None:
    """Unknown ids raise SessionNotFound with the fix in the message."""
    with pytest.raises(SessionNotFound, match="sessions list"):
        await journal.get_session("ses_nope")
    with pytest.raises(SessionNotFound):
        await journal.find_session("zzz")


async def test_seq_is_strictly_increasing_across_writers(tmp_path: Path) -> None:
    """Two journal connections (two processes' worth) appending to one session never reuse a seq."""
    a = await SqliteJournal.open(tmp_path / "j.db")
    b = await SqliteJournal.open(tmp_path / "j.db")
    row, _ = await a.create_session(cwd="/tmp", model=None, title=None)

    async def write(j: SqliteJournal, tag: str) -> None:
        for i in range(50):
            await j.commit(row.id, [("user.message", {"text": f"{tag}{i}"})])

    async with anyio.create_task_group() as tg:
        tg.start_soon(write, a, "a")
        tg.start_soon(write, b, "b")
    seqs = [e.seq for e in await a.events(row.id)]
    assert seqs == list(range(1, 102))
    await a.aclose()
    await b.aclose()
