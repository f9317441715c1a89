"""Figure 10: long sessions with compaction on — what is sent per turn, per-turn overhead, resume.

One real session is run turn after turn (the benchmark workload: a 1 KB user message, a
200-character preamble with one ``echo`` tool call of 800 characters, a 1 KB answer) through the
registry, runner, journal and OpenAI adapter against the strict mock (``tests/mockprovider.py``,
in this process: it validates every request as the real API would and refuses one longer than
the model's window with ``context_length_exceeded``), with a 16,000-token window configured for
the model and compaction on (the defaults: at 80 % of the window, the most recent 35 % kept).
Summary requests get a ~1 KB summary that keeps which turn came first; the last turn asks for it.
The session runs until it has 10,000 events; copies of its data directory are taken when it first
has ~10, 1,000 and 10,000 events.

- **Bytes sent per turn** (every request of the turn, summary requests included) against the
  history's length, next to the full history's size (what an agent without compaction would send).
- **Per-turn overhead** at each size: turns run on a copy of the snapshot (fresh registry, same
  process, interleaved rounds), the mock answering at once, so a turn's wall time is the runtime's
  (and the mock's HTTP round trips); the mean includes the turns that compacted.
- **Resume in a fresh process** (``python -m benchmarks.fig10_context HOME SID``: interpreter start,
  imports, open, get_runner, load, exit), spawn to exit, interleaved rounds; anchor: the ~10-event
  session in the same run.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import Figure, Target, stats, tmp_home
from benchmarks._context_workload import (
    WINDOW,
    long_session,
    overhead_turns,
    provider_tokens,
    responder,
    resume_once,
)

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def _fresh_resume(home: Path, sid: str) -> tuple[float, dict[str, Any]]:
    """Wall ms of one resume in a new interpreter, and the child's own figures."""
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.fig10_context", str(home), sid],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    return (time.perf_counter() - t0) * 1000, json.loads(proc.stdout.strip().splitlines()[-1])


def _measure(quick: bool) -> dict[str, Any]:
    from tests.mockprovider import MockProvider

    sizes = [10, 200, 600] if quick else [10, 1000, 10000]
    rounds, turns, resumes = (1, 3, 2) if quick else (3, 10, 7)
    with MockProvider() as mock, tmp_home("f10") as tmp:
        mock.default = responder
        t0 = time.perf_counter()
        data = anyio.run(long_session, tmp / "home", mock, sizes, tmp / "snaps")
        data["long_s"] = time.perf_counter() - t0
        data["sizes"] = sizes
        sid = data["sid"]
        over: dict[int, list[dict[str, Any]]] = {n: [] for n in sizes}
        fresh: dict[int, list[tuple[float, dict[str, Any]]]] = {n: [] for n in sizes}
        for r in range(rounds):
            for n in sizes if r % 2 == 0 else reversed(sizes):
                snap = data["snapshots"][n]
                first = len([x for x in data["rows"] if x["events"] <= snap["events"]]) + 100 * (r + 1)
                over[n] += anyio.run(overhead_turns, snap["home"], sid, mock, turns, first)
        for r in range(resumes):
            for n in sizes if r % 2 == 0 else reversed(sizes):
                fresh[n].append(_fresh_resume(data["snapshots"][n]["home"], sid))
        data["overhead"], data["fresh"] = over, fresh
    return data


def _sent_table(fig: Figure, d: dict[str, Any]) -> None:
    from acagent.runner._window import bytes_to_tokens

    rows = d["rows"]
    picks = sorted({t for t in (1, 2, 5, 10, 20, 50, 100, 200, 300, 400) if t <= len(rows)} | {len(rows)})
    table = []
    for t in picks:
        x = rows[t - 1]
        table.append(
            [
                t,
                f"{x['events']:,}",
                f"{x['sent'] / 1024:,.1f} KB",
                f"{x['largest_tokens']:,} ({x['largest_tokens'] / WINDOW:.0%})",
                f"{bytes_to_tokens(x['largest']):,}",
                x["summaries"],
                f"{x['full'] / 1024:,.1f} KB ({x['full'] // 4 / WINDOW:.0%})",
            ]
        )
    fig.table(
        [
            "turn",
            "events",
            "sent this turn",
            "largest request, provider tokens (of window)",
            "same, acagent's bytes/3 count",
            "summary calls",
            "full history, messages only (provider tokens of window)",
        ],
        table,
    )


def _resume_ms(d: dict[str, Any], size: int) -> float:
    return stats([f[0] for f in d["fresh"][size]]).median


