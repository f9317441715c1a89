"""Idle and stalled attachers do not slow a healthy one (issue 10 item 12, F32).

``python -m benchmarks.daemon_attachers [--idle 1000] [--stalled 100] [--rounds 15]``

One real ``acagent serve`` (strict mock provider, ``tests/mockprovider.py``). A healthy
WebSocket client is attached to session H; each round POSTs ``say hi`` to H and times the POST
→ first frame on the healthy socket (the turn's first event), then waits for the turn's end.

1. **calm**: nothing else attached;
2. **loaded**: ``--idle`` WebSocket clients attached to 10 idle sessions (they read, nothing
   flows), plus ``--stalled`` raw WebSocket clients that never read (``SO_RCVBUF`` 4 KiB) on a
   session whose turn streamed 5 MB of deltas: their sends stay blocked (``blocked_sends`` in
   the daemon's stats confirms it; ``send_timeout_s`` is raised so they are not closed).

Target: loaded median ≤ 2× calm median. Prints one JSON object; never writes docs/.
"""

from __future__ import annotations

import argparse
import json
import socket
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

from tests.mockprovider import MockProvider  # noqa: E402
from tests.server.conftest import Daemon, daemon_env, responder, ws  # noqa: E402


def _cpu_s(pid: int) -> float:
    import os

    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _rounds(d: Daemon, sid: str, rounds: int) -> list[float]:
    import httpx
    import websockets

    out: list[float] = []
    async with httpx.AsyncClient(base_url=d.url, headers=d.auth, timeout=60) as http:
        for _ in range(rounds):
            last = (await http.get(f"/v1/sessions/{sid}")).json()["last_seq"]
            async with websockets.connect(
                f"{d.ws_url}/v1/sessions/{sid}/attach?since={last}", additional_headers=d.auth
            ) as conn:
                t0 = time.perf_counter()
                r = await http.post(f"/v1/sessions/{sid}/messages", json={"text": "say hi"})
                assert r.status_code == 202, r.text
                await conn.recv()
                out.append((time.perf_counter() - t0) * 1000)
                while json.loads(await conn.recv())["type"] not in ("turn.completed", "turn.failed"):
                    pass
            while (await http.get(f"/v1/sessions/{sid}")).json()["busy"]:
                await anyio.sleep(0.01)
    return out


def _stalled(d: Daemon, sid: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", d.port))
    s.sendall(
        ws(
            f"/v1/sessions/{sid}/attach?since=0",
            f"127.0.0.1:{d.port}",
            None,
            [("Authorization", f"Bearer {d.token}")],
        )
    )
    return s


async def run(idle: int, stalled: int, rounds: int) -> dict[str, Any]:
    import websockets

    with MockProvider() as mock, tempfile.TemporaryDirectory() as tmp:
        mock.default = responder
        home = Path(tmp) / "home"
        home.mkdir()
        work = Path(tmp) / "w"
        work.mkdir()
        cap = str(idle + stalled + 100)
        args = ["--yes", "--max-sessions", "8"]
        for pair in (f"max_attachers_per_session={cap}", f"max_attachers_total={cap}"):
            args += ["--limit", pair]
        args += ["--limit", f"max_connections_per_client={int(cap) + 200}", "--limit", "send_timeout_s=600"]
        d = Daemon(home=home, env=daemon_env(home, mock), args=args).start()
        try:
            healthy = d.create(work)["id"]
            await _rounds(d, healthy, 3)  # warm-up (provider SDK import, first runner)
            calm = await _rounds(d, healthy, rounds)
            quiet = [d.create(work)["id"] for _ in range(10)]
            noisy = d.create(work)["id"]
            conns = []
            for i in range(idle):
                conns.append(
                    await websockets.connect(
                        f"{d.ws_url}/v1/sessions/{quiet[i % 10]}/attach?since=0",
                        additional_headers=d.auth,
                        ping_interval=None,
                    )
                )
            socks = [_stalled(d, noisy) for _ in range(stalled)]
            while d.stats()["sessions"].get(noisy, {}).get("attachers", 0) < stalled:
                await anyio.sleep(0.1)
            assert d.send(noisy, "deltas 5000 1000 0").status_code == 202
            d.wait_status(noisy, ("done",), timeout=120)
            # Until every stalled client's send is blocked, the daemon is still pushing the
            # turn's 5 MB into their socket buffers (real work, not the cost of stalled clients).
            deadline = time.monotonic() + 180
            while d.stats()["blocked_sends"] < stalled and time.monotonic() < deadline:
                await anyio.sleep(0.5)
            await anyio.sleep(1.0)
            stats = d.stats()
            c0, t0 = _cpu_s(d.pid), time.monotonic()
            loaded = await _rounds(d, healthy, rounds)
            cpu_share = (_cpu_s(d.pid) - c0) / (time.monotonic() - t0)
            for s in socks:
                s.close()
            for c in conns:
                await c.close()
        finally:
            d.terminate(30)
    calm_med, loaded_med = statistics.median(calm), statistics.median(loaded)
    return {
        "idle_attachers": idle,
        "stalled_attachers": stalled,
        "attachers_seen_by_daemon": stats["attachers"],
        "blocked_sends_seen_by_daemon": stats["blocked_sends"],
        "calm_ms": {"median": round(calm_med, 2), "max": round(max(calm), 2)},
        "loaded_ms": {"median": round(loaded_med, 2), "max": round(max(loaded), 2)},
        "ratio": round(loaded_med / calm_med, 2),
        "target": "loaded median <= 2x calm median",
        "pass": loaded_med <= 2 * calm_med,
        "daemon_cpu_share_while_loaded": round(cpu_share, 3),
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its JSON result (exit 1 when the target is missed)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.daemon_attachers", description=__doc__)
    parser.add_argument("--idle", type=int, default=1000)
    parser.add_argument("--stalled", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args(argv)
    result = anyio.run(run, args.idle, args.stalled, args.rounds)
    print(json.dumps(result, indent=2))
    return 0 if result["pass"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
