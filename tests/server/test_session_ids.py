"""F119: a session id typed by the user is an id or a prefix of one, never an empty string or a path.

An empty prefix is the start of every id, so ``acagent sessions rm "$ID"`` with ``ID`` unset
removed the only session; through a daemon the id went into the request path unquoted, so
``attach "ID/events"`` or ``attach ../debug/stats`` read another route and died in a traceback.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ACAGENT, wait_for

HOSTILE = ["", " ", "{sid}/events", "../debug/stats", "{sid}?x=1", "{sid}/../{sid}", "{sid}#"]


def _cli(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ACAGENT, *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _one_line_not_found(p: subprocess.CompletedProcess[str]) -> None:
    assert p.returncode != 0, p.stdout
    assert "Traceback" not in p.stderr, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert "matches no session" in lines[0] or "--resume needs a session id" in lines[0], lines[0]


@pytest.mark.parametrize("through", ["in_process", "daemon"])
def test_an_empty_or_path_like_session_id_names_no_session_f119(
    start_daemon: Any, tmp_path: Path, workspace: Path, through: str
) -> None:
    d = start_daemon()
    sid = d.create(workspace)["id"]
    assert d.send(sid, "say kept").status_code == 202
    d.wait_status(sid, ("done",))
    env = d.env
    if through == "in_process":
        d.terminate()
    for form in HOSTILE:
        value = form.format(sid=sid)
        commands = [["sessions", "show", value], ["run", "--resume", value], ["export", value]]
        if through == "daemon":
            commands.append(["attach", value, "--json"])
        else:
            commands += [["sessions", "rm", value], ["sessions", "rename", value, "t"]]
        for args in commands:
            _one_line_not_found(_cli(env, workspace, *args))
    # nothing was removed or renamed, and the real prefix still works
    shown = _cli(env, workspace, "sessions", "show", sid[:10])
    assert shown.returncode == 0 and "kept" in shown.stdout, shown.stderr
    listed = _cli(env, workspace, "sessions", "list", "--all", "--json")
    assert sid in listed.stdout and '"t"' not in listed.stdout


def test_streams_of_a_removed_session_end_and_say_so_f122(start_daemon: Any, workspace: Path) -> None:
    """``sessions rm`` writes the journal directly, even while a daemon serves the session: its
    attachers (``acagent attach``, an SSE reader) waited on keep-alives forever (F122)."""
    d = start_daemon()
    sid = d.create(workspace)["id"]
    assert d.send(sid, "say before").status_code == 202
    d.wait_status(sid, ("done",))
    attach = subprocess.Popen(
        [ACAGENT, "attach", sid, "--json"],
        env=d.env,
        cwd=workspace,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with d.http.stream("GET", f"/v1/sessions/{sid}/stream", params={"since": 11}, timeout=60) as sse:
            lines = sse.iter_lines()
            assert next(lines) == ": stream open"
            wait_for(lambda: d.stats()["sessions"].get(sid, {}).get("attachers") == 2, what="two attachers")
            removed = _cli(d.env, workspace, "sessions", "rm", sid)
            assert removed.returncode == 0, removed.stderr
            d.http.post("/v1/debug/hibernate")  # the periodic pass, now
            tail: list[str] = []
            deadline = time.monotonic() + 40  # keep-alives come every 15 s: the check runs
            for line in lines:
                if line and not line.startswith(":"):
                    tail.append(line)
                if line.startswith("data:") or time.monotonic() > deadline:
                    break
        assert tail[-2:] == ["event: closed", 'data: {"last_seq":11,"message":"session removed"}'], tail
        _out, err = attach.communicate(timeout=30)
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.wait()
    assert attach.returncode == 1 and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1 and sid in err, err
    assert sid not in d.stats()["sessions"]
