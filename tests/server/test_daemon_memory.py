"""A daemon's memory across many wakes (issue 12 item 6): closed connections are let go, the
daemon runs on glibc ``malloc`` (acagent/_allocator.py) without handing it to its tools, and its
own counters say how many runners it built and hibernated. A real ``acagent serve``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import websockets.sync.client as wsc

from tests.server.conftest import Daemon, wait_for


def _attach_once(d: Daemon, sid: str) -> None:
    with wsc.connect(f"{d.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=d.auth) as ws:
        ws.recv(timeout=10)


def test_closed_websockets_leave_the_connection_tracker(start_daemon: Any, workspace: Path) -> None:
    """Before, a closed WebSocket's transport (and through it its protocol and buffers) stayed in
    the per-client set until that address reached ``max_connections_per_client`` (1024)."""
    d = start_daemon()
    sid = d.create(workspace)["id"]
    for _ in range(3):
        _attach_once(d, sid)
    # What is left is this test's own kept-alive HTTP connection.
    wait_for(lambda: d.stats()["tracked_connections"] == 1, 10, what="closed WebSockets to be released")


def test_the_daemon_counts_runners_built_and_hibernated(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon()
    ids = [d.create(workspace)["id"] for _ in range(3)]
    before = d.stats()
    for sid in ids:
        _attach_once(d, sid)
    woken = d.stats()
    assert woken["runners_built"] - before["runners_built"] == 3
    assert woken["runners"] == 3
    assert d.http.post("/v1/debug/hibernate").json() == {"dropped": 3, "runners": 0}
    after = d.stats()
    assert after["runners_hibernated"] - woken["runners_hibernated"] == 3 and after["runners"] == 0


@pytest.mark.skipif(
    not (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc"), reason="glibc malloc only"
)
def test_the_daemon_runs_on_malloc_in_its_own_pid_and_its_tools_get_the_users_environment(
    start_daemon: Any, workspace: Path
) -> None:
    d = start_daemon("--yes")
    stats = d.stats()
    assert stats["allocator"] == "malloc"
    assert stats["pid"] == d.proc.pid  # re-executed in place: the pid the user started
    sid = d.create(workspace)["id"]
    assert (
        d.send(sid, 'shell echo "[${PYTHONMALLOC-unset}] [${ACAGENT_ALLOCATOR_ADDED-unset}]"').status_code
        == 202
    )
    d.wait_status(sid, ("done",))
    results = [e for e in d.events(sid) if e["type"] == "tool.result"]
    assert results and "[unset] [unset]" in str(results[-1]["payload"])


def test_a_pythonmalloc_the_user_set_is_kept(start_daemon: Any) -> None:
    d = start_daemon(PYTHONMALLOC="pymalloc")
    assert d.stats()["allocator"] == "pymalloc"
