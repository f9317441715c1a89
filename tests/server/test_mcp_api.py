"""``GET /v1/mcp``: a daemon starts a cwd's MCP servers once and shares them across its sessions.

A real ``acagent serve`` with one stdio server (the SDK lowlevel test server) in its config:
two sessions of one directory share one server process, its state and tools are served by
``GET /v1/mcp``, the model is offered its tools, and the server is gone once the daemon stops.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tests.mcp._support import BAD, write_config
from tests.server.conftest import wait_for


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_daemon_shares_a_cwd_server_and_reports_it(
    start_daemon: Any, tmp_path: Path, workspace: Path, mock: Any
) -> None:
    """Two sessions, one server; ``GET /v1/mcp`` names it ready with its tools; no orphan after stop."""
    home = tmp_path / "home"
    write_config(home / "config.toml", {"bad": {"command": [sys.executable, BAD, "badschema"]}})
    daemon = start_daemon()
    sids = [daemon.create(workspace)["id"] for _ in range(2)]
    for sid in sids:
        assert daemon.send(sid, "say hi").status_code == 202
        daemon.wait_status(sid, ("done",))
    body = daemon.http.get("/v1/mcp").json()
    [server] = body["servers"]
    assert server["name"] == "bad" and server["state"] == "ready" and server["cwd"] == str(workspace)
    assert {t["name"] for t in server["tools"]} == {"mcp__bad__ok", "mcp__bad__broken", "mcp__bad__bad_name_"}
    assert any("not valid JSON Schema" in w for w in server["warnings"])
    assert daemon.http.get("/v1/mcp", params={"cwd": "/elsewhere"}).json() == {"servers": []}
    offered = {t["function"]["name"] for t in mock.requests[-1].json["tools"]}
    assert "mcp__bad__ok" in offered
    pid = server["pid"]
    assert _alive(pid)
    assert daemon.http.get("/v1/mcp", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert daemon.terminate(20) == 0
    wait_for(lambda: not _alive(pid), 5, what="MCP server gone after the daemon stopped")
    assert os.path.exists(home / "acagent.db")
