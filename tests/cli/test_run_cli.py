"""`acagent run` / `sessions` / `export` / `import` end to end, as real subprocesses against the
strict mock provider (issue 2: "How it is checked")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.mockprovider import MockProvider, Script, TextReply, anthropic_tool_calls, openai_tool_calls


def _base(mock: MockProvider, provider: str) -> str:
    return mock.openai_base_url if provider == "openai" else mock.anthropic_base_url


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_run_tool_then_continue_sends_whole_history(
    cli: Any, mock: MockProvider, workspace: Path, provider: str
) -> None:
    """run --yes makes the model call shell (the file exists), --continue sends everything back."""
    command = "echo hi > made.txt && echo made"
    if provider == "openai":
        first = openai_tool_calls([("call_1", "shell", {"command": command})])
    else:
        first = anthropic_tool_calls("On it.", [("toolu_1", "shell", {"command": command})])
    mock.script(first, TextReply("Created made.txt."), TextReply("Yes, it exists."))
    base = _base(mock, provider)
    r = cli("run", "--yes", "--model", f"{provider}:mock", "--base-url", base, "make a file", cwd=workspace)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Created made.txt.\n"
    assert (workspace / "made.txt").read_text() == "hi\n"
    r = cli(
        "run",
        "--continue",
        "--model",
        f"{provider}:mock",
        "--base-url",
        base,
        "does it exist?",
        cwd=workspace,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Yes, it exists.\n"
    assert [q.status for q in mock.requests] == [200, 200, 200]
    assert all(q.headers.get("idempotency-key", "").startswith("ses_") for q in mock.requests)
    body = json.dumps(mock.requests[-1].json)
    for needle in (
        "make a file",
        command.replace('"', '\\"'),
        "made\\n",
        "Created made.txt.",
        "does it exist?",
    ):
        assert needle in body
    listed = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)
    assert len(listed) == 1 and listed[0]["status"] == "done" and listed[0]["cwd"] == str(workspace.resolve())
    assert {"id", "status", "cwd", "title", "updated_at", "last_seq"} <= set(listed[0])
    transcript = next((cli.home / "sessions").rglob(f"{listed[0]['id']}.jsonl"))
    records = [json.loads(line) for line in transcript.read_text().splitlines()]
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(set(seqs)) and seqs[0] == 1
    types = [r["type"] for r in records]
    for t in ("user.message", "tool.call", "tool.result", "assistant.message", "turn.completed"):
        assert t in types
    assert set(records[0]) == {"seq", "ts", "session_id", "type", "payload"}


def test_run_json_prints_every_envelope(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """--json prints the turn's events one per line, strictly increasing seq."""
    mock.script(TextReply("hello"))
    r = cli(
        "run", "--json", "--model", "openai:mock", "--base-url", mock.openai_base_url, "hi", cwd=workspace
    )
    assert r.returncode == 0, r.stderr
    events = [json.loads(line) for line in r.stdout.splitlines()]
    assert [e["type"] for e in events][-1] == "turn.completed"
    assert [e["seq"] for e in events] == list(range(events[0]["seq"], events[-1]["seq"] + 1))


def test_unknown_session_id_is_one_line_error(cli: Any, workspace: Path) -> None:
    r = cli("run", "--resume", "ses_doesnotexist", cwd=workspace)
    assert r.returncode != 0
    assert r.stderr.count("\n") == 1 and "ses_doesnotexist" in r.stderr and "Traceback" not in r.stderr
    r = cli("sessions", "show", "ses_doesnotexist", cwd=workspace)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    r = cli(
        "export", "ses_doesnotexist", cwd=workspace
    )  # it added "export ... failed after 0 events: Exit: 1"
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "matches no session" in r.stderr, r.stderr


def test_unreachable_base_url_fails_cleanly(cli: Any, workspace: Path) -> None:
    r = cli(
        "run",
        "--model",
        "openai:m",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "hi",
        cwd=workspace,
        extra_env={"ACAGENT_TIMING_RETRY_BASE_DELAY_S": "0.01"},
    )
    assert r.returncode == 1
    assert "cannot reach" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0


