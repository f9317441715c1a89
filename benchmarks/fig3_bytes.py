"""Bytes written per turn, by history length, against the bytes of the turn's own events.

A real registry runs the benchmark turn (scripted model, one echo tool call, tools auto-approved)
on one session. For the turns around each history length, every byte this process hands to
``write()``/``pwrite()`` during the turn is counted (``wchar`` of ``/proc/self/io``: the journal,
its WAL and WAL checkpoints, the JSONL transcript, acagent's context checkpoints), averaged over
max(5, history / 2) consecutive turns so periodic work (WAL checkpoints, context checkpoints) is amortised as
it is in a real session. The anchor is the turn's own events: the bytes of their JSONL envelopes,
context checkpoints excluded. Journal transactions per turn are counted by wrapping the journal's
``commit``/``commit_unfenced`` and, apart, its lease taking (``acquire_lease``, ``lease_session``) and release
(benchmark-only).

The texts are realistic: every user message, reply and tool argument is a different slice of real
prose and code (``scripted_factory(vary=True)``, ``user_text``), because the journal compresses
payloads (m007) and a repeated sentence would compress ~12× and pass the figure on repetition.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from benchmarks._common import bench_settings, echo_tools, io_written, scripted_factory, tmp_home, user_text

__all__ = ["measure_bytes"]

PEERS = {"Claude Code": 13.6 * 1024, "Codex": 544 * 1024}
"""Bytes per one-shot turn of the peers as measured in issue 12 (not measured by this run)."""


def _counting(fn: Callable[..., Awaitable[Any]], box: list[int]) -> Callable[..., Awaitable[Any]]:
    """``fn`` counting its calls in ``box[0]`` (benchmark-only wrapper of a journal method)."""

    async def counted(*a: Any, **kw: Any) -> Any:
        box[0] += 1
        return await fn(*a, **kw)

    return counted


async def _measure(lengths: list[int], per_point: int) -> list[dict[str, Any]]:
    from acagent.runner import SessionRegistry
    from acagent.testing import ScriptedModel

    factory = scripted_factory(tool_calls=True, vary=True)
    out = []
    with tmp_home("f3b") as home:
        settings = bench_settings(home)
        async with SessionRegistry.open(
            settings, provider_factory=lambda m: ScriptedModel(factory=factory), tools_factory=echo_tools
        ) as registry:
            journal = registry.journal
            commits = [0]
            leases = [0]
            for name, box in (
                ("commit", commits),
                ("commit_unfenced", commits),
                ("acquire_lease", leases),
                ("lease_session", leases),  # a turn's lease + session row in one transaction
                ("release_lease", leases),
            ):
                setattr(journal, name, _counting(getattr(journal, name), box))
            row = await registry.create_session(home, model="test:scripted")
            runner = await registry.get_runner(row.id)
            done = 0
            for length in lengths:
                while done < length - 1:
                    await runner.run_turn(user_text(done))
                    done += 1
                first = await journal.get_session(row.id)
                c0, l0, w0 = commits[0], leases[0], io_written()
                window = max(per_point, length // 2)  # long enough to include its share of checkpoints
                for _ in range(window):
                    await runner.run_turn(user_text(done))
                    done += 1
                await anyio.sleep(0.05)  # the transcript pump takes the last events
                w1 = io_written()
                events = await journal.events(row.id, first.last_seq)
                own = sum(len(e.to_json_bytes()) + 1 for e in events if e.type != "checkpoint")
                out.append(
                    {
                        "history": length,
                        "turns": window,
                        "written": (w1 - w0) / window,
                        "events_bytes": own / window,
                        "events": len([e for e in events if e.type != "checkpoint"]) / window,
                        "commits": (commits[0] - c0) / window,
                        "leases": (leases[0] - l0) / window,
                    }
                )
    return out


def measure_bytes(quick: bool) -> tuple[list[list[Any]], list[dict[str, Any]]]:
    """Rows of the bytes-per-turn table and the raw points."""
    lengths, per_point = ([1, 20], 3) if quick else ([1, 50, 200], 5)
    t0 = time.perf_counter()
    data = anyio.run(_measure, lengths, per_point)
    rows = [
        [
            f"{d['history']} ({d['turns']} turns)",
            f"{d['written'] / 1024:.1f} KB",
            f"{d['events_bytes'] / 1024:.1f} KB ({d['events']:.0f} events)",
            f"{d['written'] / d['events_bytes']:.2f}×",
            f"{d['commits']:.1f} (+ {d['leases']:.1f} lease)",
        ]
        for d in data
    ]
    for d in data:
        d["seconds"] = time.perf_counter() - t0
    return rows, data
