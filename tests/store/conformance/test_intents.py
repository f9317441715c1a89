"""Conformance: LLM step intents, tool-call intents and approvals."""

from __future__ import annotations

import anyio
import pytest

from acagent.errors import ApprovalNotFound, InvalidTransition, JournalError
from acagent.store import (
    AddUsage,
    FinishStep,
    InsertStep,
    InsertToolCall,
    Journal,
    SetApprovalRules,
    UpdateToolCall,
)

pytestmark = pytest.mark.anyio


async def test_step_intent_attempts_and_counters(journal: Journal, h) -> None:
    """Inflight rows per attempt; finish only from inflight; a duplicate request id fails the commit."""
    row, lease = await h.leased()
    await journal.commit(
        row.id, [("step.started", {})], lease=lease, ops=[InsertStep("s|1", "s", "t1", "d", 1)]
    )
    with pytest.raises(JournalError):
        await journal.commit(
            row.id, [("step.started", {})], lease=lease, ops=[InsertStep("s|1", "s", "t1", "d", 1)]
        )
    assert (await journal.get_session(row.id)).last_seq == 2  # the failed commit wrote nothing
    await journal.commit(row.id, [], lease=lease, ops=[FinishStep("s|1", "failed", "process died")])
    with pytest.raises(InvalidTransition):
        await journal.commit(row.id, [], lease=lease, ops=[FinishStep("s|1", "done")])
    await journal.commit(row.id, [], lease=lease, ops=[InsertStep("s|2", "s", "t1", "d", 2), AddUsage(10, 3)])
    await journal.commit(row.id, [], lease=lease, ops=[FinishStep("s|2", "done")])
    attempts = await journal.step_attempts(row.id, "s")
    assert [(a.attempt, a.status, a.error) for a in attempts] == [
        (1, "failed", "process died"),
        (2, "done", None),
    ]
    assert [a.request_id for a in await journal.steps(row.id)] == ["s|1", "s|2"]
    s = await journal.get_session(row.id)
    assert (s.llm_calls, s.llm_retries, s.input_tokens, s.output_tokens) == (2, 1, 10, 3)
    with pytest.raises(ValueError):
        FinishStep("s|3", "inflight")


async def test_tool_call_intents_and_terminal_rows(journal: Journal, h) -> None:
    """Intent rows in order; updates name their source statuses; terminal rows never change."""
    row, lease = await h.leased()
    await journal.commit(
        row.id,
        [],
        lease=lease,
        ops=[
            InsertToolCall("c1", "t1", "s", 0, "shell", {"cmd": "ls"}, idempotent=False),
            InsertToolCall("c2", "t1", "s", 1, "read_file", {"path": "a"}, idempotent=True),
        ],
    )
    open_calls = await journal.tool_calls(row.id, turn_id="t1", open_only=True)
    assert [(c.tool_call_id, c.status, c.idempotent) for c in open_calls] == [
        ("c1", "dispatched", 0),
        ("c2", "dispatched", 1),
    ]
    assert open_calls[0].arguments == '{"cmd":"ls"}'
    fields = (("runner", "w1"), ("pid", 4242), ("run_expires_at", 12.5), ("host", "h-1"), ("runner_pid", 77))
    await journal.commit(
        row.id, [], lease=lease, ops=[UpdateToolCall("c1", "running", ("dispatched",), fields)]
    )
    got = (await journal.tool_calls(row.id))[0]
    assert (got.status, got.runner, got.pid, got.run_expires_at) == ("running", "w1", 4242, 12.5)
    assert (got.host, got.runner_pid) == ("h-1", 77)  # which host and process ran it (recovery)
    await journal.commit(
        row.id, [], lease=lease, ops=[UpdateToolCall("c1", "done", ("running",), (("result_status", "ok"),))]
    )
    with pytest.raises(InvalidTransition):
        await journal.commit(
            row.id, [], lease=lease, ops=[UpdateToolCall("c1", "running", ("running", "dispatched"))]
        )
    with pytest.raises(ValueError):
        UpdateToolCall("c1", "running", ("done",))
    with pytest.raises(ValueError):
        UpdateToolCall("c1", "running", ("running",), (("name", "evil"),))
    assert [c.tool_call_id for c in await journal.tool_calls(row.id, open_only=True)] == ["c2"]
    assert (await journal.tool_calls(row.id))[0].terminal
    assert await journal.existing_tool_call_ids(row.id, ["c1", "zz"]) == {"c1"}
    assert await journal.existing_tool_call_ids(row.id, []) == set()
    # an op failing late rolls back the whole commit, events and earlier ops included
    with pytest.raises(InvalidTransition):
        await journal.commit(
            row.id,
            [("tool.result", {"tool_call_id": "c2"})],
            lease=lease,
            ops=[
                UpdateToolCall("c2", "running", ("dispatched",)),
                UpdateToolCall("c1", "done", ("running",)),
            ],
        )
    assert [c.status for c in await journal.tool_calls(row.id)] == ["done", "dispatched"]
    await journal.commit(row.id, [], lease=lease, ops=[SetApprovalRules({"shell": ["ls"]})])
    assert (await journal.get_session(row.id)).approval_rules == '{"shell":["ls"]}'


