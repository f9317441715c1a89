"""Figure 2: resume cost — open a session so it can take a turn, by session length.

For each length (10, 1,000, 10,000 events) a session is seeded twice: in this format (no
periodic checkpoint: the journal's context events are the incremental checkpoint) and in the
previous format (a full-context ``checkpoint`` whenever the tail outgrew ``0.5`` × the last one),
which new code still reads. Its transcript is written once (the first ``get_runner``). Then,
repeatedly, what a resuming process does is timed:

- **open**: ``SessionRegistry.open`` (journal connections, migrations check);
- **get_runner**: the session row, a runner, the transcript check against the journal;
- **load**: ``InProcessRunner.load`` — the session row and the approval rules; no message is read
  (the context is rebuilt lazily);
- **build** (reported apart, not part of resume): ``load_context`` — what the first turn then pays
  to rebuild the context (the latest snapshot and the context events after it): O(context), the
  size of the request that turn sends anyway.

Three resumes are measured: in a **fresh process** (``python -m benchmarks.fig2_resume HOME SID``:
interpreter start, imports, open, get_runner, load, exit — what ``acagent run --resume`` pays),
in a **fresh registry** of this process, and **warm in a running daemon**: one registry stays open
and the session is hibernated (``hibernate_idle``) and opened again (``get_runner`` + ``load``)
each time, as a daemon does when a client comes back. Targets (issue 12 item 7, issue 13 item 4):
each at 10,000 events ≤ 2× the same at 10.

Importing the JSONL transcript (``acagent import``: :func:`acagent.store._import.import_transcript`
into a fresh journal) is timed for the same sessions.
"""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import Figure, Profiled, Target, bench_settings, echo_tools, stats, tmp_home
from benchmarks._seed import Template, make_template, seed_session

WARM_FACTOR = 6
"""Warm resumes per session, as a multiple of the other cases' repeats (one takes ~2 ms: 90 of them
cost 0.2 s a session, and a median of 15 was one burst of the machine's noise wide)."""

MODES = (("this format", None), ("previous format (full checkpoints)", 0.5))
"""Seeding modes: label and the legacy full-checkpoint ratio (None: none is written)."""


async def _seed(home: Path, events: int, template: Template, ratio: float | None) -> tuple[str, int]:
    from acagent.runner import SessionRegistry

    settings = bench_settings(home)
    async with SessionRegistry.open(settings, tools_factory=echo_tools) as registry:
        row = await registry.create_session(home, model="test:scripted")
        turns = max(1, round((events - 1) / len(template.events)))
        last_seq = await seed_session(registry.journal, row.id, turns, template, checkpoint_ratio=ratio)
        await registry.get_runner(row.id)  # writes the transcript
    return row.id, last_seq


async def _resume_once(
    home: Path, session_id: str, build: bool = True
) -> tuple[float, float, float, float, int]:
    """``(open, get_runner, load, build ms, messages)`` of one resume in a fresh registry
    (``build``: also rebuild the context, timed apart; else 0 ms and 0 messages)."""
    from acagent.runner import SessionRegistry

    settings = bench_settings(home)
    t0 = time.perf_counter()
    async with SessionRegistry.open(settings, tools_factory=echo_tools) as registry:
        t1 = time.perf_counter()
        runner = await registry.get_runner(session_id)
        t2 = time.perf_counter()
        await runner.load()
        t3 = time.perf_counter()
        if build:
            await runner.load_context()
        t4 = time.perf_counter()
        n = len(runner.context.messages) if build else 0
    return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, (t4 - t3) * 1000, n


