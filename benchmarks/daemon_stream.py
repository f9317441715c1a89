"""Daemon stream cost and hibernation memory (issue 12 items 5 and 6).

``python -m benchmarks.daemon_stream [--deltas 20000] [--sessions 1,10,50,200] [--hibernate 10000]``

One real ``acagent serve`` (strict mock provider in this process, zero-delay deltas). Prints one
JSON object; never writes docs/.

1. **CPU per streamed delta**: one session, one attached WebSocket client; a turn of
   ``--deltas`` deltas. The daemon's own CPU time (``/proc/PID/stat`` utime + stime) over the
   turn divided by the deltas — provider bytes parsed, committed, published, framed and sent.
   Target ≤ 0.1 ms.
2. **Concurrent sessions**: K sessions each with one attached client, each running a turn of
   ``--deltas // K`` (at least 200) deltas at once; reported per K: wall time, deltas/s
   delivered to the clients, the daemon's CPU share (a share near the machine's core count
   means a saturated machine, not a slow daemon), and the POST → first-delta latency p50/p99
   over the K sessions.
3. **Hibernation**: ``--hibernate`` sessions cloned in the journal (the rows a real turn wrote),
   each *woken* by one WebSocket attach (a runner is built in the daemon; ``runners`` in
   ``/v1/debug/stats`` proves they were loaded), then ``POST /v1/debug/hibernate``. Daemon RSS:
   fresh, after waking, after hibernating; target growth ≤ 20 MB over the fresh daemon.
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
                deltas += 1
                if not first:
                    first = time.perf_counter() - t0
            if ev["type"] in END:
                break
    return first, deltas, time.perf_counter()


async def _concurrent(d: Daemon, work: Path, k: int, deltas: int) -> dict[str, Any]:
    import httpx

    sids = [d.create(work)["id"] for _ in range(k)]
    results: list[tuple[float, int, float]] = []
    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=300) as http:
        c0, t0 = _cpu_s(d.pid), time.perf_counter()

        async def one(sid: str) -> None:
            results.append(await _turn(d, http, sid, f"deltas {deltas} 20"))

        async with anyio.create_task_group() as tg:
            for sid in sids:
                tg.start_soon(one, sid)
        wall = time.perf_counter() - t0
        cpu = _cpu_s(d.pid) - c0
    firsts = sorted(r[0] * 1000 for r in results)
    total = sum(r[1] for r in results)
    return {
        "sessions": k,
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
    }


async def _hibernation(d: Daemon, work: Path, n: int) -> dict[str, Any]:
    import httpx
    import websockets

    fresh = d.rss_kib()
    template = d.create(work)["id"]
    assert d.send(template, "say hello").status_code == 202
    d.wait_status(template, ("done",))
    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=60) as http:
        await http.post("/v1/debug/hibernate")
    before = d.rss_kib()
    ids = clone_sessions(d.home / "acagent.db", template, n)
    t0 = time.perf_counter()
    for sid in ids:
        async with websockets.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=d.auth
        ) as conn:
            await conn.recv()
    wake_s = time.perf_counter() - t0
    loaded = d.stats()["runners"]
    woken = d.rss_kib()
    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=600) as http:
        dropped = (await http.post("/v1/debug/hibernate")).json()["dropped"]
    await anyio.sleep(1.0)
    after = d.rss_kib()
    growth_mb = (after - before) / 1024
    return {
        "sessions": n,
        "runners_loaded_in_daemon": loaded,
        "hibernated": dropped,
        "wake_s": round(wake_s, 1),
        "rss_mb": {
            "fresh_daemon": round(fresh / 1024, 1),
            "before": round(before / 1024, 1),
            "woken": round(woken / 1024, 1),
            "after_hibernate": round(after / 1024, 1),
        },
        "growth_mb": round(growth_mb, 1),
        "target": "growth <= 20 MB",
        "pass": growth_mb <= 20 and loaded >= n,
    }


async def run(deltas: int, levels: list[int], hibernate: int) -> dict[str, Any]:
    """Run the three parts on one daemon (see module docstring)."""
    with MockProvider() as mock, tempfile.TemporaryDirectory() as tmp:
        mock.default = responder
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
            hib = await _hibernation(d, work, hibernate) if hibernate else None
        finally:
            d.terminate(60)
    return {
        "cpu_per_delta_ms": per_delta,
        "cpu_per_delta_target": "<= 0.1 ms",
        "cpu_per_delta_pass": per_delta <= 0.1,
        "single": single,
        "concurrent": concurrent,
        "hibernation": hib,
        "load_average": os.getloadavg(),
    }


def main(argv: list[str] | None = None) -> int:
    """Run and print the JSON result."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.daemon_stream", description=__doc__)
    parser.add_argument("--deltas", type=int, default=20000)
    parser.add_argument("--sessions", default="1,10,50,200")
    parser.add_argument("--hibernate", type=int, default=10000)
    args = parser.parse_args(argv)
    levels = [int(x) for x in args.sessions.split(",") if x.strip()]
    result = anyio.run(run, args.deltas, levels, args.hibernate)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
