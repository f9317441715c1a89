"""PostgreSQL-only checks of PostgresJournal.

The shared behaviour (fencing, transitions, intents, approvals, replay, import/export) is the
conformance suite in tests/store/conformance, which runs on both SQLite and PostgreSQL.
"""

from __future__ import annotations

import anyio
import pytest

from acagent.errors import JournalError, StaleLease
from acagent.store import SetStatus
from acagent.store.pg import PostgresJournal
from acagent.store.pg._schema import PG_MIGRATIONS

pytestmark = pytest.mark.anyio


@pytest.fixture
async def journal(pg_url: str):
    j = await PostgresJournal.open(pg_url, daemon_id="d-test")
    yield j
    await j.aclose()


async def test_migrate_empty_database_records_versions(pg_url: str) -> None:
    """An empty database is migrated once; re-open is a no-op; the expected columns exist."""
    import asyncpg

    j = await PostgresJournal.open(pg_url, daemon_id="a")
    await j.aclose()
    j = await PostgresJournal.open(pg_url, daemon_id="a")
    await j.aclose()
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch("SELECT version, name FROM schema_migrations ORDER BY version")
        assert [(r[0], r[1]) for r in rows] == [(i, n) for i, (n, _) in enumerate(PG_MIGRATIONS, start=1)]
        cols = {
            r[0]
            for r in await conn.fetch(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'session'"
            )
        }
        assert {
            "status",
            "lease_owner",
            "lease_daemon",
            "fencing_token",
            "lease_expires_at",
            "last_seq",
        } <= cols
    finally:
        await conn.close()


async def test_seq_is_strictly_increasing_across_daemons(pg_url: str) -> None:
    """Two daemons' journals appending to one session never reuse a seq."""
    a = await PostgresJournal.open(pg_url, daemon_id="a")
    b = await PostgresJournal.open(pg_url, daemon_id="b")
    try:
        row, _ = await a.create_session(cwd="/tmp", model=None, title=None)

        async def write(j: PostgresJournal, tag: str) -> None:
            for i in range(50):
                await j.commit_unfenced(row.id, [("user.message", {"text": f"{tag}{i}"})], reason="test")

        async with anyio.create_task_group() as tg:
            tg.start_soon(write, a, "a")
            tg.start_soon(write, b, "b")
        assert [e.seq for e in await a.events(row.id)] == list(range(1, 102))
    finally:
        await a.aclose()
        await b.aclose()


