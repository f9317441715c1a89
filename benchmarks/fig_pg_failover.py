"""Failover after the owner's death: ``python -m benchmarks.fig_pg_failover [ROUNDS]``.

Three ``acagent serve`` daemons (127.0.0.2/.3/.4) on one PostgreSQL journal (started here, fsync
on) and the strict mock provider streaming deltas. Each round starts a turn on one daemon, with an
SSE attacher on another; after 10 deltas the owner is SIGKILLed. Measured: SIGKILL → the
attacher's first event from the new owner (its ``step.started``), and the attacher's stall (last
event before the kill → first after). The killed daemon restarts with the same id for the next
round. Each round also checks the attacher's seqs against the journal (0 gaps, 0 duplicates).
"""

from __future__ import annotations

import json
import signal
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from tests.mockprovider import MockProvider
from tests.pgserver import PgServer, find_pg_bin
from tests.scaleout.conftest import Cluster, check_stream
from tests.server.conftest import responder, wait_for

__all__ = ["main"]


def _epoch(ts: str) -> float:
    return datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def _claim_logged(cluster: Cluster, sid: str) -> float:
    """When a daemon logged its claim of ``sid`` (``--log-format json`` lines, epoch seconds)."""
    for d in cluster.daemons.values():
        for line in list(d.stderr_lines):
            if f"claimed session {sid}" in line:
                return _epoch(json.loads(line)["ts"])
    raise AssertionError(f"no daemon logged the claim of {sid}")


def _round(cluster: Cluster, i: int, work: Path) -> tuple[float, float, dict[str, float]]:
    ids = ["d2", "d3", "d4"]
    owner, watcher = cluster.daemons[ids[i % 3]], cluster.daemons[ids[(i + 1) % 3]]
    sid = owner.create(work)["id"]
    a = cluster.attach(watcher, sid)
    time.sleep(0.3)
    assert owner.send(sid, "deltas 300 12 10").status_code == 202
    wait_for(lambda: sum(1 for e in list(a.events) if e["type"] == "assistant.delta") >= 10, 30)
    seen = len(a.events)
    last_before = time.monotonic()
    owner.stop_signal(signal.SIGKILL)
    killed, killed_wall = time.monotonic(), time.time()
    wait_for(lambda: any(e["type"] == "step.started" for e in list(a.events)[seen:]), 30, interval=0.005)
    failover = time.monotonic() - killed
    a.wait_type("turn.completed", timeout=60)
    watcher.wait_status(sid, ("done",), 30)
    journal = watcher.events(sid)
    check_stream(a, journal)
    a.close()
    cluster.restart(owner)
    # the timeline from the journal's own timestamps (same host clock as the kill)
    after = [e for e in journal if _epoch(e["ts"]) > killed_wall]
    first = _epoch(after[0]["ts"])
    started = next(_epoch(e["ts"]) for e in after if e["type"] == "step.started")
    claimed = _claim_logged(cluster, sid)
    phases = {
        "detect_claim_s": claimed - killed_wall,  # kill → a peer's claim statement returned (log line)
        "runner_start_s": first - claimed,  # → the new owner's first commit (runner, lease, context)
        "resume_s": started - first,  # → its step.started commit (process_died retry, budget checks)
        "deliver_s": failover - (started - killed_wall),  # → the attacher on the third daemon has it
    }
    return failover, failover + (killed - last_before), phases


def main() -> None:
    """Run the rounds and print JSON (seconds)."""
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    bin_dir = find_pg_bin()
    if bin_dir is None:
        raise SystemExit("PostgreSQL binaries not found (apt-get install postgresql)")
    with (
        PgServer(bin_dir, fsync=True) as server,
        MockProvider() as mock,
        tempfile.TemporaryDirectory() as tmp,
    ):
        mock.default = responder
        root = Path(tmp)
        (root / "work").mkdir()
        cluster = Cluster(
            url=server.create_database("failover"),
            root=root,
            mock=mock,
            pg=server,
            args=("--yes", "--log-format", "json"),
        )
        try:
            for i in (2, 3, 4):
                cluster.start(f"127.0.0.{i}", f"d{i}")
            samples = [_round(cluster, i, root / "work") for i in range(rounds)]
        finally:
            cluster.close()
    fail = sorted(s[0] for s in samples)
    phases = {k: sorted(s[2][k] for s in samples) for k in samples[0][2]}
    stall = sorted(s[1] for s in samples)
    p99 = (
        (lambda xs: statistics.quantiles(xs, n=100, method="inclusive")[98])
        if len(fail) >= 2
        else (lambda xs: xs[-1])
    )
    result = {
        "rounds": rounds,
        "failover_p50_s": round(statistics.median(fail), 3),
        "failover_p99_s": round(p99(fail), 3),
        "failover_max_s": round(fail[-1], 3),
        "attacher_stall_p99_s": round(p99(stall), 3),
        "phases_p50_s": {k: round(statistics.median(v), 3) for k, v in phases.items()},
        "phases_p99_s": {k: round(p99(v), 3) for k, v in phases.items()},
    }
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
