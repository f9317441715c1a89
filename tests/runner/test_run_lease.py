"""The tool run lease (``tool_call.run_expires_at``) is live: recovery trusts the recorded process
group only while it holds (after that the pgid may belong to an unrelated group)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from acagent.store import InsertToolCall, SetStatus, UpdateToolCall
from acagent.store._rows import ToolCallRow

pytestmark = pytest.mark.anyio


def test_trusted_pgid_follows_the_run_lease() -> None:
    row = ToolCallRow(
        "s", "c", "t", "st", 0, "shell", "{}", None, "running", "none", None, "w", 4242, 100.0, 0, None
    )
    assert row.trusted_pgid(now=99.0) == 4242
    assert row.trusted_pgid(now=100.0) is None
    assert dataclasses.replace(row, run_expires_at=None).trusted_pgid(now=1e12) == 4242  # unknown lease
    assert dataclasses.replace(row, pid=None).trusted_pgid(now=0) is None


@pytest.mark.parametrize("lease_left_s", [600.0, -1.0])
async def test_reap_orphans_kills_the_recorded_group_only_under_its_run_lease(
    tmp_path: Path, lease_left_s: float
) -> None:
    """A dead holder left a ``running`` call whose recorded group (no spawn marker: the marker
    search cannot find it) still runs: killed while the run lease holds, left alone after it."""
    group = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        settings = load_settings({"home": str(tmp_path / "home"), "model": "openai:mock"}, env={})
        async with SessionRegistry.open(settings) as reg:
            row = await reg.create_session(tmp_path, model="openai:mock")
            lease = await reg.journal.acquire_lease(row.id, "gone", ttl_s=30, pid=dead.pid)
            expires = time.time() + lease_left_s
            await reg.journal.commit(
                row.id,
                [],
                lease=lease,
                ops=[
                    SetStatus("waiting_tool", ("pending",)),
                    InsertToolCall("c1", "t1", "s1", 0, "shell", {"command": "sleep 60"}, idempotent=False),
                    UpdateToolCall(
                        "c1", "running", ("dispatched",), (("pid", group.pid), ("run_expires_at", expires))
                    ),
                ],
            )
            killed = await reg.reap_orphans()
        if lease_left_s > 0:
            assert killed == 1
            assert group.wait(timeout=10) is not None
        else:
            assert killed == 0
            assert group.poll() is None, "a group past its run lease is not trusted"
    finally:
        if group.poll() is None:
            os.killpg(group.pid, 9)
        group.wait()
