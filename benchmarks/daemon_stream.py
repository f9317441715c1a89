"""Daemon stream cost and hibernation memory (issue 12 items 5 and 6).

``python -m benchmarks.daemon_stream [--deltas 20000] [--sessions 1,10,50,200] [--hibernate 10000] [--pace 50]``

One real ``acagent serve`` (strict mock provider in this process, zero-delay deltas). Prints one
JSON object; never writes docs/.

1. **CPU per streamed delta**: one session, one attached WebSocket client; a turn of
   ``--deltas`` deltas. The daemon's own CPU time (``/proc/PID/stat`` utime + stime) over the
   turn divided by the deltas — provider bytes parsed, committed, published, framed and sent.
   Target ≤ 0.1 ms.
2. **Concurrent sessions**: K sessions each with one attached client, each running a turn of
   ``--deltas // K`` (at least 200) deltas at once; reported per K: wall time, deltas/s
   delivered to the clients, the daemon's CPU share (a share near the machine's core count
   means a saturated machine, not a slow daemon), the POST → first-delta latency p50/p99
   over the K sessions, and the **provider byte → attached client** latency p50/p99 over every
   delta: the mock stamps each delta's text with ``time.perf_counter()`` just before writing it
   to the socket (:class:`_Stamped`), the client subtracts it from its own clock when the frame
   arrives (one machine, one monotonic clock). The zero-delay mock sends as fast as the daemon
   reads, so that latency is mostly the backlog of a saturated stream; a second pass (``paced``)
   sends 200 deltas per session at ``--pace`` deltas/s (a model's speed) and measures what a
   watcher sees (deltas are committed in 50 ms frames before they are published).
3. **Hibernation**, on a daemon of its own (defaults, except ``--hibernate-interval`` so that idle
   hibernation waits for the figure): ``--hibernate`` sessions cloned in the journal (the rows a
   real turn wrote), each *woken* by one WebSocket attach, all in memory at once, then
   ``POST /v1/debug/hibernate``. The daemon's own counters prove the premise
   (``runners_built`` grew by N, ``runners`` reached N, N were dropped, none left). Daemon RSS:
   fresh, before them (after a warm-up of 100 other wakes), woken, after hibernating; target
   growth ≤ 20 MB over the same daemon before them. Then ``--turns`` more sessions woken by one
   turn each (``say hello`` through the mock) and hibernated: reported, no target.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks._seed import clone_sessions  # noqa: E402
from tests.mockprovider import MockProvider  # noqa: E402
from tests.server.conftest import Daemon, daemon_env, responder  # noqa: E402

END = ("turn.completed", "turn.failed", "turn.interrupted")


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class _Stamped:
    """The chunks of a zero-delay stream of ``n`` deltas, each built when the mock writes it:
    its text is ``t<perf_counter> `` (the provider-byte time)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self) -> Any:
        from tests.mockprovider import _oa_chunk

        yield _oa_chunk({"role": "assistant", "content": f"t{time.perf_counter():.6f} "})
        for _ in range(self.n - 1):
            yield _oa_chunk({"content": f"t{time.perf_counter():.6f} "})
        yield _oa_chunk({}, "stop") + b"data: [DONE]\n\n"


def _bench_responder(body: Any) -> Any:
    """``stamped N``: :class:`_Stamped`; anything else: the daemon tests' directives."""
    from tests.mockprovider import Script

    messages = body.get("messages") or []
    text = str(messages[-1].get("content") if messages else "")
    if text.startswith("stamped "):
        _, n, pace = text.split()
        sleeps = 1 / float(pace) if float(pace) else None
        return Script(chunks=_Stamped(int(n)), sleeps=sleeps)  # type: ignore[arg-type]
    return responder(body)


LATENCIES: list[float] = []
"""Provider byte → client frame, seconds, of every stamped delta of the current measurement."""


async def _turn(d: Daemon, http: Any, sid: str, text: str) -> tuple[float, int, float]:
    """One turn watched by one WebSocket client: (POST → first delta s, deltas seen, end time)."""
    import websockets

    last = (await http.get(f"/v1/sessions/{sid}")).json()["last_seq"]
    async with websockets.connect(
        f"{d.ws_url}/v1/sessions/{sid}/attach?since={last}", additional_headers=d.auth, max_size=None
    ) as conn:
        t0 = time.perf_counter()
        r = await http.post(f"/v1/sessions/{sid}/messages", json={"text": text})
        assert r.status_code == 202, r.text
        first = 0.0
        deltas = 0
        async for frame in conn:
            ev = json.loads(frame)
            if ev["type"] == "assistant.delta":
                now = time.perf_counter()
                deltas += 1
                if not first:
                    first = now - t0
                stamp = ev["payload"].get("text", "")
                if stamp.startswith("t"):
                    LATENCIES.append(now - float(stamp[1:]))
            if ev["type"] in END:
                break
    return first, deltas, time.perf_counter()


