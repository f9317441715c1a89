"""``GET /metrics``: Prometheus text after a scripted run with one retry and one takeover.

The counters must match what the journal says: every ``llm.retry`` event of the daemon's turns
is one ``acagent_llm_retries_total`` increment, the session a crashed ``acagent run`` left behind
is one lease takeover, and the sessions gauge counts the journal's statuses.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.mockprovider import Script
from tests.server.conftest import daemon_env


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _sum(samples: dict, name: str, **labels: str) -> float:
    return sum(
        v for (n, lab), v in samples.items() if n == name and all((k, x) in lab for k, x in labels.items())
    )


def test_metrics_match_the_journal_after_a_retry_and_a_takeover(
    start_daemon, mock, tmp_path: Path, workspace: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = daemon_env(home, mock, ACAGENT_CRASH_AT="mid_stream")
    crashed = subprocess.run(
        [sys.executable, "-m", "acagent", "run", "deltas 6 20", "--yes"],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert crashed.returncode == -9, crashed.stderr  # SIGKILLed itself mid-stream: lease left held
    d = start_daemon("--yes", home=home)
    crashed_id = d.http.get("/v1/sessions", params={"cwd": str(workspace)}).json()[0]["id"]
    d.wait_status(crashed_id, ("done",), timeout=30)  # continued by the daemon: one takeover

    assert httpx.get(f"{d.url}/metrics").status_code == 401
    sid = d.create(workspace)["id"]
    mock.script(Script(status=500, body={"error": {"message": "boom", "type": "server_error"}}))
    assert d.send(sid, "say after one retry").status_code == 202
    d.wait_status(sid, ("done",), timeout=30)
    assert d.send(sid, "shell echo hi").status_code == 202
    d.wait_status(sid, ("done",), timeout=30)

    resp = d.http.get("/metrics")
    assert resp.status_code == 200 and resp.headers["content-type"].startswith("text/plain")
    samples = _samples(resp.text)
    events = [e for s in (crashed_id, sid) for e in d.events(s)]
    retries = [e for e in events if e["type"] == "llm.retry"]
    assert len(retries) == 2  # the dead process's attempt and the 500
    assert _sum(samples, "acagent_llm_retries_total") == len(retries)
    assert _sum(samples, "acagent_llm_retries_total", reason="process_died") == 1
    assert _sum(samples, "acagent_lease_takeovers_total") == 1
    done_steps = [e for e in events if e["type"] == "step.finished"]
    assert _sum(samples, "acagent_llm_requests_total", outcome="ok") == len(done_steps)
    assert _sum(samples, "acagent_tool_calls_total", tool="shell") == 1
    usage_out = sum(e["payload"]["output_tokens"] for e in events if e["type"] == "usage")
    assert _sum(samples, "acagent_tokens_total", kind="output") == usage_out
    assert _sum(samples, "acagent_sessions", status="done") == 2
    assert _sum(samples, "acagent_turn_duration_seconds_count", outcome="completed") == 3
    assert d.token not in resp.text
