"""MCP tools in real turns: SDK servers as real subprocesses, the strict mock provider, a real journal.

One session calls the read-only, idempotent and destructive tools and reads the progress as
``tool.output``; cancel during the hanging tool ends the turn within 5 s and the next request is
valid; a crashing server gives an error result, one event, a restart and a refreshed tool list.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.events import Event
from acagent.mcp import McpManager
from acagent.runner import InProcessRunner, SessionRegistry
from acagent.settings import load_settings
from tests.mcp._support import demo_server
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio


def _settings(home: Path, mock: MockProvider, servers: dict[str, Any], **over: Any) -> Any:
    return load_settings(
        {
            "home": str(home),
            "base_url": mock.openai_base_url,
            "model": "openai:mock",
            "mcp": {"servers": servers},
            **over,
        },
        env={},
    )


@asynccontextmanager
async def _session(
    tmp_path: Path, mock: MockProvider, workspace: Path, state: Path
) -> AsyncIterator[tuple[SessionRegistry, InProcessRunner]]:
    """A registry with the demo server configured, and a runner of a new session in ``workspace``."""
    settings = _settings(tmp_path / "home", mock, {"demo": demo_server(state)})
    async with (
        McpManager.open(settings.mcp, settings.home, os.environ) as mcp,
        SessionRegistry.open(settings, tool_source=mcp) as reg,
    ):
        row = await reg.create_session(workspace, model="openai:mock")
        yield reg, await reg.get_runner(row.id)


async def _wait_for(runner: InProcessRunner, predicate: Any, timeout: float = 20) -> Event:
    with anyio.fail_after(timeout):
        async for event in runner.subscribe("test", 0):
            if predicate(event):
                return event
    raise AssertionError("subscription ended")


def _tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


async def test_turn_calls_read_only_idempotent_and_destructive_tools(
    tmp_path: Path, mock: MockProvider, workspace: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each MCP tool runs in a turn with its schema offered; the read-only one does not ask;
    progress notifications arrive as ``tool.output``; acagent's keys never reach the server."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-acagent-own-key-123")
    mock.script(
        openai_tool_calls(
            [
                ("call_e", "mcp__demo__getenv", {"name": "OPENAI_API_KEY"}),
                ("call_r", "mcp__demo__lookup", {"key": "k1"}),
                ("call_i", "mcp__demo__count", {"name": "n1"}),
                ("call_d", "mcp__demo__append_line", {"text": "hello"}),
            ]
        ),
        TextReply("done"),
    )
    async with _session(tmp_path, mock, workspace, state) as (_reg, runner):
        await runner.step("use the tools")
        for call_id in ("call_i", "call_d"):
            asked = await _wait_for(
                runner, lambda e: e.type == "approval.requested" and e.payload["tool_call_id"] == call_id
            )
            await runner.answer_approval(asked.payload["tool_call_id"], "allow")
        await runner.wait()
        events = await runner.journal.events(runner.session_id, 0)
    first = mock.requests[0].json
    offered = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert offered["mcp__demo__lookup"]["parameters"]["properties"]["key"]["type"] == "string"
    assert {"mcp__demo__count", "mcp__demo__append_line", "shell"} <= set(offered)
    results = {e.payload["tool_call_id"]: e.payload for e in events if e.type == "tool.result"}
    assert results["call_e"]["content"] == "(unset)"
    assert results["call_r"]["content"] == "value-of-k1"
    assert results["call_i"]["content"] == "counted n1"
    assert results["call_d"]["content"] == "appended 'hello'"
    # read-only runs without asking; idempotent and destructive tools ask
    assert [e.payload["tool_call_id"] for e in events if e.type == "approval.requested"] == [
        "call_i",
        "call_d",
    ]
    progress = "".join(
        e.payload["text"] for e in events if e.type == "tool.output" and e.payload["tool_call_id"] == "call_r"
    )
    assert "[progress 1/2] looking up k1" in progress
    assert (state / "lines.txt").read_text() == "hello\n"
    last = mock.requests[-1]
    assert last.status == 200, last.error
    assert [m["tool_call_id"] for m in _tool_messages(last.json)] == ["call_e", "call_r", "call_i", "call_d"]


async def test_cancel_during_hanging_tool_ends_turn_and_next_request_is_valid(
    tmp_path: Path, mock: MockProvider, workspace: Path, state: Path
) -> None:
    """Cancel mid-call: the server gets notifications/cancelled, the turn ends cancelled within
    5 s, and the next turn's request pairs the call with an interrupted result."""
    mock.script(openai_tool_calls([("call_h", "mcp__demo__hang", {})]), TextReply("ok"))
    async with _session(tmp_path, mock, workspace, state) as (reg, runner):
        await runner.step("hang")
        await _wait_for(runner, lambda e: e.type == "tool.started")
        with anyio.fail_after(10):
            while not (state / "hang.started").exists():
                await anyio.sleep(0.05)
        started = time.monotonic()
        await reg.cancel(runner.session_id)
        await runner.wait()
        assert time.monotonic() - started < 5
        assert (await runner.snapshot())["status"] == "cancelled"
        with anyio.fail_after(5):
            while not (state / "hang.cancelled").exists():
                await anyio.sleep(0.05)
        await runner.run_turn("never mind")
    last = mock.requests[-1]
    assert last.status == 200, last.error
    tool = _tool_messages(last.json)
    assert tool[0]["tool_call_id"] == "call_h" and "interrupted" in tool[0]["content"]


async def test_crashed_server_gives_error_result_one_event_and_restarts_with_new_tools(
    tmp_path: Path, mock: MockProvider, workspace: Path, state: Path
) -> None:
    """The crash tool kills the server: error result (no hang), one ``mcp_server_crashed`` event,
    the server restarts, its changed tool list is offered; the vanished tool gives an error."""
    mock.script(
        openai_tool_calls([("call_c", "mcp__demo__crash", {})]),
        openai_tool_calls([("call_g1", "mcp__demo__gen_one", {}), ("call_g2", "mcp__demo__gen_two", {})]),
        TextReply("ok"),
    )
    async with _session(tmp_path, mock, workspace, state) as (_reg, runner):
        await runner.step("crash it")
        await _wait_for(runner, lambda e: e.type == "tool.result")
        await runner.wait()
        events = await runner.journal.events(runner.session_id, 0)
    results = {e.payload["tool_call_id"]: e.payload for e in events if e.type == "tool.result"}
    assert results["call_c"]["is_error"] and "stopped during the call" in results["call_c"]["content"]
    crashed = [e for e in events if e.type == "error" and e.payload["code"] == "mcp_server_crashed"]
    assert len(crashed) == 1 and "exited with code 3" in crashed[0].payload["message"]
    second = json.dumps(mock.requests[1].json["tools"])
    assert "mcp__demo__gen_two" in second and "mcp__demo__gen_one" not in second
    assert results["call_g2"]["content"] == "two"
    assert results["call_g1"]["is_error"] and "unknown tool" in results["call_g1"]["content"]
    assert mock.requests[-1].status == 200, mock.requests[-1].error