async def _concurrent(d: Daemon, work: Path, k: int, deltas: int, pace: float = 0.0) -> dict[str, Any]:
    """K sessions streaming ``deltas`` each at once; ``pace`` deltas/s per session (0: no delay)."""
    import httpx

    sids = [d.create(work)["id"] for _ in range(k)]
    results: list[tuple[float, int, float]] = []
    LATENCIES.clear()
    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=300) as http:
        c0, t0 = _cpu_s(d.pid), time.perf_counter()

        async def one(sid: str) -> None:
            results.append(await _turn(d, http, sid, f"stamped {deltas} {pace:g}"))

        async with anyio.create_task_group() as tg:
            for sid in sids:
                tg.start_soon(one, sid)
        wall = time.perf_counter() - t0
        cpu = _cpu_s(d.pid) - c0
    firsts = sorted(r[0] * 1000 for r in results)
    total = sum(r[1] for r in results)
    lat = sorted(x * 1000 for x in LATENCIES) or [0.0]
    return {
        "sessions": k,
        "pace_per_session": pace or "zero delay",
        "deltas_per_session": deltas,
        "wall_s": round(wall, 2),
        "deltas_per_s": round(total / wall),
        "daemon_cpu_s": round(cpu, 2),
        "daemon_cpu_share": round(cpu / wall, 2),
        "cpu_ms_per_delta": round(cpu * 1000 / max(total, 1), 4),
        "post_to_first_delta_ms": {
            "p50": round(statistics.median(firsts), 1),
            "p99": round(firsts[min(len(firsts) - 1, int(len(firsts) * 0.99))], 1),
        },
        "provider_byte_to_client_ms": {
            "p50": round(statistics.median(lat), 2),
            "p99": round(lat[min(len(lat) - 1, int(len(lat) * 0.99))], 2),
            "deltas": len(LATENCIES),
        },
    }


async def _wake_by_attach(d: Daemon, ids: list[str]) -> None:
    """One WebSocket attach per session (``since=0``), closed after its first frame."""
    import websockets

    for sid in ids:
        async with websockets.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=d.auth
        ) as conn:
            await conn.recv()


async def _wake_by_turn(d: Daemon, ids: list[str], since: int) -> None:
    """One turn per session (``say hello``), watched on an attach until the turn ends."""
    import httpx
    import websockets

    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=60) as http:
        for sid in ids:
            r = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "say hello"})
            assert r.status_code == 202, r.text
            async with websockets.connect(
                f"{d.ws_url}/v1/sessions/{sid}/attach?since={since}", additional_headers=d.auth
            ) as conn:
                while json.loads(await conn.recv()).get("type") not in END:
                    pass


async def _hibernate(d: Daemon) -> int:
    import httpx

    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=600) as http:
        dropped = int((await http.post("/v1/debug/hibernate")).json()["dropped"])
    await anyio.sleep(1.0)
    return dropped


async def _woken_then_hibernated(d: Daemon, template: str, n: int, how: str) -> dict[str, Any]:
    """Wake ``n`` fresh clones of ``template`` (``how``: ``attach`` or ``turn``), then hibernate them.

    The premise is checked in the daemon's own counters (``GET /v1/debug/stats``): ``n`` runners
    were built, all ``n`` were in memory at once, and ``n`` were dropped."""
    ids = clone_sessions(d.home / "acagent.db", template, n)
    s0, before = d.stats(), d.rss_kib()
    t0 = time.perf_counter()
    if how == "turn":
        await _wake_by_turn(d, ids, int(d.session(template)["last_seq"]))
    else:
        await _wake_by_attach(d, ids)
    wake_s = time.perf_counter() - t0
    s1, woken = d.stats(), d.rss_kib()
    dropped = await _hibernate(d)
    s2, after = d.stats(), d.rss_kib()
    built = s1["runners_built"] - s0["runners_built"]
    # Differences, not totals: runners built and in memory because of these n wakes.
    proven = built == n and s1["runners"] - s0["runners"] >= n and dropped >= n and s2["runners"] == 0
    growth_mb = (after - before) / 1024
    return {
        "sessions": n,
        "woken_by": how,
        "runners_built": built,
        "runners_in_memory_at_once": s1["runners"],
        "hibernated": dropped,
        "runners_after": s2["runners"],
        "premise_holds": proven,
        "wake_s": round(wake_s, 1),
        "rss_mb": {
            "before": round(before / 1024, 1),
            "woken": round(woken / 1024, 1),
            "after_hibernate": round(after / 1024, 1),
        },
        "live_kb_per_runner": round((woken - before) / max(n, 1), 2),
        "growth_mb": round(growth_mb, 1),
        "kept_kb_per_session": round((after - before) / max(n, 1), 2),
    }


