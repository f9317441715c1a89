"""Fixtures for the daemon tests: real ``acagent serve`` subprocesses, the strict mock, raw clients.

The mock answers by *directive*: the last line of the last user message tells it what the model
does, so many tests can share one daemon and one mock without queueing script entries in order:

- ``say TEXT`` — a plain reply;
- ``deltas N [SIZE] [SLEEP_MS]`` — N text deltas of SIZE bytes (default 20), optionally paced;
- ``shell COMMAND`` — one shell tool call; after its result the model replies ``tool said: …``;
- ``shells C1 ;; C2`` — two shell calls in one step;
- ``slow SECONDS TEXT`` — wait, then reply;
- ``pause TEXT`` — stream the first half of TEXT, pause until ``mock.release()``, then the rest.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))

from tests.mockprovider import MockProvider, Script, TextReply, _oa_chunk  # noqa: E402

ACAGENT = str(Path(sys.executable).parent / "acagent")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# --------------------------------------------------------------------------------------- mock

_ids = itertools.count(1)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def openai_deltas(pieces: list[str]) -> list[bytes]:
    """An OpenAI stream with one chunk per piece (each becomes one ``assistant.delta``)."""
    chunks = [_oa_chunk({"role": "assistant", "content": pieces[0]})]
    chunks += [_oa_chunk({"content": p}) for p in pieces[1:]]
    chunks.append(_oa_chunk({}, "stop") + b"data: [DONE]\n\n")
    return chunks


def openai_calls(calls: list[tuple[str, str, dict[str, Any]]]) -> bytes:
    out = b""
    for i, (cid, name, args) in enumerate(calls):
        out += _oa_chunk(
            {
                "tool_calls": [
                    {
                        "index": i,
                        "id": cid,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ]
            }
        )
    return out + _oa_chunk({}, "tool_calls") + b"data: [DONE]\n\n"


def responder(body: Any) -> Any:
    """The directive interpreter (module docstring)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        first = _content_text(last.get("content")).strip().split("\n")[0][:80]
        return TextReply(f"tool said: {first}")
    text = _content_text(last.get("content")).strip().split("\n")[-1]
    verb, _, rest = text.partition(" ")
    if verb == "say":
        return TextReply(rest or "ok")
    if verb == "deltas":
        parts = rest.split()
        n = int(parts[0])
        size = int(parts[1]) if len(parts) > 1 else 20
        sleep_ms = float(parts[2]) if len(parts) > 2 else 0.0
        pieces = [(f"d{i:06d} " + "x" * size)[:size] for i in range(n)]
        return Script(chunks=openai_deltas(pieces), sleeps=sleep_ms / 1000 if sleep_ms else None)
    if verb == "shell":
        return openai_calls([(f"call_{next(_ids)}", "shell", {"command": rest})])
    if verb == "shells":
        cmds = [c.strip() for c in rest.split(";;")]
        return openai_calls([(f"call_{next(_ids)}", "shell", {"command": c}) for c in cmds])
    if verb == "slow":
        seconds, _, reply = rest.partition(" ")
        return Script(chunks=[b"", *openai_deltas([reply or "slow"])], sleeps=[0, float(seconds)] + [0] * 3)
    if verb == "pause":
        half = max(1, len(rest) // 2)
        return Script(chunks=openai_deltas([rest[:half], rest[half:]]), pause_after=1)
    return TextReply(f"echo: {text}" if text else "ok")


@pytest.fixture(scope="module")
def mock() -> Iterator[MockProvider]:
    with MockProvider() as server:
        server.default = responder
        yield server


# --------------------------------------------------------------------------------------- daemon


def rss_kib(pid: int) -> int:
    """Resident set size of ``pid`` in KiB (``/proc/PID/status`` VmRSS)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_for(
    predicate: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02, what: str = ""
) -> Any:
    """Poll ``predicate`` until it returns a truthy value; return it (TimeoutError otherwise)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what or predicate}")
        time.sleep(interval)


_REGISTRY = Path(tempfile.gettempdir()) / "acagent-test-daemons"
"""One file per daemon a test started: named by its pid, holding the test process's pid."""


