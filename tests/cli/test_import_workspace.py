"""F139: an imported session works in a directory that exists here, chosen visibly.

Before: ``acagent import FILE`` kept the transcript's recorded ``cwd`` whatever it was: a path of
another machine (``/home/alice/proj``, missing here: every ``shell`` call of the resumed session
failed to start) or ``/`` (a process in a container without a working directory: the tools'
workspace was the whole filesystem), and nothing said so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.mockprovider import MockProvider, TextReply, openai_tool_calls


def _transcript(path: Path, cwd: str) -> Path:
    records = [
        {
            "seq": 1,
            "ts": "2026-01-01T00:00:00Z",
            "session_id": "ses_far",
            "type": "session.created",
            "payload": {"cwd": cwd, "model": "openai:mock"},
        },
        {
            "seq": 2,
            "ts": "2026-01-01T00:00:01Z",
            "session_id": "ses_far",
            "type": "user.message",
            "payload": {"text": "hello"},
        },
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def _pwd_of_resumed_session(cli: Any, mock: MockProvider, sid: str, cwd: Path) -> str:
    """``run --resume SID --yes`` whose model calls ``shell pwd``: the directory the tool ran in."""
    mock.script(openai_tool_calls([("call_1", "shell", {"command": "pwd"})]), TextReply("done"))
    model = ("--model", "openai:mock", "--base-url", mock.openai_base_url)
    r = cli("run", "--resume", sid, "--yes", *model, "where are you?", cwd=cwd)
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in cli("export", sid, check=True).stdout.splitlines()]
    (result,) = [e for e in events if e["type"] == "tool.result"]
    return str(result["payload"]["content"]).strip()


@pytest.mark.parametrize("recorded", ["/home/nobody-here/proj", "/"], ids=["other_machine", "root"])
def test_a_recorded_directory_that_cannot_be_kept_becomes_this_one_f139(
    cli: Any, mock: MockProvider, tmp_path: Path, recorded: str
) -> None:
    here = tmp_path / "here"
    here.mkdir()
    r = cli("import", str(_transcript(tmp_path / "t.jsonl", recorded)), cwd=here)
    assert r.returncode == 0, r.stderr
    (line,) = r.stderr.splitlines()
    assert f"working directory {recorded!r}" in line and repr(str(here.resolve())) in line and "--cwd" in line
    (row,) = json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout)
    assert row["cwd"] == str(here.resolve())
    first = json.loads(cli("export", row["id"], check=True).stdout.splitlines()[0])
    assert first["payload"]["cwd"] == str(here.resolve()) and first["payload"]["recorded_cwd"] == recorded
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert _pwd_of_resumed_session(cli, mock, row["id"], elsewhere) == str(here.resolve())


def test_an_existing_recorded_directory_is_kept_and_cwd_chooses_f139(
    cli: Any, mock: MockProvider, tmp_path: Path
) -> None:
    kept = tmp_path / "kept"
    kept.mkdir()
    chosen = tmp_path / "chosen"
    chosen.mkdir()
    source = _transcript(tmp_path / "t.jsonl", str(kept))
    r = cli("import", str(source), cwd=tmp_path)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = cli("import", str(source), "--cwd", "chosen", cwd=tmp_path)  # relative to where it is typed
    assert r.returncode == 0 and r.stderr == "", r.stderr
    by_id = {
        row["id"]: row["cwd"]
        for row in json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout)
    }
    assert sorted(by_id.values()) == sorted([str(kept.resolve()), str(chosen.resolve())])
    sid = next(i for i, c in by_id.items() if c == str(chosen.resolve()))
    assert _pwd_of_resumed_session(cli, mock, sid, tmp_path) == str(chosen.resolve())
    for bad in ("missing", str(source)):
        r = cli("import", str(source), "--cwd", bad, cwd=tmp_path)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and "--cwd" in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert len(json.loads(cli("sessions", "list", "--all", "--json", check=True).stdout)) == 2
