"""Conformance: leases, fencing tokens, and the fenced-by-default commit."""

from __future__ import annotations

import anyio
import pytest

from acagent.errors import SessionBusy, SessionNotFound, StaleLease
from acagent.store import Journal, Lease, ReleaseLease, SetStatus

pytestmark = pytest.mark.anyio


async def test_commit_requires_a_lease(journal: Journal, h) -> None:
    """``commit`` is fenced: no lease is a programming error; the unfenced path is named and reasoned."""
    row = await h.session()
    with pytest.raises(TypeError):
        await journal.commit(row.id, [("user.message", {"text": "x"})], lease=None)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        await journal.commit_unfenced(row.id, [("user.message", {"text": "x"})], reason="")
    out = await journal.commit_unfenced(row.id, [("user.message", {"text": "x"})], reason="repair")
    assert [e.seq for e in out] == [2]


async def test_zombie_worker_write_is_rejected(journal: Journal, h) -> None:
    """After a takeover, the old holder's commit raises StaleLease and writes nothing (ops neither)."""
    row, old = await h.leased(ttl_s=0.01)
    await anyio.sleep(0.05)
    new = await journal.acquire_lease(row.id, "w2", ttl_s=30)
    assert new.token == old.token + 1
    with pytest.raises(StaleLease):
        await journal.commit(
            row.id,
            [("user.message", {"text": "zombie"})],
            lease=old,
            ops=[SetStatus("running", ("pending",))],
        )
    assert [e.type for e in await journal.events(row.id)] == ["session.created"]
    assert (await journal.get_session(row.id)).status == "pending"
    await journal.commit(row.id, [("user.message", {"text": "ok"})], lease=new)


async def test_late_commit_by_last_holder_without_takeover_succeeds(journal: Journal, h) -> None:
    """An expired lease nobody took over still lets its holder commit (the token is unchanged)."""
    row, lease = await h.leased(ttl_s=0.01)
    await anyio.sleep(0.05)
    events = await journal.commit(row.id, [("user.message", {"text": "late"})], lease=lease)
    assert events[0].seq == 2


async def test_live_holder_makes_second_acquire_busy(journal: Journal, h) -> None:
    """A live holder → SessionBusy naming the pid and pointing at attach; a dead one is taken over."""
    row, _ = await h.leased()
    with pytest.raises(SessionBusy, match="acagent attach"):
        await journal.acquire_lease(row.id, "w2", ttl_s=30)
    lease = await journal.acquire_lease(row.id, "w2", ttl_s=30, is_dead=lambda host, pid: True)
    assert lease.owner == "w2"
    same = await journal.acquire_lease(row.id, "w2", ttl_s=30)  # the holder itself may re-take it
    assert same.token == lease.token + 1


async def test_renew_check_release(journal: Journal, h) -> None:
    """Renewal keeps a held lease; a superseded one reports not held; release frees it; cancel is reported."""
    row, lease = await h.leased()
    assert await journal.renew_lease(row.id, lease, ttl_s=30) == (True, False)
    await journal.set_cancel(row.id, True)
    assert await journal.cancel_requested(row.id) is True
    kept = await journal.keep_leases([(row.id, lease)], ttl_s=30, renew=False)
    assert kept == {row.id: (True, True)}
    stale = Lease(owner=lease.owner, token=lease.token - 1)
    assert (await journal.keep_leases([(row.id, stale)], ttl_s=30, renew=True))[row.id][0] is False
    await journal.release_lease(row.id, stale)  # superseded: a no-op
    with pytest.raises(SessionBusy):
        await journal.acquire_lease(row.id, "w2", ttl_s=30)
    await journal.release_lease(row.id, lease)
    other = await journal.acquire_lease(row.id, "w2", ttl_s=30)
    assert other.token == lease.token + 1
    assert (await journal.renew_lease(row.id, lease, ttl_s=30))[0] is False


async def test_unknown_session_is_clear_error(journal: Journal) -> None:
    """Unknown ids raise SessionNotFound with the fix in the message, on every path."""
    with pytest.raises(SessionNotFound, match="sessions list"):
        await journal.get_session("ses_nope")
    with pytest.raises(SessionNotFound):
        await journal.find_session("zzz")
    with pytest.raises(SessionNotFound):
        await journal.acquire_lease("ses_nope", "w", ttl_s=1)
    with pytest.raises(SessionNotFound):
        await journal.commit_unfenced("ses_nope", [("user.message", {"text": "x"})], reason="test")
    with pytest.raises(SessionNotFound):
        await journal.context_events("ses_nope")


