"""F137: a daemon that is alive but answers nothing (SIGSTOP, Ctrl-Z, hung) is not "down".

Before: the kernel still accepted connections on its socket, so ``acagent status`` waited for the
client's 30 s read timeout and then said ``daemon: down``; ``run`` waited as long and failed with
"did not answer in time"; ``serve --stop`` sent a SIGTERM a stopped process never acts on and
waited 60 s. The daemon still holds ``daemon.lock`` and its sessions' leases, so nothing may take
its place: every command now says at once what is true (the pid, stopped or not answering) and
what to do, and none writes the journal beside it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.server.conftest import ACAGENT, Daemon


def _cli(d: Daemon, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [ACAGENT, *args],
        env=d.env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=90,
        stdin=subprocess.DEVNULL,
    )


def _session_count(home: Path) -> int:
    with sqlite3.connect(f"file:{home / 'acagent.db'}?mode=ro", uri=True) as db:
        return int(db.execute("SELECT count(*) FROM session").fetchone()[0])


def test_a_stopped_daemon_is_named_stopped_by_every_command_f137(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    d = start_daemon()
    work = tmp_path / "w"
    work.mkdir()
    sid = d.create(work)["id"]
    os.kill(d.pid, signal.SIGSTOP)
    try:
        status = _cli(d, "status")
        assert status.returncode == 4, (status.stdout, status.stderr)
        line = status.stdout.splitlines()[0]
        assert "not answering" in line and f"pid {d.pid}" in line and "stopped" in line, status.stdout
        assert f"kill -CONT {d.pid}" in line and "Traceback" not in status.stderr
        as_json = json.loads(_cli(d, "status", "--json").stdout)
        assert as_json["daemon"]["pid"] == d.pid and as_json["daemon"]["answering"] is False
        assert as_json["daemon"]["state"] == "stopped"

        before = _session_count(d.home)
        run = _cli(d, "run", "say hello", cwd=work)
        assert run.returncode != 0 and f"pid {d.pid}" in run.stderr and "stopped" in run.stderr, run.stderr
        assert len(run.stderr.strip().splitlines()) == 1 and "Traceback" not in run.stderr
        assert _session_count(d.home) == before  # no in-process session beside the frozen daemon

        attach = _cli(d, "attach", sid, "--json")
        assert attach.returncode == 1 and "stopped" in attach.stderr and attach.stdout == "", attach.stderr

        second = _cli(d, "serve", "--port", "0")
        assert second.returncode != 0 and "already serves" in second.stderr, second.stderr
        assert f"kill -CONT {d.pid}" in second.stderr

        doctor = _cli(d, "doctor")
        assert f"stopped, pid {d.pid}" in doctor.stdout and f"kill -CONT {d.pid}" in doctor.stdout, (
            doctor.stdout
        )

        stop = _cli(d, "serve", "--stop")
        assert stop.returncode == 0 and f"stopped the daemon (pid {d.pid})" in stop.stdout, stop.stderr
        assert d.proc is not None and d.proc.wait(30) == 0
    finally:
        if d.proc is not None and d.proc.poll() is None:
            os.kill(d.pid, signal.SIGCONT)


def test_a_hung_daemon_is_named_not_answering_f137(tmp_path: Path) -> None:
    """A registered live acagent process whose socket accepts but never answers (a hung loop)."""
    home = tmp_path / "home"
    home.mkdir()
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    fake = tmp_path / "acagent_hung.py"  # its command line names acagent, as a daemon's does
    fake.write_text("import time\ntime.sleep(600)\n")
    hung = subprocess.Popen([sys.executable, str(fake)], start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        (home / "daemon.json").write_text(
            json.dumps({"pid": hung.pid, "host": "127.0.0.1", "port": port, "url": url})
        )
        (home / "token").write_text("t")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_"))}
        env["ACAGENT_HOME"] = str(home)
        status = subprocess.run([ACAGENT, "status"], env=env, capture_output=True, text=True, timeout=90)
        assert status.returncode == 4, (status.stdout, status.stderr)
        assert "not answering" in status.stdout and f"pid {hung.pid}" in status.stdout
        assert "no answer within" in status.stdout and "Traceback" not in status.stderr
        run = subprocess.run(
            [ACAGENT, "run", "hello"], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=90
        )
        assert run.returncode != 0 and "does not answer" in run.stderr and "Traceback" not in run.stderr
        assert not (home / "acagent.db").exists()  # nothing ran in-process beside it
    finally:
        hung.kill()
        hung.wait(10)
        listener.close()


@pytest.mark.anyio
async def test_a_daemon_stopped_while_a_client_talks_to_it_is_named_stopped_f137(
    start_daemon: Callable[..., Daemon],
) -> None:
    """A request that times out because the daemon was stopped after the client found it says so
    (before: "the daemon did not answer in time (ReadTimeout)", three times for a keyed request)."""
    import httpx

    from acagent.client._discovery import daemon_info
    from acagent.client._remote import RemoteSessionClient
    from acagent.errors import DaemonUnavailable

    d = start_daemon()
    info = daemon_info(d.home)
    assert info is not None
    client = RemoteSessionClient(d.home, info, "", http=httpx.AsyncClient(timeout=httpx.Timeout(1.0)))
    try:
        assert isinstance(await client.request("GET", "/v1/sessions"), list)
        os.kill(d.pid, signal.SIGSTOP)
        with pytest.raises(DaemonUnavailable) as caught:
            await client.request("POST", "/v1/sessions", json={"cwd": str(d.home)}, idempotent=True)
        assert "stopped" in caught.value.message and f"kill -CONT {d.pid}" in caught.value.message
        assert caught.value.detail["state"] == "stopped"
    finally:
        os.kill(d.pid, signal.SIGCONT)
        await client.http.aclose()


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "http://hôst\u00e9:1", "http://[::1"])
def test_an_unusable_url_in_daemon_json_is_one_line_f137(url: str, tmp_path: Path) -> None:
    """A hand-edited ``daemon.json`` (a port out of range, a non-ASCII host) was a ``ValueError``
    out of the probe; it is the probe's reason like any other."""
    from acagent.client._discovery import DaemonInfo, check_answering
    from acagent.errors import DaemonUnavailable

    info = DaemonInfo(pid=os.getpid(), host="127.0.0.1", port=1, url=url, home=tmp_path)
    with pytest.raises(DaemonUnavailable) as caught:
        check_answering(info, timeout=1.0)
    assert caught.value.detail["state"] == "not_answering" and "\n" not in caught.value.message