async def _warm(cases: list[tuple[Path, str]], repeats: int) -> list[list[float]]:
    """ms of ``get_runner`` + ``load`` of each hibernated session, in registries that stay open
    (one per session's home, as a daemon keeps its own), taken in interleaved rounds: one resume of
    every session per round, so a burst of the machine's load falls on all sizes alike instead of
    on whichever was measured during it (one sequential run measured 1.41 / 3.57 ms at 10 / 10,000
    events, the next 1.08 / 1.81 ms; the loop alone, 100 times per size, 1.79 / 1.56 ms)."""
    from contextlib import AsyncExitStack

    from acagent.runner import SessionRegistry

    out: list[list[float]] = [[] for _ in cases]
    async with AsyncExitStack() as stack:
        registries = [
            await stack.enter_async_context(
                SessionRegistry.open(bench_settings(home), tools_factory=echo_tools)
            )
            for home, _ in cases
        ]
        for i in range(repeats + 1):
            for k, (registry, (_, session_id)) in enumerate(zip(registries, cases, strict=True)):
                t0 = time.perf_counter()
                runner = await registry.get_runner(session_id)
                await runner.load()
                if i:  # the first open of each registry is the fresh-registry case
                    out[k].append((time.perf_counter() - t0) * 1000)
                if await registry.hibernate_idle() != 1:
                    raise RuntimeError(
                        "the session was not hibernated: the warm resume would measure nothing"
                    )
    return out


def _fresh_process(home: Path, session_id: str) -> tuple[float, dict[str, float]]:
    """Wall ms of one resume in a new interpreter, and the child's own open/get_runner/load ms."""
    import json
    import subprocess
    import sys

    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.fig2_resume", str(home), session_id],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    wall = (time.perf_counter() - t0) * 1000
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


async def _import_once(home: Path) -> float:
    from acagent.store import SqliteJournal
    from acagent.store._import import import_transcript

    path = next((home / "sessions").rglob("*.jsonl"))
    with tmp_home("f2i") as dest:
        journal = await SqliteJournal.open(dest / "acagent.db")
        try:
            t0 = time.perf_counter()
            await import_transcript(journal, path, dest / "sessions")
            return (time.perf_counter() - t0) * 1000
        finally:
            await journal.aclose()