def reap_orphan_daemons(registry: Path | None = None) -> list[int]:
    """Kill (SIGKILL, the process group) the daemons whose test process is gone; their pids.

    ``registry``: the directory of ``<daemon pid>`` files holding their test process's pid
    (default the machine-wide one; a test of this function passes its own, since another test run
    on the machine reaps from the shared one at any moment).

    A test run killed from outside (a ``timeout``, the CI's limit) never reaches its fixtures'
    teardown, so its ``acagent serve`` processes would serve on for ever. The next daemon a test
    starts on the machine cleans them up. A pid is killed only while its command line is still an
    ``acagent serve`` (not a reused pid).
    """
    reaped = []
    for entry in (registry or _REGISTRY).glob("*"):
        try:
            daemon, owner = int(entry.name), int(entry.read_text())
        except (OSError, ValueError):
            continue
        try:
            os.kill(owner, 0)
            continue  # its test process runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        try:
            argv = Path(f"/proc/{daemon}/cmdline").read_bytes().split(b"\0")
        except OSError:
            argv = []
        if any(a.endswith(b"acagent") for a in argv) and b"serve" in argv:
            with contextlib.suppress(OSError):
                os.killpg(daemon, signal.SIGKILL)
            reaped.append(daemon)
        entry.unlink(missing_ok=True)
    return reaped


@dataclass
class Daemon:
    """One ``acagent serve`` subprocess on a loopback port."""

    home: Path
    env: dict[str, str]
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[str] | None = None
    port: int = 0
    pid: int = 0
    token: str = ""
    stdout_lines: list[str] = field(default_factory=list)
    stderr_lines: list[str] = field(default_factory=list)
    _http: httpx.Client | None = None
    _drains: list[threading.Thread] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def start(self, timeout: float = 30.0) -> Daemon:
        reap_orphan_daemons()
        old = self.home / "daemon.json"
        self.proc = subprocess.Popen(
            [ACAGENT, "serve", "--port", "0", *self.args],
            env=self.env,
            cwd=str(self.home),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        _REGISTRY.mkdir(exist_ok=True)
        (_REGISTRY / str(self.proc.pid)).write_text(str(os.getpid()))
        self._drains = [
            threading.Thread(target=_drain, args=(stream, sink), daemon=True)
            for stream, sink in ((self.proc.stdout, self.stdout_lines), (self.proc.stderr, self.stderr_lines))
        ]
        for t in self._drains:
            t.start()

        def ready() -> dict[str, Any] | None:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"acagent serve exited {self.proc.returncode}: {''.join(self.stderr_lines)[-3000:]}"
                )
            try:
                info = json.loads(old.read_text())
            except (OSError, ValueError):
                return None
            return info if info.get("pid") == self.proc.pid else None

        info = wait_for(ready, timeout, what="daemon.json")
        self.port, self.pid = int(info["port"]), int(info["pid"])
        self.token = (self.home / "token").read_text().strip()
        self._http = None
        return self

    @property
    def http(self) -> httpx.Client:
        if self._http is None:
            self._http = httpx.Client(base_url=self.url, headers=self.auth, timeout=30.0)
        return self._http

    def kill(self) -> None:
        """SIGKILL (the crash tests)."""
        assert self.proc is not None
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
        (_REGISTRY / str(self.proc.pid)).unlink(missing_ok=True)
        self._close_http()
        self._read_to_the_end()

    def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        (_REGISTRY / str(self.proc.pid)).unlink(missing_ok=True)
        self._close_http()
        self._read_to_the_end()
        return self.proc.returncode

    def _read_to_the_end(self) -> None:
        """Wait until the drain threads have read the exited daemon's stdout and stderr to the end.

        The process is gone, but its last lines may still be in the pipes: a test that reads
        ``stderr_lines`` right after :meth:`terminate` saw whatever the threads had got so far.
        A descendant that kept a pipe open (a tool's process) only bounds the wait.
        """
        for t in self._drains:
            t.join(10)

    def _close_http(self) -> None:
        if self._http is not None:
            self._http.close()
            self._http = None

    def rss_kib(self) -> int:
        return rss_kib(self.pid)

    # ---------------------------------------------------------------- API helpers

    def create(self, cwd: Path, **body: Any) -> dict[str, Any]:
        r = self.http.post("/v1/sessions", json={"cwd": str(cwd), **body})
        assert r.status_code == 201, r.text
        return r.json()

    def send(self, sid: str, text: str, **body: Any) -> httpx.Response:
        return self.http.post(f"/v1/sessions/{sid}/messages", json={"text": text, **body})

    def session(self, sid: str) -> dict[str, Any]:
        r = self.http.get(f"/v1/sessions/{sid}")
        assert r.status_code == 200, r.text
        return r.json()

    def events(self, sid: str, since: int = 0) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        while True:
            r = self.http.get(f"/v1/sessions/{sid}/events", params={"since": since, "limit": 10000})
            assert r.status_code == 200, r.text
            page = r.json()
            out += page["events"]
            if not page["more"]:
                return out
            since = out[-1]["seq"]

    def wait_status(self, sid: str, statuses: tuple[str, ...], timeout: float = 20.0) -> dict[str, Any]:
        return wait_for(
            lambda: (
                s
                if (s := self.session(sid))["status"] in statuses
                and not (s["busy"] and s["status"] in ("done", "cancelled", "failed"))
                else None
            ),
            timeout,
            what=f"status in {statuses}",
        )

    def wait_event(
        self, sid: str, pred: Callable[[dict[str, Any]], bool], timeout: float = 20.0
    ) -> dict[str, Any]:
        return wait_for(lambda: next((e for e in self.events(sid) if pred(e)), None), timeout, what="event")

    def stats(self) -> dict[str, Any]:
        return self.http.get("/v1/debug/stats").json()