def _turn_table(fig: Figure, d: dict[str, Any]) -> tuple[float, float, float]:
    """The overhead and resume table; returns the CPU, wall and resume ratios (largest / smallest)."""
    sizes, snaps = d["sizes"], d["snapshots"]
    base = {k: stats([o[k] for o in d["overhead"][sizes[0]]]).median for k in ("ms", "cpu")}
    base_resume = _resume_ms(d, sizes[0])
    out, ratios = [], (0.0, 0.0, 0.0)
    for n in sizes:
        turns = d["overhead"][n]
        ms, cpu = [o["ms"] for o in turns], [o["cpu"] for o in turns]
        walls = [f[0] for f in d["fresh"][n]]
        inner = [f[1]["open"] + f[1]["get_runner"] + f[1]["load"] for f in d["fresh"][n]]
        ratios = (
            stats(cpu).median / base["cpu"],
            stats(ms).median / base["ms"],
            stats(walls).median / base_resume,
        )
        out.append(
            [
                f"{snaps[n]['events']:,}",
                stats(ms).fmt(1),
                f"{sum(ms) / len(ms):.1f}",
                f"{stats(cpu).median:.1f} ({sum(cpu) / len(cpu):.1f})",
                f"{sum(o['compacted'] for o in turns)}/{len(turns)}",
                f"{ratios[1]:.2f} / {ratios[0]:.2f}",
                stats(walls).fmt(0),
                f"{stats(inner).median:.1f}",
                d["fresh"][n][0][1]["messages"],
                f"{ratios[2]:.2f}",
            ]
        )
    fig.table(
        [
            "events",
            "turn wall ms, median (p95, min–max)",
            "wall mean",
            "turn CPU ms, median (mean)",
            "turns that compacted",
            "turn × wall / CPU",
            "fresh-process resume ms",
            "of which open + get_runner + load ms",
            "messages loaded",
            "resume ×",
        ],
        out,
        "Per-turn overhead (turns on a copy of the session at that size, the mock answering at once; CPU = "
        "this process, all threads, the mock's included) and resume in a fresh process; × = relative to "
        "the smallest session in this run:",
    )
    return ratios


def run(quick: bool) -> Figure:
    """Measure (module docstring) and report."""
    from acagent.runner._window import bytes_to_tokens

    fig = Figure(10, "Long sessions with compaction: bytes sent per turn, per-turn overhead, resume")
    d = _measure(quick)
    rows, sizes, snaps, requests = d["rows"], d["sizes"], d["snapshots"], d["requests"]
    largest = max(provider_tokens(r.json) for r in requests)
    ours = max(bytes_to_tokens(len(r.body)) for r in requests)
    rejected = sum(r.status != 200 for r in requests)
    fig.text.append(
        f"One session of {len(rows)} turns ({rows[-1]['events']:,} events, {d['compactions']} compactions, "
        f"{len(requests):,} requests, built in {d['long_s']:.0f} s) against the strict mock with a "
        f"{WINDOW:,}-token window. Sent per turn: the request bodies of the turn (its summary request "
        "included when it compacted); the full history is what one request would carry without "
        "compaction (its messages, without the system prompt and tool definitions). Provider tokens: the mock's count (a quarter of the JSON bytes), "
        "which the mock reports as usage and acagent calibrates its estimate with; acagent's own "
        "uncalibrated count (bytes / 3) is shown beside it."
    )
    _sent_table(fig, d)
    cpu_x, wall_x, resume_x = _turn_table(fig, d)
    plateau = [x["sent"] for x in rows if sizes[1] <= x["events"] < 2 * sizes[1]]
    tail = [x["sent"] for x in rows[-max(10, len(rows) // 10) :]]
    flat = stats(tail).median / stats(plateau).median if plateau else float("inf")
    big, small = snaps[sizes[-1]]["events"], snaps[sizes[0]]["events"]
    fig.targets += [
        Target(
            "resume flat with compaction, fresh process",
            f"resume of {big:,} events ≤ 2× resume of {small} events (same run)",
            f"{_resume_ms(d, sizes[-1]):.0f} ms / {_resume_ms(d, sizes[0]):.0f} ms = {resume_x:.2f}×",
            resume_x <= 2.0,
        ),
        Target(
            "per-turn overhead flat with compaction",
            f"median turn CPU at {big:,} events ≤ 1.5× at {small} events (same run)",
            f"CPU {cpu_x:.2f}× (wall {wall_x:.2f}×)",
            cpu_x <= 1.5,
        ),
        Target(
            "requests bounded by the window",
            f"every request ≤ the {WINDOW:,}-token window; none refused by the strict mock",
            f"largest {largest:,} provider tokens ({largest / WINDOW:.0%}; {ours:,} by bytes/3); "
            f"{rejected} refused of {len(requests):,}",
            largest <= WINDOW and rejected == 0,
        ),
        Target(
            "bytes sent per turn flat once compaction runs",
            f"median per turn over the last turns ≤ 1.25× the median at {sizes[1]:,}–{2 * sizes[1]:,} events",
            f"{stats(tail).median / 1024:.1f} KB / {stats(plateau).median / 1024:.1f} KB = {flat:.2f}×"
            if plateau
            else "no turns in range",
            flat <= 1.25,
        ),
        Target(
            "the answer after every compaction is right",
            "the last turn recalls which turn came first (a fact carried by every summary)",
            repr(d["answer"]),
            d["answer"] == "the first turn was turn 0",
        ),
    ]
    return fig


def _child_main(argv: list[str]) -> None:
    """``python -m benchmarks.fig10_context HOME SID``: one resume, its parts as JSON on stdout."""
    print(json.dumps(anyio.run(resume_once, Path(argv[0]), argv[1])))


if __name__ == "__main__":
    _child_main(sys.argv[1:])
