"""Crash-point harness (issue 3): SIGKILL a real `acagent run` at each named point, resume it with
`acagent run --resume ID`, and check the recovery invariants against the strict mock provider.

For each crash point × provider:
- the session ends `done` with the final answer;
- the mock saw at most one extra LLM request per crash, and the journal's attempt count matches
  what was sent (a crash after the step committed causes no extra request);
- the non-idempotent shell tool appended its line at most once, and when it may not have
  completed the model was told so;
- every request the mock received was accepted (no 400);
- seqs are 1..last_seq with no gap and no reuse.
"""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from tests.mockprovider import MockProvider, Script, anthropic_text, openai_text, openai_tool_calls

FINAL = "All appended."


def _openai_first(command: str) -> list[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {
            "id": "c",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return ("data: " + json.dumps(body) + "\n\n").encode()

    call = {
        "index": 0,
        "id": "call_append",
        "type": "function",
        "function": {"name": "shell", "arguments": json.dumps({"command": command})},
    }
    return [
        chunk({"role": "assistant", "content": "Appending "}),
        chunk({"content": "the line "}),
        chunk({"content": "now."}),
        chunk({"tool_calls": [call]}),
        chunk({}, "tool_calls") + b"data: [DONE]\n\n",
    ]


def _anthropic_first(command: str) -> list[bytes]:
    def ev(name: str, data: dict[str, Any]) -> bytes:
        return f"event: {name}\ndata: {json.dumps(data)}\n\n".encode()

    def delta(i: int, d: dict[str, Any]) -> bytes:
        return ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})

    return [
        ev(
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "content": [],
                    "model": "mock",
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {"input_tokens": 5, "output_tokens": 1},
                },
            },
        )
        + ev(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        ),
        delta(0, {"type": "text_delta", "text": "Appending "}),
        delta(0, {"type": "text_delta", "text": "the line "}),
        delta(0, {"type": "text_delta", "text": "now."}),
        ev("content_block_stop", {"type": "content_block_stop", "index": 0})
        + ev(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "toolu_append", "name": "shell", "input": {}},
            },
        )
        + delta(1, {"type": "input_json_delta", "partial_json": json.dumps({"command": command})})
        + ev("content_block_stop", {"type": "content_block_stop", "index": 1})
        + ev(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": 9},
            },
        )
        + ev("message_stop", {"type": "message_stop"}),
    ]


def _responder(provider: str, command: str) -> Any:
    """First request (ends with user text) → streamed text + one shell call; later → FINAL."""

    def answer(body: dict[str, Any]) -> Any:
        last = body["messages"][-1]
        asks_tool = last["role"] == "user" and (
            isinstance(last["content"], str)
            or not any(b.get("type") == "tool_result" for b in last["content"])
        )
        if provider == "openai":
            return Script(chunks=_openai_first(command), sleeps=0.05) if asks_tool else openai_text(FINAL)
        return Script(chunks=_anthropic_first(command), sleeps=0.05) if asks_tool else anthropic_text(FINAL)

    return answer


def _base_url(mock: MockProvider, provider: str) -> str:
    return mock.openai_base_url if provider == "openai" else mock.anthropic_base_url


def _journal(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "acagent.db")


def _check_seqs(db: sqlite3.Connection, sid: str) -> list[tuple[int, str, str]]:
    stored = [(seq, typ, p) for _, seq, _, typ, p in stored_events(db, sid)]
    rows = [(seq, typ, payload_text(p)) for seq, typ, p in stored]
    seqs = [r[0] for r in rows]
    last_seq = db.execute("SELECT last_seq FROM session WHERE id = ?", (sid,)).fetchone()[0]
    assert seqs == list(range(1, last_seq + 1)), "seqs must be 1..last_seq without gaps"
    return rows


