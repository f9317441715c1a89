"""Upgrading the journal while an older daemon still serves it, or an older process runs a turn (version skew).

Before: the first command of a newer acagent (even ``sessions list``) migrated the journal under
a running older daemon; m007 made ``event`` a view, so from then on every write of that daemon
failed ("cannot modify event because it is a view": 503 to every message, and ``acagent run``
through it exited 1 with that line). Now the newer command refuses to migrate under a live
daemon and says to stop it; once the daemon is gone it migrates.
"""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acagent.store import _migrations as migrations


def _journal_before_m007(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in migrations.MIGRATIONS[:6]:
        db.execute("BEGIN")
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, '2026-01-01T00:00:00Z')", (fn.__name__,))
        db.execute("COMMIT")
    db.execute(
        "INSERT INTO session (id, cwd, status, created_at, updated_at, last_seq)"
        " VALUES ('ses_old', '/w', 'done', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 1)"
    )
    db.execute(
        "INSERT INTO event (session_id, seq, ts, type, payload)"
        " VALUES ('ses_old', 1, '2026-01-01T00:00:00Z', 'session.created', '{\"cwd\":\"/w\"}')"
    )
    db.close()


def _applied(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM migrations")}


def test_no_migration_under_a_live_older_daemon(cli: Any, workspace: Path) -> None:
    cli.home.mkdir(parents=True, exist_ok=True)
    db_path = cli.home / "acagent.db"
    _journal_before_m007(db_path)
    # A live process whose command line names acagent stands for the older daemon.
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "acagent-serve"])
    try:
        (cli.home / "daemon.json").write_text(
            json.dumps({"pid": older.pid, "host": "127.0.0.1", "port": 9, "url": "http://127.0.0.1:9"})
        )
        listed = cli("sessions", "list", "--all", cwd=workspace)
        assert listed.returncode == 1, (listed.stdout, listed.stderr)
        assert listed.stderr.splitlines() == [
            f"acagent: error: the daemon serving {str(cli.home)!r} (pid {older.pid}) is an older acagent: "
            f"this one would upgrade the journal ({', '.join(fn.__name__ for fn in migrations.MIGRATIONS[6:])}) "
            "and that daemon could not write after it; stop it (`acagent serve --stop`), then run this "
            "again [journal_error]"
        ]
        assert "m007_compact_journal" not in _applied(db_path)  # the older daemon can still write
    finally:
        older.kill()
        older.wait()
    listed = cli("sessions", "list", "--all", "--json", cwd=workspace, check=True)
    assert [s["id"] for s in json.loads(listed.stdout)] == ["ses_old"]
    assert "m007_compact_journal" in _applied(db_path)


def test_a_journal_upgraded_by_a_newer_acagent_is_refused_in_one_line(cli: Any, workspace: Path) -> None:
    """A downgrade: the journal records a migration this acagent does not know (a newer one
    changed the layout). Before, it was opened as if current and the first read of the changed
    layout was a traceback (the b9b4de1 code on today's journal: ``orjson.JSONDecodeError`` in
    ``sessions show``); now every command refuses it in one line and changes nothing."""
    cli("sessions", "list", "--all", cwd=workspace, check=True)  # creates the current journal
    db_path = cli.home / "acagent.db"
    with sqlite3.connect(db_path) as db:
        db.execute("INSERT INTO migrations VALUES ('m999_from_the_future', '2027-01-01T00:00:00Z')")
    listed = cli("sessions", "list", "--all", cwd=workspace)
    assert listed.returncode == 1, (listed.stdout, listed.stderr)
    assert listed.stderr.splitlines() == [
        f"acagent: error: {str(db_path)!r} was upgraded by a newer acagent (migration "
        "m999_from_the_future, unknown to this one): run that newer acagent, or open another "
        "ACAGENT_HOME [journal_error]"
    ]
    assert "Traceback" not in listed.stderr


def _journal_before_m012(path: Path, lease_pid: int) -> None:
    """m001–m011 applied (``step`` still a table); one session whose lease ``lease_pid`` holds."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    for fn in migrations.MIGRATIONS[:11]:
        db.execute("BEGIN")
        fn(db)
        db.execute("INSERT INTO migrations VALUES (?, '2026-01-01T00:00:00Z')", (fn.__name__,))
        db.execute("COMMIT")
    db.execute(
        "INSERT INTO session (id, cwd, status, created_at, updated_at, last_seq, num, lease_owner, lease_host,"
        " lease_pid, lease_expires_at, fencing_token) VALUES ('ses_old', '/w', 'waiting_tool',"
        " '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z', 1, 1, 'wrk_old', ?, ?, ?, 1)",
        (socket.gethostname(), lease_pid, time.time() + 600),
    )
    db.execute(  # m007: the events of session num 1 are keys 1 << 32 | seq
        "INSERT INTO event_log (key, ts, type, payload)"
        " VALUES (1 << 32 | 1, '2026-01-01T00:00:00Z', 'session.created', '{\"cwd\":\"/w\"}')"
    )
    db.close()


@pytest.mark.parametrize("holder", ["live", "dead"])
def test_no_migration_under_an_older_process_running_a_turn_f130(
    cli: Any, workspace: Path, holder: str
) -> None:
    """An older ``acagent run`` (or ``chat``) in the middle of a turn holds its session's lease;
    before, any newer command migrated under it (m012 made ``step`` a view) and that turn failed
    at its next step ("journal error: cannot modify step because it is a view", exit 1, session
    ``failed``). Now the newer command refuses while the holder lives; a dead holder's lease (a
    crashed run) does not stop the upgrade."""
    cli.home.mkdir(parents=True, exist_ok=True)
    db_path = cli.home / "acagent.db"
    older = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "acagent-run"])
    try:
        if holder == "dead":
            older.kill()
            older.wait()
        _journal_before_m012(db_path, older.pid)
        listed = cli("sessions", "list", "--all", cwd=workspace)
        if holder == "live":
            pending = ", ".join(fn.__name__ for fn in migrations.MIGRATIONS[11:])
            assert listed.returncode == 1, (listed.stdout, listed.stderr)
            assert listed.stderr.splitlines() == [
                f"acagent: error: an older acagent (pid {older.pid}) is running a turn of session ses_old in "
                f"{str(db_path)!r}: this one would upgrade the journal ({pending}) and that turn could not "
                "be recorded after it; let it finish (or stop it), then run this again [journal_error]"
            ]
            assert "m012_compact_step" not in _applied(db_path)  # the older run can still write
    finally:
        older.kill()
        older.wait()
    listed = cli("sessions", "list", "--all", "--json", cwd=workspace, check=True)
    assert [s["id"] for s in json.loads(listed.stdout)] == ["ses_old"]
    assert "m013_session_text" in _applied(db_path)
