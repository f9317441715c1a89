"""The blackhole fault: a TCP proxy between one daemon (d2) and PostgreSQL stops forwarding mid-turn.

Nothing is closed, so PostgreSQL still sees d2's connections (and its advisory liveness lock) as
alive: only lease expiry on the database clock lets a peer take over. d2 must notice by itself
(statement and renewal timeouts) and stop writing; when the network comes back (the proxy resets
every connection) its late writes are fenced. After each fault: the attachers on d3/d4 got seq
1…N exactly once, no session is stuck, a non-idempotent tool ran once, and every provider request
is a journaled step attempt (no silent double LLM call).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.scaleout.conftest import Cluster, ClusterDaemon
from tests.scaleout.proxy import BlackholeProxy
from tests.scaleout.test_cluster import _deltas, _finish, _sql, _start_turn
from tests.server.conftest import wait_for

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def behind_proxy(cluster: Cluster) -> Iterator[tuple[ClusterDaemon, BlackholeProxy]]:
    """d2 restarted with its journal URL through a blackhole proxy; restarted direct afterwards."""
    with BlackholeProxy("127.0.0.1", cluster.pg.port) as proxy:
        d2 = cluster.daemons["d2"]
        d2.kill()
        d2 = cluster.start(d2.host, "d2", url=proxy.url(cluster.url))
        try:
            yield d2, proxy
        finally:
            proxy.heal()
            cluster.restart(d2)


def _no_silent_llm_double(cluster: Cluster, sid: str) -> None:
    """Every provider request of the session is one journaled step attempt, each key once."""
    keys = [r.headers.get("idempotency-key", "") for r in cluster.mock.requests]
    mine = [k for k in keys if k.startswith(sid)]
    steps = _sql(cluster, f"SELECT request_id FROM step WHERE session_id = '{sid}' ORDER BY started_at")
    journaled = set(steps.split("\n")) if steps else set()
    assert len(mine) == len(set(mine)), f"a request id was sent twice: {mine}"
    assert set(mine) <= journaled, f"a provider call without its step row: {set(mine) - journaled}"


def _fenced_after_heal(
    cluster: Cluster, reader: ClusterDaemon, sid: str, journal: list[dict[str, Any]], proxy: BlackholeProxy
) -> None:
    proxy.heal()  # the partition ends: d2's connections are reset, its retries reach the server
    time.sleep(3.0)
    assert reader.events(sid) == journal, "the blackholed daemon appended after the takeover"


class TestBlackhole:
    def test_blackhole_mid_stream(
        self, cluster: Cluster, behind_proxy: tuple[ClusterDaemon, BlackholeProxy], workspace: Path
    ) -> None:
        """Blackhole d2 mid-stream: its lease expires (database clock), a peer claims and retries
        the step (attempt 2, counted), attachers on d3/d4 see every seq once."""
        d2, proxy = behind_proxy
        d3, d4 = cluster.daemons["d3"], cluster.daemons["d4"]
        sid, attachers = _start_turn(cluster, d2, [d3, d4], workspace, "deltas 200 12 10")
        _deltas(attachers[0], 20)
        proxy.blackhole()
        journal = _finish(cluster, d3, sid, attachers)
        assert proxy.dropped_bytes > 0  # d2 kept trying
        assert d3.session(sid)["usage"]["llm_retries"] >= 1
        _no_silent_llm_double(cluster, sid)
        _fenced_after_heal(cluster, d3, sid, journal, proxy)
        wait_for(lambda: d2.session(sid)["status"] == "done", 30, what="d2 serves again")

    def test_blackhole_mid_tool_runs_it_once(
        self, cluster: Cluster, behind_proxy: tuple[ClusterDaemon, BlackholeProxy], workspace: Path
    ) -> None:
        """Blackhole d2 while its non-idempotent shell tool runs: the peer that takes over does
        not run it again (outcome unknown, journaled), the turn finishes."""
        d2, proxy = behind_proxy
        d3, d4 = cluster.daemons["d3"], cluster.daemons["d4"]
        marker = workspace / "bh-runs.txt"
        sid, attachers = _start_turn(cluster, d2, [d3, d4], workspace, f"shell echo run >> {marker}; sleep 3")
        attachers[0].wait_type("tool.started", timeout=20)
        wait_for(marker.exists, 10, what="tool ran")
        proxy.blackhole()
        journal = _finish(cluster, d4, sid, attachers)
        results = [e for e in journal if e["type"] == "tool.result"]
        assert len(results) == 1 and results[0]["payload"]["status"] in ("interrupted", "error"), results
        time.sleep(1.0)
        assert marker.read_text().count("run") == 1
        _no_silent_llm_double(cluster, sid)
        _fenced_after_heal(cluster, d4, sid, journal, proxy)
