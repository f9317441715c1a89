"""Figure 7: the daemon — POST /messages to the first WebSocket event; ``since=0`` replay throughput.

A real ``acagent serve --port 0`` process (its own ``ACAGENT_HOME``, provider = the strict mock
OpenAI-compatible server of ``tests/mockprovider.py``), driven from this process with httpx and
websockets, as a browser or another terminal would:

- **POST → first event**: a WebSocket client attached at the session's current seq; the clock runs
  from sending ``POST /v1/sessions/{id}/messages`` to the first frame on the socket (the turn's
  ``turn.started``). Anchors in the same run: the POST's own round trip (202), and a bare
  ``GET /v1/sessions/{id}`` round trip.
- **Replay**: a session of ~10,000 events (seeded through the journal while the daemon runs, see
  :mod:`benchmarks._seed`), attached with ``since=0``; events/s until its last seq arrives.
  Anchor: reading the same events straight from the journal in this process
  (``SqliteJournal.events``).

Skipped with a note when ``acagent serve`` does not exist.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks._common import Figure, stats, tmp_home
from benchmarks._seed import make_template, seed_session
from benchmarks.fig6_cli import _env, _load_mock, _script


def _has_serve() -> bool:
    return (
        importlib.util.find_spec("acagent.cli._serve") is not None
        and importlib.util.find_spec("acagent.server._daemon") is not None
    )


def _start_daemon(home: Path, base_url: str) -> tuple[subprocess.Popen[bytes], dict[str, Any], str]:
    env = _env(home)
    env["OPENAI_API_KEY"] = "sk-bench"
    proc = subprocess.Popen(
        [_script(), "serve", "--port", "0", "--yes", "--model", "openai:gpt-bench", "--base-url", base_url],
        env=env,
        cwd=home,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        path = home / "daemon.json"
        if path.exists():
            try:
                info = json.loads(path.read_text())
                if info.get("pid") == proc.pid:
                    return proc, info, (home / "token").read_text().strip()
            except (OSError, ValueError):
                pass
        if proc.poll() is not None:
            raise RuntimeError(
                f"acagent serve exited {proc.returncode}: {proc.stderr.read().decode()[-2000:]}"
            )  # type: ignore[union-attr]
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("acagent serve did not write daemon.json within 60 s")


async def _measure(home: Path, url: str, token: str, turns: int, replays: int, events: int) -> dict[str, Any]:
    import httpx
    from websockets.asyncio.client import connect

    headers = {"authorization": f"Bearer {token}"}
    ws_base = url.replace("http://", "ws://")
    out: dict[str, Any] = {
        "post_to_event": [],
        "post_rtt": [],
        "get_rtt": [],
        "get_fresh": [],
        "replay": [],
        "journal_read": [],
    }
    fresh = httpx.AsyncClient(
        base_url=url, headers=headers, timeout=60, limits=httpx.Limits(max_keepalive_connections=0)
    )
    async with fresh, httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as http:
        r = await http.post("/v1/sessions", json={"cwd": str(home)})
        r.raise_for_status()
        sid = r.json()["id"]
        for i in range(turns + 1):
            last = (await http.get(f"/v1/sessions/{sid}")).json()["last_seq"]
            async with connect(
                f"{ws_base}/v1/sessions/{sid}/attach?since={last}",
                additional_headers=headers,
                subprotocols=["acagent.v1"],
            ) as ws:  # type: ignore[list-item]
                t0 = time.perf_counter()
                await http.get(f"/v1/sessions/{sid}")
                get_rtt = time.perf_counter() - t0
                t0 = time.perf_counter()
                posted = await http.post(f"/v1/sessions/{sid}/messages", json={"text": f"hello {i}"})
                t_post = time.perf_counter()
                posted.raise_for_status()
                first = await ws.recv()
                t_first = time.perf_counter()
                t_fresh = time.perf_counter()
                await fresh.get(f"/v1/sessions/{sid}")
                t_fresh = time.perf_counter() - t_fresh
                if i > 0:  # the first turn warms the provider and the daemon
                    out["get_fresh"].append(t_fresh * 1000)
                    out["post_to_event"].append((t_first - t0) * 1000)
                    out["post_rtt"].append((t_post - t0) * 1000)
                    out["get_rtt"].append(get_rtt * 1000)
                out["first_type"] = json.loads(first)["type"]
                while True:
                    event = json.loads(await ws.recv())
                    if event["type"] in ("turn.completed", "turn.failed", "turn.interrupted"):
                        out["turn_end"] = event["type"]
                        break
        # a long session for the replay, written through the journal while the daemon runs
        from acagent.store import SqliteJournal

        template = await make_template()
        journal = await SqliteJournal.open(home / "acagent.db")
        try:
            row, _ = await journal.create_session(cwd=str(home), model="openai:gpt-bench", title=None)
            last_seq = await seed_session(
                journal, row.id, max(1, round(events / len(template.events))), template
            )
            for _ in range(replays):
                t0 = time.perf_counter()
                got = await journal.events(row.id, 0)
                out["journal_read"].append(len(got) / (time.perf_counter() - t0))
        finally:
            await journal.aclose()
        out["replay_events"] = last_seq
        for _ in range(replays):
            n = 0
            t0 = time.perf_counter()
            async with connect(
                f"{ws_base}/v1/sessions/{row.id}/attach?since=0", additional_headers=headers, max_size=None
            ) as ws:
                while True:
                    event = json.loads(await ws.recv())
                    n += 1
                    if event.get("seq") == last_seq:
                        break
            out["replay"].append(n / (time.perf_counter() - t0))
    return out


def run(quick: bool) -> Figure:
    fig = Figure(7, "Daemon: POST to first WebSocket event, since=0 replay")
    if not _has_serve():
        fig.text.append("Skipped: `acagent serve` does not exist in this build.")
        return fig
    turns, replays = (3, 1) if quick else (20, 5)
    mp = _load_mock()
    with tmp_home("f7") as home, mp.MockProvider() as mock:
        mock.default = mp.openai_text("hello from the mock", usage=(10, 5))
        proc, info, token = _start_daemon(home, mock.openai_base_url)
        try:
            data = anyio.run(_measure, home, info["url"], token, turns, replays, 2_000 if quick else 10_000)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
    p, post, get = stats(data["post_to_event"]), stats(data["post_rtt"]), stats(data["get_rtt"])
    fresh = stats(data["get_fresh"])
    fig.text.append(
        f"{turns} turns after a warm-up; the first WebSocket frame was `{data['first_type']}`, every turn ended "
        f"with `{data['turn_end']}`. Daemon pid {info['pid']} on {info['url']}."
    )
    fig.table(
        ["measure", "ms: median (p95, min–max)", "× GET round trip"],
        [
            ["`GET /v1/sessions/{id}` round trip, kept-alive connection (anchor)", get.fmt(2), "1.00"],
            [
                "`GET /v1/sessions/{id}` on a new connection each time",
                fresh.fmt(2),
                f"{fresh.median / get.median:.2f}",
            ],
            ["`POST …/messages` → 202", post.fmt(2), f"{post.median / get.median:.2f}"],
            ["`POST …/messages` → first WebSocket event", p.fmt(2), f"{p.median / get.median:.2f}"],
        ],
    )
    if get.median > 30 and get.median > 3 * fresh.median:
        fig.text.append(
            f"**Finding:** a request on a kept-alive connection ({get.median:.0f} ms) is slower than one on a new "
            f"connection ({fresh.median:.0f} ms): the ~40 ms Nagle / delayed-ACK stall. `acagent/server/_daemon.py` "
            "`_bind()` creates the listening socket with `socket.socket(family, SOCK_STREAM)`, i.e. protocol 0, and "
            "asyncio only sets `TCP_NODELAY` on accepted sockets whose `proto == IPPROTO_TCP` "
            "(`asyncio.base_events._set_nodelay`), so uvicorn's multi-write responses wait for the client's "
            "delayed ACK. Fix: `socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)` in `_bind()` (or "
            "set `TCP_NODELAY` on each accepted transport). Checked by hand with `_bind` patched that way: "
            "kept-alive GETs fell from ~45 ms to 2–3 ms. Every `POST …/messages` → first event and every "
            "`acagent attach`/`chat` request through the daemon pays this stall today."
        )
    r, j = stats(data["replay"]), stats(data["journal_read"])
    fig.table(
        ["replay of a session", "events/s (median, min–max)", "relative"],
        [
            [
                f"journal read in process, {data['replay_events']:,} events (anchor)",
                f"{j.median:,.0f} ({j.min:,.0f}–{j.max:,.0f})",
                "1.00",
            ],
            [
                f"WebSocket `since=0`, {data['replay_events']:,} events",
                f"{r.median:,.0f} ({r.min:,.0f}–{r.max:,.0f})",
                f"{r.median / j.median:.2f}",
            ],
        ],
    )
    fig.text.append("The issue sets no target for this figure; the numbers are for scale and regressions.")
    return fig


if __name__ == "__main__":
    sys.stdout.write(json.dumps(run("--quick" in sys.argv).to_json(), indent=1) + "\n")
    os._exit(0)