def test_invalid_api_key_fails_cleanly(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """A 401 from the endpoint is not retried and names the key to fix."""
    mock.default = Script(status=401, body={"error": {"message": "bad key", "type": "invalid_request_error"}})
    r = cli(
        "run",
        "--model",
        "openai:m",
        "--base-url",
        mock.openai_base_url,
        "hi",
        cwd=workspace,
        extra_env={"OPENAI_API_KEY": "bad-key"},
    )
    assert r.returncode == 1
    assert "OPENAI_API_KEY" in r.stderr and "Traceback" not in r.stderr
    assert len(mock.requests) == 1


def test_missing_key_or_unknown_provider_writes_nothing(cli: Any, workspace: Path) -> None:
    for model, needle in (("anthropic:claude", "ANTHROPIC_API_KEY"), ("nope:x", "unknown provider")):
        r = cli("run", "--model", model, "hi", cwd=workspace)
        assert r.returncode == 2 or r.returncode == 1
        assert needle in r.stderr and "Traceback" not in r.stderr
    assert json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout) == []


def test_import_corrupt_line_names_line_and_keeps_the_rest(cli: Any, tmp_path: Path) -> None:
    """A corrupt mid-file line is skipped with a warning naming it; the session is imported with
    every other record (F03: a damaged line never refuses the whole session)."""
    bad = tmp_path / "bad.jsonl"
    good = {"seq": 1, "ts": "t", "session_id": "ses_x", "type": "session.created", "payload": {"cwd": "/tmp"}}
    bad.write_text(
        json.dumps(good)
        + "\n{not json\n"
        + json.dumps({**good, "seq": 3, "type": "user.message", "payload": {"text": "x"}})
        + "\n"
    )
    r = cli("import", str(bad))
    assert r.returncode == 0 and "line 2" in r.stderr and "Traceback" not in r.stderr
    (row,) = json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout)
    assert row["id"] == "ses_x" and row["last_message"] == "x" and "line 2" in row["warnings"][0]["message"]


def test_export_import_round_trip(cli: Any, mock: MockProvider, workspace: Path, tmp_path: Path) -> None:
    """export → import gives a session with the same events whose context resumes."""
    mock.script(TextReply("one"), TextReply("two"))
    cli(
        "run",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "first",
        cwd=workspace,
        check=True,
    )
    sid = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)[0]["id"]
    exported = cli("export", sid, check=True).stdout
    path = tmp_path / "s.jsonl"
    path.write_text(exported)
    r = cli("import", str(path), check=True)
    new_id = r.stdout.split()[2]
    assert new_id != sid
    r = cli(
        "run",
        "--resume",
        new_id,
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "second",
        cwd=workspace,
        check=True,
    )
    assert r.stdout == "two\n"
    body = json.dumps(mock.requests[-1].json)
    assert "first" in body and "one" in body and "second" in body


def test_help_is_fast_enough_to_start(cli: Any) -> None:
    r = cli("--help", check=True)
    assert "chat" in r.stdout and "run" in r.stdout


@pytest.mark.parametrize("name", ["chat.jsonl", "tool-calls.jsonl"])
def test_shipped_example_transcripts_import_and_resume(
    cli: Any, mock: MockProvider, name: str, workspace: Path
) -> None:
    """sessions.example/ transcripts are in the transcript format: they import and resume."""
    from tests.conftest import REPO

    # their recorded cwd (/tmp/ex/project) is not on this machine: --cwd names the workspace (F139)
    r = cli("import", str(REPO / "sessions.example" / name), "--cwd", str(workspace), check=True)
    assert r.stderr == ""
    sid = r.stdout.split()[2]
    shown = cli("export", sid, check=True).stdout.splitlines()
    original = (REPO / "sessions.example" / name).read_text().splitlines()
    assert [json.loads(x)["type"] for x in shown] == [json.loads(x)["type"] for x in original]
    mock.script(TextReply("resumed"))
    r = cli(
        "run",
        "--resume",
        sid,
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "and now?",
        cwd=workspace,
    )
    assert r.returncode == 0, r.stderr
    assert mock.requests[-1].status == 200, mock.requests[-1].error


