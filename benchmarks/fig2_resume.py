"""Figure 2: resume cost — open a session and rebuild its model context, by session length.

For each length (10, 1,000, 10,000 events) a session is seeded twice: with the runtime's
checkpoint policy (``checkpoint_ratio`` 0.5, the default) and without checkpoints
(``checkpoint_ratio`` 1e12: none is ever written). Its transcript is written once (the first
``get_runner``). Then, repeatedly, what a resuming process does is timed:

- **open**: ``SessionRegistry.open`` (journal connections, migrations check);
- **get_runner**: the session row, a runner, the transcript check against the journal;
- **load**: ``InProcessRunner.load`` — the latest checkpoint and the tail, folded into messages.

The same resume also runs **in a fresh process** (``python -m benchmarks.fig2_resume HOME SID
RATIO``: interpreter start, imports, open, get_runner, load, exit), timed from spawn to exit —
what ``acagent run --resume`` pays; the target (issue 12 item 7, issue 13 item 4) is on that.

Importing the JSONL transcript (``acagent import``: :func:`acagent.store._import.import_transcript`
into a fresh journal) is timed for the same sessions.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import Figure, Profiled, Target, bench_settings, echo_tools, stats, tmp_home
from benchmarks._seed import Template, make_template, seed_session

NO_CHECKPOINTS = 1e12


async def _seed(home: Path, events: int, template: Template, ratio: float) -> tuple[str, int]:
    from acagent.runner import SessionRegistry

    settings = bench_settings(home, checkpoint_ratio=ratio)
    async with SessionRegistry.open(settings, tools_factory=echo_tools) as registry:
        row = await registry.create_session(home, model="test:scripted")
        turns = max(1, round((events - 1) / len(template.events)))
        last_seq = await seed_session(registry.journal, row.id, turns, template, checkpoint_ratio=ratio)
        await registry.get_runner(row.id)  # writes the transcript
    return row.id, last_seq


async def _resume_once(home: Path, session_id: str, ratio: float) -> tuple[float, float, float, int]:
    from acagent.runner import SessionRegistry

    settings = bench_settings(home, checkpoint_ratio=ratio)
    t0 = time.perf_counter()
    async with SessionRegistry.open(settings, tools_factory=echo_tools) as registry:
        t1 = time.perf_counter()
        runner = await registry.get_runner(session_id)
        t2 = time.perf_counter()
        await runner.load()
        t3 = time.perf_counter()
        n = len(runner.context.messages)
    return (t1 - t0) * 1000, (t2 - t1) * 1000, (t3 - t2) * 1000, n


def _fresh_process(home: Path, session_id: str, ratio: float) -> tuple[float, dict[str, float]]:
    """Wall ms of one resume in a new interpreter, and the child's own open/get_runner/load ms."""
    import json
    import subprocess
    import sys

    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.fig2_resume", str(home), session_id, str(ratio)],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).resolve().parents[1],
    )
    wall = (time.perf_counter() - t0) * 1000
    return wall, json.loads(proc.stdout.strip().splitlines()[-1])


