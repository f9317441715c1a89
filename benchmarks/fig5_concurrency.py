"""Figure 5: concurrency — 1,000 live sessions in one process, then 10,000 hibernated ones.

**Live**: one ``SessionRegistry`` (``max_sessions`` 2,000), N sessions created and their runners
started; then every session starts a turn at once (``registry.start_turn`` + ``runner.wait``, the
daemon's path) against a scripted model that waits 1 s before answering a ~1 KB text (one LLM
call, no tool). Added latency = turn wall time − 1 s, per session. CPU = process CPU time (all
threads) during the wave, as % of one core; RSS from ``psutil``.

**Hibernated**: a journal holding N sessions (each the journal rows of one real completed turn,
cloned), opened by a fresh process: its RSS after importing acagent, after
``SessionRegistry.open``, and after waking one session (``get_runner`` + ``load``), against the
same process on an empty journal. Run as a subprocess so nothing else is resident.
"""

from __future__ import annotations

import cProfile
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import (
    USER_TEXT,
    Figure,
    Profiled,
    Target,
    bench_settings,
    echo_tools,
    format_profile,
    scripted_factory,
    stats,
    tmp_home,
)

MB = 1024 * 1024


async def _wave(n: int, *, spread_s: float = 0.0, profile: bool = False) -> dict[str, Any]:
    """One turn in each of ``n`` sessions; session i starts at ``i / n * spread_s`` (0: all at once)."""
    import psutil

    from acagent.runner import SessionRegistry
    from acagent.testing import ScriptedModel

    proc = psutil.Process()
    inner = scripted_factory(tool_calls=False, delay_s=1.0)
    requested: list[float] = []

    def factory(request: Any) -> Any:
        requested.append(time.perf_counter())
        return inner(request)

    with tmp_home("f5") as home:
        settings = bench_settings(home, max_sessions=max(2000, 2 * n))
        rss_before = proc.memory_info().rss
        async with SessionRegistry.open(
            settings, provider_factory=lambda m: ScriptedModel(factory=factory), tools_factory=echo_tools
        ) as registry:
            ids = [(await registry.create_session(home, model="test:scripted")).id for _ in range(n)]
            for sid in ids:
                await registry.get_runner(sid)
            rss_ready = proc.memory_info().rss
            added: list[float] = []

            async def one(i: int, sid: str) -> None:
                if spread_s:
                    await anyio.sleep(i / n * spread_s)
                t0 = time.perf_counter()
                runner, _ = await registry.start_turn(sid, USER_TEXT)
                await runner.wait()
                added.append((time.perf_counter() - t0 - 1.0) * 1000)

            prof = Profiled() if profile else None
            worker = cProfile.Profile() if profile else None
            if worker is not None:  # profile the journal's writer thread too (enable it on that thread)
                await registry.journal._w._execute(worker.enable)  # type: ignore[attr-defined]
            cpu0, t0 = proc.cpu_times(), time.perf_counter()
            if prof is not None:
                prof.__enter__()
            async with anyio.create_task_group() as tg:
                for i, sid in enumerate(ids):
                    tg.start_soon(one, i, sid)
            if prof is not None:
                prof.__exit__(None, None, None)
            wall = time.perf_counter() - t0
            if worker is not None:
                await registry.journal._w._execute(worker.disable)  # type: ignore[attr-defined]
                prof.text += "\njournal writer thread (aiosqlite worker):\n" + format_profile(  # type: ignore[union-attr]
                    worker, wall, 14, "acagent", "journal writer thread"
                )
            cpu1 = proc.cpu_times()
            rss_after = proc.memory_info().rss
            done = sum(1 for r in await registry.journal.list_sessions() if r.status == "done")
            dropped = await registry.hibernate_idle()
            rss_hibernated = proc.memory_info().rss
    cpu = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system)
    return {
        "n": n,
        "added_ms": added,
        "to_request_ms": [(t - t0) * 1000 for t in requested],
        "spread_s": spread_s,
        "wall_s": wall,
        "cpu_s": cpu,
        "rss_before": rss_before,
        "rss_ready": rss_ready,
        "rss_after": rss_after,
        "rss_hibernated": rss_hibernated,
        "hibernated": dropped,
        "done": done,
        "profile": prof.text if prof is not None else "",
    }


async def _seed_hibernated(home: Path, n: int) -> list[str]:
    from acagent.runner import SessionRegistry
    from acagent.testing import ScriptedModel
    from benchmarks._seed import clone_sessions

    factory = scripted_factory()
    settings = bench_settings(home)
    async with SessionRegistry.open(
        settings, provider_factory=lambda m: ScriptedModel(factory=factory), tools_factory=echo_tools
    ) as registry:
        row = await registry.create_session(home, model="test:scripted")
        runner = await registry.get_runner(row.id)
        await runner.run_turn(USER_TEXT)
    return clone_sessions(home / "acagent.db", row.id, n - 1)