def test_an_attached_stream_names_a_daemon_stopped_mid_stream_f137(
    start_daemon: Callable[..., Daemon], tmp_path: Path
) -> None:
    """Before: ``attach`` (and ``run`` through the daemon) printed nothing for as long as the daemon
    stayed stopped — its socket stays open, so the stream just froze (145 s in a tester's run,
    then killed by ``timeout``). Now the attacher names the stopped daemon within seconds."""
    d = start_daemon()
    work = tmp_path / "w"
    work.mkdir()
    sid = d.create(work)["id"]
    attach = subprocess.Popen(
        [ACAGENT, "attach", sid, "--json"],
        env=d.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert attach.stdout is not None
        first = attach.stdout.readline()  # the stream is live: the session's first event arrived
        assert json.loads(first)["seq"] == 1, first
        os.kill(d.pid, signal.SIGSTOP)
        try:  # before: reconnects for ever once the WebSocket ping gave up (40 s)
            _out, err = attach.communicate(timeout=60)
        finally:
            os.kill(d.pid, signal.SIGCONT)
        assert attach.returncode == 1, err
        assert "stopped" in err and f"kill -CONT {d.pid}" in err and "Traceback" not in err, err
        assert len(err.strip().splitlines()) == 1, err
    finally:
        if attach.poll() is None:
            attach.kill()
            attach.wait(10)