def test_explicit_model_flag_applies_on_resume(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """`run --continue --model X` talks to X; without --model the session's recorded model is used."""
    mock.default = TextReply("ok")
    cli("run", "--model", "openai:first", "--base-url", mock.openai_base_url, "a", cwd=workspace, check=True)
    cli(
        "run",
        "--continue",
        "--model",
        "openai:second",
        "--base-url",
        mock.openai_base_url,
        "b",
        cwd=workspace,
        check=True,
    )
    cli(
        "run",
        "--continue",
        "--base-url",
        mock.openai_base_url,
        "c",
        cwd=workspace,
        extra_env={"OPENAI_API_KEY": "k"},
        check=True,
    )
    assert [r.json["model"] for r in mock.requests] == ["first", "second", "first"]


def test_deleted_working_directory_is_one_line_error(cli: Any, tmp_path: Path) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    import subprocess
    import sys

    for args in (["run", "hi"], ["sessions", "list"]):
        proc = subprocess.run(
            [
                "bash",
                "-c",
                f'cd "{gone}" && rmdir "{gone}" && exec "$0" -m acagent "$@"',
                sys.executable,
                *args,
            ],
            env=cli.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        gone.mkdir()
        assert proc.returncode != 0
        assert "current directory no longer exists" in proc.stderr and "Traceback" not in proc.stderr


def test_empty_prompt_is_refused_before_any_request(cli: Any, mock: MockProvider, workspace: Path) -> None:
    for prompt in ("", "   "):
        r = cli("run", "--model", "openai:mock", "--base-url", mock.openai_base_url, prompt, cwd=workspace)
        assert r.returncode == 2 and "empty" in r.stderr
    assert mock.requests == []
    assert json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout) == []


def test_a_proxy_error_page_is_one_line_error(cli: Any, mock: MockProvider, workspace: Path) -> None:
    """A 502 HTML page from a proxy (many lines) ends `acagent run` with one line naming it."""
    page = b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body>\r\n</html>\r\n"
    mock.default = Script(status=502, body=page)
    r = cli(
        "run",
        "--model",
        "openai:m",
        "--base-url",
        mock.openai_base_url,
        "hi",
        cwd=workspace,
        extra_env={"ACAGENT_TIMING_RETRY_BASE_DELAY_S": "0.01"},
    )
    assert r.returncode == 1 and "502 Bad Gateway" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1, r.stderr


@pytest.mark.parametrize("bad_id", ["../../../outside", "ses_/../../x", "ses_\x1b[31mred", "a" * 5000])
def test_import_of_a_hostile_session_id_stays_in_the_sessions_dir(
    cli: Any, tmp_path: Path, bad_id: str
) -> None:
    """A transcript's session id names the transcript file: '../../../outside' wrote a file outside
    ACAGENT_HOME and 5,000 characters was a traceback (name too long). Such an id gets a new one."""
    work = tmp_path / "w"
    work.mkdir()
    records = [
        {"seq": 1, "ts": "2026-01-01T00:00:00Z", "session_id": bad_id, "type": "session.created",
         "payload": {"cwd": str(work)}},
        {"seq": 2, "ts": "2026-01-01T00:00:01Z", "session_id": bad_id, "type": "user.message",
         "payload": {"text": "hi"}},
    ]  # fmt: skip
    source = tmp_path / "in" / "t.jsonl"
    source.parent.mkdir()
    source.write_text("".join(json.dumps(r) + "\n" for r in records))
    r = cli("import", str(source))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    (row,) = json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout)
    assert row["id"].startswith("ses_") and row["id"] != bad_id and row["id"] in r.stdout
    written = [p for p in tmp_path.rglob("*.jsonl") if p != source]
    assert written == [next((cli.home / "sessions").rglob(f"{row['id']}.jsonl"))], written


