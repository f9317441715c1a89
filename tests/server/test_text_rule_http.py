"""F25 through the daemon: a message with NUL or a lone surrogate is accepted (202, never 422)
and journaled with U+FFFD in its place; the model saw the same text (the strict mock accepted it)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.server.conftest import Daemon, wait_for

R = "\ufffd"


def test_message_with_nul_and_lone_surrogate_is_accepted(daemon: Daemon, workspace: Path) -> None:
    sid = daemon.create(workspace)["id"]
    # A JSON escape for a lone surrogate is valid JSON text; Python decodes it to "\ud800".
    body = b'{"text": "say hi\\u0000there \\ud800!"}'
    r = daemon.http.post(
        f"/v1/sessions/{sid}/messages", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 202, r.text
    done = wait_for(
        lambda: [e for e in daemon.events(sid) if e["type"] == "turn.completed"], what="turn.completed"
    )
    events = daemon.events(sid)
    (user,) = [e["payload"]["text"] for e in events if e["type"] == "user.message"]
    assert user == f"say hi{R}there {R}!"
    assert done[0]["payload"]["text"] == f"hi{R}there {R}!"
    assert "\\u0000" not in json.dumps(events)
