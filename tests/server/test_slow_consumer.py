"""F08 (scaled): stalled and churning stream clients never grow daemon memory or slow others down.

Scale: 3,000 events of ~1,000 bytes instead of 200,000 (the turn runs a few seconds), 100 churn
cycles instead of 300, 5 SIGSTOPped clients instead of 50, a send timeout of 5 s instead of 30 s.
The memory bound is F08's constant: baseline + 200 MB, the baseline taken after the same turn ran
alone. The turn itself grows the runner by ~30 MiB (its context keeps several copies of the 3 MB
reply); the seven stalled clients add ~60 MiB (each one's replay page and the shared live queue).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import websockets.sync.client as wsc

from tests.server.conftest import ACAGENT, Daemon, req, wait_for, ws

RSS_BOUND_KIB = 200 * 1024
N_EVENTS = 3000
DELTA_BYTES = 1000


def _stalled_socket(d: Daemon, request: bytes) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", d.port))
    s.sendall(request)
    return s


def _read_all(s: socket.socket, timeout: float = 20.0) -> bytes:
    """Read until EOF or a WebSocket close frame (the client is back: it opens its window)."""
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    s.settimeout(timeout)
    out = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(1 << 20)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        out += chunk
        if _ws_closed(out):
            break
    return out


def _ws_frames(data: bytes) -> list[tuple[int, bytes]]:
    head, _, buf = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head[:100]
    frames = []
    while len(buf) >= 2:
        opcode, length, pos = buf[0] & 0x0F, buf[1] & 0x7F, 2
        if length == 126:
            length, pos = struct.unpack("!H", buf[2:4])[0], 4
        elif length == 127:
            length, pos = struct.unpack("!Q", buf[2:10])[0], 10
        if len(buf) < pos + length:
            break
        frames.append((opcode, buf[pos : pos + length]))
        buf = buf[pos + length :]
    return frames


def _ws_closed(data: bytes) -> bool:
    if b"\r\n\r\n" not in data:
        return False
    try:
        return any(op == 8 for op, _ in _ws_frames(data))
    except (AssertionError, struct.error):
        return False


def _sse_events(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    body = data.split(b"\r\n\r\n", 1)[1].decode()
    out = []
    for block in body.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.split("\n") if ": " in line and not line.startswith(":")
        )
        if "data" in fields:
            out.append((fields.get("event", ""), json.loads(fields["data"])))
    return out


class _Healthy:
    """`acagent attach --json` reading continuously."""

    def __init__(self, d: Daemon, sid: str) -> None:
        self.proc = subprocess.Popen(
            [ACAGENT, "attach", sid, "--json"],
            env=d.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        self.times: list[float] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))
            self.times.append(time.monotonic())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def _churn(d: Daemon, sid: str, cursor: Any, cycles: int, errors: list[str]) -> None:
    """Connect (since = ``cursor()``, a recent seq), read one event, abort with RST — ``cycles`` times."""
    for _ in range(cycles):
        handshake = ws(
            f"/v1/sessions/{sid}/attach?since={max(0, cursor() - 1)}",
            f"127.0.0.1:{d.port}",
            None,
            [("Authorization", f"Bearer {d.token}")],
        )
        try:
            with socket.create_connection(("127.0.0.1", d.port), timeout=10) as s:
                s.sendall(handshake)
                data = b""
                while not (b"\r\n\r\n" in data and len(data.split(b"\r\n\r\n", 1)[1]) >= 2):
                    chunk = s.recv(65536)
                    if not chunk:
                        raise ConnectionError("closed before the first event")
                    data += chunk
                if not data.startswith(b"HTTP/1.1 101"):
                    raise ConnectionError(data[:100].decode("latin-1"))
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except Exception as exc:
            errors.append(repr(exc))


_STOPPED_CLIENT = """
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(sys.argv[2].encode("latin-1"))
data = b""
while b"\\r\\n\\r\\n" not in data:
    data += s.recv(4096)
