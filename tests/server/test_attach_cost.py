"""F36: attaching to a session costs the same whatever its size — no transcript read, no rebuild.

A session of ~20,000 events (one real turn of 20,000 deltas, so journal and transcript are the
program's own) and a small one; the daemon is restarted and both sessions' ``transcript_stat``
is cleared — the state of an imported session, or of one whose last writer died — so nothing
vouches for the transcript files. Then the first attach to each (``since=0``, and the middle of the big one) is
measured by the bytes the daemon process reads (``/proc/PID/io`` ``rchar``: files and SQLite
pages alike, after a warm-up so module imports do not count), not by wall time. Before, the attach path built the runner through
``get_runner``, which read and checked the whole transcript (~6 MB here) on the event loop.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
import websockets

from tests.server.conftest import Daemon

pytestmark = pytest.mark.anyio

N = 20_000


def _rchar(pid: int) -> int:
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("rchar:"):
                return int(line.split()[1])
    raise AssertionError("no rchar")


async def _first_frame_cost(d: Daemon, sid: str, since: int) -> tuple[int, dict[str, Any]]:
    before = _rchar(d.pid)
    with anyio.fail_after(30):
        async with websockets.connect(
            f"{d.ws_url}/v1/sessions/{sid}/attach?since={since}", additional_headers=d.auth, max_size=None
        ) as conn:
            frame = json.loads(await conn.recv())
    return _rchar(d.pid) - before, frame


async def test_first_attach_cost_does_not_grow_with_the_session(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon()
    big = d.create(workspace)["id"]
    small = d.create(workspace)["id"]
    assert d.send(big, f"deltas {N} 200").status_code == 202
    assert d.send(small, "say hi").status_code == 202
    last = {sid: d.wait_status(sid, ("done",), timeout=180)["last_seq"] for sid in (big, small)}
    assert last[big] > N
    assert d.terminate() == 0
    transcripts = {p.stem: p.stat().st_size for p in (d.home / "sessions").rglob("*.jsonl")}
    assert transcripts[big] > 4_000_000
    with sqlite3.connect(d.home / "acagent.db") as db:
        db.execute("UPDATE session SET transcript_stat = NULL")
    d.start()
    # Warm up (lazy imports, the provider SDK prewarm) on a third session: rchar counts module
    # files too.
    warm = d.create(workspace)["id"]
    assert d.send(warm, "say warm").status_code == 202
    d.wait_status(warm, ("done",))
    for _ in range(2):
        await _first_frame_cost(d, warm, 0)
    await anyio.sleep(1.0)
    costs: dict[tuple[str, str], int] = {}
    # Cursors whose next page is ordinary deltas: the head, and the middle of the big reply
    # (the reply's own end — a 4 MB assistant.message and checkpoint — is content, not size).
    for sid, where, since in ((small, "head", 0), (big, "head", 0), (big, "middle", N // 2)):
        cost, frame = await _first_frame_cost(d, sid, since)
        assert frame["seq"] == since + 1
        costs[(sid, where)] = cost
    for where in ("head", "middle"):
        growth = costs[(big, where)] - costs[(small, "head")]
        assert growth < 1_500_000, f"{where}: attaching to the big session read {growth} more bytes: {costs}"
        assert costs[(big, where)] < transcripts[big] // 3, costs
    # Driving the session afterwards still repairs/completes its transcript as before.
    assert d.send(big, "say more").status_code == 202
    d.wait_status(big, ("done",), timeout=60)
