"""F13: an in-band ``overloaded_error`` mid-stream is retried cleanly — through the runner.

Case ``shared/cases/F13-inband-stream-error.md``. The stream-level mapping (the in-band error
is a retryable ``ProviderHTTPError`` with ``error_type`` ``overloaded_error``, the partial
``tool_use`` is never returned) is tested in
``tests/providers/test_anthropic_stream.py::TestInbandError``; here the whole turn runs. Names:
``llm.retry{reason, attempt, delay_ms}`` as in the case; the case's ``turn.failed{type, retryable}``
is acagent's ``turn.failed`` payload ``type`` (the error type) and ``retryable``; the retry limit
is ``timing.step_max_attempts``. The events are read from the journal, which is what ``attach``
replays.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply

pytestmark = pytest.mark.anyio


def _index(types: list[tuple[str, str]], wanted: tuple[str, str]) -> int:
    return types.index(wanted)


async def test_overloaded_mid_stream_is_retried_and_superseded(
    tmp_path: Path, mock: MockProvider, workspace: Path, cases: Path
) -> None:
    """turn.started → delta ``I'll start by`` → llm.retry(overloaded_error, 1, delay_ms > 0) →
    delta and message ``done`` → turn.completed; the partial tool_use never runs; request 2 has
    the body of request 1; the history holds only ``done``."""
    mock.script(
        (cases / "F13-overloaded-attempt1.anthropic.sse").read_bytes(),
        (cases / "F13-ok-attempt2.anthropic.sse").read_bytes(),
        TextReply("next answer"),
    )
    settings = settings_for(tmp_path / "home", mock, "anthropic", auto_approve=True)
    async with open_session(settings, workspace) as (_, runner):
        await runner.run_turn("start")
        events = await journal_events(runner)
        await runner.run_turn("and then?")
        snapshot = await runner.snapshot()
    marks = [(e.type, e.payload.get("text", "")) for e in events]
    order = [
        _index(marks, ("turn.started", "")),
        _index(marks, ("assistant.delta", "I'll start by")),
        next(i for i, e in enumerate(events) if e.type == "llm.retry"),
        _index(marks, ("assistant.delta", "done")),
        _index(marks, ("assistant.message", "done")),
        _index(marks, ("turn.completed", "done")),
    ]
    assert order == sorted(order)
    (retry,) = [e.payload for e in events if e.type == "llm.retry"]
    assert (retry["reason"], retry["attempt"]) == ("overloaded_error", 1) and retry["delay_ms"] > 0
    assert [e.payload["text"] for e in events if e.type == "assistant.message"] == ["done"]
    assert not [
        e for e in events if e.type in ("tool.call", "tool.started", "tool.result", "approval.requested")
    ]
    assert snapshot["status"] == "done" and snapshot["usage"]["llm_retries"] == 1
    first, second, third = mock.requests
    assert [first.status, second.status, third.status] == [200, 200, 200]
    assert first.json == second.json  # no partial output appended to the retry
    history = json.dumps(third.json["messages"])
    assert "I'll start by" not in history and "tool_use" not in history and "toolu_E" not in history
    assert third.json["messages"][1] == {"role": "assistant", "content": "done"}


async def test_every_attempt_overloaded_fails_the_turn_after_the_limit(
    tmp_path: Path, mock: MockProvider, workspace: Path, cases: Path
) -> None:
    """Variant: 3 attempts overloaded (limit 3) → turn.failed{type overloaded_error, retryable};
    exactly 3 requests; status failed; the next message is accepted and the strict mock accepts it."""
    attempt1 = (cases / "F13-overloaded-attempt1.anthropic.sse").read_bytes()
    mock.script(attempt1, attempt1, attempt1, TextReply("recovered"))
    settings = settings_for(
        tmp_path / "home", mock, "anthropic", auto_approve=True, timing={"step_max_attempts": 3}
    )
    async with open_session(settings, workspace) as (reg, runner):
        await runner.run_turn("start")
        events = await journal_events(runner)
        failed_snapshot = await runner.snapshot()
        assert len(mock.requests) == 3
        await reg.start_turn(runner.session_id, "try again")  # accepted from `failed`
        await runner.wait()
        after = await runner.snapshot()
        all_events = await journal_events(runner)
    (failed,) = [e.payload for e in events if e.type == "turn.failed"]
    assert failed["type"] == "overloaded_error" and failed["retryable"] is True
    retries = [e.payload for e in events if e.type == "llm.retry"]
    assert [(r["reason"], r["attempt"]) for r in retries] == [
        ("overloaded_error", 1),
        ("overloaded_error", 2),
    ]
    assert failed_snapshot["status"] == "failed"
    assert not [e for e in all_events if e.type in ("tool.call", "tool.started")]
    assert after["status"] == "done"
    requests = mock.requests
    assert len(requests) == 4 and [r.status for r in requests] == [200] * 4, [r.error for r in requests]
    history = json.dumps(requests[3].json["messages"])
    assert "tool_use" not in history and "I'll start by" not in history
    assert "start" in history and "try again" in history