def _child(home: str, ids: list[str], trace: bool) -> dict[str, Any]:
    """Runs in a fresh process: RSS after import, after open, after waking sessions."""
    import tracemalloc

    if trace:
        tracemalloc.start(1)
    import psutil

    proc = psutil.Process()
    rss0 = proc.memory_info().rss
    from acagent.runner import SessionRegistry
    from acagent.testing import ScriptedModel

    rss_import = proc.memory_info().rss
    out: dict[str, Any] = {"rss_python": rss0, "rss_import": rss_import}

    async def go() -> None:
        settings = bench_settings(Path(home))
        async with SessionRegistry.open(
            settings, provider_factory=lambda m: ScriptedModel(), tools_factory=echo_tools
        ) as reg:
            out["rss_open"] = proc.memory_info().rss
            wakes = []
            for i, sid in enumerate(ids):
                before = set(sys.modules)
                t0 = time.perf_counter()
                runner = await reg.get_runner(sid)
                await runner.load_context()
                wakes.append((time.perf_counter() - t0) * 1000)
                if i == 0:
                    out["rss_woken"] = proc.memory_info().rss
                    out["wake_imports"] = sorted({m.split(".")[0] for m in set(sys.modules) - before})
            out["wake_ms"] = wakes
            out["rss_woken_all"] = proc.memory_info().rss
            t0 = time.perf_counter()
            rows = await reg.journal.list_sessions()
            out["list_ms"] = (time.perf_counter() - t0) * 1000
            out["sessions"] = len(rows)
            del rows
            out["rss_listed"] = proc.memory_info().rss

    anyio.run(go)
    if trace:
        snap = tracemalloc.take_snapshot()
        by_pkg: dict[str, int] = {}
        for stat in snap.statistics("filename"):
            f = stat.traceback[0].filename
            if "site-packages/" in f:
                key = f.split("site-packages/", 1)[1].split("/", 1)[0]
            elif "/acagent/" in f:
                key = "acagent/" + f.split("/acagent/", 1)[1].split("/", 1)[0]
            elif "/lib/python3" in f:
                key = "stdlib: " + f.split("/lib/python3.11/", 1)[-1].split("/", 1)[0]
            else:
                key = f
            by_pkg[key] = by_pkg.get(key, 0) + stat.size
        out["traced_total"] = sum(by_pkg.values())
        out["traced"] = sorted(by_pkg.items(), key=lambda kv: -kv[1])[:15]
    return out