def test_export_skips_an_unreadable_event_and_exports_the_rest(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """Before: a corrupt stored payload at seq N ended the export there (events after N were
    lost to it). Now that event is named on stderr, the rest is exported, and the exit is 1."""
    import sqlite3

    mock.script(TextReply("one"), TextReply("two"))
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    cli("run", *base, "first", cwd=workspace, check=True)
    sid = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)[0]["id"]
    cli("run", "--resume", sid, *base, "second", cwd=workspace, check=True)
    whole = [json.loads(line) for line in cli("export", sid, check=True).stdout.splitlines()]
    bad = next(e["seq"] for e in whole if e["type"] == "user.message" and e["payload"]["text"] == "first")
    db = sqlite3.connect(cli.home / "acagent.db")
    with db:
        (num,) = db.execute("SELECT num FROM session WHERE id = ?", (sid,)).fetchone()
        # the row holding it: the accept commit's frame (m016), whose every event is then unreadable
        key, codes = db.execute(
            "SELECT key, type FROM event_log WHERE key <= ? ORDER BY key DESC LIMIT 1", ((num << 32) | bad,)
        ).fetchone()
        db.execute("UPDATE event_log SET payload = ? WHERE key = ?", (b"\x02\xff\xfe\xfd", key))
    db.close()
    lost = list(range(key & 0xFFFFFFFF, (key & 0xFFFFFFFF) + len(codes)))
    assert bad in lost and len(lost) > 1
    r = cli("export", sid)
    assert r.returncode == 1
    got = [json.loads(line) for line in r.stdout.splitlines()]
    assert got == [e for e in whole if e["seq"] not in lost]
    warnings = [line for line in r.stderr.splitlines() if line.startswith("acagent: warning:")]
    assert len(warnings) == 1, r.stderr  # one line for the frame (was one per event of it)
    assert f"events {lost[0]}-{lost[-1]} (one frame)" in warnings[0] and "skipped" in warnings[0]
    assert "Traceback" not in r.stderr
    seqs = f"{lost[0]}-{lost[-1]}"
    assert f"{len(lost)} unreadable event(s) skipped (seq {seqs})" in r.stderr.splitlines()[-1]


@pytest.mark.parametrize("flip", [1, 2])
def test_export_names_a_frame_whose_key_moved_once_and_never_relabels_seqs(
    cli: Any, mock: MockProvider, workspace: Path, flip: int
) -> None:
    """Before: the key of a frame XOR 1 or 2 exported its events under other seqs (a gap, seqs
    relabelled or twice, one past the session's last seq), exit 0, no word of it. Now the row is
    named once (session and seqs), the events of the rows around it are exported, and the exit is 1."""
    import sqlite3

    mock.script(TextReply("one"), TextReply("two"))
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    cli("run", *base, "first", cwd=workspace, check=True)
    sid = json.loads(cli("sessions", "list", "--json", cwd=workspace, check=True).stdout)[0]["id"]
    cli("run", "--resume", sid, *base, "second", cwd=workspace, check=True)
    whole = [json.loads(line) for line in cli("export", sid, check=True).stdout.splitlines()]
    db = sqlite3.connect(cli.home / "acagent.db")
    with db:
        (num,) = db.execute("SELECT num FROM session WHERE id = ?", (sid,)).fetchone()
        keys = {k for (k,) in db.execute("SELECT key FROM event_log WHERE key >> 32 = ?", (num,))}
        key = next(  # a frame in the middle whose moved key collides with no row
            k
            for k, t in db.execute("SELECT key, type FROM event_log WHERE key >> 32 = ? ORDER BY key", (num,))
            if len(t) > 1 and t.isupper() and k & 0xFFFFFFFF > 4 and k ^ flip not in keys
        )
        db.execute("UPDATE event_log SET key = ? WHERE key = ?", (key ^ flip, key))
    db.close()
    r = cli("export", sid)
    assert r.returncode == 1, r.stderr
    got = [json.loads(line) for line in r.stdout.splitlines()]
    seqs = [e["seq"] for e in got]
    assert seqs == sorted(set(seqs)) and set(seqs) < {e["seq"] for e in whole}  # no seq twice, none new
    assert all(e in whole for e in got)  # no event under another seq
    warnings = [line for line in r.stderr.splitlines() if line.startswith("acagent: warning:")]
    assert len(warnings) == 1 and f"session {sid!r} event" in warnings[0], r.stderr
    assert "Traceback" not in r.stderr and "unreadable event(s) skipped" in r.stderr.splitlines()[-1]
