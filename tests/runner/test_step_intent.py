"""Each LLM step's intent rides in the commit before it (issue 12, benchmarks figure 3).

The accept commit (the user's message) and the commit of a step's last tool result carry the next
step's ``step.started`` and its ``step`` row inflight, so a turn pays one journal transaction per
step fewer; the step id is ``session|turn|digest16`` (``runner/_stepstart.py``), and a step an
older acagent left inflight under its old id (``session|context seq|digest16``) is still found and
retried visibly, never called twice silently. A real registry, a real SQLite journal and the
strict mock provider; commits are counted by wrapping the journal instance's ``commit``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acagent.events import make_payload
from acagent.runner import SessionRegistry
from acagent.runner._context import ContextBuilder
from acagent.settings import load_settings
from acagent.store import RESTING, InsertStep, SetStatus, SetTurn
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio


def _settings(home: Path, mock: MockProvider) -> Any:
    return load_settings(
        {"home": str(home), "base_url": mock.openai_base_url, "model": "openai:mock"}, env={}
    )


def _counting_commits(journal: Any) -> list[list[str]]:
    """The event types of every ``commit`` of ``journal`` from now on (its method is wrapped)."""
    seen: list[list[str]] = []
    inner = journal.commit

    async def commit(session_id: str, events: Any, **kwargs: Any) -> Any:
        seen.append([t for t, _ in events])
        return await inner(session_id, events, **kwargs)

    journal.commit = commit
    return seen


async def test_each_step_intent_rides_in_the_commit_that_makes_its_context(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A turn of three LLM steps and two tool calls (one per step): 6 commits, was 9 (each
    ``step.started`` had a transaction of its own); every ``step.started`` follows the
    ``user.message`` or ``tool.result`` of its own transaction, and its step id names the turn."""
    (workspace / "a.txt").write_text("x")
    ls = openai_tool_calls([("call_1", "list_dir", {"path": "."})])
    again = openai_tool_calls([("call_2", "list_dir", {"path": "."})])
    mock.script(TextReply("warm"), ls, again, TextReply("done"))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        runner = await reg.get_runner((await reg.create_session(workspace)).id)
        runner.writer.frame_s = 60.0  # each quick call ends "within a frame" however loaded the machine is
        await runner.run_turn("warm up")
        seen = _counting_commits(reg.journal)
        turn_id = await runner.run_turn("list it twice")
        events = await reg.journal.events(runner.session_id, 0)
        steps = [s for s in await reg.journal.steps(runner.session_id) if s.turn_id == turn_id]
    assert len(seen) == 6, seen
    assert [c for c in seen if "step.started" in c] == [
        ["turn.started", "user.message", "step.started"],
        ["tool.started", "tool.result", "step.started"],
        ["tool.started", "tool.result", "step.started"],
    ]
    turn = [e for e in events if e.payload.get("turn_id") == turn_id]
    for i, e in enumerate(turn):
        if e.type == "step.started":
            before = next(x for x in reversed(turn[:i]) if x.type != "session.status")
            assert before.type in ("user.message", "tool.result") and before.ts == e.ts  # one transaction
    assert [(s.status, s.attempt) for s in steps] == [("done", 1)] * 3
    for s in steps:
        assert s.step_id == f"{runner.session_id}|{turn_id}|{s.digest[:16]}"
        assert s.request_id == f"{s.step_id}|1"
    assert [r.status for r in mock.requests] == [200] * 4


