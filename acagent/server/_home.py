"""What a daemon keeps in ``$ACAGENT_HOME``: the bearer token, ``daemon.json`` and ``daemon.lock``.

- ``token``: created once (``secrets.token_urlsafe``, mode 0600) and reused by every daemon of the home;
- ``daemon.json``: the running daemon's ``pid``, ``host``, ``port``, ``url`` (written atomically once it
  listens, removed at exit if it still names this process);
- ``daemon.lock``: an exclusive ``flock`` the serving process holds (F128: ``daemon.json`` alone let
  two daemons started together serve one home).
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any

from acagent._private import private_dir
from acagent.errors import DaemonRunning

__all__ = ["claim_home", "ensure_token", "remove_daemon_json", "write_daemon_json"]


def ensure_token(home: Path) -> str:
    """The daemon's bearer token from ``home/token``: created once (mode 0600), then reused."""
    private_dir(home)
    path = home / "token"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            path.chmod(0o600)
        token = path.read_text().strip()
        if token:
            return token
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC, 0o600)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


def write_daemon_json(home: Path, info: dict[str, Any]) -> Path:
    """Write ``home/daemon.json`` atomically (temp file + rename), mode 0600."""
    path = home / "daemon.json"
    tmp = home / f".daemon.json.{os.getpid()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(info, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def remove_daemon_json(home: Path, pid: int) -> None:
    """Remove ``home/daemon.json`` if it still names ``pid`` (a newer daemon's file stays)."""
    path = home / "daemon.json"
    try:
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()
    except (OSError, ValueError):
        pass


def claim_home(home: Path) -> int:
    """Take ``$ACAGENT_HOME/daemon.lock`` (an exclusive ``flock``, released when the process
    exits, also by SIGKILL) and return its descriptor.

    ``daemon.json`` alone left a window: two ``acagent serve`` started together both found none
    and both served the home, one of them invisible to every client and to ``serve --stop`` (F128).

    Raises:
        DaemonRunning: a live daemon (not this process) serves ``home``, or is starting.
    """
    import fcntl

    from acagent._pids import is_stopped
    from acagent._private import private_file
    from acagent.client._discovery import daemon_info

    fd = os.open(private_file(private_dir(home) / "daemon.lock"), os.O_RDONLY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locked = True
    except BlockingIOError:
        locked = False
    running = daemon_info(home)  # with the lock: a daemon of an older acagent (no lock) may run
    if locked and (running is None or running.pid == os.getpid()):
        return fd
    os.close(fd)
    where = f"pid {running.pid}, {running.url}" if running is not None else "it is starting"
    if running is not None and is_stopped(running.pid):  # frozen, yet it holds the home (F137)
        where += f"; it is stopped: `kill -CONT {running.pid}` resumes it"
    raise DaemonRunning(
        f"a daemon already serves {str(home)!r} ({where}); stop it with `acagent serve --stop`",
        detail={"pid": running.pid, "url": running.url} if running is not None else {},
    )