async def _measure(sizes: list[int], repeats: int) -> list[dict[str, Any]]:
    template = await make_template()
    out = []
    cases: list[tuple[Path, str]] = []
    with ExitStack() as homes:
        for size in sizes:
            for label, ratio in MODES:
                home = homes.enter_context(tmp_home("f2"))
                sid, last_seq = await _seed(home, size, template, ratio)
                cases.append((home, sid))
                parts = [await _resume_once(home, sid) for _ in range(repeats)]
                imports = [await _import_once(home) for _ in range(max(1, repeats // 3))]
                fresh = [_fresh_process(home, sid) for _ in range(max(3, repeats // 2))]
                tpath = next((home / "sessions").rglob("*.jsonl"))
                out.append(
                    {
                        "size": size,
                        "events": last_seq,
                        "mode": label,
                        "total": [p[0] + p[1] + p[2] for p in parts],
                        "open": [p[0] for p in parts],
                        "get_runner": [p[1] for p in parts],
                        "load": [p[2] for p in parts],
                        "build": [p[3] for p in parts],
                        "messages": parts[-1][4],
                        "import": imports,
                        "fresh": [f[0] for f in fresh],
                        "fresh_inner": [f[1]["open"] + f[1]["get_runner"] + f[1]["load"] for f in fresh],
                        "transcript_bytes": tpath.stat().st_size,
                    }
                )
        for row, warm in zip(out, await _warm(cases, repeats * WARM_FACTOR), strict=True):
            row["warm"] = warm
    return out


def _ratio_target(fig: Figure, by: dict[Any, Any], sizes: list[int], key: str, name: str, goal: str) -> None:
    small = stats(by[(sizes[0], MODES[0][0])][key]).median
    big = stats(by[(sizes[-1], MODES[0][0])][key]).median
    fig.targets.append(
        Target(name, goal, f"{big:.2f} ms / {small:.2f} ms = {big / small:.2f}×", big / small <= 2.0)
    )


def run(quick: bool) -> Figure:
    fig = Figure(2, "Resume cost (open a session so it can take a turn)")
    sizes = [10, 1000, 10000]
    repeats = 3 if quick else 15
    data = anyio.run(_measure, sizes, repeats)
    fig.text.append(
        f"Median ms (p95, min–max) over {repeats} resumes per session ({repeats * WARM_FACTOR} warm ones), warm OS cache. Sessions are seeded "
        "with whole turns, so the event counts are the nearest whole-turn counts. *build* is what the first "
        "turn then pays to rebuild the context (not part of resume). Transcript import: median of the imports "
        "into a fresh journal."
    )
    fig.table(
        [
            "events",
            "format",
            "fresh registry: open + get_runner + load ms",
            "open ms",
            "get_runner ms",
            "load ms",
            "warm daemon: get_runner + load ms",
            "build ms (first turn)",
            "messages",
            "import JSONL ms",
            "transcript",
        ],
        [
            [
                f"{d['events']:,}",
                d["mode"],
                stats(d["total"]).fmt(),
                f"{stats(d['open']).median:.2f}",
                f"{stats(d['get_runner']).median:.2f}",
                f"{stats(d['load']).median:.2f}",
                stats(d["warm"]).fmt(),
                f"{stats(d['build']).median:.2f}",
                d["messages"],
                stats(d["import"]).fmt(1),
                f"{d['transcript_bytes'] / 1024:,.0f} KB",
            ]
            for d in data
        ],
    )
    by = {(d["size"], d["mode"]): d for d in data}
    rrows = []
    for mode, _ in MODES:
        row = [mode]
        for key in ("fresh", "total", "warm", "build", "import"):
            base = stats(by[(sizes[0], mode)][key]).median
            row += [f"{stats(by[(s, mode)][key]).median / base:.2f}" for s in sizes[1:]]
        rrows.append(row)
    head = ["format"]
    for what in ("fresh process", "fresh registry", "warm daemon", "build", "import"):
        head += [f"{what} ×, {by[(s, MODES[0][0])]['events']:,} ev" for s in sizes[1:]]
    fig.table(head, rrows, "Growth relative to the same format at ~10 events (the anchor, same run):")
    fig.table(
        ["events", "format", "fresh process, spawn to exit ms", "of which open + get_runner + load ms"],
        [
            [f"{d['events']:,}", d["mode"], stats(d["fresh"]).fmt(0), stats(d["fresh_inner"]).fmt()]
            for d in data
        ],
        "Resume in a fresh process (what `acagent run --resume` pays), median (p95, min–max):",
    )
    _ratio_target(
        fig,
        by,
        sizes,
        "fresh",
        "resume flat, fresh process",
        "resume of 10,000 events ≤ 2× resume of 10, each in a fresh process",
    )
    _ratio_target(
        fig,
        by,
        sizes,
        "total",
        "resume flat, fresh registry (in-process)",
        "open + get_runner + load at 10,000 events ≤ 2× at 10 (same process, warm cache)",
    )
    _ratio_target(
        fig,
        by,
        sizes,
        "warm",
        "resume flat, warm daemon",
        "get_runner + load of a hibernated 10,000-event session ≤ 2× a 10-event one (registry kept open)",
    )
    if not all(t.passed for t in fig.targets) and not quick:
        fig.profiles.append(
            (
                f"resume of the {by[(sizes[-1], MODES[0][0])]['events']:,}-event session, 5 times",
                _profile(sizes[-1]),
            )
        )
    return fig


def _profile(size: int) -> str:
    async def go() -> str:
        template = await make_template()
        with tmp_home("f2p") as home:
            sid, _ = await _seed(home, size, template, None)
            with Profiled() as prof:
                for _ in range(5):
                    await _resume_once(home, sid)
        return prof.text

    return anyio.run(go)


def _child_main(argv: list[str]) -> None:
    """``python -m benchmarks.fig2_resume HOME SID``: one resume, its parts as JSON on stdout."""
    import json

    home, sid = Path(argv[0]), argv[1]
    o, g, ld, _, _ = anyio.run(_resume_once, home, sid, False)  # resume only: no context build
    print(json.dumps({"open": o, "get_runner": g, "load": ld}))


if __name__ == "__main__":
    import sys

    _child_main(sys.argv[1:])