async def _import_once(home: Path, session_id: str) -> float:
    from acagent.runner import canonical_cwd
    from acagent.store import SqliteJournal
    from acagent.store._import import import_transcript
    from acagent.store._transcript import transcript_path

    path = transcript_path(home / "sessions", canonical_cwd(home), session_id)
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
    for size in sizes:
        for label, ratio in (("checkpoints", 0.5), ("no checkpoints", NO_CHECKPOINTS)):
            with tmp_home("f2") as home:
                sid, last_seq = await _seed(home, size, template, ratio)
                totals, parts, imports = [], [], []
                messages = 0
                for _ in range(repeats):
                    o, g, ld, messages = await _resume_once(home, sid, ratio)
                    totals.append(o + g + ld)
                    parts.append((o, g, ld))
                for _ in range(max(1, repeats // 3)):
                    imports.append(await _import_once(home, sid))
                fresh = [_fresh_process(home, sid, ratio) for _ in range(max(3, repeats // 2))]
                tpath = next((home / "sessions").rglob("*.jsonl"))
                out.append(
                    {
                        "size": size,
                        "events": last_seq,
                        "mode": label,
                        "total": totals,
                        "open": [p[0] for p in parts],
                        "get_runner": [p[1] for p in parts],
                        "load": [p[2] for p in parts],
                        "import": imports,
                        "fresh": [f[0] for f in fresh],
                        "fresh_inner": [f[1]["open"] + f[1]["get_runner"] + f[1]["load"] for f in fresh],
                        "messages": messages,
                        "transcript_bytes": tpath.stat().st_size,
                        "db_bytes": sum(p.stat().st_size for p in home.glob("acagent.db*")),
                    }
                )
    return out


def run(quick: bool) -> Figure:
    fig = Figure(2, "Resume cost (open a session and rebuild its model context)")
    sizes = [10, 1000, 10000]
    repeats = 3 if quick else 15
    data = anyio.run(_measure, sizes, repeats)
    fig.text.append(
        f"Median ms (p95, min–max) over {repeats} resumes, each in a fresh `SessionRegistry` of the same "
        "process (warm OS cache). Sessions are seeded with whole turns, so the event counts are the nearest "
        "whole-turn counts. Transcript import: median of the imports into a fresh journal."
    )
    rows = []
    for d in data:
        rows.append(
            [
                f"{d['events']:,}",
                d["mode"],
                stats(d["total"]).fmt(),
                f"{stats(d['open']).median:.2f}",
                f"{stats(d['get_runner']).median:.2f}",
                f"{stats(d['load']).median:.2f}",
                d["messages"],
                stats(d["import"]).fmt(1),
                f"{d['transcript_bytes'] / 1024:,.0f} KB",
            ]
        )
    fig.table(
        [
            "events",
            "mode",
            "resume total ms",
            "open ms",
            "get_runner ms",
            "load ms",
            "messages",
            "import JSONL ms",
            "transcript",
        ],
        rows,
    )
    by = {(d["size"], d["mode"]): d for d in data}
    small = stats(by[(sizes[0], "checkpoints")]["total"]).median
    big = stats(by[(sizes[-1], "checkpoints")]["total"]).median
    ratio = big / small
    rrows = []
    for mode in ("checkpoints", "no checkpoints"):
        base = stats(by[(sizes[0], mode)]["total"]).median
        base_imp = stats(by[(sizes[0], mode)]["import"]).median
        rrows.append(
            [mode]
            + [f"{stats(by[(s, mode)]['total']).median / base:.2f}" for s in sizes]
            + [f"{stats(by[(s, mode)]['import']).median / base_imp:.2f}" for s in sizes]
        )
    fig.table(
        ["mode"]
        + [f"resume ×, {by[(s, 'checkpoints')]['events']:,} ev" for s in sizes]
        + [f"import ×, {by[(s, 'checkpoints')]['events']:,} ev" for s in sizes],
        rrows,
        "Growth relative to the smallest session (anchor = the same mode at ~10 events):",
    )
    frows = []
    for d in data:
        frows.append([f"{d['events']:,}", d["mode"], stats(d["fresh"]).fmt(0), stats(d["fresh_inner"]).fmt()])
    fig.table(
        ["events", "mode", "fresh process, spawn to exit ms", "of which open + get_runner + load ms"],
        frows,
        "Resume in a fresh process (what `acagent run --resume` pays), median (p95, min–max):",
    )
    f_small = stats(by[(sizes[0], "checkpoints")]["fresh"]).median
    f_big = stats(by[(sizes[-1], "checkpoints")]["fresh"]).median
    fig.targets.append(
        Target(
            "resume flat, fresh process",
            "resume of 10,000 events ≤ 2× resume of 10, each in a fresh process",
            f"{f_big:.0f} ms / {f_small:.0f} ms = {f_big / f_small:.2f}×",
            f_big / f_small <= 2.0,
        )
    )
    passed = ratio <= 2.0
    fig.targets.append(
        Target(
            "resume flat with checkpoints (warm, in-process)",
            "open + get_runner + load at 10,000 events ≤ 2× at 10 (same process, warm)",
            f"{big:.2f} ms / {small:.2f} ms = {ratio:.2f}×",
            passed,
        )
    )
    if not passed and not quick:
        fig.profiles.append(
            (
                f"resume of the {by[(sizes[-1], 'checkpoints')]['events']:,}-event session with checkpoints, 5 times",
                _profile(sizes[-1]),
            )
        )
    return fig


def _profile(size: int) -> str:
    async def go() -> str:
        template = await make_template()
        with tmp_home("f2p") as home:
            sid, _ = await _seed(home, size, template, 0.5)
            with Profiled() as prof:
                for _ in range(5):
                    await _resume_once(home, sid, 0.5)
        return prof.text

    return anyio.run(go)


def _child_main(argv: list[str]) -> None:
    """``python -m benchmarks.fig2_resume HOME SID RATIO``: one resume, its parts as JSON on stdout."""
    import json

    home, sid, ratio = Path(argv[0]), argv[1], float(argv[2])
    o, g, ld, n = anyio.run(_resume_once, home, sid, ratio)
    print(json.dumps({"open": o, "get_runner": g, "load": ld, "messages": n}))


if __name__ == "__main__":
    import sys

    _child_main(sys.argv[1:])
