"""``GET /v1/mcp``: a daemon starts a cwd's MCP servers once and shares them across its sessions.

A real ``acagent serve`` with one stdio server (the SDK lowlevel test server) in its config:
two sessions of one directory share one server process, its state and tools are served by
``GET /v1/mcp``, the model is offered its tools, and the server is gone once the daemon stops.
An MCP call waiting for approval survives a SIGKILLed daemon exactly as a shell call does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from tests.mcp._support import BAD, demo_server, pids_alive, write_config
from tests.mockprovider import openai_tool_calls
from tests.server.conftest import responder, wait_for


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


def _mcp_responder(body: Any) -> Any:
    """``mcp TOOL TEXT`` → one call of ``mcp__demo__TOOL`` with ``{"text": TEXT}``; else the directives."""
    last = body["messages"][-1]
    text = last.get("content") if last.get("role") == "user" else None
    if isinstance(text, str) and text.startswith("mcp "):
        _, tool, arg = text.split(" ", 2)
        return openai_tool_calls([("call_mcp", f"mcp__demo__{tool}", {"text": arg})])
    return responder(body)


def test_pending_mcp_approval_survives_daemon_kill(
    start_daemon: Any, tmp_path: Path, workspace: Path, mock: Any
) -> None:
    """kill -9 while a destructive MCP call waits for approval: after the restart it is still
    pending; answering it runs the tool once; the killed daemon's server did not outlive it."""
    state = tmp_path / "demo-state"
    write_config(tmp_path / "home" / "config.toml", {"demo": demo_server(state)})
    mock.default = _mcp_responder
    try:
        d1 = start_daemon()
        sid = d1.create(workspace)["id"]
        assert d1.send(sid, "mcp append_line once").status_code == 202
        d1.wait_event(sid, lambda e: e["type"] == "approval.requested", timeout=30)
        d1.wait_status(sid, ("waiting_user",))
        first = pids_alive(state)
        d1.kill()
        wait_for(lambda: not set(first) & set(pids_alive(state)), 5, what="the server died with its daemon")
        d2 = start_daemon()
        s = wait_for(
            lambda: x if (x := d2.session(sid))["status"] == "waiting_user" and x["busy"] else None,
            20,
            what="recovered and waiting",
        )
        assert [a["tool_call_id"] for a in s["pending_approvals"]] == ["call_mcp"]
        r = d2.http.post(f"/v1/sessions/{sid}/approvals/call_mcp", json={"decision": "allow"})
        assert r.status_code == 200, r.text
        d2.wait_status(sid, ("done",), timeout=30)
        assert (state / "lines.txt").read_text() == "once\n"
        result = [e for e in d2.events(sid) if e["type"] == "tool.result"][-1]["payload"]
        assert result["status"] == "ok" and result["content"] == "appended 'once'"
        assert d2.terminate(20) == 0
        wait_for(lambda: not pids_alive(state), 5, what="no MCP server left")
    finally:
        mock.default = responder