def _drain(stream: Any, sink: list[str]) -> None:
    for line in stream:
        sink.append(line)


def lines_of(stream: Any) -> tuple[list[str], threading.Thread]:
    """Read a child's text pipe line by line on a thread: ``(lines so far, the thread)``.

    For waiting on what a process printed (``wait_for(lambda: ... in "".join(lines))``) instead of
    sleeping and hoping it got there; join the thread once the process has ended to have it all.
    """
    sink: list[str] = []
    t = threading.Thread(target=_drain, args=(stream, sink), daemon=True)
    t.start()
    return sink, t


def daemon_env(home: Path, mock: MockProvider, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_"))}
    env.update(
        ACAGENT_HOME=str(home),
        OPENAI_BASE_URL=mock.openai_base_url,
        OPENAI_API_KEY="test-key",
        ACAGENT_MODEL="openai:mock",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env


@pytest.fixture
def start_daemon(tmp_path: Path, mock: MockProvider) -> Iterator[Callable[..., Daemon]]:
    """Start daemons on ``tmp_path/home`` (all stopped at the end)."""
    started: list[Daemon] = []

    def start(*args: str, home: Path | None = None, **env: str) -> Daemon:
        h = home or tmp_path / "home"
        h.mkdir(parents=True, exist_ok=True)
        d = Daemon(home=h, env=daemon_env(h, mock, **env), args=list(args)).start()
        started.append(d)
        return d

    yield start
    for d in started:
        if d.proc is not None and d.proc.poll() is None:
            d.terminate(15)
        if d.proc is not None:  # ended on its own (a crash point): its entry goes too
            (_REGISTRY / str(d.proc.pid)).unlink(missing_ok=True)


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, mock: MockProvider) -> Iterator[Daemon]:
    """One daemon shared by a module (``--max-sessions 3``)."""
    home = tmp_path_factory.mktemp("home")
    d = Daemon(home=home, env=daemon_env(home, mock), args=["--max-sessions", "3"]).start()
    yield d
    d.terminate(15)


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    w = tmp_path / "w"
    w.mkdir(exist_ok=True)
    return w


# --------------------------------------------------------------------------------------- raw HTTP (F16)


def req(
    method: str, path: str, headers: list[tuple[str, str]], body: bytes = b"", version: str = "HTTP/1.1"
) -> bytes:
    """One request with exactly these headers, in this order (duplicates allowed)."""
    lines = [f"{method} {path} {version}", *(f"{k}: {v}" for k, v in headers)]
    if body:
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def raw(port: int, request: bytes, timeout: float = 3.0) -> bytes:
    """Send the bytes as given; return the answer (up to the header end for a 101).

    An answer that never ends (an event stream) is cut after ``timeout`` seconds of silence; the
    first bytes are waited for up to 30 s (a loaded daemon can take longer than ``timeout`` to
    answer at all, and an empty answer is not what the tests mean to check).
    """
    out = b""
    with socket.create_connection(("127.0.0.1", port), timeout=max(timeout, 30.0)) as s:
        s.sendall(request)
        while True:
            try:
                chunk = s.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            out += chunk
            s.settimeout(timeout)
            if out.startswith(b"HTTP/1.1 101") and b"\r\n\r\n" in out:
                break
            if _complete(out):
                break
    return out


def _complete(resp: bytes) -> bool:
    """A non-streaming answer with Content-Length is complete (saves waiting for the timeout)."""
    head, sep, body = resp.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            return len(body) >= int(v.strip())
    return False


def status(resp: bytes) -> int:
    return int(resp.split(b" ", 2)[1])


def header_lines(resp: bytes) -> list[str]:
    return resp.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")[1:]


def body_json(resp: bytes) -> Any:
    return json.loads(resp.split(b"\r\n\r\n", 1)[1] or b"null")


def ws(path: str, host: str, origin: str | None, extra: list[tuple[str, str]] | None = None) -> bytes:
    """A WebSocket opening handshake (origin=None leaves the header out)."""
    h = [
        ("Host", host),
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Version", "13"),
        ("Sec-WebSocket-Key", base64.b64encode(os.urandom(16)).decode()),
    ]
    if origin is not None:
        h.append(("Origin", origin))
    return req("GET", path, h + list(extra or []))