def _run_child(home: Path, ids: list[str], *, trace: bool = False) -> dict[str, Any]:
    args = [sys.executable, "-m", "benchmarks.fig5_concurrency", "child", str(home), ",".join(ids)]
    if trace:
        args.append("trace")
    proc = subprocess.run(args, capture_output=True, text=True, check=True, cwd=Path(__file__).parent.parent)
    return json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def run(quick: bool) -> Figure:
    fig = Figure(5, "Concurrency: live sessions, then hibernated sessions")
    n_live = 200 if quick else 1000
    n_hib = 2_000 if quick else 10_000
    burst = anyio.run(_wave, n_live)
    steady = anyio.run(lambda: _wave(n_live, spread_s=1.0))
    fig.text.append(
        f"**{n_live:,} concurrent sessions**, one turn each against a model that waits 1 s. *Burst*: every session "
        "starts its turn at the same instant. *Spread*: session i starts at i/N s, so N sessions are in flight "
        "once the first second has passed (N turns/s offered, the steady state of N sessions with 1 s calls). "
        "Added latency = turn wall time − 1 s, from the session's own start."
    )
    rows = []
    for label, wave in (("burst", burst), ("spread over 1 s", steady)):
        a = stats(wave["added_ms"])
        rows.append(
            [
                label,
                f"{wave['done']:,}/{n_live:,}",
                f"{a.median:.1f} ms",
                f"{a.p95:.1f} ms",
                f"{a.p99:.1f} ms",
                f"{a.max:.1f} ms",
                f"{wave['cpu_s']:.2f} s = {100 * wave['cpu_s'] / wave['wall_s']:.0f}% of a core over {wave['wall_s']:.1f} s",
                f"{wave['cpu_s'] * 1000 / n_live:.2f} ms",
                f"{wave['rss_ready'] / MB:.0f} → {wave['rss_after'] / MB:.0f} MB",
                f"{(wave['rss_after'] - wave['rss_before']) / n_live / 1024:.0f} KB",
            ]
        )
    fig.table(
        [
            "start",
            "completed",
            "added p50",
            "p95",
            "p99",
            "max",
            "CPU (all threads)",
            "CPU per turn",
            "RSS ready → after",
            "RSS per live session",
        ],
        rows,
    )
    pre = stats(burst["to_request_ms"])
    fig.text.append(
        f"Burst, where the added latency sits: from the start to each session's model request p50 {pre.median:.0f} "
        f"ms, p99 {pre.p99:.0f} ms (lease with the session row and caps, turn accepted, context, step row); the rest comes after the "
        "model answered (the reply commit with turn completion and lease release, transcript), queued behind every other "
        "session's work on the one event loop and the one journal writer thread. At "
        f"{burst['cpu_s'] * 1000 / n_live:.1f} ms of CPU per turn one process can finish at most "
        f"~{n_live / burst['cpu_s']:.0f} turns/s."
    )
    a = stats(steady["added_ms"])
    with tmp_home("f5h") as home, tmp_home("f5e") as empty:
        ids = anyio.run(_seed_hibernated, home, n_hib)
        sample = ids[:: max(1, len(ids) // 5)][:5]
        hib = _run_child(home, sample)
        base = _run_child(empty, [])
        db_mb = sum(p.stat().st_size for p in home.glob("acagent.db*")) / MB
        fig.text.append(
            f"**{hib['sessions']:,} hibernated sessions** in the journal ({db_mb:.0f} MB), opened by a fresh process; "
            "the same process on an empty journal is the anchor."
        )
        fig.table(
            [
                "process",
                "RSS after `import acagent`",
                "after `SessionRegistry.open`",
                "after waking one",
                "after waking 5",
                "first wake",
                "next wakes",
                "list all sessions (RSS after)",
            ],
            [
                [
                    f"{hib['sessions']:,} sessions",
                    f"{hib['rss_import'] / MB:.1f} MB",
                    f"{hib['rss_open'] / MB:.1f} MB",
                    f"{hib['rss_woken'] / MB:.1f} MB",
                    f"{hib['rss_woken_all'] / MB:.1f} MB",
                    f"{hib['wake_ms'][0]:.1f} ms",
                    f"{stats(hib['wake_ms'][1:]).median:.2f} ms (median)",
                    f"{hib['list_ms']:.0f} ms ({hib['rss_listed'] / MB:.1f} MB)",
                ],
                [
                    "empty journal",
                    f"{base['rss_import'] / MB:.1f} MB",
                    f"{base['rss_open'] / MB:.1f} MB",
                    "—",
                    "—",
                    "—",
                    "—",
                    "—",
                ],
            ],
        )
        fig.text.append(
            "Modules first imported by the first wake: "
            + (", ".join(f"`{m}`" for m in hib["wake_imports"]) or "none")
            + ". A wake is `get_runner` (session row, runner, transcript check and catch-up) + `load` (checkpoint + "
            "tail)."
        )
        fig.text.append(
            f"A bare `python` is {hib['rss_python'] / MB:.1f} MB before importing acagent. The sessions themselves "
            f"add {(hib['rss_open'] - base['rss_open']) / MB:+.1f} MB at open (hibernated sessions are rows on "
            "disk, not objects in memory)."
        )
        rss_ok = hib["rss_open"] <= 50 * MB
        trace = None if rss_ok or quick else _run_child(home, sample, trace=True)
    p99_ok = a.p99 <= 20.0
    fig.targets.append(
        Target(
            "concurrent sessions",
            "1,000 sessions: p99 added latency ≤ 20 ms (spread start; the burst is shown for scale)",
            f"{n_live:,} sessions"
            + (" (quick run)" if quick else "")
            + f": p99 {a.p99:.1f} ms (p50 {a.median:.1f} ms)",
            p99_ok,
        )
    )
    fig.targets.append(
        Target(
            "hibernated sessions",
            "10,000 sessions: process RSS ≤ 50 MB with every session hibernated",
            (f"quick run, {n_hib:,} sessions: " if quick else "")
            + f"{hib['rss_open'] / MB:.1f} MB after open ({(hib['rss_open'] - base['rss_open']) / MB:+.1f} MB over an "
            f"empty journal); {hib['rss_woken'] / MB:.1f} MB once one is woken",
            rss_ok,
        )
    )
    if not p99_ok and not quick:
        prof = anyio.run(lambda: _wave(max(100, n_live // 2), spread_s=1.0, profile=True))
        fig.profiles.append((f"{prof['n']} turns spread over 1 s (event-loop thread)", prof["profile"]))
    if trace is not None:
        lines = [
            f"tracemalloc, Python allocations alive after open + wake, by package "
            f"(total {trace['traced_total'] / MB:.1f} MB traced of {trace['rss_woken'] / MB:.1f} MB RSS):"
        ]
        lines += [f"  {size / MB:7.2f} MB  {pkg}" for pkg, size in trace["traced"]]
        fig.profiles.append(("memory of the hibernated-sessions process", "\n".join(lines)))
    return fig


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "child":
        ids = [s for s in sys.argv[3].split(",") if s] if len(sys.argv) > 3 else []
        result = _child(sys.argv[2], ids, trace="trace" in sys.argv[4:])
        sys.stdout.write(json.dumps(result) + "\n")
        os._exit(0)