async def _pending_call(journal: Journal, h, call_id: str = "c1"):
    row, lease = await h.leased()
    await journal.commit(
        row.id,
        [("approval.requested", {"tool_call_id": call_id, "name": "shell"})],
        lease=lease,
        ops=[
            InsertToolCall(
                call_id, "t", "s", 0, "shell", {}, idempotent=False, status="waiting_user", approval="pending"
            )
        ],
    )
    return row, lease


async def test_concurrent_approval_answers_first_wins(journal_factory, h) -> None:
    """allow and deny at the same moment from two connections: one wins, the other names the winner."""
    journal = h.journal
    other = await journal_factory()
    row, _ = await _pending_call(journal, h)
    results: list[object] = []

    async def answer(j: Journal, decision: str) -> None:
        try:
            results.append(await j.resolve_approval(row.id, "c1", decision, note="by test"))
        except ApprovalNotFound as exc:
            results.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(answer, journal, "allow")
        tg.start_soon(answer, other, "deny")
    errors = [r for r in results if isinstance(r, ApprovalNotFound)]
    assert len(errors) == 1
    winner = next(r for r in results if not isinstance(r, ApprovalNotFound))
    assert errors[0].detail["decision"] == winner.approval  # type: ignore[union-attr]
    assert winner.approval_note == "by test"  # type: ignore[union-attr]
    with pytest.raises(ApprovalNotFound):
        await journal.resolve_approval(row.id, "nope", "allow")


async def test_pending_approvals_one_definition(journal: Journal, h) -> None:
    """Pending = approval pending and waiting_user, per session or across sessions; events: latest request."""
    row, lease = await _pending_call(journal, h)
    await journal.commit(
        row.id, [("approval.requested", {"tool_call_id": "c1", "name": "shell", "again": 1})], lease=lease
    )
    other, _ = await _pending_call(journal, h, "c9")
    assert [r.approval_view() for r in await journal.pending_approvals(row.id)] == [
        {"tool_call_id": "c1", "name": "shell", "arguments": {}, "turn_id": "t"}
    ]
    assert {(r.session_id, r.tool_call_id) for r in await journal.pending_approvals()} >= {
        (row.id, "c1"),
        (other.id, "c9"),
    }
    events = await journal.pending_approval_events(row.id)
    assert [(e.seq, e.payload.get("again")) for e in events] == [(3, 1)]
    await journal.resolve_approval(row.id, "c1", "allow")
    assert await journal.pending_approvals(row.id) == []
    assert await journal.pending_approval_events(row.id) == []
