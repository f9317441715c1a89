"""CLI ≡ serve: `acagent run` through a daemon emits the same events as in process; `attach` basics."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from acagent.client._discovery import daemon_info
from acagent.client._remote import error_from_envelope
from acagent.errors import ApprovalNotFound, ConcurrencyCap, SessionBusy, SessionNotFound
from tests.mockprovider import MockProvider
from tests.server.conftest import ACAGENT, daemon_env, lines_of, wait_for


def _shape(lines: str) -> list[tuple[int, str, list[str]]]:
    """(seq, type, payload keys) of each event. A message sent through the daemon carries its
    request's ``Idempotency-Key`` (hashed) in ``user.message``; that one field is left out."""
    out = []
    for line in lines.splitlines():
        ev = json.loads(line)
        keys = sorted(
            k for k in ev["payload"] if not (ev["type"] == "user.message" and k == "idempotency_key")
        )
        out.append((ev["seq"], ev["type"], keys))
    return out


def test_run_through_daemon_matches_in_process(start_daemon: Any, tmp_path: Path, mock: MockProvider) -> None:
    d = start_daemon()
    w = tmp_path / "w"
    w.mkdir()
    cmd = [ACAGENT, "run", "shell echo same", "--yes", "--json"]
    remote = subprocess.run(cmd, env=d.env, cwd=w, capture_output=True, text=True, timeout=60)
    assert remote.returncode == 0, remote.stderr
    local_home = tmp_path / "local"
    local_home.mkdir()
    local = subprocess.run(
        cmd, env=daemon_env(local_home, mock), cwd=w, capture_output=True, text=True, timeout=60
    )
    assert local.returncode == 0, local.stderr
    assert _shape(remote.stdout) == _shape(local.stdout)
    sid = json.loads(remote.stdout.splitlines()[0])["session_id"]
    assert d.session(sid)["status"] == "done"  # the daemon ran it
    assert not (local_home / "daemon.json").exists()
    # the plain (non --json) answer is the final text
    plain = subprocess.run(
        [ACAGENT, "run", "say plain answer"], env=d.env, cwd=w, capture_output=True, text=True, timeout=60
    )
    assert plain.returncode == 0 and plain.stdout.strip() == "plain answer"
    # --continue resumes this directory's latest session through the daemon
    cont = subprocess.run(
        [ACAGENT, "run", "say again", "--continue", "--json"],
        env=d.env,
        cwd=w,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cont.returncode == 0, cont.stderr
    assert json.loads(cont.stdout.splitlines()[0])["session_id"] in [
        r["id"] for r in d.http.get("/v1/sessions").json()
    ]


def test_attach_unknown_session_and_no_daemon(start_daemon: Any, tmp_path: Path, mock: MockProvider) -> None:
    d = start_daemon()
    r = subprocess.run(
        [ACAGENT, "attach", "ses_does_not_exist", "--json"],
        env=d.env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 1 and "matches no session" in r.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    r = subprocess.run(
        [ACAGENT, "attach", "ses_x"], env=daemon_env(empty, mock), capture_output=True, text=True, timeout=30
    )
    assert r.returncode == 1 and "no daemon serves" in r.stderr


def test_attach_interactive_sends_and_renders(start_daemon: Any, workspace: Path) -> None:
    """A line typed into `acagent attach` is sent as a message; the reply is rendered; EOF detaches (exit 0)."""
    d = start_daemon()
    sid = d.create(workspace)["id"]
    proc = subprocess.Popen(
        [ACAGENT, "attach", sid],
        env={**d.env, "COLUMNS": "120"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, t_out = lines_of(proc.stdout)
    err, t_err = lines_of(proc.stderr)
    try:
        wait_for(lambda: d.stats()["sessions"].get(sid, {}).get("attachers") == 1, 15, what="attached")
        assert proc.stdin is not None
        proc.stdin.write("say hello from attach\n")
        proc.stdin.flush()
        d.wait_status(sid, ("done",))
        wait_for(lambda: any(e["type"] == "turn.completed" for e in d.events(sid)), 10)
        # The reply is drawn (the echoed message is "say hello from attach"): then EOF detaches. A
        # fixed half second before the EOF lost the reply on a loaded machine.
        wait_for(lambda: any(line.strip() == "hello from attach" for line in out), 30, what="the reply")
        proc.stdin.close()
        assert proc.wait(15) == 0, "".join(err)
        t_out.join(10)
        t_err.join(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert [e["payload"]["text"] for e in d.events(sid) if e["type"] == "user.message"] == [
        "say hello from attach"
    ]


def _attach_process(d: Any, sid: str) -> subprocess.Popen[str]:
    """``acagent attach SID`` with piped stdin, stdout and stderr (the line mode)."""
    return subprocess.Popen(
        [ACAGENT, "attach", sid],
        env=d.env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_attach_answers_approval_from_terminal(start_daemon: Any, workspace: Path) -> None:
    d = start_daemon()
    sid = d.create(workspace)["id"]
    assert d.send(sid, "shell touch yes.txt").status_code == 202
    d.wait_status(sid, ("waiting_user",))
    proc = _attach_process(d, sid)
    try:
        # attached: its history (with the request) was read first, so the "y" answers the request
        wait_for(lambda: d.stats()["sessions"].get(sid, {}).get("attachers") == 1, 15, what="attached")
        assert proc.stdin is not None
        proc.stdin.write("y\n")
        proc.stdin.flush()
        d.wait_status(sid, ("done",))
        proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert (workspace / "yes.txt").exists()


def test_attach_answers_parallel_approvals_oldest_first_f127(start_daemon: Any, workspace: Path) -> None:
    """Three tool calls of one step ask at once (F46); `attach` tracked only the newest request, so
    its `y` answered the last call, the next answer met "already resolved" and the first two calls
    could never be answered from that terminal (the same in `chat` and the attach terminal UI)."""
    d = start_daemon()
    sid = d.create(workspace)["id"]
    cmds = " ;; ".join(f"echo {x} >> calls.txt" for x in "ABC")
    assert d.send(sid, f"shells {cmds}").status_code == 202
    wait_for(lambda: len(d.session(sid)["pending_approvals"]) == 3, 15, what="three approvals")
    proc = _attach_process(d, sid)
    try:
        # attached: its history (with the three requests) was read first
        wait_for(lambda: d.stats()["sessions"].get(sid, {}).get("attachers") == 1, 15, what="attached")
        assert proc.stdin is not None
        proc.stdin.write("y\nn\ny\n")
        proc.stdin.flush()
        d.wait_status(sid, ("done",))
        _out, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "already resolved" not in err
    assert (workspace / "calls.txt").read_text().split() == ["A", "C"]
    decisions = [e["payload"]["decision"] for e in d.events(sid) if e["type"] == "approval.resolved"]
    assert decisions == ["allow", "deny", "allow"]
    assert [e for e in d.events(sid) if e["type"] == "user.message"][1:] == []  # no answer became a message


def test_daemon_info_ignores_dead_pid(tmp_path: Path) -> None:
    (tmp_path / "daemon.json").write_text(
        json.dumps({"pid": 2**22 + 12345, "host": "127.0.0.1", "port": 1, "url": "http://127.0.0.1:1"})
    )
    assert daemon_info(tmp_path) is None
    (tmp_path / "daemon.json").write_text("{torn")
    assert daemon_info(tmp_path) is None


@pytest.mark.parametrize(
    ("status", "code", "cls"),
    [
        (409, "session_busy", SessionBusy),
        (429, "concurrency_cap", ConcurrencyCap),
        (404, "session_not_found", SessionNotFound),
        (404, "approval_not_found", ApprovalNotFound),
    ],
)
def test_error_envelope_maps_back(status: int, code: str, cls: type) -> None:
    exc = error_from_envelope(status, {"error": {"code": code, "message": "m", "detail": {"turn_id": "t"}}})
    assert isinstance(exc, cls) and exc.detail == {"turn_id": "t"} and exc.code == code


def test_attach_shows_a_markup_like_cwd_as_text(start_daemon: Any, tmp_path: Path) -> None:
    """`acagent attach` on a session whose cwd reads as rich markup (``/tmp/…/a[/x]``, a real path)
    prints it as text: the header died with a ``MarkupError`` traceback."""
    workspace = tmp_path / "a[" / "x]"
    workspace.mkdir(parents=True)
    d = start_daemon()
    sid = d.create(workspace)["id"]
    proc = subprocess.run([ACAGENT, "attach", sid], env={**d.env, "COLUMNS": "200"}, input="",
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert f"attached to {sid}" in proc.stdout and "a[/x]" in proc.stdout, proc.stdout