async def _hibernation(root: Path, mock: MockProvider, n: int, turns: int) -> dict[str, Any]:
    """Part 3 on a daemon of its own (defaults, except that idle hibernation waits for the figure).

    Warm-up: a template session's turn, 100 other sessions woken and hibernated (the code paths
    of a wake, imported and run once). Then ``n`` sessions woken by an attach, all in memory at
    once, hibernated: the target (growth ≤ 20 MB over the same daemon before them). Then
    ``turns`` sessions woken by a turn each (after 20 as a warm-up of the turn path), hibernated
    (reported, no target).
    """
    home = root / "hib-home"
    home.mkdir()
    work = root / "hib-w"
    work.mkdir()
    d = Daemon(home=home, env=daemon_env(home, mock), args=["--yes", "--hibernate-interval", "86400"]).start()
    try:
        fresh = d.rss_kib()
        template = d.create(work)["id"]
        assert d.send(template, "say hello").status_code == 202
        d.wait_status(template, ("done",), timeout=60)
        await _wake_by_attach(d, clone_sessions(d.home / "acagent.db", template, 100))
        await _hibernate(d)
        attach = await _woken_then_hibernated(d, template, n, "attach")
        turn = None
        if turns:
            await _woken_then_hibernated(d, template, 20, "turn")  # warm-up: the turn path once
            turn = await _woken_then_hibernated(d, template, turns, "turn")
        allocator = d.stats().get("allocator", "?")
    finally:
        d.terminate(60)
    return {
        "fresh_daemon_rss_mb": round(fresh / 1024, 1),
        "allocator": allocator,
        "attach": attach,
        "turn": turn,
        # The 20 MB is for 10,000 sessions. A smaller run (--quick) cannot show it: fixed
        # costs (SQLite's page caches filling, ~4 MB) do not scale down, and a flat 20 MB would pass
        # whatever hibernation freed. So below 10,000 the growth is reported, not judged (None);
        # a premise that does not hold is a FAIL at any size.
        "target": "growth <= 20 MB at 10,000 sessions, premise (n built, n in memory at once, n hibernated) checked",
        "pass": (attach["growth_mb"] <= 20 if n >= 10_000 else None) if attach["premise_holds"] else False,
    }


async def run(
    deltas: int, levels: list[int], hibernate: int, pace: float = 50.0, turns: int = 1000
) -> dict[str, Any]:
    """Run the three parts on one daemon (see module docstring)."""
    with MockProvider() as mock, tempfile.TemporaryDirectory() as tmp:
        mock.default = _bench_responder
        home = Path(tmp) / "home"
        home.mkdir()
        work = Path(tmp) / "w"
        work.mkdir()
        cap = str(max(levels) + 10)
        args = ["--yes", "--max-sessions", cap, "--limit", f"max_attachers_total={max(2048, int(cap))}"]
        d = Daemon(home=home, env=daemon_env(home, mock), args=args).start()
        try:
            await _concurrent(d, work, 1, 200)  # warm-up: SDK import, first runner
            single = await _concurrent(d, work, 1, deltas)
            per_delta = single["cpu_ms_per_delta"]
            concurrent = [await _concurrent(d, work, k, max(200, deltas // k)) for k in levels]
            # Latency at a model's pace (``--pace`` deltas/s per session): what a watcher sees.
            paced = [await _concurrent(d, work, k, 200, pace) for k in levels] if pace else []
        finally:
            d.terminate(60)
        hib = await _hibernation(Path(tmp), mock, hibernate, turns) if hibernate else None
    return {
        "cpu_per_delta_ms": per_delta,
        "cpu_per_delta_target": "<= 0.1 ms",
        "cpu_per_delta_pass": per_delta <= 0.1,
        "single": single,
        "concurrent": concurrent,
        "paced": paced,
        "hibernation": hib,
        "load_average": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run and print the JSON result."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.daemon_stream", description=__doc__)
    parser.add_argument("--deltas", type=int, default=20000)
    parser.add_argument("--sessions", default="1,10,50,200")
    parser.add_argument("--hibernate", type=int, default=10000)
    parser.add_argument(
        "--turns", type=int, default=1000, help="sessions woken by a turn in part 3 (0: skip)"
    )
    parser.add_argument(
        "--pace", type=float, default=50.0, help="deltas/s per session of the paced run (0: skip)"
    )
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.sessions.split(",") if x.strip()]
    result = anyio.run(run, args.deltas, levels, args.hibernate, args.pace, args.turns)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
