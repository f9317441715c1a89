"""The one pending-approval rule (``store/_rows.py``): the row predicate, the view, the latest request."""

from __future__ import annotations

import dataclasses

from acagent.events import Event
from acagent.store._rows import ToolCallRow, latest_requests

ROW = ToolCallRow(
    "ses_1",
    "c1",
    "t1",
    "s1",
    0,
    "shell",
    '{"command": "ls"}',
    None,
    "waiting_user",
    "pending",
    None,
    None,
    None,
    None,
    0,
    None,
)


def test_pending_predicate_and_view() -> None:
    """Pending = approval pending and waiting_user; the view decodes arguments, raw text if not JSON."""
    assert ROW.pending_approval
    assert not dataclasses.replace(ROW, status="dispatched").pending_approval
    assert not dataclasses.replace(ROW, approval="allow").pending_approval
    assert ROW.approval_view() == {
        "tool_call_id": "c1",
        "name": "shell",
        "arguments": {"command": "ls"},
        "turn_id": "t1",
    }
    assert dataclasses.replace(ROW, arguments="{broken").approval_view()["arguments"] == "{broken"


def test_latest_request_per_pending_call() -> None:
    """A re-asked approval is re-sent once, as its latest request; resolved calls are left out."""

    def req(seq: int, tcid: str) -> Event:
        return Event(
            seq=seq, ts="t", session_id="ses_1", type="approval.requested", payload={"tool_call_id": tcid}
        )

    events = [req(3, "a"), req(4, "b"), req(7, "a"), req(9, "gone")]
    assert [(e.seq, e.payload["tool_call_id"]) for e in latest_requests({"a", "b"}, events)] == [
        (4, "b"),
        (7, "a"),
    ]
