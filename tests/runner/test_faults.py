"""Faults found by starving and freezing real processes from outside (issue 10 items 17, 18).

- A full disk mid-turn (a real tmpfs of a few MiB as ``ACAGENT_HOME``, filled while the reply
  streams): ``acagent run`` ends with one line naming the full disk and a non-zero exit, leaves no
  lease behind, and ``run --resume`` finishes the turn once space is back, nothing lost (F54).
- A read-only data directory (the same tmpfs remounted ``ro``): one line, never a traceback (F54).
- A process frozen past its lease TTL (SIGSTOP), taken over by another process, then SIGCONT:
  it notices it was fenced and exits with a clear message (F55).

The mounts need root (``mount -t tmpfs``); without it the disk tests skip and say so.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from acagent.store._frames import stored_events
from acagent.store._payload import payload_text
from tests.mockprovider import MockProvider, Script, TextReply, split_every

PREFIX = "Here is a long answer that streams in many small pieces. "


def _mount(path: Path, *opts: str) -> None:
    subprocess.run(["mount", *opts, str(path)], check=True, capture_output=True, timeout=10)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 6 MiB tmpfs, unmounted afterwards whatever happens."""
    path = tmp_path / "disk"
    path.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        _mount(path, "-t", "tmpfs", "-o", "size=6m,mode=0700", "tmpfs")
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, timeout=10)


def _fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(
        filler, "wb", buffering=0
    ) as f:  # unbuffered: a partial write left no tail for close() to fail on
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    return filler


def _openai_stream(text: str) -> list[bytes]:
    from tests.mockprovider import openai_text

    return split_every(openai_text(text), 40)


def _db(home: Path) -> sqlite3.Connection:
    return sqlite3.connect(home / "acagent.db")


def _one_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr, stderr
    assert len(lines) == 1, stderr
    return lines[0]


