"""MCP servers that misbehave, over stdio and streamable HTTP (real SDK servers, real sockets).

Each bad input is one line (a notice recorded once as an ``error`` event) and the rest of the
tool set stays usable: a command that does not exist, a server printing garbage on stdout, an
invalid tool schema and tool name, an HTTP endpoint answering 401 or 500. The FastMCP demo server
also runs over streamable HTTP: calls, progress, and a timeout that sends notifications/cancelled.
"""

from __future__ import annotations

import http.server
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.mcp import McpManager, ToolSet
from acagent.tools import ToolContext, ToolResult
from tests.mcp._support import BAD, DEMO

pytestmark = pytest.mark.anyio


async def _call(tools: ToolSet, name: str, out: list[str] | None = None, **args: Any) -> ToolResult:
    tool = tools[name]
    sink = out if out is not None else []
    ctx = ToolContext(cwd=Path.cwd(), session_id="s", tool_call_id="c", emit_output=sink.append)
    return await tool.run(tool.args_model.model_validate(args), ctx)


async def test_bad_stdio_servers_are_one_line_each_and_the_rest_works(tmp_path: Path) -> None:
    """No such command, garbage on stdout, an invalid schema and a bad tool name: one line each."""
    table = {
        "servers": {
            "nope": {"command": ["acagent-no-such-server"]},
            "garbage": {"command": [sys.executable, BAD, "garbage"], "startup_timeout_s": 1},
            "bad": {"command": [sys.executable, BAD, "badschema"]},
        }
    }
    async with McpManager.open(table, tmp_path, {}) as mcp:
        tools = mcp.toolset(str(tmp_path), {})
        changed, notices = await tools.refresh()
        assert changed
        by_code: dict[str, list[str]] = {}
        for code, message in notices:
            assert "\n" not in message and "Traceback" not in message
            by_code.setdefault(code, []).append(message)
        failed = " | ".join(by_code["mcp_server_failed"])
        assert "'nope'" in failed and "command not found: 'acagent-no-such-server'" in failed
        assert "'garbage'" in failed and "stdout is not JSON-RPC" in failed and "line 0" in failed
        warned = " | ".join(by_code["mcp_tool_warning"])
        assert "'broken'" in warned and "not valid JSON Schema" in warned
        assert "'bad name!'" in warned and "mcp__bad__bad_name_" in warned
        assert sorted(tools) == ["mcp__bad__bad_name_", "mcp__bad__broken", "mcp__bad__ok"]
        assert tools["mcp__bad__broken"].parameters_schema() == {
            "type": "object",
            "additionalProperties": True,
            "properties": {},
        }
        assert (await _call(tools, "mcp__bad__ok")).content == "ok ran"
        assert (await _call(tools, "mcp__bad__bad_name_")).content == "bad name! ran"
        states = {s["name"]: s["state"] for s in mcp.status()}
        assert states == {"bad": "ready", "garbage": "failed", "nope": "failed"}
        assert (await tools.refresh())[1] == []  # each notice is returned once


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every request with the server's status; records the Authorization header."""

    def do_POST(self) -> None:
        self.server.seen.append(self.headers.get("Authorization"))  # type: ignore[attr-defined]
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST
    do_DELETE = do_POST

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def status_servers() -> Iterator[dict[int, Any]]:
    """Two HTTP servers on 127.0.0.1 answering 401 and 500 to everything."""
    servers: dict[int, Any] = {}
    for status in (401, 500):
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
        srv.status, srv.seen = status, []  # type: ignore[attr-defined]
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers[status] = srv
    yield servers
    for srv in servers.values():
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def http_demo(tmp_path: Path) -> Iterator[str]:
    """The FastMCP demo server over streamable HTTP (a real subprocess); yields its URL."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    state = tmp_path / "http-state"
    env = {**os.environ, "DEMO_DIR": str(state)}
    proc = subprocess.Popen([sys.executable, DEMO, "--http", str(port)], env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), 0.1).close()
                break
            except OSError:
                assert proc.poll() is None, "the HTTP demo server exited"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


async def test_http_server_calls_progress_timeout_and_auth_errors(
    tmp_path: Path, http_demo: str, status_servers: dict[int, Any]
) -> None:
    """Streamable HTTP: a call with progress, a timed-out call, and 401/500 endpoints as one line."""
    token = "s3cret-token-value"
    auth = {"Authorization": "Bearer ${DEMO_TOKEN}"}
    table = {
        "servers": {
            "web": {"url": http_demo, "timeout_s": 1},
            "denied": {"url": f"http://127.0.0.1:{status_servers[401].server_port}/mcp", "headers": auth},
            "broken": {"url": f"http://127.0.0.1:{status_servers[500].server_port}/mcp"},
        }
    }
    async with McpManager.open(table, tmp_path, {"DEMO_TOKEN": token}) as mcp:
        tools = mcp.toolset(str(tmp_path), {})
        _, notices = await tools.refresh()
        out: list[str] = []
        result = await _call(tools, "mcp__web__lookup", out, key="h")
        assert result.content == "value-of-h" and "[progress 2/2] done\n" in out
        hung = await _call(tools, "mcp__web__hang")
        assert hung.is_error and "did not answer within 1 s" in hung.content
        with anyio.fail_after(5):
            while not (tmp_path / "http-state" / "hang.cancelled").exists():
                await anyio.sleep(0.05)
        assert (await _call(tools, "mcp__web__lookup", key="again")).content == "value-of-again"
        status = {s["name"]: s for s in mcp.status()}
    failed = dict(n for n in notices if n[0] == "mcp_server_failed")
    assert status_servers[401].seen[0] == f"Bearer {token}"  # the expanded header is sent ...
    messages = [m for _, m in notices] + [str(s) for s in status.values()]
    assert all(token not in m for m in messages)  # ... and never shown
    assert status["denied"]["state"] == "failed" and "HTTP 401 Unauthorized" in status["denied"]["error"]
    assert (
        status["broken"]["state"] == "failed"
        and "HTTP 500 Internal Server Error" in status["broken"]["error"]
    )
    assert failed and all("\n" not in m for m in failed.values())
    assert status["web"]["state"] == "ready"
