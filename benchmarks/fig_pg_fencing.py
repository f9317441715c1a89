"""Zombie writes under a frozen lease holder: ``python -m benchmarks.fig_pg_fencing [ROUNDS]``.

Each round: daemon A takes a session's lease with a short TTL and then "freezes" (does not renew,
like a SIGSTOPped host whose advisory lock stays held); once the lease expires on the database
clock, daemon B takes it over while A — "SIGCONT" — keeps appending with its old lease at the same
moment. A zombie write is an event of A committed after B took the lease (in seq order: an A event
after any B event). The fencing rule (token checked in the same statement as the append) makes the
count 0; the report also gives how many of A's racing commits were refused (StaleLease) and how
many landed before the takeover (a late commit when nobody had taken over yet is allowed).

Starts its own PostgreSQL (Debian binaries, fsync on). The CI test (tests/scaleout) runs a few
rounds through :func:`race_rounds`; this script runs ≥ 300.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import anyio.lowlevel

from acagent.errors import StaleLease
from acagent.store.pg import PostgresJournal

__all__ = ["race_rounds"]


async def race_rounds(url: str, rounds: int, *, ttl_s: float = 0.05) -> dict[str, Any]:
    """Run ``rounds`` takeover races on the journal at ``url``; returns the counts."""
    a = await PostgresJournal.open(url, daemon_id="race-a")
    b = await PostgresJournal.open(url, daemon_id="race-b")
    totals = {
        "rounds": rounds,
        "zombie_writes": 0,
        "a_refused": 0,
        "a_landed_before_takeover": 0,
        "b_writes": 0,
    }
    try:
        for _ in range(rounds):
            row, _ = await a.create_session(cwd="/tmp", model=None, title=None)
            old = await a.acquire_lease(row.id, "wa", ttl_s=ttl_s)
            await anyio.sleep(ttl_s * 1.2)  # frozen past the TTL

            async def zombie(sid: str = row.id, lease: Any = old) -> None:
                for i in range(6):
                    try:
                        await a.commit(sid, [("user.message", {"text": f"A{i}"})], lease=lease)
                    except StaleLease:
                        totals["a_refused"] += 1
                    await anyio.lowlevel.checkpoint()

            async def takeover(sid: str = row.id) -> None:
                while True:
                    try:
                        lease = await b.acquire_lease(sid, "wb", ttl_s=30)
                        break
                    except Exception:  # not expired yet on the database clock
                        await anyio.sleep(0.005)
                for i in range(3):
                    await b.commit(sid, [("user.message", {"text": f"B{i}"})], lease=lease)
                    totals["b_writes"] += 1

            async with anyio.create_task_group() as tg:
                tg.start_soon(zombie)
                tg.start_soon(takeover)
            texts = [e.payload.get("text", "") for e in await a.events(row.id) if e.type == "user.message"]
            first_b = next(i for i, t in enumerate(texts) if t.startswith("B"))
            totals["zombie_writes"] += sum(1 for t in texts[first_b:] if t.startswith("A"))
            totals["a_landed_before_takeover"] += sum(1 for t in texts[:first_b] if t.startswith("A"))
    finally:
        await a.aclose()
        await b.aclose()
    return totals


def main() -> None:
    """Start a PostgreSQL server, run the rounds, print JSON."""
    from tests.pgserver import PgServer, find_pg_bin

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries not found (apt-get install postgresql)")
    with PgServer(bin_dir, fsync=True) as server:
        url = server.create_database("race")
        result = anyio.run(race_rounds, url, rounds)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
