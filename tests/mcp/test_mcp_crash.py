"""Crash safety of MCP calls: SIGKILL a real ``acagent run`` mid-call, resume with ``--resume``.

One session, one step calling the idempotent ``count`` then the destructive ``append_line``:

1. the first run is killed while ``count`` hangs (its first call);
2. the resume re-runs ``count`` once (idempotent) and is killed while ``append_line`` hangs,
   its line already written;
3. the second resume does not re-run ``append_line``: the model is told the outcome is unknown,
   the line appears once, and every request the strict mock saw was valid.

After each kill the server process is gone (no orphan in the process table).
"""

from __future__ import annotations

import json
import signal
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any

from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from tests.mcp._support import demo_server, pids_alive, write_config
from tests.mockprovider import MockProvider, openai_text, openai_tool_calls

FINAL = "Both done."


def _responder(body: dict[str, Any]) -> bytes:
    if body["messages"][-1]["role"] == "user":
        return openai_tool_calls(
            [
                ("call_count", "mcp__demo__count", {"name": "n"}),
                ("call_append", "mcp__demo__append_line", {"text": "once"}),
            ]
        )
    return openai_text(FINAL)


def _wait_until(predicate: Any, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _run_until(cli: Any, args: list[str], workspace: Path, predicate: Any) -> None:
    """Start ``acagent ARGS``, SIGKILL it once ``predicate()`` holds."""
    proc = cli.popen(*args, cwd=workspace)
    try:
        _wait_until(lambda: predicate() or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        proc.communicate()


def test_sigkill_mid_call_reruns_idempotent_and_never_destructive(
    cli: Any, mock: MockProvider, workspace: Path, state: Path
) -> None:
    """The idempotent call is re-run once, the destructive one never; the model is told."""
    assert sys.platform.startswith("linux")
    table = demo_server(state, DEMO_COUNT_HANG_FIRST="1", DEMO_APPEND_HANG_FIRST="1")
    write_config(cli.home / "config.toml", {"demo": table, "nope": {"command": ["acagent-no-such-server"]}})
    mock.default = _responder
    model = ["--yes", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    count_log, lines = state / "count.log", state / "lines.txt"

    _run_until(cli, ["run", *model, "count and append"], workspace, count_log.exists)
    _wait_until(lambda: not pids_alive(state), 5)  # the server died with acagent (no orphan)
    db = sqlite3.connect(cli.home / "acagent.db")
    sid = db.execute("SELECT id FROM session").fetchone()[0]

    _run_until(cli, ["run", "--resume", sid, *model], workspace, lines.exists)
    _wait_until(lambda: not pids_alive(state), 5)
    assert count_log.read_text().splitlines() == ["n", "n"]  # re-run once after the crash

    done = cli("run", "--resume", sid, *model, cwd=workspace)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == FINAL
    warned = [line for line in done.stderr.splitlines() if "'nope'" in line]  # a failed server: one line
    assert warned == [
        "acagent: warning: MCP server 'nope' is not available, its tools are absent: "
        "command not found: 'acagent-no-such-server'"
    ]
    assert lines.read_text() == "once\n"  # never re-run
    assert count_log.read_text().splitlines() == ["n", "n"]
    results = {
        p["tool_call_id"]: p
        for (p,) in ((json.loads(payload_text(r[4])),) for r in stored_events(db) if r[3] == "tool.result")
    }
    assert results["call_count"]["status"] == "ok" and results["call_count"]["content"] == "counted n"
    assert results["call_append"]["status"] == "interrupted"
    assert "may or may not have taken effect" in results["call_append"]["content"]
    assert [r.status for r in mock.requests] == [200] * len(mock.requests), [r.error for r in mock.requests]
    assert len(mock.requests) == 2
    tool_msgs = [m for m in mock.requests[-1].json["messages"] if m["role"] == "tool"]
    assert "may or may not have taken effect" in tool_msgs[1]["content"]
    assert not pids_alive(state)
