"""F119: a session id typed by the user is an id or a prefix of one, never an empty string or a path.

An empty prefix is the start of every id, so ``acagent sessions rm "$ID"`` with ``ID`` unset
removed the only session; through a daemon the id went into the request path unquoted, so
``attach "ID/events"`` or ``attach ../debug/stats`` read another route and died in a traceback.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import ACAGENT

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
