"""Compaction through the daemon's real HTTP API: a message meanwhile is refused as busy."""

from __future__ import annotations

import json
from pathlib import Path

from tests.mockprovider import MockProvider, Script
from tests.server.conftest import openai_deltas


def test_a_message_during_compaction_gets_409_session_busy(
    start_daemon, mock: MockProvider, workspace: Path
) -> None:
    d = start_daemon("--yes")
    sid = d.create(workspace)["id"]
    for i in range(2):
        assert d.send(sid, f"say answer {i} " + "z" * 2000).status_code == 202
        d.wait_status(sid, ("done",), timeout=30)
    # The summary request streams its first half, then waits until released.
    mock.script(Script(chunks=openai_deltas(["The user asked ", "for two answers."]), pause_after=1))
    assert d.http.post(f"/v1/sessions/{sid}/compact").status_code == 202
    mock.wait_paused(1, timeout=30)  # compaction is in flight
    busy = d.send(sid, "say during")
    assert busy.status_code == 409, busy.text
    assert busy.json()["error"]["code"] == "session_busy"
    mock.release()
    done = d.wait_event(sid, lambda e: e["type"] == "context.compacted", timeout=30)
    assert done["payload"]["summary"] == "The user asked for two answers."
    assert d.send(sid, "say after").status_code == 202  # free again once the compaction ended
    d.wait_status(sid, ("done",), timeout=30)
    events = d.events(sid)
    assert not any("say during" in json.dumps(e["payload"]) for e in events)  # refused, not queued
    assert [e["type"] for e in events].count("context.compacted") == 1
