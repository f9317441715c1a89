"""The daemon's caps and compaction routes: POST /v1/sessions limits, 429 budget_exceeded, /compact."""

from __future__ import annotations

from pathlib import Path


def test_session_limits_refuse_a_message_with_429_budget_exceeded(start_daemon, workspace: Path) -> None:
    d = start_daemon("--yes")
    bad = d.http.post("/v1/sessions", json={"cwd": str(workspace), "limits": {"daily_usd": 1}})
    assert bad.status_code == 400 and "daily_usd" in bad.json()["error"]["message"]
    negative = d.http.post("/v1/sessions", json={"cwd": str(workspace), "limits": {"session_usd": -1}})
    message = negative.json()["error"]["message"]  # was "invalid limits: 1 validation error for Limits"
    assert negative.status_code == 400 and "limits.session_usd = -1" in message and "greater than" in message
    sid = d.http.post("/v1/sessions", json={"cwd": str(workspace), "limits": {"session_turns": 1}}).json()[
        "id"
    ]
    assert d.send(sid, "say one").status_code == 202
    d.wait_status(sid, ("done",), timeout=30)
    refused = d.send(sid, "say two")
    assert refused.status_code == 429
    err = refused.json()["error"]
    assert err["code"] == "budget_exceeded"
    assert err["detail"]["scope"] == "session" and err["detail"]["cap"] == "session_turns"
    assert err["detail"]["limit"] == 1 and err["detail"]["used"] == 1
    assert d.session(sid)["status"] == "done"  # nothing was written: the session stays usable


def test_compact_route_answers_202_and_journals_one_compaction(start_daemon, workspace: Path) -> None:
    d = start_daemon("--yes")
    sid = d.create(workspace)["id"]
    for i in range(3):
        assert d.send(sid, f"say answer {i}").status_code == 202
        d.wait_status(sid, ("done",), timeout=30)
    resp = d.http.post(f"/v1/sessions/{sid}/compact")
    assert resp.status_code == 202 and resp.json()["status"] == "compacting"
    d.wait_event(sid, lambda e: e["type"] == "context.compacted", timeout=30)
    compacted = [e for e in d.events(sid) if e["type"] == "context.compacted"]
    assert len(compacted) == 1 and compacted[0]["payload"]["reason"] == "manual"
    assert d.http.post("/v1/sessions/ses_nope/compact").status_code == 404
    assert d.send(sid, "say after").status_code == 202  # the session goes on from the summary
    d.wait_status(sid, ("done",), timeout=30)


def test_compact_of_an_empty_session_is_refused_at_once_and_a_late_failure_is_in_the_stream(
    start_daemon, workspace: Path
) -> None:
    d = start_daemon("--yes")
    sid = d.create(workspace)["id"]
    resp = d.http.post(f"/v1/sessions/{sid}/compact")  # nothing was said yet: no 202 that fails in the log
    assert resp.status_code == 422 and resp.json()["error"]["code"] == "context_too_large"
    assert "no history" in resp.json()["error"]["message"]
    assert d.send(sid, "say only turn").status_code == 202
    d.wait_status(sid, ("done",), timeout=30)
    assert d.http.post(f"/v1/sessions/{sid}/compact").status_code == 202  # one turn: nothing older
    failure = d.wait_event(
        sid, lambda e: e["type"] == "error" and e["payload"]["code"] == "context_too_large"
    )
    assert "is all the last turn: nothing older" in failure["payload"]["message"]  # no turn is running
    assert d.session(sid)["status"] == "done"
    assert d.send(sid, "say after").status_code == 202  # the session goes on
    d.wait_status(sid, ("done",), timeout=30)
