"""The tests' own PostgreSQL servers do not outlive a test run that was killed (tests/pgserver.py)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pgserver import PgServer, find_pg_bin, reap_stale

ROOT = Path(__file__).resolve().parents[2]


def test_a_cluster_whose_test_run_was_killed_is_stopped_by_the_next_one() -> None:
    """Before: a run killed from outside (a timeout) never reached ``PgServer.close``; its
    server kept running until the machine restarted."""
    bin_dir = find_pg_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL binaries are not installed")
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from tests.pgserver import PgServer\n"
        "s = PgServer(Path(sys.argv[1])).start()\n"
        "print(s.root, flush=True)\n"
        "time.sleep(600)\n"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script, str(bin_dir)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert owner.stdout is not None
        root = Path(owner.stdout.readline().strip())
        pid_file = root / "data" / "postmaster.pid"
        assert pid_file.exists()
        assert reap_stale(bin_dir) == []  # its owner runs: left alone
    finally:
        owner.kill()  # as a timeout would: no close()
        owner.wait(10)
    postmaster = int(pid_file.read_text().split()[0])
    assert reap_stale(bin_dir) == [root]
    assert not root.exists()
    for _ in range(50):
        if subprocess.run(["kill", "-0", str(postmaster)], capture_output=True).returncode:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the stale cluster's postmaster still runs")
    with PgServer(bin_dir) as fresh:  # and a live one is untouched by the next reap
        assert reap_stale(bin_dir) == [] and fresh.root.exists()
