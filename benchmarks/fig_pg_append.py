"""PostgreSQL journal throughput and hint latency: ``python -m benchmarks.fig_pg_append [N]``.

On one PostgreSQL server (Debian binaries, fsync on, started here), in one run:

- **anchor**: raw ``INSERT … COMMIT`` of one event row per transaction on one asyncpg connection;
- **fenced append**: :meth:`PostgresJournal.commit` with a lease, one event per transaction, with
  and without the cluster's batched NOTIFY (the notify path's cost);
- **framed**: 50 events per commit (how the writer commits a burst of deltas);
- **concurrent writers** (``WRITERS`` sessions committing at once, as a daemon with that many
  running turns does): the same three measurements with the raw anchor also run by ``WRITERS``
  connections — PostgreSQL's WAL flush covers every commit queued behind it (group commit), so
  throughput scales with writers on an fsync-bound disk;
- **commit → another daemon**: a second journal's :class:`ClusterMember` LISTENs; the time from
  ``commit()`` returning on journal A to journal B having *read the event* after the hint
  (``on_commit`` → ``events(since)``), p50/p99 — the SSE hop to a client is not included.

Ratios are to the anchor measured in the same run.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import Any

import anyio

from acagent.store.pg import PostgresJournal
from acagent.store.pg._cluster import ClusterMember

__all__ = ["measure"]


async def _raw(url: str, n: int) -> float:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute("CREATE TABLE IF NOT EXISTS raw_event (sid TEXT, seq BIGINT, payload TEXT)")
        t0 = time.perf_counter()
        for i in range(n):
            await conn.execute("INSERT INTO raw_event VALUES ($1, $2, $3)", "s", i, '{"text": "x"}')
        return n / (time.perf_counter() - t0)
    finally:
        await conn.close()


WRITERS = 8


async def _raw_concurrent(url: str, n: int, writers: int) -> float:
    import asyncpg

    conns = [await asyncpg.connect(url) for _ in range(writers)]
    try:
        await conns[0].execute("CREATE TABLE IF NOT EXISTS raw_event (sid TEXT, seq BIGINT, payload TEXT)")

        async def one(conn: Any, k: int) -> None:
            for i in range(n // writers):
                await conn.execute("INSERT INTO raw_event VALUES ($1, $2, $3)", f"s{k}", i, '{"text": "x"}')

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for k, conn in enumerate(conns):
                tg.start_soon(one, conn, k)
        return (n // writers) * writers / (time.perf_counter() - t0)
    finally:
        for conn in conns:
            await conn.close()


async def _fenced(j: PostgresJournal, n: int, batch: int, writers: int = 1) -> float:
    leases = []
    for _ in range(writers):
        row, _ = await j.create_session(cwd="/tmp", model=None, title=None)
        leases.append((row.id, await j.acquire_lease(row.id, "w", ttl_s=300)))
    events = [("assistant.delta", {"text": "x" * 12})] * batch
    per_writer = n // batch // writers

    async def one(sid: str, lease: Any) -> None:
        for _ in range(per_writer):
            await j.commit(sid, events, lease=lease)

    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for sid, lease in leases:
            tg.start_soon(one, sid, lease)
    return per_writer * writers * batch / (time.perf_counter() - t0)


class _Reader:
    """ClusterHooks of journal B: read the events after each hint, stamp the time."""

    def __init__(self, journal: PostgresJournal, sid: str) -> None:
        self.journal, self.sid, self.last = journal, sid, 1
        self.seen: dict[int, float] = {}

    def followed(self) -> dict[str, int]:
        return {self.sid: self.last}

    def running(self) -> set[str]:
        return set()

    def capacity(self) -> int:
        return 0

    async def on_commit(self, session_id: str, seq: int) -> None:
        if session_id != self.sid or seq <= self.last:
            return
        for e in await self.journal.events(session_id, self.last, until=seq):
            self.seen[e.seq] = time.perf_counter()
            self.last = e.seq

    async def on_input(self, session_id: str, kind: str, ref: str) -> None:
        return None

    async def sweep_inbox(self) -> None:
        return None

    async def resume(self, session_id: str) -> None:
        return None


async def _latency(url: str, a: PostgresJournal, rounds: int) -> dict[str, float]:
    b = await PostgresJournal.open(url, daemon_id="bench-b")
    try:
        row, _ = await a.create_session(cwd="/tmp", model=None, title=None)
        lease = await a.acquire_lease(row.id, "w", ttl_s=300)
        reader = _Reader(b, row.id)
        member_a = ClusterMember(a, url, lease_ttl_s=30)
        member_b = ClusterMember(b, url, lease_ttl_s=30, poll_s=3600)
        samples: list[float] = []
        async with anyio.create_task_group() as tg:
            await tg.start(member_a.run, _Reader(a, "none"))
            await tg.start(member_b.run, reader)
            for _ in range(rounds):
                committed = await a.commit(row.id, [("assistant.delta", {"text": "x"})], lease=lease)
                t0 = time.perf_counter()
                seq = committed[-1].seq
                with anyio.fail_after(5):
                    while seq not in reader.seen:
                        await anyio.sleep(0.0005)
                samples.append((reader.seen[seq] - t0) * 1000)
                await anyio.sleep(0.02)
            tg.cancel_scope.cancel()
        qs = statistics.quantiles(samples, n=100, method="inclusive")
        return {"p50_ms": round(statistics.median(samples), 2), "p99_ms": round(qs[98], 2)}
    finally:
        await b.aclose()


ROUNDS = 4
"""Every measurement runs in ``ROUNDS`` interleaved slices, so load from other work on the machine
(and the disk's moods) hits the anchor and the journal alike."""


async def measure(url: str, n: int = 3000) -> dict[str, Any]:
    """Run every measurement on the journal at ``url``; rates are events per second."""
    a = await PostgresJournal.open(url, daemon_id="bench-a", max_connections=WRITERS + 2)
    member = ClusterMember(a, url, lease_ttl_s=30)
    seconds: dict[str, float] = {}
    counts = {
        "raw": n, "plain": n, "no_notify": n, "batched": n, "framed": n * 10,
        "raw_k": n * 2, "batched_k": n * 2, "framed_k": n * 20,
    }  # fmt: skip

    def add(name: str, rate: float) -> None:
        seconds[name] = seconds.get(name, 0.0) + counts[name] / ROUNDS / rate

    try:
        for _ in range(ROUNDS):  # compared pairs run back to back (the disk has moods)
            add("raw", await _raw(url, n // ROUNDS))
            a.on_commit = member.hint  # batched hints, sent by nobody: the append path alone
            add("no_notify", await _fenced(a, n // ROUNDS, 1))
            async with anyio.create_task_group() as tg:
                tg.start_soon(member._notifier)
                add("batched", await _fenced(a, n // ROUNDS, 1))
                tg.cancel_scope.cancel()
            a.on_commit = None  # no cluster: one inline NOTIFY after each commit
            add("plain", await _fenced(a, n // ROUNDS, 1))
            a.on_commit = member.hint
            add("raw_k", await _raw_concurrent(url, n * 2 // ROUNDS, WRITERS))
            async with anyio.create_task_group() as tg:
                tg.start_soon(member._notifier)
                add("batched_k", await _fenced(a, n * 2 // ROUNDS, 1, WRITERS))
                add("framed", await _fenced(a, n * 10 // ROUNDS, 50))
                add("framed_k", await _fenced(a, n * 20 // ROUNDS, 50, WRITERS))
                tg.cancel_scope.cancel()
        a.on_commit = None
        latency = await _latency(url, a, 200)
    finally:
        await a.aclose()
    rate = {k: counts[k] / v for k, v in seconds.items()}
    return {
        "raw_insert_commit_per_s": round(rate["raw"]),
        "fenced_append_per_s": round(rate["no_notify"]),
        "fenced_append_batched_notify_per_s": round(rate["batched"]),
        "fenced_append_inline_notify_per_s": round(rate["plain"]),
        "framed_50_per_commit_events_per_s": round(rate["framed"]),
        "ratio_fenced_to_raw": round(rate["no_notify"] / rate["raw"], 2),
        "writers": WRITERS,
        "raw_insert_commit_concurrent_per_s": round(rate["raw_k"]),
        "fenced_append_concurrent_per_s": round(rate["batched_k"]),
        "ratio_fenced_to_raw_concurrent": round(rate["batched_k"] / rate["raw_k"], 2),
        "framed_50_concurrent_events_per_s": round(rate["framed_k"]),
        "notify_cost_pct": round(100 * (1 - rate["batched"] / rate["no_notify"]), 1),
        "commit_to_other_daemon": latency,
    }


def main() -> None:
    """Start a PostgreSQL server (fsync on), measure, print JSON."""
    from tests.pgserver import PgServer, find_pg_bin

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries not found (apt-get install postgresql)")
    with PgServer(bin_dir, fsync=True) as server:
        result = anyio.run(measure, server.create_database("bench"), n)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
