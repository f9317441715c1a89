"""The one process-liveness rule: does a pid on this host still run code?

Used for lease holders (:func:`pid_is_dead`, the registry and the journal's takeover), tool
process groups (``tools/_process.py``), the daemon's ``daemon.json`` (``client/_discovery.py``)
and ``acagent doctor``. A pid is alive when it exists and is not a zombie (state ``Z``/``X`` in
``/proc/<pid>/stat``: a zombie runs no code, it only waits for its parent to reap it). A pid this
user may not signal (``EPERM``) exists, so it is alive.
"""

from __future__ import annotations

import os
import socket

__all__ = ["is_stopped", "pid_alive", "pid_is_dead", "proc_state", "runs_acagent"]


def proc_state(pid: int) -> str | None:
    """The state letter of ``pid`` from ``/proc/<pid>/stat`` (``R``, ``S``, ``Z``…), or None when
    it is gone or ``/proc`` is not there."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # "pid (comm) state ppid pgrp ..."; comm may hold spaces and parentheses.
    rest = raw[raw.rfind(b")") + 2 :].split()
    return rest[0].decode() if rest else None


def pid_alive(pid: int) -> bool:
    """True if process ``pid`` exists on this host and is not a zombie; False for ``pid <= 0``."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    except OSError:
        return False
    return proc_state(pid) not in ("Z", "X")


def is_stopped(pid: int) -> bool:
    """True if ``pid`` is stopped by a signal (SIGSTOP, Ctrl-Z: ``T``) or by a tracer (``t``):
    alive, yet it runs no code until continued (a daemon in that state answers nothing, F137)."""
    return proc_state(pid) in ("T", "t")


def runs_acagent(pid: int) -> bool:
    """False when ``pid`` (alive) was reused by an unrelated process (its command line lacks acagent)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
    except OSError:
        return True
    return not cmdline or b"acagent" in cmdline


def pid_is_dead(host: str | None, pid: int | None) -> bool:
    """True if ``pid`` on this host no longer runs (a crashed lease holder).

    Another host's pid, pid 0/None and this process's own pid are never "dead" (unknowable, or
    alive).
    """
    if host != socket.gethostname() or not pid or pid == os.getpid():
        return False
    return not pid_alive(pid)
