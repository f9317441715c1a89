"""F67: everything under ``$ACAGENT_HOME`` is owner-only, whichever command creates the home first.

Each command runs as a real subprocess with umask 022 on a home that does not exist yet; then
every directory under the home must be 0700 and every file 0600 (the chat input history, the
journal, transcripts, a ``.corrupt`` sidecar of an import, the daemon's token and daemon.json).
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.mockprovider import MockProvider, TextReply

ACAGENT = [sys.executable, "-m", "acagent"]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACAGENT_", "OPENAI_", "ANTHROPIC_"))}
    env.update(ACAGENT_HOME=str(home), OPENAI_API_KEY="k", PYTHONUNBUFFERED="1")
    return env


def _umask022() -> None:
    os.umask(0o022)


def _loose(home: Path) -> list[str]:
    """Entries under (and including) ``home`` that group or others can access."""
    assert home.exists(), "the command did not create the home"
    bad = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = 0o700 if path.is_dir() else 0o600
        if mode & 0o077 or (path.is_dir() and mode != want):
            bad.append(f"{path.relative_to(home.parent)} {oct(mode)}")
    return bad


def _run(home: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*ACAGENT, *args], cwd=cwd, env=_env(home), capture_output=True, text=True, timeout=60,
        stdin=subprocess.DEVNULL, preexec_fn=_umask022,
    )  # fmt: skip


def test_run_creates_an_owner_only_home(tmp_path: Path, workspace: Path, mock: MockProvider) -> None:
    home = tmp_path / "h" / "home"  # its parent does not exist either
    mock.script(TextReply("hi"))
    r = _run(
        home, "run", "--model", "openai:mock", "--base-url", mock.openai_base_url, "hello", cwd=workspace
    )
    assert r.returncode == 0, r.stderr
    assert list(home.rglob("*.jsonl")), "a transcript was written"
    assert _loose(home) == []


def test_sessions_and_import_create_an_owner_only_home(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home"
    assert _run(home, "sessions", "list", cwd=workspace).returncode == 0
    assert _loose(home) == []
    home2 = tmp_path / "home2"
    good = {"seq": 1, "ts": "t", "session_id": "ses_x", "type": "session.created", "payload": {"cwd": "/tmp"}}
    damaged = tmp_path / "t.jsonl"
    damaged.write_text(json.dumps(good) + "\n{not json\n")
    r = _run(home2, "import", str(damaged), cwd=workspace)
    assert r.returncode == 0, r.stderr
    assert list(home2.rglob("*.corrupt")), "the damaged line was kept in a sidecar"
    assert _loose(home2) == []


def test_serve_creates_an_owner_only_home(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home"
    proc = subprocess.Popen(
        [*ACAGENT, "serve", "--port", "0"], cwd=workspace, env=_env(home), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, preexec_fn=_umask022, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while not (home / "daemon.json").exists():
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            assert time.monotonic() < deadline, "the daemon did not start"
            time.sleep(0.05)
        assert (home / "token").exists()
        assert _loose(home) == []
        # (the same daemon) --base-url cannot apply through it: refused with a clear line, not ignored
        r = _run(home, "run", "--base-url", "http://127.0.0.1:9/v1", "hi", cwd=workspace)
        assert r.returncode == 1 and "a daemon serves" in r.stderr and "--base-url cannot apply" in r.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_chat_creates_an_owner_only_home_and_history(
    tmp_path: Path, workspace: Path, mock: MockProvider
) -> None:
    home = tmp_path / "home"
    mock.script(TextReply("hello back"))
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [*ACAGENT, "chat", "--model", "openai:mock", "--base-url", mock.openai_base_url],
        cwd=workspace, env={**_env(home), "TERM": "xterm"}, stdin=slave, stdout=slave, stderr=slave,
        preexec_fn=_umask022, start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    seen = b""

    def wait_for(text: bytes, after: int = 0, timeout: float = 30) -> None:
        nonlocal seen
        deadline = time.monotonic() + timeout
        while text not in seen[after:]:
            assert time.monotonic() < deadline, f"timed out waiting for {text!r}: {seen[-800:]!r}"
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    seen += os.read(master, 65536)
                except OSError:
                    break

    try:
        wait_for("›".encode())
        os.write(master, b"say hi\r")
        wait_for(b"hello back")
        wait_for("›".encode(), after=seen.index(b"hello back"))
        os.write(master, b"/exit\r")
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
    history = home / "history"
    assert "say hi" in history.read_text()
    assert _loose(home) == []


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path
