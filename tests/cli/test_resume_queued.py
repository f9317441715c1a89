"""A message sent with ``run --resume`` to a session whose turn was interrupted (F132, F133).

The runner first finishes the interrupted turn, then runs the message under the same lease. Before,
the message ran only when that resumed turn *completed*: when it failed (a provider refusal, the
daily cap) the message was never started nor ended, and ``acagent run`` (or a daemon's client)
waited for its end forever. And a Ctrl-C while the resumed turn ran was ignored: ``run`` cancels
the turn it was given (the message's), which was not current yet, so the resumed turn and then
the message ran on (exit 0). A real ``acagent run`` is SIGKILLed inside a tool, then resumed.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from tests.mockprovider import MockProvider, Script, openai_text, openai_tool_calls, split_every

_ENDS = ("turn.completed", "turn.failed", "turn.interrupted")


def _status(db: Path) -> str | None:
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT status FROM session").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _tool_pid(db: Path) -> int | None:
    """The process group recorded for the session's running shell call, if any yet."""
    try:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT pid FROM tool_call WHERE status = 'running'").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def _interrupted_session(cli: Any, mock: MockProvider, workspace: Path) -> str:
    """A session whose turn was SIGKILLed while its shell call ran (status ``waiting_tool``)."""
    mock.script(openai_tool_calls([("c1", "shell", {"command": "sleep 30"})]))
    model = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    proc = cli.popen("run", "--yes", *model, "sleep a while", cwd=workspace)
    db = cli.home / "acagent.db"
    deadline = time.monotonic() + 30
    # the tool is started: its process group is recorded (a fixed 0.3 s after `waiting_tool` was
    # not always enough on a loaded machine)
    while not _tool_pid(db) and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert _status(db) == "waiting_tool"
    with sqlite3.connect(db) as conn:
        session_id: str = conn.execute("SELECT id FROM session").fetchone()[0]
    return session_id


@pytest.mark.parametrize("failure", ["provider_400", "daily_cap"])
def test_a_message_queued_behind_a_resumed_turn_that_fails_still_ends_f132(
    cli: Any, mock: MockProvider, workspace: Path, failure: str
) -> None:
    session_id = _interrupted_session(cli, mock, workspace)
    if failure == "provider_400":
        refusal = {"error": {"message": "bad request", "type": "invalid_request_error"}}
        mock.script(Script(status=400, body=refusal), openai_text("answered the new message"))
    else:
        (cli.home / "config.toml").write_text(
            '[pricing."openai:mock"]\ninput_usd_per_mtok = 1000.0\noutput_usd_per_mtok = 2000.0\n'
            "[limits]\ndaily_usd = 0.000001\n"
        )
    model = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    done = cli("run", "--yes", *model, "--resume", session_id, "go on", cwd=workspace, timeout=40)
    exported = cli("export", session_id, cwd=workspace, check=True)
    events = [json.loads(line) for line in exported.stdout.splitlines()]
    ends = [(e["type"], e["payload"].get("turn_id")) for e in events if e["type"] in _ENDS]
    started = [e["payload"]["turn_id"] for e in events if e["type"] == "turn.started"]
    assert len(started) == 2 and ends[-1][1] == started[-1]  # the message's turn started and ended
    if failure == "provider_400":
        assert ends[-2][0] == "turn.failed" and ends[-1][0] == "turn.completed"
        assert (done.returncode, done.stdout) == (0, "answered the new message\n"), done.stderr
    else:
        assert [t for t, _ in ends[-2:]] == ["turn.failed", "turn.failed"]
        assert done.returncode == 1 and done.stderr.splitlines() == [
            "acagent: error: today's limit of $0.00 is reached ($0.0000 used; [limits] daily_usd)"
        ]


def test_ctrl_c_while_the_resumed_turn_runs_stops_it_and_the_message_f133(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    session_id = _interrupted_session(cli, mock, workspace)
    mock.script(
        Script(chunks=split_every(openai_text("resumed slowly"), 20), pause_after=2), openai_text("new")
    )
    model = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    proc = cli.popen("run", "--yes", *model, "--resume", session_id, "go on", cwd=workspace)
    try:
        mock.wait_paused(1, timeout=30)  # the resumed turn's call is streaming
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
        mock.release(5)
    assert proc.returncode == 130, err
    assert err.splitlines()[-1] == "acagent: error: the turn was interrupted (user)"
    events = [
        json.loads(line) for line in cli("export", session_id, cwd=workspace, check=True).stdout.splitlines()
    ]
    ends = [(e["type"], e["payload"].get("reason")) for e in events if e["type"] in _ENDS]
    assert ends[-2:] == [("turn.interrupted", "user"), ("turn.interrupted", "user")]
    assert [e["payload"]["text"] for e in events if e["type"] == "user.message"][-1] == "go on"  # recorded
    assert len(mock.requests) == 2  # the first run's call and the resumed turn's: the message made none
