"""Crash and shutdown: SIGKILL mid-turn (F05), a pending approval across a restart (F14 R), SIGTERM,
``serve --stop`` and ``status``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.mockprovider import MockProvider
from tests.server.conftest import ACAGENT, wait_for


def _pids_with(marker: str) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    out.append(int(entry))
        except OSError:
            pass
    return out


class _Attach:
    """`acagent attach ID --since N --json` collecting envelopes in a thread."""

    def __init__(self, env: dict[str, str], sid: str, since: int) -> None:
        self.proc = subprocess.Popen(
            [ACAGENT, "attach", sid, "--since", str(since), "--json"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.events: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def stop(self) -> str:
        self.proc.terminate()
        _, err = self.proc.communicate(10)
        return err


@pytest.mark.slow
def test_sigkill_mid_tool_recovers_by_itself(start_daemon: Any, workspace: Path, mock: MockProvider) -> None:
    """F05 main path: kill -9 while `sleep` runs; the restarted daemon continues the turn on its own."""
    d1 = start_daemon()
    sid = d1.create(workspace)["id"]
    for text in ("say one", "say two"):
        assert d1.send(sid, text).status_code == 202
        d1.wait_status(sid, ("done",))
    L = d1.session(sid)["last_seq"]
    assert d1.send(sid, "shell sleep 61.7; echo done", auto_approve=True).status_code == 202
    d1.wait_event(sid, lambda e: e["type"] == "tool.started")
    sleepers = wait_for(lambda: _pids_with("61.7"), 5, what="the sleep process")
    requests_before = len(mock.requests)
    os.kill(d1.pid, signal.SIGKILL)
    d1.proc.wait(10)  # type: ignore[union-attr]

    t0 = time.monotonic()
    d2 = start_daemon()
    listed = d2.http.get("/v1/sessions").json()
    assert sid in [r["id"] for r in listed]
    attach = _Attach(d2.env, sid, L)
    try:
        s = d2.wait_status(sid, ("done",), timeout=15)
        assert time.monotonic() - t0 < 20
        wait_for(
            lambda: not any(os.path.exists(f"/proc/{p}") and _alive(p) for p in sleepers),
            5,
            what="sleep killed",
        )
        events = d2.events(sid, L)
        wait_for(
            lambda: attach.events and attach.events[-1]["seq"] >= s["last_seq"], 10, what="attach caught up"
        )
    finally:
        err = attach.stop()
    seqs = [e["seq"] for e in attach.events]
    assert seqs == list(range(L + 1, seqs[-1] + 1)), err
    assert [e for e in attach.events if e["seq"] <= events[-1]["seq"]] == events
    result = next(e for e in events if e["type"] == "tool.result")
    assert result["payload"]["status"] == "interrupted"
    assert "may or may not have taken effect" in result["payload"]["content"]
    final = [e for e in events if e["type"] == "assistant.message"][-1]
    assert final["payload"]["text"].startswith("tool said:")
    assert [e["type"] for e in events].count("turn.completed") == 1
    recovered = mock.requests[requests_before:]
    assert recovered and all(r.status == 200 for r in recovered)
    # step 5: a new message after the recovered turn
    assert d2.send(sid, "say after").status_code == 202
    d2.wait_status(sid, ("done",))
    assert mock.requests[-1].status == 200


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_pending_approval_survives_restart(start_daemon: Any, workspace: Path) -> None:
    """F14 R: kill -9 while an approval is pending; after the restart it is still pending, re-sent to an
    attaching client, and answering it runs the tool once."""
    (workspace / "build").mkdir()
    d1 = start_daemon()
    sid = d1.create(workspace)["id"]
    assert d1.send(sid, "shell rm -rf build/").status_code == 202
    req = d1.wait_event(sid, lambda e: e["type"] == "approval.requested")
    d1.wait_status(sid, ("waiting_user",))
    d1.kill()
    d2 = start_daemon()
    s = wait_for(
        lambda: x if (x := d2.session(sid))["status"] == "waiting_user" and x["busy"] else None,
        5,
        what="recovered and waiting",
    )
    assert [a["tool_call_id"] for a in s["pending_approvals"]] == [req["payload"]["tool_call_id"]]
    attach = _Attach(d2.env, sid, s["last_seq"])
    try:
        wait_for(lambda: attach.events, 10, what="the re-sent approval")
        first = attach.events[0]
        assert first["replay"] is True and first["seq"] == req["seq"]
        r = d2.http.post(
            f"/v1/sessions/{sid}/approvals/{req['payload']['tool_call_id']}", json={"decision": "allow"}
        )
        assert r.status_code == 200, r.text
        d2.wait_status(sid, ("done",))
    finally:
        attach.stop()
    assert not (workspace / "build").exists()
    results = [e for e in d2.events(sid) if e["type"] == "tool.result"]
    assert len(results) == 1 and results[0]["payload"]["status"] == "ok"


def test_sigterm_interrupts_turns_and_removes_daemon_json(start_daemon: Any, workspace: Path) -> None:
    """Graceful shutdown: attached clients see turn.interrupted (shutdown); daemon.json is removed; a
    restart serves the session again and it takes a new message."""
    import websockets.sync.client as wsc

    d1 = start_daemon()
    sid = d1.create(workspace)["id"]
    assert d1.send(sid, "shell sleep 62.3", auto_approve=True).status_code == 202
    d1.wait_event(sid, lambda e: e["type"] == "tool.started")
    seen: list[dict[str, Any]] = []
    close: list[Any] = []
    with wsc.connect(f"{d1.ws_url}/v1/sessions/{sid}/attach?since=0", additional_headers=d1.auth) as conn:
        d1.proc.send_signal(signal.SIGTERM)  # type: ignore[union-attr]
        try:
            while True:
                seen.append(json.loads(conn.recv(timeout=20)))
        except Exception as exc:
            close.append(exc)
    assert d1.proc.wait(30) == 0  # type: ignore[union-attr]
    ended = [e for e in seen if e["type"] == "turn.interrupted"]
    assert ended and ended[0]["payload"]["reason"] == "shutdown"
    assert getattr(close[0], "rcvd", None) is not None and close[0].rcvd.code == 1012
    assert not (d1.home / "daemon.json").exists()
    assert not _pids_with("62.3")
    d2 = start_daemon()
    assert d2.session(sid)["status"] == "cancelled"
    assert d2.send(sid, "say back").status_code == 202
    d2.wait_status(sid, ("done",))


def test_status_and_stop(start_daemon: Any) -> None:
    d = start_daemon()
    out = subprocess.run([ACAGENT, "status"], env=d.env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0 and "daemon: up" in out.stdout and str(d.port) in out.stdout
    again = subprocess.run(
        [ACAGENT, "serve", "--port", "0"], env=d.env, capture_output=True, text=True, timeout=30
    )
    assert again.returncode != 0 and "already serves" in again.stderr
    stop = subprocess.run([ACAGENT, "serve", "--stop"], env=d.env, capture_output=True, text=True, timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert d.proc.wait(10) == 0  # type: ignore[union-attr]
    assert not (d.home / "daemon.json").exists()
    down = subprocess.run(
        [ACAGENT, "status", "--json"], env=d.env, capture_output=True, text=True, timeout=30
    )
    assert down.returncode == 3 and json.loads(down.stdout)["daemon"] is None
    token = d.home / "token"
    assert oct(token.stat().st_mode & 0o777) == "0o600"


def test_token_created_once_and_reused(tmp_path: Path) -> None:
    from acagent.server import ensure_token

    first = ensure_token(tmp_path)
    assert ensure_token(tmp_path) == first and len(first) >= 40
    assert oct((tmp_path / "token").stat().st_mode & 0o777) == "0o600"
    (tmp_path / "token").chmod(0o644)
    assert ensure_token(tmp_path) == first
    assert oct((tmp_path / "token").stat().st_mode & 0o777) == "0o600"
