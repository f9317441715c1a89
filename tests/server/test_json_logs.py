"""``acagent serve --log-format json``: one JSON object per log line, never the token."""

from __future__ import annotations

import json
from pathlib import Path


def test_json_log_lines_carry_no_token(start_daemon, workspace: Path) -> None:
    d = start_daemon("--yes", "--log-format", "json")
    sid = d.create(workspace)["id"]
    assert d.send(sid, "say hi").status_code == 202
    d.wait_status(sid, ("done",), timeout=30)
    d.http.get("/v1/sessions/ses_nope")  # a 404 path
    d.terminate(15)  # returns once the daemon's stderr is read to its end
    lines = [line for line in d.stderr_lines if line.strip()]
    assert lines, "the daemon logged nothing"
    for line in lines:
        obj = json.loads(line)  # every line is one JSON object
        assert {"ts", "level", "logger", "message"} <= set(obj)
    assert all(d.token not in line for line in d.stderr_lines + d.stdout_lines[2:])
