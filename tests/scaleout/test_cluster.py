"""Three daemons sharing sessions through PostgreSQL: cross-daemon attach and failover.

Every test ends with the same checks: each attacher on a non-owner daemon got seq 1…N exactly
once, in order, with the journal's content, and no session is left stuck (active with no live
owner).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.scaleout.conftest import Attacher, ClusterDaemon, check_stream
from tests.server.conftest import wait_for

pytestmark = pytest.mark.timeout(90)


def _attach(cluster: Callable[..., ClusterDaemon], d: ClusterDaemon, sid: str, since: int = 0) -> Attacher:
    a = Attacher(d, sid, since=since).start()
    cluster.attachers.append(a)  # type: ignore[attr-defined]
    return a


def _finished(d: ClusterDaemon, sid: str, timeout: float = 30.0) -> dict:
    return d.wait_status(sid, ("done",), timeout)


class TestCrossDaemonAttach:
    def test_attachers_on_other_daemons_see_every_seq_once(
        self, cluster: Callable[..., ClusterDaemon], workspace: Path
    ) -> None:
        """A turn streamed on daemon A reaches SSE attachers on B and C with the same seqs, no gap, no duplicate."""
        a = cluster("127.0.0.2", "d2")
        b = cluster("127.0.0.3", "d3")
        c = cluster("127.0.0.4", "d4")
        sid = a.create(workspace)["id"]
        on_b = _attach(cluster, b, sid)
        on_c = _attach(cluster, c, sid, since=1)
        time.sleep(0.3)
        assert a.send(sid, "deltas 60 12 5").status_code == 202
        _finished(a, sid)
        on_b.wait_type("turn.completed")
        on_c.wait_type("turn.completed")
        journal = b.events(sid)
        assert journal == a.events(sid)  # every daemon reads the same journal
        check_stream(on_b, journal)
        check_stream(on_c, journal, since=1)
        # a late attacher on C with since=N gets only the tail
        late = _attach(cluster, c, sid, since=journal[-5]["seq"])
        wait_for(lambda: len(late.events) >= 4, 10, what="late tail")
        check_stream(late, journal, since=journal[-5]["seq"])


class TestFailover:
    def test_sigkill_owner_mid_stream_peer_finishes_the_turn(
        self, cluster: Callable[..., ClusterDaemon], workspace: Path
    ) -> None:
        """SIGKILL the owner mid-stream: a peer claims at once (free advisory lock), retries the step
        (attempt 2, counted) and finishes; attachers elsewhere see one unbroken seq line."""
        a = cluster("127.0.0.2", "d2")
        b = cluster("127.0.0.3", "d3")
        c = cluster("127.0.0.4", "d4")
        sid = a.create(workspace)["id"]
        on_c = _attach(cluster, c, sid)
        time.sleep(0.3)
        assert a.send(sid, "deltas 400 12 10").status_code == 202
        wait_for(
            lambda: sum(1 for e in on_c.events if e["type"] == "assistant.delta") >= 20, 20, what="deltas"
        )
        a.stop_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        a.proc.wait(10)  # type: ignore[union-attr]
        on_c.wait_type("turn.completed", timeout=60)
        failover_s = time.monotonic() - killed_at
        journal = c.events(sid)
        check_stream(on_c, journal)
        session = c.session(sid)
        assert session["status"] == "done"
        assert session["usage"]["llm_retries"] >= 1  # the interrupted step was retried, visibly
        assert failover_s < 30
        steps = [e for e in journal if e["type"] == "step.started"]
        assert len(steps) >= 2
        _ = b
