"""Daemon numbers for docs/daemon.md (not collected by pytest).

Run: ``. .venv/bin/activate && python tests/server/bench_daemon.py [--sessions 1000] [--events 10000]``

1. latency from ``POST /messages`` to the first event of that turn on an attached WebSocket client;
2. ``since=0`` replay throughput of a 10,000-event session (WebSocket, SSE, and the JSON pages);
3. daemon RSS: fresh, with 1,000 sessions that each ran a turn, and after they hibernate.

A real ``acagent serve`` subprocess and the strict mock provider, as in the tests.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx
import websockets

_REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(_REPO))

from tests.mockprovider import MockProvider  # noqa: E402
from tests.server.conftest import Daemon, daemon_env, responder  # noqa: E402


async def latency(d: Daemon, sid: str, runs: int) -> list[float]:
    out = []
    async with httpx.AsyncClient(base_url=d.url, headers=d.auth) as http:
        last = (await http.get(f"/v1/sessions/{sid}")).json()["last_seq"]
        async with websockets.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since={last}", additional_headers=d.auth
        ) as ws:
            for i in range(runs):
                t0 = time.perf_counter()
                r = await http.post(f"/v1/sessions/{sid}/messages", json={"text": f"say reply {i}"})
                assert r.status_code == 202, r.text
                first = None
                while True:
                    ev = json.loads(await ws.recv())
                    if first is None:
                        first = time.perf_counter() - t0
                    if ev["type"] == "turn.completed":
                        break
                out.append(first * 1000)
    return out


async def replay_ws(d: Daemon, sid: str, end: int) -> float:
    t0 = time.perf_counter()
    async with websockets.connect(
        f"{d.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=d.auth, max_size=None
    ) as ws:
        async for frame in ws:
            if json.loads(frame)["seq"] == end:
                break
    return time.perf_counter() - t0


async def replay_sse(d: Daemon, sid: str, end: int) -> float:
    t0 = time.perf_counter()
    async with (
        httpx.AsyncClient(timeout=None) as c,
        c.stream("GET", f"{d.url}/v1/sessions/{sid}/stream", headers=d.auth) as r,
    ):
        async for line in r.aiter_lines():
            if line == f"id: {end}":
                break
    return time.perf_counter() - t0


async def many_sessions(d: Daemon, w: Path, n: int) -> None:
    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=60) as http:
        sem = anyio.Semaphore(8)

        async def one(i: int) -> None:
            async with sem:
                sid = (await http.post("/v1/sessions", json={"cwd": str(w)})).json()["id"]
                while (
                    await http.post(f"/v1/sessions/{sid}/messages", json={"text": f"say s{i}"})
                ).status_code == 429:
                    await anyio.sleep(0.05)
                while True:
                    s = (await http.get(f"/v1/sessions/{sid}")).json()
                    if s["status"] == "done" and not s["busy"]:
                        return
                    await anyio.sleep(0.02)

        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(one, i)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--latency-runs", type=int, default=50)
    args = parser.parse_args()
    with MockProvider() as mock:
        mock.default = responder
        home = Path(tempfile.mkdtemp())
        w = home / "w"
        w.mkdir()
        d = Daemon(home=home, env=daemon_env(home, mock), args=["--hibernate-interval", "3600"]).start()
        try:
            fresh = d.rss_kib()
            sid = d.create(w)["id"]
            d.send(sid, "say warm-up")
            d.wait_status(sid, ("done",))
            lat = anyio.run(latency, d, sid, args.latency_runs)
            lat.sort()
            print(
                f"POST /messages -> first event on an attached WebSocket: median {statistics.median(lat):.1f} ms, "
                f"p95 {lat[int(len(lat) * 0.95) - 1]:.1f} ms, min {lat[0]:.1f} ms ({len(lat)} turns)"
            )

            big = d.create(w)["id"]
            d.send(big, f"deltas {args.events - 11} 20")
            d.wait_status(big, ("done",), timeout=300)
            end = d.session(big)["last_seq"]
            ws_s = [anyio.run(replay_ws, d, big, end) for _ in range(3)]
            sse_s = [anyio.run(replay_sse, d, big, end) for _ in range(3)]
            t0 = time.perf_counter()
            pages = len(d.events(big))
            http_s = time.perf_counter() - t0
            print(
                f"since=0 replay of {end} events: WebSocket best {min(ws_s):.2f} s ({end / min(ws_s):,.0f} events/s), "
                f"SSE best {min(sse_s):.2f} s ({end / min(sse_s):,.0f} events/s), JSON pages {http_s:.2f} s ({pages} events)"
            )

            t0 = time.perf_counter()
            anyio.run(many_sessions, d, w, args.sessions)
            built = time.perf_counter() - t0
            before = d.rss_kib()
            stats = d.stats()
            dropped = d.http.post("/v1/debug/hibernate").json()
            time.sleep(1)
            after = d.rss_kib()
            print(
                f"RSS: fresh daemon {fresh / 1024:.1f} MiB; {args.sessions} sessions with one turn each "
                f"({built:.0f} s to run) {before / 1024:.1f} MiB with {stats['runners']} runners in memory; "
                f"after hibernating {dropped['dropped']} runners {after / 1024:.1f} MiB ({dropped['runners']} left)"
            )
        finally:
            d.terminate()


if __name__ == "__main__":
    main()
