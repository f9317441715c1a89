"""Figure 11: the daemon at scale — CPU per streamed delta, latency under concurrency, memory of hibernated sessions.

Runs :mod:`benchmarks.daemon_stream` (issue 12 targets 5 and 6; it can also be run alone, and
prints JSON): a real ``acagent serve`` against the strict mock provider in this process.

- **CPU per streamed delta** (target 5): the daemon's own CPU (``/proc/PID/stat``) over a turn
  of zero-delay deltas to one attached WebSocket client, divided by the deltas: provider bytes
  parsed, committed, published, framed and sent. Then K concurrent sessions (CPU per delta, the
  daemon's CPU share, POST → first delta, provider byte → client latency p50/p99), once at full
  speed and once at a model's pace.
- **Hibernated sessions** (target 6), on a daemon of its own: N sessions woken by an attach, all
  in memory at once (the daemon's own counters prove it), then hibernated; the daemon's RSS
  growth over the same daemon before them, next to a fresh daemon's RSS. Then sessions woken by
  one turn each and hibernated (reported, no target).
"""

from __future__ import annotations

from typing import Any

import anyio

from benchmarks._common import Figure, Target


def _level_rows(levels: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for c in levels:
        lat = c["provider_byte_to_client_ms"]
        rows.append(
            [
                c["sessions"],
                f"{c['cpu_ms_per_delta']:.4f}",
                f"{c['daemon_cpu_share']:.2f}",
                f"{c['post_to_first_delta_ms']['p50']:.0f} / {c['post_to_first_delta_ms']['p99']:.0f}",
                f"{lat['p50']:.1f} / {lat['p99']:.1f}",
            ]
        )
    return rows


def _hib_row(label: str, h: dict[str, Any]) -> list[Any]:
    rss = h["rss_mb"]
    return [
        label,
        f"{h['runners_built']:,} built, {h['runners_in_memory_at_once']:,} at once, {h['hibernated']:,} dropped",
        f"{rss['before']} → {rss['woken']} → {rss['after_hibernate']}",
        f"{h['live_kb_per_runner']:.1f}",
        f"**{h['growth_mb']:+.1f}** ({h['kept_kb_per_session']:.2f} KB each)",
    ]


def run(quick: bool) -> Figure:
    """Run :func:`benchmarks.daemon_stream.run` and report it (``quick``: small sizes)."""
    from benchmarks import daemon_stream

    fig = Figure(11, "Daemon at scale: CPU per streamed delta, concurrency, hibernated sessions")
    if quick:
        deltas, levels, pace, hibernate, turns = 2_000, [1, 10], 0.0, 1_000, 100
    else:
        deltas, levels, pace, hibernate, turns = 20_000, [1, 10, 50, 200], 50.0, 10_000, 1_000
    r = anyio.run(daemon_stream.run, deltas, levels, hibernate, pace, turns)
    single = r["single"]
    fig.text.append(
        f"One session, one attached WebSocket client, a turn of {deltas:,} zero-delay deltas: the daemon "
        f"spent **{r['cpu_per_delta_ms']:.4f} ms** of CPU per delta (CPU share {single['daemon_cpu_share']:.2f} "
        f"of a core over the turn)."
    )
    header = [
        "sessions",
        "CPU ms / delta",
        "daemon CPU share",
        "POST → first delta ms p50 / p99",
        "provider byte → client ms p50 / p99",
    ]
    fig.table(
        header,
        _level_rows(r["concurrent"]),
        "Zero-delay mock (each session's deltas as fast as the daemon reads):",
    )
    if r["paced"]:
        fig.table(
            header, _level_rows(r["paced"]), f"At a model's pace ({pace:g} deltas/s per session, 200 each):"
        )
    fig.targets.append(
        Target(
            "daemon CPU per streamed delta",
            "≤ 0.1 ms from provider byte to subscriber frame",
            f"{r['cpu_per_delta_ms']:.4f} ms",
            r["cpu_per_delta_pass"],
        )
    )
    h = r["hibernation"]
    rows = [_hib_row("woken by an attach (target)", h["attach"])]
    if h["turn"]:
        rows.append(_hib_row("woken by a turn each (reported)", h["turn"]))
    fig.table(
        [
            "sessions",
            "premise (daemon's counters)",
            "RSS MB before → woken → hibernated",
            "KB live per runner",
            "growth MB",
        ],
        rows,
        f"A fresh daemon: **{h['fresh_daemon_rss_mb']} MB** RSS; allocator `{h['allocator']}` "
        "(acagent/_allocator.py). Growth is over the same daemon before them, after a warm-up of 100 other wakes.",
    )
    a = h["attach"]
    fig.targets.append(
        Target(
            f"{a['sessions']:,} sessions woken, then hibernated",
            "daemon RSS growth ≤ 20 MB over the same daemon before them (all woken, in memory at once); "
            "judged at 10,000 sessions only",
            f"{a['growth_mb']:+.1f} MB; premise {'holds' if a['premise_holds'] else 'NOT met'}",
            h["pass"],
        )
    )
    return fig