print("ready" if data.startswith(b"HTTP/1.1 101") else "refused", flush=True)
while True:
    time.sleep(1)
"""


def _turn(d: Daemon, sid: str) -> tuple[float, int]:
    t0 = time.monotonic()
    assert d.send(sid, f"deltas {N_EVENTS} {DELTA_BYTES}").status_code == 202
    rss_max = 0
    while True:
        rss_max = max(rss_max, d.rss_kib())
        s = d.session(sid)
        if s["status"] == "done" and not s["busy"]:
            return time.monotonic() - t0, rss_max
        time.sleep(0.1)


@pytest.mark.slow
def test_stalled_clients_are_evicted_others_unaffected(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon("--send-timeout", "5", "--keepalive", "1")
    sid = d.create(workspace)["id"]
    # warm up (provider import, first turn) and take the baseline
    assert d.send(sid, "say warm").status_code == 202
    d.wait_status(sid, ("done",))
    before_alone = d.rss_kib()
    alone_s, _ = _turn(d, sid)
    baseline = d.rss_kib()
    alone_growth = baseline - before_alone
    start_seq = d.session(sid)["last_seq"]

    healthy = _Healthy(d, sid)
    wait_for(lambda: healthy.events and healthy.events[-1]["seq"] == start_seq, 20, what="healthy catch-up")
    s_ws = _stalled_socket(
        d,
        ws(
            f"/v1/sessions/{sid}/attach?since=0",
            f"127.0.0.1:{d.port}",
            None,
            [("Authorization", f"Bearer {d.token}")],
        ),
    )
    s_sse = _stalled_socket(
        d,
        req(
            "GET",
            f"/v1/sessions/{sid}/stream?since=0",
            [("Host", f"127.0.0.1:{d.port}"), ("Authorization", f"Bearer {d.token}")],
        ),
    )
    stopped = []
    for _ in range(5):
        hs = ws(
            f"/v1/sessions/{sid}/attach?since=0",
            f"127.0.0.1:{d.port}",
            None,
            [("Authorization", f"Bearer {d.token}")],
        )
        p = subprocess.Popen(
            [sys.executable, "-c", _STOPPED_CLIENT, str(d.port), hs.decode("latin-1")],
            stdout=subprocess.PIPE,
            env=d.env,
        )
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        os.kill(p.pid, signal.SIGSTOP)
        stopped.append(p)
    wait_for(lambda: d.stats()["sessions"][sid]["attachers"] == 8, 10, what="8 attachers")
    churn_errors: list[str] = []
    churn = threading.Thread(
        target=_churn, args=(d, sid, lambda: healthy.events[-1]["seq"], 100, churn_errors)
    )
    churn.start()
    comeback: dict[str, bytes] = {}

    def come_back() -> None:
        # S resumes reading once the daemon has closed the stalled clients (within the close grace).
        wait_for(lambda: (st := d.stats())["evictions"] + st["send_timeouts"] >= 7, 90, interval=0.2)
        comeback["ws"] = _read_all(s_ws)
        comeback["sse"] = _read_all(s_sse)

    reader = threading.Thread(target=come_back, daemon=True)
    reader.start()

    loaded_s, rss_max = _turn(d, sid)
    print(
        f"F08: turn alone {alone_s:.2f}s (rss +{alone_growth / 1024:.1f} MiB), with stalled/churn clients "
        f"{loaded_s:.2f}s (rss +{(rss_max - baseline) / 1024:.1f} MiB)"
    )
    churn.join(60)
    end_seq = d.session(sid)["last_seq"]
    try:
        assert rss_max - baseline < RSS_BOUND_KIB, (baseline, rss_max)
        # H: every event, in order, promptly
        wait_for(lambda: healthy.events[-1]["seq"] == end_seq, 30, what="healthy got the end")
        seqs = [e["seq"] for e in healthy.events]
        assert seqs == list(range(1, end_seq + 1))
        # F08 asks for 1.2x on a quiet machine (benchmarks/daemon_attachers.py measures it); here
        # the bound only catches the class — a healthy client held up by the stalled ones waits for
        # their send timeouts (tens of seconds) — and is loose enough for a loaded 2-CPU CI box.
        assert loaded_s <= 3.0 * alone_s + 5.0, (alone_s, loaded_s)
        # ... and directly: no gap on the healthy client as long as one stalled send's timeout (5 s).
        live = [t for t, e in zip(healthy.times, healthy.events) if e["seq"] > start_seq]
        gaps = [b - a for a, b in itertools.pairwise(live)]
        assert max(gaps, default=0.0) < 5.0, gaps
        assert not churn_errors, churn_errors[:3]
        # S (ws, sse) and the 5 stopped clients: evicted (queue overflow) or timed out (blocked send)
        stats = wait_for(
            lambda: st if (st := d.stats())["evictions"] + st["send_timeouts"] >= 7 else None,
            15,
            what="7 stalled clients closed",
        )
        assert stats["sessions"][sid]["attachers"] == 1, stats  # only H is left
        assert any("evicted" in line or "stalled" in line for line in d.stderr_lines)
        # S comes back: it reads what was buffered, then the close telling it where to resume
        reader.join(60)
        frames = _ws_frames(comeback["ws"])
        texts = [json.loads(p) for op, p in frames if op == 1]
        close = [p for op, p in frames if op == 8]
        assert close, "no close frame"
        code = struct.unpack("!H", close[0][:2])[0]
        reason = close[0][2:].decode()
        got = [e["seq"] for e in texts]
        assert code == 4008 and reason == f"re-attach with since={got[-1]}", (code, reason)
        assert got == list(range(1, got[-1] + 1))
        with wsc.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since={got[-1]}", additional_headers=d.auth, max_size=None
        ) as conn:
            while got[-1] < end_seq:
                got.append(json.loads(conn.recv(timeout=10))["seq"])
        assert got == list(range(1, end_seq + 1))
        sse = _sse_events(comeback["sse"])
        assert sse[-1][0] == "evicted"
        sse_seqs = [ev["seq"] for kind, ev in sse if kind not in ("evicted",)]
        assert sse[-1][1]["last_seq"] == sse_seqs[-1]
        assert sse_seqs == list(range(1, sse_seqs[-1] + 1))
    finally:
        for p in stopped:
            os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
        healthy.stop()
        s_ws.close()
        s_sse.close()
    wait_for(
        lambda: d.stats()["sessions"].get(sid, {}).get("attachers", 0) == 0, 15, what="no attachers left"
    )
    assert d.stats()["connections"] == {"ws": 0, "sse": 0}


@pytest.mark.parametrize("kind", ["ws"])
def test_blocked_write_times_out(start_daemon: Any, workspace: Path, kind: str) -> None:
    """A client that stops reading in a quiet session is closed once a send blocks past the timeout."""
    d = start_daemon("--send-timeout", "1", "--queue-events", "100000")
    sid = d.create(workspace)["id"]
    s = _stalled_socket(
        d,
        ws(
            f"/v1/sessions/{sid}/attach?since=0",
            f"127.0.0.1:{d.port}",
            None,
            [("Authorization", f"Bearer {d.token}")],
        ),
    )
    # ~5 MB of frames: more than the kernel's socket buffers hold (turns no longer end with a
    # full-context checkpoint, which used to push a 3,000 × 200 reply over them)
    assert d.send(sid, "deltas 3000 400").status_code == 202
    d.wait_status(sid, ("done",), timeout=60)
    wait_for(lambda: d.stats()["send_timeouts"] >= 1, 15, what="a send timeout")
    assert d.stats()["sessions"].get(sid, {}).get("attachers", 0) == 0
    s.close()
