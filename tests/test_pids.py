"""The one liveness rule (``acagent/_pids.py``) on real processes."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from acagent._pids import pid_alive, pid_is_dead, proc_state


def test_running_zombie_and_reaped_process() -> None:
    """Alive while it runs; a zombie (exited, not yet reaped) is dead; a reaped pid is dead."""
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert pid_alive(proc.pid)
        assert not pid_is_dead(socket.gethostname(), proc.pid)
        assert proc.stdin is not None
        proc.stdin.close()
        for _ in range(500):  # until it exited (a zombie: nobody waited for it yet)
            if proc_state(proc.pid) in ("Z", "X", None):
                break
            time.sleep(0.01)
        assert not pid_alive(proc.pid)
        assert pid_is_dead(socket.gethostname(), proc.pid)
    finally:
        proc.wait()
    assert not pid_alive(proc.pid)


def test_unknowable_pids_are_never_dead() -> None:
    """Another host's pid, no pid, and this process are never "dead"; pid 0 and below are not alive."""
    assert not pid_is_dead("another-host.invalid", 999_999_999)
    assert not pid_is_dead(socket.gethostname(), None)
    assert not pid_is_dead(socket.gethostname(), os.getpid())
    assert not pid_alive(0) and not pid_alive(-1)
    assert pid_alive(1)  # init exists (EPERM counts as alive)
