"""F31/F32: every daemon limit (``acagent/server/_limits.py``) holds against a real socket.

One daemon per module with small limits (``--limit NAME=VALUE``); the per-client connection cap
and the many-idle-attachers CPU check get their own daemon.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import websockets
import websockets.sync.client as wsc
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.mockprovider import MockProvider
from tests.server.conftest import Daemon, daemon_env, status, wait_for

pytestmark = pytest.mark.anyio

LIMITS = [
    "header_timeout_s=1.5",
    "max_attachers_per_session=2",
    "max_attachers_total=3",
    "ws_messages_per_s=5",
    "ws_burst=10",
    "ws_max_message_bytes=1024",
]


@pytest.fixture(scope="module")
def ld(tmp_path_factory: pytest.TempPathFactory, mock: MockProvider) -> Iterator[Daemon]:
    home = tmp_path_factory.mktemp("home")
    args = [a for pair in LIMITS for a in ("--limit", pair)]
    d = Daemon(home=home, env=daemon_env(home, mock), args=args).start()
    yield d
    d.terminate(15)


def _recv_until_closed(s: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything the daemon sends until it closes; and how long that took."""
    s.settimeout(timeout)
    t0 = time.monotonic()
    out = b""
    while True:
        try:
            chunk = s.recv(65536)
        except (TimeoutError, ConnectionResetError):
            break
        if not chunk:
            break
        out += chunk
    return out, time.monotonic() - t0


def _body(resp: bytes) -> Any:
    return json.loads(resp.split(b"\r\n\r\n", 1)[1])


# ------------------------------------------------------------------------------ header timeout


@pytest.mark.parametrize("sent", [b"", b"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"])
def test_header_timeout_closes_a_slow_request_head(ld: Daemon, sent: bytes) -> None:
    with socket.create_connection(("127.0.0.1", ld.port)) as s:
        s.sendall(sent)
        out, took = _recv_until_closed(s, 10)
    assert status(out) == 408, out
    assert _body(out)["error"]["code"] == "header_timeout"
    assert 1.0 <= took < 5.0, took


def test_header_timeout_rearms_after_a_response(ld: Daemon) -> None:
    """A kept-alive connection that trickles its second request head is closed too."""
    with socket.create_connection(("127.0.0.1", ld.port)) as s:
        s.sendall(
            b"GET /v1/debug/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " + ld.token.encode()
        )
        s.sendall(b"\r\n\r\n")
        s.settimeout(5)
        first = s.recv(65536)
        assert status(first) == 200
        t0 = time.monotonic()
        for piece in (b"GET /v1/sessions HTTP/1.1\r\n", b"Host: 127.0.0.1\r\n"):
            time.sleep(0.6)
            s.sendall(piece)
        out, _ = _recv_until_closed(s, 10)
        # uvicorn's own keep-alive timer is cancelled by the trickle; ours is not.
        assert time.monotonic() - t0 < 5.0
        assert b" 408 " in out.split(b"\r\n", 1)[0] or out == b"", out


# ------------------------------------------------------------------------------ header limit


@pytest.mark.parametrize(
    "shape", ["one_big_header", "just_over_in_one_read", "many_headers", "websocket_handshake"]
)
def test_a_request_head_above_the_limit_is_431_in_the_envelope_f90(ld: Daemon, shape: str) -> None:
    """A 200 KB request head is ``431 header_too_large`` with the limit named (it was a
    misleading ``400 malformed HTTP request``); a head just under the limit still works. A head
    a little over the limit that arrives in one read is refused too (h11's incomplete-event
    limit never saw it: a 100 KB head was answered 200)."""
    from acagent.server._limits import Limits

    limit = Limits().max_header_bytes
    if shape == "one_big_header":
        extra = f"X-Big: {'a' * 200_000}\r\n"
    elif shape == "just_over_in_one_read":
        extra = f"X-Big: {'a' * (limit + 2_000)}\r\n"
    elif shape == "many_headers":
        extra = "".join(f"X-H{i}: {'b' * 90}\r\n" for i in range(2000))
    else:
        extra = "Upgrade: websocket\r\nConnection: Upgrade\r\n" + f"Cookie: c={'c' * 200_000}\r\n"
    head = f"GET /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ld.token}\r\n{extra}\r\n"
    with socket.create_connection(("127.0.0.1", ld.port)) as s:
        try:
            s.sendall(head.encode())
        except (BrokenPipeError, ConnectionResetError):
            pass  # the daemon answered and closed before the whole head was sent
        out, _ = _recv_until_closed(s, 10)
    assert status(out) == 431, out[:300]
    err = _body(out)["error"]
    assert err["code"] == "header_too_large" and err["detail"]["limit_bytes"] == limit, err
    assert "max_header_bytes" in err["message"]
    fits = f"X-Fits: {'d' * (limit - 1024)}"
    r = ld.http.get("/v1/sessions", headers={"x-fits": fits[8:]})
    assert r.status_code == 200, r.text


# ------------------------------------------------------------------------------ body limit


