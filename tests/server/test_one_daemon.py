"""F128: one daemon per ACAGENT_HOME, also when several ``acagent serve`` start at the same moment.

The refusal read ``daemon.json``, which a daemon writes once it listens: daemons started together
all found none and all served the home; ``daemon.json`` named the last one, so the others ran on
unseen by every client and by ``acagent serve --stop`` (their recovery passes still drove sessions).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.mockprovider import MockProvider
from tests.server.conftest import ACAGENT, daemon_env, wait_for


def _alive(proc: subprocess.Popen[str]) -> bool:
    return proc.poll() is None


def _info(home: Path) -> dict[str, int] | None:
    try:
        return dict(json.loads((home / "daemon.json").read_text()))
    except (OSError, ValueError):
        return None


def _serve(env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [ACAGENT, "serve", "--port", "0"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _pid_in_info(home: Path, pid: int) -> bool:
    return (_info(home) or {}).get("pid") == pid


def test_daemons_started_together_leave_exactly_one_serving_f128(tmp_path: Path, mock: MockProvider) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = daemon_env(home, mock)
    procs = [_serve(env) for _ in range(4)]
    try:
        info = wait_for(lambda: _info(home), 30, what="daemon.json")
        wait_for(lambda: sum(_alive(p) for p in procs) == 1, 30, what="the others to exit")
        time.sleep(1.0)  # a late starter would be listening by now
        (serving,) = [p for p in procs if _alive(p)]
        assert serving.pid == info["pid"]
        for p in procs:
            if p is not serving:
                _out, err = p.communicate(timeout=10)
                assert p.returncode != 0 and "already serves" in err and "Traceback" not in err, err
        stop = subprocess.run(
            [ACAGENT, "serve", "--stop"], env=env, capture_output=True, text=True, timeout=60
        )
        assert stop.returncode == 0, stop.stderr
        serving.wait(30)
        again = _serve(env)
        procs.append(again)
        wait_for(lambda: _pid_in_info(home, again.pid), 30, what="restart")
        os.kill(again.pid, signal.SIGKILL)  # the lock dies with the process
        again.wait(10)
        last = _serve(env)
        procs.append(last)
        wait_for(lambda: _pid_in_info(home, last.pid), 30, what="after kill")
    finally:
        for p in procs:
            if _alive(p):
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(5)


def test_a_daemon_whose_test_run_was_killed_is_reaped_by_the_next_one(tmp_path: Path) -> None:
    """Before: a test run killed from outside (a timeout) left its ``acagent serve`` running."""
    from tests.server.conftest import reap_orphan_daemons

    registry = tmp_path / "registry"  # not the shared one: a concurrent test run would reap first

    dead_owner = subprocess.Popen(["true"])
    dead_owner.wait()
    fake = tmp_path / "acagent"
    fake.write_text("import time\ntime.sleep(600)\n")
    # a process whose command line is an `acagent serve` (a real one would need a whole home)
    stray = subprocess.Popen([sys.executable, str(fake), "serve"], start_new_session=True)
    alive_owner = subprocess.Popen([sys.executable, str(fake), "serve"], start_new_session=True)
    try:
        registry.mkdir()
        (registry / str(stray.pid)).write_text(str(dead_owner.pid))
        (registry / str(alive_owner.pid)).write_text(str(os.getpid()))
        assert stray.pid in reap_orphan_daemons(registry)
        assert stray.wait(10) == -signal.SIGKILL
        assert alive_owner.poll() is None  # its owner (this test) runs: left alone
    finally:
        for p in (stray, alive_owner):
            p.kill()
            p.wait(10)