def test_full_disk_mid_turn_fails_in_one_line_and_resumes_when_space_is_back_f54(
    cli: Any, mock: MockProvider, workspace: Path, small_disk: Path
) -> None:
    home = small_disk / "home"
    mock.script(Script(chunks=_openai_stream(PREFIX * 40), pause_after=3), TextReply("resumed fine"))
    env = {"ACAGENT_HOME": str(home)}
    proc = cli.popen(
        "run",
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "hello",
        cwd=workspace,
        extra_env=env,
    )
    try:
        mock.wait_paused(1, 60)
        filler = _fill(small_disk)
        mock.release()
        _out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode not in (0, None), (proc.returncode, err)
    # The transcript (a derived view) may hit the full disk before the journal does — with
    # compressed journal payloads (m007) it often does: its one warning line may precede the error.
    repaired = "it will be repaired from the journal"
    line = _one_line("\n".join(x for x in err.splitlines() if repaired not in x))
    assert "full" in line, line
    filler.unlink()
    db = _db(home)
    sid, status, _owner = db.execute("SELECT id, status, lease_owner FROM session").fetchone()
    # Nothing moved it to a resting state — or the turn's end still fit (a small commit can reuse
    # WAL space the disk no longer has; compressed payloads since m007 make that likelier) and it
    # is `failed` with the disk-full reason journaled: then a new message continues the session.
    assert status in ("running", "waiting_tool", "failed"), status
    db.close()
    second = cli(
        "run",
        "--resume",
        sid,
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        *(["continue"] if status == "failed" else []),
        cwd=workspace,
        extra_env=env,
        timeout=60,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout.strip() == "resumed fine"
    db = _db(home)
    rows = [(seq, typ, p) for _, seq, _, typ, p in stored_events(db, sid)]
    assert [r[0] for r in rows] == list(range(1, len(rows) + 1))
    assert any(t == "user.message" and json.loads(payload_text(p))["text"] == "hello" for _, t, p in rows)
    assert [t for _, t, _ in rows].count("turn.completed") == 1
    assert db.execute("SELECT status, lease_owner FROM session").fetchone() == ("done", None)


def test_a_disk_already_full_is_named_as_full_not_as_an_io_error_f54(
    cli: Any, mock: MockProvider, workspace: Path, small_disk: Path
) -> None:
    """A command opening the journal on a disk that is already full: SQLite cannot grow the WAL
    index and says ``disk I/O error`` (SQLITE_IOERR_SHMSIZE); the one line names the full disk."""
    home = small_disk / "home"
    mock.default = lambda body: TextReply("ok")
    env = {"ACAGENT_HOME": str(home)}
    base = ["--model", "openai:mock", "--base-url", mock.openai_base_url]
    assert cli("run", *base, "hi", cwd=workspace, extra_env=env).returncode == 0
    filler = _fill(small_disk)
    for args in (["run", "--continue", *base, "again"], ["sessions", "list"]):
        r = cli(*args, cwd=workspace, extra_env=env)
        if r.returncode != 0:  # a read may still succeed; whatever fails says why
            line = _one_line(r.stderr)
            assert "disk is full" in line, (args, line)
    filler.unlink()
    r = cli("run", "--continue", *base, "once more", cwd=workspace, extra_env=env)
    assert r.returncode == 0 and r.stdout == "ok\n", r.stderr


def test_read_only_data_dir_is_one_line_never_a_traceback_f54(
    cli: Any, mock: MockProvider, workspace: Path, small_disk: Path
) -> None:
    home = small_disk / "home"
    mock.default = lambda body: TextReply("ok")
    env = {"ACAGENT_HOME": str(home)}
    first = cli(
        "run",
        "--yes",
        "--model",
        "openai:mock",
        "--base-url",
        mock.openai_base_url,
        "hi",
        cwd=workspace,
        extra_env=env,
    )
    assert first.returncode == 0, first.stderr
    _mount(small_disk, "-o", "remount,ro")
    for args in (["run", "again"], ["sessions", "list"]):
        r = (
            cli(
                *args[:1],
                "--yes",
                "--model",
                "openai:mock",
                "--base-url",
                mock.openai_base_url,
                *args[1:],
                cwd=workspace,
                extra_env=env,
            )
            if args[0] == "run"
            else cli(*args, cwd=workspace, extra_env=env)
        )
        if args[0] == "run" or r.returncode != 0:
            assert r.returncode != 0, r.stdout
            _one_line(r.stderr)


def test_frozen_past_its_lease_then_continued_notices_it_was_fenced_f55(
    cli: Any, mock: MockProvider, workspace: Path
) -> None:
    """SIGSTOP past the TTL, another process takes over and finishes, SIGCONT: the frozen process
    exits non-zero with one line saying it was taken over (before: it waited forever)."""
    timing = {"ACAGENT_TIMING_LEASE_TTL_S": "3", "ACAGENT_TIMING_LEASE_RENEW_S": "1"}
    mock.script(Script(chunks=_openai_stream(PREFIX * 5), pause_after=2), TextReply("taken over"))
    base = ("--yes", "--model", "openai:mock", "--base-url", mock.openai_base_url)
    frozen = cli.popen("run", *base, "hello", cwd=workspace, extra_env=timing)
    try:
        mock.wait_paused(1, 60)
        os.kill(frozen.pid, signal.SIGSTOP)
        time.sleep(4)  # past the 3 s TTL
        sid = _db(cli.home).execute("SELECT id FROM session").fetchone()[0]
        other = cli("run", "--resume", sid, *base, cwd=workspace, extra_env=timing, timeout=60)
        assert other.returncode == 0, other.stderr
        assert other.stdout.strip() == "taken over"
        mock.release()
        os.kill(frozen.pid, signal.SIGCONT)
        _out, err = frozen.communicate(timeout=30)
    finally:
        if frozen.poll() is None:
            os.kill(frozen.pid, signal.SIGCONT)
            frozen.kill()
            frozen.communicate()
    assert frozen.returncode not in (0, None)
    line = _one_line(err)
    assert "another process took over" in line, line
    status = _db(cli.home).execute("SELECT status FROM session").fetchone()[0]
    assert status == "done"  # the frozen process wrote nothing after waking