def _post_head(d: Daemon, extra: str) -> bytes:
    return (
        f"POST /v1/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {d.token}\r\n"
        f"Content-Type: application/json\r\n{extra}\r\n"
    ).encode()


def test_declared_body_above_1mib_is_refused_before_it_is_sent(ld: Daemon) -> None:
    with socket.create_connection(("127.0.0.1", ld.port)) as s:
        s.sendall(_post_head(ld, f"Content-Length: {1024 * 1024 + 1}\r\n"))
        out, _ = _recv_until_closed(s, 10)  # nothing of the body was sent
    assert status(out) == 413, out
    err = _body(out)["error"]
    assert err["code"] == "body_too_large" and err["detail"] == {"limit_bytes": 1024 * 1024}
    assert b"connection: close" in out.lower()


def test_exactly_1mib_is_accepted_by_the_limit(ld: Daemon, workspace: Path) -> None:
    body = json.dumps({"cwd": str(workspace), "title": "x" * 100}).encode()
    body += b" " * (1024 * 1024 - len(body))
    r = ld.http.post("/v1/sessions", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 201, r.text  # the model's own max_length still applies to fields


def _stream_huge(d: Daemon, head: bytes, chunked: bool, total: int) -> tuple[bytes, int, int]:
    """Send ``head`` then up to ``total`` bytes of body while reading the answer.

    Returns (answer, bytes sent before the daemon closed, peak daemon RSS growth in KiB).
    """
    base = d.rss_kib()
    peak = [base]
    sent = [0]
    s = socket.create_connection(("127.0.0.1", d.port))
    s.sendall(head)
    chunk = b"[" + b"1," * (512 * 1024) + b"1]"  # ~1 MiB of valid-looking JSON
    stop = threading.Event()

    def writer() -> None:
        try:
            while sent[0] < total and not stop.is_set():
                piece = (b"%x\r\n" % len(chunk) + chunk + b"\r\n") if chunked else chunk
                s.sendall(piece)
                sent[0] += len(chunk)
                if sent[0] % (64 * len(chunk)) < len(chunk):
                    peak[0] = max(peak[0], d.rss_kib())
        except OSError:
            pass

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    try:
        out, _ = _recv_until_closed(s, 30)
    finally:
        stop.set()
        t.join(30)
        peak[0] = max(peak[0], d.rss_kib())
        s.close()
    return out, sent[0], peak[0] - base


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_1gib_upload_is_refused_without_reading_it(ld: Daemon, chunked: bool) -> None:
    gib = 1024**3
    extra = "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {gib}\r\n"
    out, sent, growth_kib = _stream_huge(ld, _post_head(ld, extra), chunked, gib)
    assert status(out) == 413, out[:200]
    assert _body(out)["error"]["code"] == "body_too_large"
    assert sent < gib // 4, f"the daemon kept reading: {sent} bytes went in"
    assert growth_kib < 16 * 1024, f"daemon RSS grew {growth_kib} KiB"
    assert ld.http.get("/v1/debug/stats").status_code == 200  # still serving


# ------------------------------------------------------------------------------ attachers


async def test_attacher_caps_per_session_and_total(ld: Daemon, workspace: Path) -> None:
    a = ld.create(workspace)["id"]
    b = ld.create(workspace)["id"]
    url = f"{ld.ws_url}/v1/sessions/{{}}/attach?since=0"
    async with (
        websockets.connect(url.format(a), additional_headers=ld.auth),
        websockets.connect(url.format(a), additional_headers=ld.auth),
    ):
        with pytest.raises(InvalidStatus) as info:
            await websockets.connect(url.format(a), additional_headers=ld.auth)
        assert info.value.response.status_code == 429
        err = json.loads(info.value.response.body)["error"]
        assert err["code"] == "too_many_attachers" and err["detail"]["scope"] == "session"
        sse = ld.http.get(f"/v1/sessions/{a}/stream", headers={"accept": "text/event-stream"})
        assert sse.status_code == 429 and sse.json()["error"]["code"] == "too_many_attachers"
        async with websockets.connect(url.format(b), additional_headers=ld.auth):
            with pytest.raises(InvalidStatus) as info:
                await websockets.connect(url.format(b), additional_headers=ld.auth)
            assert info.value.response.status_code == 429
            assert json.loads(info.value.response.body)["error"]["detail"]["scope"] == "total"
    # Closed connections free their places.
    wait_for(lambda: ld.stats()["connections"]["ws"] == 0, 10)
    async with websockets.connect(url.format(a), additional_headers=ld.auth) as conn:
        assert conn.protocol.state.name == "OPEN"
    assert ld.stats()["refused"]["attachers"] >= 3


# ------------------------------------------------------------------------------ WebSocket frames


def test_websocket_frame_flood_is_closed_1008(ld: Daemon, workspace: Path) -> None:
    sid = ld.create(workspace)["id"]
    with wsc.connect(f"{ld.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=ld.auth) as conn:

        def flood() -> None:
            for _ in range(200):
                conn.send("hi")
                time.sleep(0.001)
            for _ in range(20):
                conn.recv(timeout=10)

        with pytest.raises(ConnectionClosed):
            flood()
        assert conn.close_code == 1008, conn.close_code


def test_websocket_message_above_the_size_limit_is_closed_1009(ld: Daemon, workspace: Path) -> None:
    sid = ld.create(workspace)["id"]
    with wsc.connect(f"{ld.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=ld.auth) as conn:
        conn.send("x" * 4096)

        def drain() -> None:
            for _ in range(20):
                conn.recv(timeout=10)

        with pytest.raises(ConnectionClosed):
            drain()
        assert conn.close_code == 1009, conn.close_code


# ------------------------------------------------------------------------------ connections per client


def test_connections_per_client_cap(start_daemon: Any) -> None:
    d = start_daemon("--limit", "max_connections_per_client=6", "--limit", "header_timeout_s=30")
    held = [socket.create_connection(("127.0.0.1", d.port)) for _ in range(6)]
    try:
        with socket.create_connection(("127.0.0.1", d.port)) as extra:
            out, _ = _recv_until_closed(extra, 10)
        assert status(out) == 429 and _body(out)["error"]["code"] == "too_many_connections", out
        closed = held.pop()
        port = closed.getsockname()[1]
        closed.close()
        # The daemon has closed its end (our socket is in TIME_WAIT), so the place is free; a
        # fixed 0.3 s was not always enough for a loaded daemon to see the close.
        wait_for(lambda: _time_wait(port), 30, what="the daemon to close its end")
        with socket.create_connection(("127.0.0.1", d.port)) as again:
            again.sendall(
                b"GET /v1/debug/stats HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                b"Authorization: Bearer " + d.token.encode() + b"\r\n\r\n"
            )
            out, _ = _recv_until_closed(again, 10)
        assert status(out) == 200, out[:300]
        assert _body(out)["refused"]["connections"] == 1
    finally:
        for s in held:
            s.close()


def _time_wait(local_port: int) -> bool:
    """True when our TCP socket on ``local_port`` (closed by us) is in TIME_WAIT, or gone: the
    peer has closed its end too (``/proc/net/tcp``: state 06; IPv4 loopback)."""
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    states = [row[3] for row in rows if int(row[1].rsplit(":", 1)[1], 16) == local_port]
    return all(state == "06" for state in states)


# ------------------------------------------------------------------------------ many idle attachers


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    import os

    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def test_idle_attachers_cost_no_cpu_f32(start_daemon: Any, workspace: Path) -> None:
    """500 idle attachers on one session: the daemon stays idle (one reaper, O(1) per connection).

    Before: every connection ran its own 0.1 s watchdog scanning the session's subscriber list
    (O(N²) ten times a second): 500 idle clients took ~15 % of a CPU, 600 ~21 % (measured on a
    loaded 2-CPU box); now ~0.3 %.
    """
    n = 500
    d = start_daemon("--limit", f"max_attachers_per_session={n}")
    sid = d.create(workspace)["id"]
    url = f"{d.ws_url}/v1/sessions/{sid}/attach?since=0"
    conns: list[Any] = []
    try:
        with anyio.fail_after(120):
            for _ in range(n):
                conns.append(await websockets.connect(url, additional_headers=d.auth, ping_interval=None))
            while d.stats()["sessions"].get(sid, {}).get("attachers", 0) < n:
                await anyio.sleep(0.2)
        await anyio.sleep(1.0)
        c0, t0 = _cpu_s(d.pid), time.monotonic()
        await anyio.sleep(3.0)
        share = (_cpu_s(d.pid) - c0) / (time.monotonic() - t0)
        assert share < 0.05, f"the idle daemon used {share:.0%} of a CPU with {n} idle attachers"
        # And it still answers promptly.
        t = time.monotonic()
        assert d.http.get(f"/v1/sessions/{sid}").status_code == 200
        assert time.monotonic() - t < 1.0
    finally:
        for c in conns:
            await c.close()


def test_a_low_open_files_limit_does_not_undercut_the_connection_cap(
    tmp_path_factory: pytest.TempPathFactory, mock: MockProvider
) -> None:
    """Started with the common soft RLIMIT_NOFILE below the per-client cap, the daemon raises it:
    a flood gets ``429 too_many_connections`` at the cap, not EMFILE from ``accept()`` (which
    logged one traceback per attempt while the cap never answered)."""
    import resource

    home = tmp_path_factory.mktemp("fdhome")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1024:
        pytest.skip(f"the hard open-files limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (200, hard))  # inherited by the daemon
    try:
        d = Daemon(
            home=home, env=daemon_env(home, mock), args=["--limit", "max_connections_per_client=300"]
        ).start()
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    held: list[socket.socket] = []
    try:
        for _ in range(300):
            held.append(socket.create_connection(("127.0.0.1", d.port)))
        with socket.create_connection(("127.0.0.1", d.port)) as extra:
            out, _ = _recv_until_closed(extra, 10)
        assert status(out) == 429 and _body(out)["error"]["code"] == "too_many_connections", out
        assert "Too many open files" not in "".join(d.stderr_lines)
    finally:
        for s in held:
            s.close()
        d.terminate(15)
