"""Three daemons on one PostgreSQL journal: real ``acagent serve`` subprocesses on 127.0.0.2/.3/.4
(all of 127/8 is loopback), the strict mock provider streaming deltas, SSE attachers on daemons
that do not own the session. Every daemon and attacher is stopped at the end, also on failure."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.mockprovider import MockProvider
from tests.server.conftest import Daemon, daemon_env, responder, wait_for

__all__ = ["Attacher", "Cluster", "ClusterDaemon", "check_stream"]

FAST_TIMING = {
    # A short TTL so a frozen host is detected in seconds (renew < ttl / 2).
    "ACAGENT_TIMING_LEASE_TTL_S": "2",
    "ACAGENT_TIMING_LEASE_RENEW_S": "0.5",
}


@dataclass
class ClusterDaemon(Daemon):
    """A :class:`Daemon` bound to ``host`` with ``--journal`` and ``--daemon-id``."""

    host: str = "127.0.0.1"
    daemon_id: str = ""

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{self.host}:{self.port}"

    def stop_signal(self, sig: int) -> None:
        """Send ``sig`` (SIGSTOP / SIGCONT / SIGKILL) to the daemon's process group."""
        assert self.proc is not None
        os.killpg(self.proc.pid, sig)


@dataclass
class Attacher:
    """An SSE client on one daemon, collecting every event envelope it receives (thread)."""

    daemon: ClusterDaemon
    session_id: str
    since: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Attacher:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        last = self.since
        while not self._stop.is_set():  # re-attach with since=<last seq> whenever the stream ends
            try:
                with (
                    httpx.Client(timeout=httpx.Timeout(30.0, read=2.0)) as client,
                    client.stream(
                        "GET",
                        f"{self.daemon.url}/v1/sessions/{self.session_id}/stream",
                        params={"since": last},
                        headers=self.daemon.auth,
                    ) as resp,
                ):
                    if resp.status_code != 200:
                        self.errors.append(f"HTTP {resp.status_code}")
                        return
                    for line in resp.iter_lines():
                        if self._stop.is_set():
                            return
                        if line.startswith("data:"):
                            data = json.loads(line[5:])
                            if data.get("replay") or "seq" not in data:
                                continue
                            self.events.append(data)
                            last = max(last, data["seq"])
            except httpx.ReadTimeout:
                continue
            except httpx.HTTPError as exc:
                if self._stop.is_set():
                    return
                self.errors.append(repr(exc))
                self._stop.wait(0.2)

    def wait_type(self, typ: str, timeout: float = 30.0, count: int = 1) -> None:
        wait_for(
            lambda: sum(1 for e in list(self.events) if e["type"] == typ) >= count,
            timeout,
            what=f"{typ} x{count} on {self.daemon.host}",
        )

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)


def check_stream(attacher: Attacher, journal_events: list[dict[str, Any]], since: int = 0) -> None:
    """The attacher got seq since+1…N exactly once each, in order, with the journal's content."""
    seqs = [e["seq"] for e in attacher.events]
    want = [e["seq"] for e in journal_events if e["seq"] > since]
    assert seqs == want, (
        f"{attacher.daemon.host}: gaps or duplicates: got {seqs[:8]}…{seqs[-8:]} want {len(want)}"
    )
    by_seq = {e["seq"]: e for e in journal_events}
    for e in attacher.events:
        assert (e["type"], e["payload"]) == (by_seq[e["seq"]]["type"], by_seq[e["seq"]]["payload"])


@pytest.fixture(scope="module")
def mock() -> Iterator[MockProvider]:
    with MockProvider() as server:
        server.default = responder
        yield server


@dataclass
class Cluster:
    """Daemons of one test module on one journal (schema) of the session's PostgreSQL server."""

    url: str
    root: Path
    mock: MockProvider
    pg: Any
    daemons: dict[str, ClusterDaemon] = field(default_factory=dict)
    attachers: list[Attacher] = field(default_factory=list)
    args: tuple[str, ...] = ("--yes",)

    def start(self, host: str, daemon_id: str, *, url: str | None = None, **env: str) -> ClusterDaemon:
        """Start (or restart, same home and id) daemon ``daemon_id`` on ``host`` (journal ``url``,
        default the cluster's)."""
        home = self.root / daemon_id
        home.mkdir(parents=True, exist_ok=True)
        d = ClusterDaemon(
            home=home,
            env=daemon_env(home, self.mock, **{**FAST_TIMING, **env}),
            args=["--host", host, "--journal", url or self.url, "--daemon-id", daemon_id, *self.args],
            host=host,
            daemon_id=daemon_id,
        ).start()
        self.daemons[daemon_id] = d
        return d

    def restart(self, d: ClusterDaemon) -> ClusterDaemon:
        """Kill ``d`` if it still runs, then start a new process with the same id and home."""
        if d.proc is not None and d.proc.poll() is None:
            d.kill()
        return self.start(d.host, d.daemon_id)

    def attach(self, d: ClusterDaemon, session_id: str, since: int = 0) -> Attacher:
        a = Attacher(d, session_id, since=since).start()
        self.attachers.append(a)
        return a

    def close(self) -> None:
        for a in self.attachers:
            a.close()
        for d in self.daemons.values():
            if d.proc is not None and d.proc.poll() is None:
                try:
                    os.killpg(d.proc.pid, signal.SIGCONT)
                except ProcessLookupError:
                    pass
                d.terminate(15)


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, mock: MockProvider, pg_server: Any
) -> Iterator[Cluster]:
    """Three daemons (d2, d3, d4 on 127.0.0.2/.3/.4) for the module; all stopped at the end."""
    c = Cluster(
        url=pg_server.create_schema("acagent_tests"),
        root=tmp_path_factory.mktemp("cluster"),
        mock=mock,
        pg=pg_server,
    )
    try:
        for i in (2, 3, 4):
            c.start(f"127.0.0.{i}", f"d{i}")
        yield c
    finally:
        c.close()
