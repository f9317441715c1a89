"""Work and input from any daemon: three daemons (d2, d3, d4 on 127.0.0.2/.3/.4, one turn each at
most: ``--max-sessions 1``) on one PostgreSQL journal.

Every message, approval answer and cancel posted to a daemon is an ``inbox`` row first (with the
client's ``Idempotency-Key``); the session's owner takes it exactly once and applies it; an
unowned session is claimed by the receiving daemon; a daemon without a free slot hands a message
to a peer that has one; ``409 session_busy`` and ``429 concurrency_cap`` hold cluster-wide.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mockprovider import MockProvider
from tests.scaleout.conftest import Cluster, ClusterDaemon
from tests.scaleout.test_cluster import _deltas, _finish, _sql, _start_turn
from tests.server.conftest import _content_text, openai_calls, responder, wait_for

pytestmark = pytest.mark.timeout(180)

LONG = "deltas 300 12 10"  # ~3 s mid-stream
_ids = itertools.count(1)


def _responder(body: Any) -> Any:
    """The shared directives plus ``ask QUESTION`` (an ask_user call: always an approval)."""
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    text = _content_text(last.get("content")).strip()
    if last.get("role") == "user" and text.startswith("ask "):
        return openai_calls([(f"ask_{next(_ids)}", "ask_user", {"question": text[4:]})])
    return responder(body)


@pytest.fixture(scope="module")
def mock() -> Iterator[MockProvider]:
    with MockProvider() as server:
        server.default = _responder
        yield server


@pytest.fixture(scope="module")
def cluster(
    tmp_path_factory: pytest.TempPathFactory, mock: MockProvider, pg_server: Any
) -> Iterator[Cluster]:
    c = Cluster(
        url=pg_server.create_schema("acagent_tests"),
        root=tmp_path_factory.mktemp("inbox"),
        mock=mock,
        pg=pg_server,
        args=("--yes", "--max-sessions", "1"),
    )
    try:
        for i in (2, 3, 4):
            c.start(f"127.0.0.{i}", f"d{i}")
        yield c
    finally:
        c.close()


def _inbox(cluster: Cluster, sid: str) -> list[list[str]]:
    out = _sql(
        cluster,
        "SELECT kind, idempotency_key, received_by, coalesce(target, '-'), coalesce(consumed_by, '-'),"
        f" coalesce(outcome, '-') FROM inbox WHERE session_id = '{sid}' ORDER BY id",
    )
    return [line.split("|") for line in out.split("\n")] if out else []


def _post(d: ClusterDaemon, path: str, key: str | None = None, **body: Any) -> Any:
    headers = {"Idempotency-Key": key} if key else {}
    return d.http.post(path, json=body or None, headers=headers)


class TestInputFromAnyDaemon:
    def test_cancel_posted_to_a_non_owner(self, cluster: Cluster, workspace: Path) -> None:
        """A cancel posted to d3 for d2's running turn: one inbox row (d3 → d2), taken by d2, which
        interrupts its turn; a retry with the same key to d4 is answered without a second row."""
        d2, d3, d4 = (cluster.daemons[k] for k in ("d2", "d3", "d4"))
        sid, (on4,) = _start_turn(cluster, d2, [d4], workspace, LONG)
        _deltas(on4, 10)
        r = _post(d3, f"/v1/sessions/{sid}/cancel", key="cancel-1")
        assert r.status_code == 202, r.text
        on4.wait_type("turn.interrupted", timeout=30)
        d4.wait_status(sid, ("cancelled",), 30)
        assert _post(d4, f"/v1/sessions/{sid}/cancel", key="cancel-1").status_code == 202
        rows = _inbox(cluster, sid)
        assert [r[:5] for r in rows if r[0] == "cancel"] == [["cancel", "cancel-1", "d3", "d2", "d2"]]
        journal = d3.events(sid)
        assert sum(1 for e in journal if e["type"] == "turn.interrupted") == 1
        assert [e["seq"] for e in on4.events] == [e["seq"] for e in journal]

    def test_approval_answered_on_a_non_owner(self, cluster: Cluster, workspace: Path) -> None:
        """An ask_user question of d2's turn answered through d4: d2 takes the row, records the
        answer and its turn continues; the same key again (to d3) gets the same answer, a second
        answer without it is 404."""
        d2, d3, d4 = (cluster.daemons[k] for k in ("d2", "d3", "d4"))
        sid, (on3,) = _start_turn(cluster, d2, [d3], workspace, "ask which colour?")
        on3.wait_type("approval.requested", timeout=30)
        call = next(e for e in on3.events if e["type"] == "approval.requested")["payload"]["tool_call_id"]
        path = f"/v1/sessions/{sid}/approvals/{call}"
        r = _post(d4, path, key="ans-1", decision="allow", answer="teal")
        assert r.status_code == 200 and r.json()["decision"] == "answered", r.text
        journal = _finish(cluster, d3, sid, [on3])
        result = next(e for e in journal if e["type"] == "tool.result")
        assert "teal" in str(result["payload"])
        again = _post(d3, path, key="ans-1", decision="allow", answer="teal")
        assert again.status_code == 200 and again.json()["decision"] == "answered"
        late = _post(d3, path, decision="deny")
        assert late.status_code == 404 and late.json()["error"]["code"] == "approval_not_found"
        rows = [r for r in _inbox(cluster, sid) if r[1] == "ans-1"]
        assert [r[:5] for r in rows] == [["approval", "ans-1", "d4", "d2", "d2"]]

    def test_idempotent_message_claimed_by_the_receiver(self, cluster: Cluster, workspace: Path) -> None:
        """A message to an unowned session: the receiving daemon (d3) claims it and runs the turn;
        the same key again to d4 gets the same turn id and starts nothing."""
        d3, d4 = cluster.daemons["d3"], cluster.daemons["d4"]
        sid = d3.create(workspace)["id"]
        a = cluster.attach(d4, sid)
        time.sleep(0.3)
        r = _post(d3, f"/v1/sessions/{sid}/messages", key="msg-1", text="say hi")
        assert r.status_code == 202, r.text
        again = _post(d4, f"/v1/sessions/{sid}/messages", key="msg-1", text="say hi")
        assert again.status_code == 202 and again.json()["turn_id"] == r.json()["turn_id"]
        journal = _finish(cluster, d4, sid, [a])
        assert sum(1 for e in journal if e["type"] == "turn.started") == 1
        assert [x[:5] for x in _inbox(cluster, sid)] == [["message", "msg-1", "d3", "d3", "d3"]]


class TestClusterWideBusyAndCap:
    def test_busy_and_cap_are_cluster_wide(self, cluster: Cluster, workspace: Path) -> None:
        """Every daemon runs one turn at most. d2 is full: a message it receives for an idle
        session is handed to a peer with a free slot (202); with all three slots taken the next
        one is 429 concurrency_cap (detail: the cluster's load); a message for a running
        session is 409 session_busy on any daemon."""
        d2, d3, d4 = (cluster.daemons[k] for k in ("d2", "d3", "d4"))
        sid_a, (on3,) = _start_turn(cluster, d2, [d3], workspace, LONG)
        _deltas(on3, 5)
        others = [d2.create(workspace)["id"] for _ in range(3)]
        ran_on = []
        for sid in others[:2]:
            r = _post(d2, f"/v1/sessions/{sid}/messages", text=LONG)
            assert r.status_code == 202, r.text
            ran_on.append(_inbox(cluster, sid)[0][4])
        assert sorted(ran_on) == ["d3", "d4"]  # d2 was full: each went to the peer with a slot
        full = _post(d2, f"/v1/sessions/{others[2]}/messages", text="say hi")
        assert full.status_code == 429, full.text
        err = full.json()["error"]
        assert err["code"] == "concurrency_cap" and err["detail"]["cluster_capacity"] == 3
        for d in (d2, d3, d4):
            busy = _post(d, f"/v1/sessions/{sid_a}/messages", text="say hi")
            assert busy.status_code == 409 and busy.json()["error"]["code"] == "session_busy", busy.text
        for sid in others[:2]:
            d4.wait_status(sid, ("done",), 60)
        _finish(cluster, d3, sid_a, [on3])
        assert d4.session(others[2])["status"] == "pending"  # the refused message started nothing
        wait_for(
            lambda: _post(d3, f"/v1/sessions/{others[2]}/messages", text="say ok").status_code == 202, 20
        )
        d3.wait_status(others[2], ("done",), 30)