# point → (requests the mock sees in total, whether the tool may have been interrupted)
MATRIX: dict[str, tuple[int, bool]] = {
    "after_turn_accepted": (2, False),
    "after_step_inflight": (2, False),
    "mid_stream": (3, False),
    "before_step_commit": (3, False),
    "after_step_commit": (2, False),
    "after_tool_intent": (2, False),
    "mid_tool": (2, True),
    "after_tool_result_before_wake": (2, False),
}
UNSENT = ("after_turn_accepted", "after_step_inflight", "after_tool_result_before_wake")
"""Points after a step's intent is durable and before its request left: the accept and the last
tool result's commits carry the next step's intent (runner/_stepstart.py), so recovery finds it
inflight and retries it visibly (``llm.retry`` ``process_died``), as after ``after_step_inflight``."""


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
@pytest.mark.parametrize("point", list(MATRIX))
def test_crash_at_point_then_resume_finishes_turn(
    cli: Any, mock: MockProvider, workspace: Path, provider: str, point: str
) -> None:
    """SIGKILL at the point, `run --resume ID` finishes the turn with the invariants intact."""
    log = workspace / "log.txt"
    command = f"echo appended >> {log}; sleep 1"
    mock.default = _responder(provider, command)
    base = _base_url(mock, provider)
    first = cli(
        "run",
        "--yes",
        "--model",
        f"{provider}:mock",
        "--base-url",
        base,
        "append a line",
        cwd=workspace,
        extra_env={"ACAGENT_CRASH_AT": point},
    )
    assert first.returncode == -signal.SIGKILL, (first.returncode, first.stderr)
    db = _journal(cli.home)
    sid, status = db.execute("SELECT id, status FROM session").fetchone()
    assert status in ("running", "waiting_tool")

    second = cli(
        "run", "--resume", sid, "--yes", "--model", f"{provider}:mock", "--base-url", base, cwd=workspace
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == FINAL

    expected_requests, may_be_interrupted = MATRIX[point]
    requests = mock.requests
    assert [r.status for r in requests] == [200] * len(requests), [r.error for r in requests]
    assert len(requests) == expected_requests
    status, llm_calls, retries = db.execute(
        "SELECT status, llm_calls, llm_retries FROM session WHERE id = ?", (sid,)
    ).fetchone()
    assert status == "done"
    # Every request that went out is an attempt in the journal; an attempt recorded inflight right
    # before the crash may not have reached the mock (UNSENT).
    assert llm_calls - (1 if point in UNSENT else 0) == len(requests)
    assert retries == (1 if point in (*UNSENT, "mid_stream", "before_step_commit") else 0)

    lines = log.read_text().splitlines() if log.exists() else []
    assert len(lines) <= 1
    rows = _check_seqs(db, sid)
    results = [json.loads(p) for _, t, p in rows if t == "tool.result"]
    assert len(results) == 1
    if may_be_interrupted:
        assert results[0]["status"] == "interrupted"
        assert "may or may not" in results[0]["content"]
        last_body = json.dumps(requests[-1].json)
        assert "may or may not" in last_body
    else:
        assert len(lines) == 1
        assert results[0]["status"] == "ok"
    types = [t for _, t, _ in rows]
    assert types.count("turn.completed") == 1
    if retries:
        (retry,) = [json.loads(p) for _, t, p in rows if t == "llm.retry"]
        assert (retry["reason"], retry["attempt"]) == ("process_died", 1)
    # A step's intent rides in the commit that makes its context, right after what woke the model.
    woke = [types[i - 1] for i, t in enumerate(types) if t == "step.started"]
    assert set(woke) <= {"user.message", "tool.result", "llm.retry"}, woke
    finals = [json.loads(p) for _, t, p in rows if t == "assistant.message"]
    assert finals[-1]["text"] == FINAL
    # The dead attempt's partial text never reaches the model.
    assert "Appending the line now.Appending" not in json.dumps(requests[-1].json)


@pytest.mark.parametrize("point", ["after_turn_accepted", "after_tool_result_before_wake"])
def test_a_step_held_in_the_session_row_at_a_crash_is_retried_as_attempt_2(
    cli: Any, mock: MockProvider, workspace: Path, point: str
) -> None:
    """m020: SIGKILL after a step's intent (held in the session row, no ``step_log`` row) and before
    its request; the resume finds it inflight and retries it as attempt 2 of the same step."""
    mock.default = _responder("openai", f"echo appended >> {workspace / 'log.txt'}")
    base = _base_url(mock, "openai")
    args = ("--yes", "--model", "openai:mock", "--base-url", base)
    first = cli("run", *args, "append a line", cwd=workspace, extra_env={"ACAGENT_CRASH_AT": point})
    assert first.returncode == -signal.SIGKILL, (first.returncode, first.stderr)
    db = _journal(cli.home)
    sid, held = db.execute("SELECT id, step_digest FROM session").fetchone()
    assert held is not None
    assert db.execute("SELECT count(*) FROM step_log WHERE status = 'inflight'").fetchone() == (0,)
    (step_id, attempt, status) = db.execute(
        "SELECT step_id, attempt, status FROM step WHERE status = 'inflight'"
    ).fetchone()
    assert (attempt, status) == (1, "inflight")
    second = cli("run", "--resume", sid, *args, cwd=workspace)
    assert second.returncode == 0, second.stderr
    assert len(mock.requests) == 2  # the unsent attempt is not paid
    rows = db.execute(
        "SELECT attempt, status, error FROM step WHERE step_id = ? ORDER BY attempt", (step_id,)
    )
    assert rows.fetchall() == [(1, "failed", "process died"), (2, "done", None)]
    assert db.execute("SELECT step_digest FROM session").fetchone() == (None,)
    assert db.execute("SELECT count(*) FROM step_log WHERE status = 'inflight'").fetchone() == (0,)


def test_crash_mid_tool_kills_orphaned_process_group(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """The shell tool's process group left by a SIGKILLed run is killed on resume (F05)."""
    pidfile = workspace / "sleep.pid"
    command = f"sleep 60 & echo $! > {pidfile}; wait"
    mock.default = _responder("openai", command)
    first = cli(
        "run",
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "go",
        cwd=workspace,
        extra_env={"ACAGENT_CRASH_AT": "mid_tool"},
    )
    assert first.returncode == -signal.SIGKILL
    import os
    import time

    deadline = time.time() + 5
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.time() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    os.kill(pid, 0)  # the orphan is alive before recovery
    sid = _journal(cli.home).execute("SELECT id FROM session").fetchone()[0]
    second = cli(
        "run",
        "--resume",
        sid,
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        cwd=workspace,
    )
    assert second.returncode == 0, second.stderr
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
        except (ProcessLookupError, FileNotFoundError):
            break
        time.sleep(0.05)
    else:
        pytest.fail(f"orphaned sleep {pid} is still alive after recovery")


def test_crash_while_approval_pending_keeps_it_pending(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """Killed in waiting_user: the approval survives; resuming re-sends it and answering continues."""
    log = workspace / "log.txt"
    mock.default = _responder("openai", f"echo appended >> {log}")
    first = cli(
        "run",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "go",
        cwd=workspace,
        extra_env={"ACAGENT_CRASH_AT": "waiting_approval"},
    )
    assert first.returncode == -signal.SIGKILL
    db = _journal(cli.home)
    sid, status = db.execute("SELECT id, status FROM session").fetchone()
    assert status == "waiting_user"
    assert db.execute("SELECT approval FROM tool_call").fetchone()[0] == "pending"
    second = cli(
        "run",
        "--resume",
        sid,
        "--yes",
        "--json",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        cwd=workspace,
    )
    assert second.returncode == 0, second.stderr
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert events[0]["type"] == "approval.requested"  # re-sent although its seq is before the cursor
    assert any(e["type"] == "approval.resolved" and e["payload"]["decision"] == "allow" for e in events)
    assert log.read_text() == "appended\n"
    assert len(mock.requests) == 2
    _check_seqs(db, sid)


def test_resume_of_a_pending_approval_with_no_terminal_exits_3(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """Killed in waiting_user, then `run --resume` with no terminal and no --yes: exit 3 at once.
    The re-sent approval reached the client before the resumed turn was current, so its cancel
    missed that turn and the resume waited for an answer forever (no approval timeout). An earlier
    command on the data dir (`sessions list`) sets up the timing that loses the race."""
    log = workspace / "log.txt"
    mock.script(openai_tool_calls([("call_1", "shell", {"command": f"echo appended >> {log}"})]))
    first = cli(
        "run",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "go",
        cwd=workspace,
        extra_env={"ACAGENT_CRASH_AT": "waiting_approval", "OPENAI_API_KEY": "k"},
    )
    assert first.returncode == -signal.SIGKILL
    db = _journal(cli.home)
    (sid,) = db.execute("SELECT id FROM session").fetchone()
    cli(
        "sessions", "list", "--all", cwd=workspace, check=True
    )  # as a user would look first (the race needs it)
    second = cli(
        "run",
        "--resume",
        sid,
        "--json",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        cwd=workspace,
        timeout=30,
        extra_env={"OPENAI_API_KEY": "k"},
    )  # --json + key: the racy timing
    assert second.returncode == 3, second.stderr
    assert "no terminal to ask" in second.stderr and "Traceback" not in second.stderr
    assert db.execute("SELECT status FROM session").fetchone()[0] == "cancelled"
    assert not log.exists() and len(mock.requests) == 1
    _check_seqs(db, sid)


def test_any_cli_start_reaps_orphaned_tool_processes(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """Opening the data dir kills tool process groups a dead process left (the turn stays resumable)."""
    import os
    import time

    pidfile = workspace / "sleep.pid"
    mock.default = _responder("openai", f"sleep 60 & echo $! > {pidfile}; wait")
    first = cli(
        "run",
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "go",
        cwd=workspace,
        extra_env={"ACAGENT_CRASH_AT": "mid_tool"},
    )
    assert first.returncode == -signal.SIGKILL
    deadline = time.time() + 5
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.time() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    mock.default = openai_text("hello")
    r = cli("run", "--model", "openai:mock", "--base-url", mock.openai_base_url, "unrelated", cwd=workspace)
    assert r.returncode == 0, r.stderr
    deadline = time.time() + 5
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{pid}/stat") as f:
            if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.05)
    else:
        pytest.fail("the orphaned sleep survived")
    status = (
        _journal(cli.home).execute("SELECT status FROM session ORDER BY created_at LIMIT 1").fetchone()[0]
    )
    assert status == "waiting_tool"  # still resumable with `run --resume`


def test_resume_after_an_empty_reply_committed_before_turn_completed_ends_f50(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """An empty model reply, then SIGKILL between the step commit and ``turn.completed``: resume
    finds the step done with nothing added to the context and completes the turn (before: the
    "step already done" branch reported progress and the resume looped forever)."""
    mock.default = lambda body: openai_text("")
    base = mock.openai_base_url
    first = cli(
        "run",
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        base,
        "say nothing",
        cwd=workspace,
        extra_env={"ACAGENT_CRASH_AT": "after_step_commit"},
    )
    assert first.returncode == -signal.SIGKILL, (first.returncode, first.stderr)
    db = _journal(cli.home)
    sid = db.execute("SELECT id FROM session").fetchone()[0]
    second = cli(
        "run",
        "--resume",
        sid,
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        base,
        cwd=workspace,
        timeout=45,
    )
    assert second.returncode == 0, second.stderr
    status = db.execute("SELECT status FROM session WHERE id = ?", (sid,)).fetchone()[0]
    assert status == "done"
    assert len(mock.requests) == 1  # the committed step is not asked again
    types = [t for _, t, _ in _check_seqs(db, sid)]
    assert types.count("turn.completed") == 1


def test_three_crashes_within_one_step_do_not_spend_the_provider_retries_f56(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """SIGKILL mid-stream three times in one step (step_max_attempts is 3): the next resume still
    gets its answer; crash-killed attempts are counted apart from provider failures."""
    mock.default = lambda body: Script(chunks=_openai_first("true")[:3], sleeps=0.05)
    base = ("--yes", "--model", "openai:mock", "--base-url", mock.openai_base_url)
    crash = {"ACAGENT_CRASH_AT": "mid_stream"}
    first = cli("run", *base, "go", cwd=workspace, extra_env=crash)
    assert first.returncode == -signal.SIGKILL, first.stderr
    db = _journal(cli.home)
    sid = db.execute("SELECT id FROM session").fetchone()[0]
    for _ in range(2):
        again = cli("run", "--resume", sid, *base, cwd=workspace, extra_env=crash)
        assert again.returncode == -signal.SIGKILL, again.stderr
    mock.default = lambda body: openai_text(FINAL)
    last = cli("run", "--resume", sid, *base, cwd=workspace)
    assert last.returncode == 0, last.stderr
    assert last.stdout.strip() == FINAL
    assert db.execute("SELECT status FROM session").fetchone()[0] == "done"