async def test_seq_is_strictly_increasing_across_writers(journal_factory) -> None:
    """Two connections (two processes' worth) appending to one session never reuse or skip a seq."""
    a = await journal_factory()
    b = await journal_factory()
    row, _ = await a.create_session(cwd="/tmp", model=None, title=None)
    lease = await a.acquire_lease(row.id, "w1", ttl_s=30)

    async def write(j: Journal, tag: str) -> None:
        for i in range(30):
            await j.commit(row.id, [("user.message", {"text": f"{tag}{i}"}), ("usage", {})], lease=lease)

    async with anyio.create_task_group() as tg:
        tg.start_soon(write, a, "a")
        tg.start_soon(write, b, "b")
    seqs = [e.seq for e in await b.events(row.id)]
    assert seqs == list(range(1, 122))
    assert (await b.get_session(row.id)).last_seq == 121


async def test_a_commit_releases_its_own_lease(journal: Journal, h) -> None:
    """``ReleaseLease`` in a fenced commit frees the lease in that transaction (the turn's last
    write needs no ``release_lease`` after it); a zombie's commit with it is rejected whole."""
    row, lease = await h.leased()
    await journal.commit(
        row.id, [("user.message", {"text": "x"})], lease=lease, ops=[ReleaseLease(lease.owner)]
    )
    assert (await journal.get_session(row.id)).lease_owner is None
    other = await journal.acquire_lease(row.id, "w2", ttl_s=30)  # free at once: no wait, no takeover
    assert other.token == lease.token + 1
    with pytest.raises(StaleLease):
        await journal.commit(
            row.id, [("user.message", {"text": "z"})], lease=lease, ops=[ReleaseLease(lease.owner)]
        )
    with pytest.raises(SessionBusy):  # the new holder kept it
        await journal.acquire_lease(row.id, "w3", ttl_s=30)
    assert [e.type for e in await journal.events(row.id)] == ["session.created", "user.message"]


async def test_lease_session_takes_the_lease_and_reads_the_row(journal: Journal, h) -> None:
    """``lease_session`` = ``acquire_lease`` + the row ``get_session`` would read next (the token
    bumped, the holder recorded) + the session's own caps; a live holder still makes it busy."""
    row = await h.session()
    lease, seen, caps = await journal.lease_session(row.id, "w1", ttl_s=30)
    assert lease.owner == "w1" and seen == await journal.get_session(row.id) and caps == {}
    assert (seen.lease_owner, seen.fencing_token, seen.last_seq) == ("w1", lease.token, row.last_seq)
    with pytest.raises(SessionBusy):
        await journal.lease_session(row.id, "w2", ttl_s=30)
    with pytest.raises(SessionNotFound):
        await journal.lease_session("nope", "w1", ttl_s=30)
    await journal.set_session_limits(row.id, {"session_usd": 2.5})  # type: ignore[attr-defined]
    await journal.release_lease(row.id, lease)
    assert (await journal.lease_session(row.id, "w1", ttl_s=30))[2] == {"session_usd": 2.5}


async def test_zombie_write_without_ops_is_rejected(journal: Journal, h) -> None:
    """A commit without ops checks the token too (SQLite: in its ``UPDATE … RETURNING``): the
    superseded holder gets StaleLease naming both tokens, and nothing is written."""
    row, old = await h.leased()
    await journal.release_lease(row.id, old)
    new = await journal.acquire_lease(row.id, "w2", ttl_s=30)
    with pytest.raises(StaleLease, match=f"{old.token}.*{new.token}"):
        await journal.commit(row.id, [("user.message", {"text": "zombie"})], lease=old)
    s = await journal.get_session(row.id)
    assert (s.last_seq, s.last_message) == (1, None)
    assert [e.type for e in await journal.events(row.id)] == ["session.created"]
    out = await journal.commit(row.id, [("user.message", {"text": "ok"})], lease=new)
    assert [e.seq for e in out] == [2]
