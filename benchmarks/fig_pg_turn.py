"""One turn on PostgreSQL vs the same turn on SQLite: ``python -m benchmarks.fig_pg_turn [TURNS]``.

The runtime's overhead per turn with the model excluded: ``SessionRegistry`` +
``InProcessRunner.run_turn`` with a ``ScriptedModel`` (no delay: every millisecond is runtime)
and the in-process ``echo`` tool — one user message, a step with a tool call, the tool, a
second step with the 1 KB answer (≈10 commits). Both journals run in one process, turns
interleaved so machine noise hits them alike: SQLite on a file (WAL, ``synchronous=NORMAL``,
the default), PostgreSQL as configured by default (the server started here, fsync on,
``synchronous_commit`` on — every commit waits for the WAL flush, which SQLite's default does
not), and PostgreSQL with ``synchronous_commit=off`` (the durability class of SQLite's
``NORMAL``: safe against a process crash, the last commits may be lost with the OS) — the
runtime's own overhead without the disk's flush latency. Reported: wall and CPU time per turn
(median, p95), the ratios to SQLite, and the events per turn.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import USER_TEXT, bench_settings, echo_tools, scripted_factory, stats, tmp_home

__all__ = ["measure"]


async def _peer(stack: AsyncExitStack, home: Path, journal: Any) -> Any:
    from acagent.runner import SessionRegistry
    from acagent.testing import ScriptedModel

    factory = scripted_factory()
    registry = await stack.enter_async_context(
        SessionRegistry.open(
            bench_settings(home),
            provider_factory=lambda m: ScriptedModel(factory=factory),
            tools_factory=echo_tools,
            journal=journal,
        )
    )
    row = await registry.create_session(home, model="test:scripted")
    runner = await registry.get_runner(row.id)
    await runner.run_turn(USER_TEXT)  # warm-up
    return runner


async def measure(url: str, turns: int = 60) -> dict[str, Any]:
    """Interleave ``turns`` turns on each backend; return per-turn wall/CPU stats (ms)."""
    from acagent.store import SqliteJournal
    from acagent.store.pg import PostgresJournal

    backends = ("sqlite", "postgres", "postgres_async")
    samples: dict[str, dict[str, list[float]]] = {b: {"wall": [], "cpu": []} for b in backends}
    commits: dict[str, float] = {}
    with tmp_home("pgturn-s") as home_s, tmp_home("pgturn-p") as home_p, tmp_home("pgturn-a") as home_a:
        async with AsyncExitStack() as stack:
            sqlite = await SqliteJournal.open(home_s / "acagent.db")
            stack.push_async_callback(sqlite.aclose)
            pg = await PostgresJournal.open(url, daemon_id="bench-turn")
            stack.push_async_callback(pg.aclose)
            sep = "&" if "?" in url else "?"
            pg_async = await PostgresJournal.open(
                f"{url}{sep}synchronous_commit=off", daemon_id="bench-turn-a"
            )
            stack.push_async_callback(pg_async.aclose)
            runners = {
                "sqlite": await _peer(stack, home_s, sqlite),
                "postgres": await _peer(stack, home_p, pg),
                "postgres_async": await _peer(stack, home_a, pg_async),
            }
            seq0 = {b: r.bus.last_seq for b, r in runners.items()}
            for _ in range(turns):
                for backend, runner in runners.items():
                    w0, c0 = time.perf_counter(), time.process_time()
                    await runner.run_turn(USER_TEXT)
                    samples[backend]["wall"].append((time.perf_counter() - w0) * 1000)
                    samples[backend]["cpu"].append((time.process_time() - c0) * 1000)
            for backend, runner in runners.items():
                commits[backend] = (runner.bus.last_seq - seq0[backend]) / turns  # events per turn
    out: dict[str, Any] = {"turns": turns}
    for backend, s in samples.items():
        wall, cpu = stats(s["wall"]), stats(s["cpu"])
        out[backend] = {
            "wall_ms_median": round(wall.median, 2),
            "wall_ms_p95": round(wall.p95, 2),
            "cpu_ms_median": round(cpu.median, 2),
            "events_per_turn": round(commits[backend], 1),
        }
    for backend in backends[1:]:
        for k in ("wall", "cpu"):
            ratio = statistics.median(samples[backend][k]) / statistics.median(samples["sqlite"][k])
            out[f"ratio_{k}_{backend}_to_sqlite"] = round(ratio, 2)
    return out


def main() -> None:
    """Start a PostgreSQL server (fsync on), measure, print JSON."""
    from tests.pgserver import PgServer, find_pg_bin

    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries not found (apt-get install postgresql)")
    with PgServer(bin_dir, fsync=True) as server:
        result = anyio.run(measure, server.create_database("turn"), turns)
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