async def test_fenced_append_with_ops_writes_nothing(journal: PostgresJournal) -> None:
    """A stale token on a commit with row operations: no event, no status change."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    old = await journal.acquire_lease(row.id, "w1", ttl_s=30)
    await journal.acquire_lease(row.id, "w1", ttl_s=30)  # same owner re-acquires: token bumps
    with pytest.raises(StaleLease):
        await journal.commit(
            row.id, [("user.message", {"text": "x"})], lease=old, ops=[SetStatus("running", ("pending",))]
        )
    after = await journal.get_session(row.id)
    assert (after.status, after.last_seq) == ("pending", 1)


async def test_lease_expiry_uses_the_database_clock(journal: PostgresJournal) -> None:
    """lease_expires_at is the server's epoch + ttl, whatever this host's clock says."""
    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    await journal.acquire_lease(row.id, "w1", ttl_s=100)
    db_now = (await journal._fetch("SELECT extract(epoch from clock_timestamp())::float8"))[0][0]
    expires = (await journal.get_session(row.id)).lease_expires_at
    assert expires is not None and abs(expires - (db_now + 100)) < 2


async def test_keep_leases_is_one_statement_and_reports_lost(journal: PostgresJournal) -> None:
    """Renewing many leases: held ones come back, a superseded one is reported lost."""
    rows = [(await journal.create_session(cwd="/tmp", model=None, title=None))[0] for _ in range(3)]
    leases = [(r.id, await journal.acquire_lease(r.id, f"w{i}", ttl_s=30)) for i, r in enumerate(rows)]
    await journal._fetch("UPDATE session SET fencing_token = fencing_token + 1 WHERE id = $1", rows[1].id)
    await journal.set_cancel(rows[2].id, True)
    states = await journal.keep_leases(leases, ttl_s=30, renew=True)
    assert states == {rows[0].id: (True, False), rows[1].id: (False, False), rows[2].id: (True, True)}


async def test_daemon_id_live_elsewhere_is_refused(pg_url: str) -> None:
    """A second process with a live daemon id is refused in one line naming the URL (no password)."""
    a = await PostgresJournal.open(pg_url, daemon_id="same")
    try:
        with pytest.raises(JournalError, match="already live") as info:
            await PostgresJournal.open(pg_url, daemon_id="same")
        assert "s3cret" not in str(info.value) and "postgresql://postgres@127.0.0.1" in str(info.value)
    finally:
        await a.aclose()


async def test_frozen_holder_never_writes_after_takeover(pg_url: str) -> None:
    """SIGSTOP-like races (benchmarks/fig_pg_fencing.py runs ≥ 300): 0 zombie writes."""
    import os

    from benchmarks.fig_pg_fencing import race_rounds

    result = await race_rounds(pg_url, int(os.environ.get("ACAGENT_PG_RACE_ROUNDS", "15")))
    assert result["zombie_writes"] == 0, result
    assert result["a_refused"] > 0  # the race was real: the zombie did try after the takeover


async def test_usage_and_caps_queries(journal: PostgresJournal) -> None:
    """The usage rows, caps and turn counts the runner checks before each LLM call (caps)."""
    from acagent.store import RecordUsage, SetTurn
    from acagent.store._usage import local_day

    row, _ = await journal.create_session(cwd="/tmp", model=None, title=None)
    lease = await journal.acquire_lease(row.id, "w1", ttl_s=30)
    await journal.commit(row.id, [("turn.started", {"turn_id": "t1"})], lease=lease, ops=[SetTurn("t1")])
    await journal.commit(
        row.id,
        [],
        lease=lease,
        ops=[
            RecordUsage("r1", "openai:m", 10, 5, cost_usd=None),
            RecordUsage("r2", "openai:m", 1, 2, cost_usd=0.5),
        ],
    )
    totals = await journal.usage_totals(session_id=row.id)
    assert (totals.calls, totals.input_tokens, totals.output_tokens, totals.unpriced_calls) == (2, 11, 7, 1)
    assert totals.cost_usd == 0.5 and isinstance(totals.input_tokens, int)
    priced = await journal.usage_totals(day=local_day(), price=lambda m, i, c, o: 1.0)
    assert priced.cost_usd == 1.5 and priced.unpriced_calls == 0
    assert await journal.turns_started(row.id) == 1
    assert await journal.session_limits(row.id) == {}
    await journal.set_session_limits(row.id, {"session_usd": 2.0})
    assert await journal.session_limits(row.id) == {"session_usd": 2.0}
    report = await journal.usage_report(by="session")
    assert report[0][0] == row.id and report[0][2].calls == 2
    assert (await journal.session_counts())["pending"] == 1


async def test_takeovers_are_counted_in_metrics(pg_url: str) -> None:
    """A lease taken from another holder (expired) and a claim of an orphan each count one
    ``acagent_lease_takeovers_total``; re-taking one's own or a released lease counts none."""
    from acagent.obs import _metrics

    recorder = _metrics.enable_metrics()  # maybe already on (an earlier test): count from here
    try:
        base = recorder.registry.get_sample_value("acagent_lease_takeovers_total") or 0.0
        total = lambda: (recorder.registry.get_sample_value("acagent_lease_takeovers_total") or 0.0) - base  # noqa: E731
        a = await PostgresJournal.open(pg_url, daemon_id="ta")
        b = await PostgresJournal.open(pg_url, daemon_id="tb")
        try:
            row, _ = await a.create_session(cwd="/tmp", model=None, title=None)
            lease = await a.acquire_lease(row.id, "wa", ttl_s=30)
            await a.release_lease(row.id, lease)
            lease = await a.acquire_lease(row.id, "wa", ttl_s=0.01)
            assert total() == 0
            await a.commit(row.id, [], lease=lease, ops=[SetStatus("running", ("pending",))])
            await anyio.sleep(0.05)
            await b.acquire_lease(row.id, "wb", ttl_s=0.01)  # wa's lease expired: a takeover
            assert total() == 1
            await anyio.sleep(0.05)
            assert await a.claim_orphans(limit=5, ttl_s=30) == [row.id]  # wb expired: a takeover
            assert total() == 2
            await a.acquire_lease(row.id, "wa2", ttl_s=30)  # this daemon's own claim: not another
            assert total() == 2
        finally:
            await a.aclose()
            await b.aclose()
    finally:
        _metrics._reset_for_tests()
