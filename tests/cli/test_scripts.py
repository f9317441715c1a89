"""``acagent`` in scripts (issue 17 item 5): prompts from stdin, exit code 3 when no one can approve,
``--output-format``, and the ``sessions`` housekeeping commands — real subprocesses, strict mock."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.mockprovider import MockProvider, TextReply, openai_tool_calls


def _run(cli: Any, *args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "acagent", *args], cwd=cwd, env={**cli.env, "OPENAI_API_KEY": "k"},
        input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def test_prompt_from_stdin(cli: Any, mock: MockProvider, workspace: Path) -> None:
    base = ["run", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(TextReply("one"), TextReply("two"))
    r = _run(cli, *base, "-", cwd=workspace, stdin="first prompt\nwith two lines\n")
    assert (r.returncode, r.stdout) == (0, "one\n"), r.stderr
    assert mock.requests[-1].json["messages"][-1]["content"] == "first prompt\nwith two lines\n"
    r = _run(cli, *base, cwd=workspace, stdin="piped without a dash")  # a pipe on stdin is the prompt
    assert (r.returncode, r.stdout) == (0, "two\n"), r.stderr
    assert mock.requests[-1].json["messages"][-1]["content"] == "piped without a dash"
    r = _run(cli, *base, "-", cwd=workspace, stdin="  \n")
    assert r.returncode == 2 and "stdin held no prompt" in r.stderr


def test_no_terminal_line_escapes_a_hostile_command_once(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """Before: the command was the repr of its escaped form, so ESC showed as ``\\x1b`` (two
    backslashes) and nothing said that characters were hidden."""
    command = "echo hi\x1b[2J\nrm -rf ~ #\u202eevil"
    mock.script(openai_tool_calls([("call_1", "shell", {"command": command})]))
    args = ["run", "--model", "openai:mock", "--base-url", mock.openai_base_url, "go"]
    r = _run(cli, *args, cwd=workspace, stdin="")
    assert r.returncode == 3, (r.returncode, r.stderr)
    assert r.stderr.splitlines() == [
        "acagent: no terminal to ask: pass --yes or add an allow rule (shell needed approval: "
        "'echo hi\\x1b[2J\\nrm -rf ~ #\\u202eevil'; ⚠ hidden characters shown escaped: 1 control, "
        "1 bidi control)"
    ]


def test_no_terminal_and_no_yes_exits_3_and_runs_nothing(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    mock.script(openai_tool_calls([("call_1", "shell", {"command": "touch made.txt"})]))
    args = ["run", "--model", "openai:mock", "--base-url", mock.openai_base_url, "--json", "make it"]
    r = _run(cli, *args, cwd=workspace, stdin="")  # a pipe (already closed) is no terminal
    assert r.returncode == 3, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "no terminal to ask: pass --yes or add an allow rule" in lines[0], r.stderr
    assert "touch made.txt" in lines[0]
    assert not (workspace / "made.txt").exists()
    events = [json.loads(line) for line in r.stdout.splitlines()]
    end = events[-1]
    assert end["type"] == "turn.interrupted" and end["payload"]["reason"] == "no_terminal"
    assert len(mock.requests) == 1  # the model was not asked to carry on without the tool
    # the session accepts the next message (with --yes the tool runs)
    mock.script(openai_tool_calls([("call_2", "shell", {"command": "touch made.txt"})]), TextReply("made"))
    r = _run(cli, "run", "--continue", "--yes", "--base-url", mock.openai_base_url, "again", cwd=workspace)
    assert (r.returncode, r.stdout) == (0, "made\n"), r.stderr
    assert (workspace / "made.txt").exists()


def test_output_formats(cli: Any, mock: MockProvider, workspace: Path) -> None:
    base = ["run", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(TextReply("as json"), TextReply("as events"))
    r = _run(cli, *base, "--output-format", "json", "hi", cwd=workspace)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)  # exactly one JSON document
    assert result["outcome"] == "completed" and result["text"] == "as json" and result["exit_code"] == 0
    assert result["session_id"].startswith("ses_") and result["end"]["type"] == "turn.completed"
    r = _run(cli, *base, "--output-format", "stream-json", "hi", cwd=workspace)
    types = [json.loads(line)["type"] for line in r.stdout.splitlines()]
    assert types[0] == "session.created" and types[-1] == "turn.completed"
    r = _run(cli, *base, "--output-format", "yaml", "hi", cwd=workspace)
    assert r.returncode == 2 and "text, json or stream-json" in r.stderr
    r = _run(cli, *base, "--json", "--output-format", "json", "hi", cwd=workspace)
    assert r.returncode == 2


def test_sessions_list_rename_rm(cli: Any, mock: MockProvider, workspace: Path) -> None:
    base = ["run", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(TextReply("a"), TextReply("b"), TextReply("c"))
    for prompt in ("first " * 20, "second " * 20, "third " * 20):
        assert _run(cli, *base, prompt, cwd=workspace).returncode == 0
    rows = json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)
    ids = [row["id"] for row in rows]
    narrow = subprocess.run(
        [sys.executable, "-m", "acagent", "sessions", "list", "--all"], cwd=workspace,
        env={**cli.env, "COLUMNS": "60"}, capture_output=True, text=True, timeout=60,
    ).stdout  # fmt: skip
    for sid in ids:
        assert sid in narrow, narrow  # the title gives way, never the id
    limited = json.loads(_run(cli, "sessions", "list", "--json", "--limit", "2", cwd=workspace).stdout)
    assert [row["id"] for row in limited] == ids[:2]
    r = _run(cli, "sessions", "rename", ids[1][:-3], "a better   name", cwd=workspace)
    assert r.returncode == 0 and ids[1] in r.stdout, r.stderr
    rows = json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)
    assert {row["id"]: row["title"] for row in rows}[ids[1]] == "a better name"
    transcripts = list((cli.home / "sessions").rglob(f"{ids[0]}.jsonl"))
    assert transcripts
    r = _run(cli, "sessions", "rm", ids[0], cwd=workspace)
    assert r.returncode == 0 and f"removed {ids[0]}" in r.stdout, r.stderr
    assert not transcripts[0].exists()
    rows = json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)
    assert [row["id"] for row in rows] == ids[1:]
    r = _run(cli, "sessions", "rm", ids[0], cwd=workspace)
    assert r.returncode == 1 and "matches no session" in r.stderr
    assert "Traceback" not in r.stderr


def test_refused_connection_fails_at_once_and_writes_nothing(cli: Any, workspace: Path) -> None:
    """No retries with backoff against a port nothing listens on: one line with the URL and what
    to check, before any session is written. Retry delays are made long (at least 30 s each, with
    the jitter), not short, so that a retry cannot hide in a slow start-up: "under 8 s" of wall
    time with the default delays failed on a loaded machine as easily as a retry would."""
    import socket
    import time

    with socket.socket() as s:  # a port that was free a moment ago
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    cli.home.mkdir(parents=True, exist_ok=True)
    (cli.home / "config.toml").write_text("[timing]\nretry_base_delay_s = 60\nretry_max_delay_s = 60\n")
    started = time.monotonic()
    r = _run(cli, "run", "--model", "openai:m", "--base-url", url, "hi", cwd=workspace)
    elapsed = time.monotonic() - started
    assert r.returncode == 1
    assert url in r.stderr and "connection refused" in r.stderr and "is the server running" in r.stderr
    assert r.stderr.strip().count("\n") == 0
    assert elapsed < 25, elapsed  # start-up included; one retry alone would take 30 s or more
    assert json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout) == []


def test_sessions_archive_hides_and_resume_still_works(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """`sessions archive` hides a session from `sessions list` (`--archived` lists it) without
    touching its status or lease: it resumes like any other; `unarchive` brings it back;
    `sessions show` says it is archived and shows the context fill of the last request."""
    (cli.home / "config.toml").write_text('[models."openai:mock"]\ncontext_window = 40000\n')
    base = ["run", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(TextReply("one"), TextReply("two"), TextReply("three"))
    for prompt in ("first", "second"):
        assert _run(cli, *base, prompt, cwd=workspace).returncode == 0
    ids = [row["id"] for row in json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)]
    r = _run(cli, "sessions", "archive", ids[0][:-4], cwd=workspace)
    assert r.returncode == 0 and r.stdout == f"archived {ids[0]}\n", r.stderr
    shown = json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)
    assert [row["id"] for row in shown] == ids[1:]
    limited = json.loads(_run(cli, "sessions", "list", "--json", "--limit", "1", cwd=workspace).stdout)
    assert [row["id"] for row in limited] == ids[1:2]  # the limit counts what is shown
    archived = json.loads(_run(cli, "sessions", "list", "--json", "--archived", cwd=workspace).stdout)
    assert [row["id"] for row in archived] == ids[:1] and archived[0]["archived"] is True
    assert archived[0]["archived_at"] and archived[0]["status"] == "done"
    show = _run(cli, "sessions", "show", ids[0], cwd=workspace)
    assert show.returncode == 0 and "archived" in show.stdout.splitlines()[0], show.stdout
    assert "context" in show.stdout and "/ 40,000 tokens (" in show.stdout, show.stdout
    # resume an archived session: the turn runs, the session stays archived (hidden)
    r = _run(cli, *base, "--resume", ids[0], "again", cwd=workspace)
    assert r.returncode == 0 and r.stdout == "three\n", r.stderr
    assert mock.requests[-1].json["messages"][-1]["content"] == "again"
    listed = json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)
    assert [row["id"] for row in listed] == [ids[1]]
    r = _run(cli, "sessions", "unarchive", ids[0], cwd=workspace)
    assert r.returncode == 0 and r.stdout == f"unarchived {ids[0]}\n"
    rows = json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)
    assert {row["id"] for row in rows} == set(ids) and not any(row["archived"] for row in rows)
    r = _run(cli, "sessions", "archive", "ses_nope", cwd=workspace)
    assert r.returncode == 1 and "matches no session" in r.stderr and "Traceback" not in r.stderr


def test_hostile_titles_are_shown_as_text_in_every_table(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """A title is never rich markup nor raw terminal control: a prompt starting ``[/oops]`` made
    `sessions list` and `usage` die with a MarkupError traceback; ``[link=…]`` became a link and an
    ESC in a renamed title reached the terminal (list, show, usage)."""
    base = ["run", "--model", "openai:mock", "--base-url", mock.openai_base_url]
    mock.script(TextReply("ok"))
    assert _run(cli, *base, "[/oops] is a closing tag", cwd=workspace).returncode == 0
    sid = json.loads(_run(cli, "sessions", "list", "--json", cwd=workspace).stdout)[0]["id"]
    for args in (["sessions", "list"], ["sessions", "list", "--all"], ["usage"], ["sessions", "show", sid]):
        r = _run(cli, *args, cwd=workspace)
        assert r.returncode == 0 and "Traceback" not in r.stderr, (args, r.stderr)
        assert "[/oops]" in r.stdout, (args, r.stdout)
    hostile = "\x1b[31mred\u202etxt.exe [link=http://evil.example]click[/link]"
    assert _run(cli, "sessions", "rename", sid, hostile, cwd=workspace).returncode == 0
    env = {"FORCE_COLOR": "1", "TERM": "xterm-256color", "COLUMNS": "250"}
    for args in (["sessions", "list"], ["usage"], ["sessions", "show", sid]):
        r = subprocess.run([sys.executable, "-m", "acagent", *args], cwd=workspace, capture_output=True, text=True,
                           env={**cli.env, **env}, stdin=subprocess.DEVNULL, timeout=60)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert "\x1b[31m" not in r.stdout and "\u202e" not in r.stdout and "\x1b]8;" not in r.stdout, (
            args,
            r.stdout,
        )
        assert "\\x1b[31mred\\u202etxt.exe" in r.stdout and "[link=http://evil.example]" in r.stdout, (
            args,
            r.stdout,
        )