async def test_a_step_an_older_acagent_left_inflight_is_retried_under_its_old_id(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A journal whose turn died mid-call under an older acagent (step id ``session|seq|digest16``):
    the resumed turn finds that attempt, records ``llm.retry`` ``process_died`` and makes attempt 2
    under the same step id — one request, counted as the retry it is, not a fresh first call."""
    mock.script(TextReply("answered"))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        sid = (await reg.create_session(workspace)).id
        runner = await reg.get_runner(sid)
        turn_id = "turn_0123456789abcdef"
        await reg.journal.commit_unfenced(
            sid,
            [
                ("turn.started", make_payload("turn.started", turn_id=turn_id)),
                ("user.message", make_payload("user.message", turn_id=turn_id, text="hello")),
            ],
            ops=[SetTurn(turn_id), SetStatus("running", RESTING, turn_id=turn_id)],
            reason="test: as an older acagent left it",
        )
        context = ContextBuilder()
        context.rebuild(await reg.journal.context_events(sid))
        digest = context.digest(runner.system_prompt)
        old = f"{sid}|{context.last_seq}|{digest[:16]}"
        started = make_payload("step.started", turn_id=turn_id, step_id=old, request_id=f"{old}|1", attempt=1)
        await reg.journal.commit_unfenced(
            sid,
            [("step.started", started)],
            ops=[InsertStep(f"{old}|1", old, turn_id, digest, 1)],
            reason="test: as an older acagent left it",
        )
        assert await runner.run_turn(None) == turn_id  # resume the interrupted turn
        events = await reg.journal.events(sid, 0)
        steps = await reg.journal.steps(sid)
        row = await reg.journal.get_session(sid)
    retries = [e.payload for e in events if e.type == "llm.retry"]
    assert [(r["reason"], r["attempt"]) for r in retries] == [("process_died", 1)]
    assert [(s.request_id, s.status) for s in steps] == [(f"{old}|1", "failed"), (f"{old}|2", "done")]
    assert len(mock.requests) == 1
    assert (row.status, row.llm_calls, row.llm_retries) == ("done", 2, 1)
    assert events[-1].type == "turn.completed" and events[-1].payload["text"] == "answered"


async def test_the_step_after_a_compaction_rides_in_the_compaction_commit(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A compaction before an LLM call (``fit_context``) commits its summary with the intent of the
    call it made room for: the ``step.started`` that follows each ``context.compacted`` is in its
    transaction (it was a transaction of its own), and every turn still completes."""
    from tests.runner.test_compaction import _settings as compaction_settings
    from tests.runner.test_compaction import notes, responder

    mock.default = responder
    notes(workspace, 30)
    async with SessionRegistry.open(compaction_settings(tmp_path / "home", mock)) as reg:
        runner = await reg.get_runner((await reg.create_session(workspace, model="openai:mock")).id)
        for i in range(30):
            await runner.run_turn(f"please run turn {i}")
        events = await reg.journal.events(runner.session_id, 0)
        steps = {s.request_id: s for s in await reg.journal.steps(runner.session_id)}
    compactions = [i for i, e in enumerate(events) if e.type == "context.compacted"]
    assert len(compactions) >= 3
    for i in compactions:
        after = next(e for e in events[i + 1 :] if e.type != "session.status")
        assert (after.type, after.ts) == ("step.started", events[i].ts)  # one transaction
        step = steps[after.payload["request_id"]]
        assert (step.status, step.attempt, step.turn_id) == ("done", 1, events[i - 1].payload["turn_id"])
    assert [e.type for e in events].count("turn.completed") == 30


async def test_no_intent_rides_when_the_next_call_would_break_a_cap(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """The step after a tool result would break the session's cap: the result's commit carries no
    intent (none would ever be called), and the turn fails ``budget_exceeded`` before that call,
    with no step left inflight and one LLM call counted — as when each step wrote its own."""
    from tests.mockprovider import _oa_usage

    (workspace / "a.txt").write_text("x")
    ls = openai_tool_calls([("call_1", "list_dir", {"path": "."})])
    mock.script(ls.replace(b"data: [DONE]\n\n", _oa_usage(50, 1024) + b"data: [DONE]\n\n"))
    settings = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock",
         "limits": {"session_usd": 1.5},
         "pricing": {"openai:mock": {"input_usd_per_mtok": 0.0, "output_usd_per_mtok": 1000.0}}},
        env={},
    )  # fmt: skip
    async with SessionRegistry.open(settings) as reg:
        runner = await reg.get_runner((await reg.create_session(workspace)).id)
        await runner.run_turn("list it")  # $1.024 spent; the next call's estimate brings it over $1.50
        events = await reg.journal.events(runner.session_id, 0)
        steps = await reg.journal.steps(runner.session_id)
        row = await reg.journal.get_session(runner.session_id)
    failed = [e.payload for e in events if e.type == "turn.failed"]
    assert [f["type"] for f in failed] == ["budget_exceeded"]
    assert [(s.status, s.attempt) for s in steps] == [("done", 1)]
    assert (row.llm_calls, len(mock.requests)) == (1, 1)
    assert [e.type for e in events].count("step.started") == 1
