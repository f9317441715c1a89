"""F46: parallel tool calls of one step ask for all their approvals at once — both providers.

A real session (strict mock provider, real journal, real ``bash``): one step asks for three
``shell`` calls. All three ``approval.requested`` events arrive before any answer; the test answers
them out of order (third, first, second); each call starts only after its own decision, the
denied one gets its "not run" result, and the strict mock accepts the follow-up request. Cancel
with three pending approvals closes all three, and the next turn is accepted.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.runner import InProcessRunner
from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply, anthropic_tool_calls, openai_tool_calls

pytestmark = pytest.mark.anyio

CALLS = [("call_a", "shell", {"command": "echo one"}), ("call_b", "shell", {"command": "echo two"}),
         ("call_c", "shell", {"command": "echo three"})]  # fmt: skip


def step_reply(provider: str) -> bytes:
    if provider == "openai":
        return openai_tool_calls(CALLS)
    return anthropic_tool_calls(None, CALLS)


async def requested_all(runner: InProcessRunner, since: int, n: int) -> list[dict[str, Any]]:
    """The first ``n`` approval.requested payloads after ``since``, waiting at most 10 s."""
    seen: list[dict[str, Any]] = []
    with anyio.move_on_after(10):
        async for event in runner.subscribe("f46", since):
            if event.type == "approval.requested":
                seen.append(event.payload)
                if len(seen) == n:
                    break
    return seen


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_all_approvals_at_once_answered_in_any_order(
    tmp_path: Path, mock: MockProvider, provider: str
) -> None:
    W = Path(os.path.realpath(tmp_path)) / "w"
    W.mkdir()
    settings = settings_for(tmp_path / "state", mock, provider)
    async with open_session(settings, W) as (_, runner):
        mock.script(step_reply(provider), TextReply("done"))
        since = runner.bus.last_seq
        await runner.step("three calls")
        asked = await requested_all(runner, since, 3)
        assert [p["tool_call_id"] for p in asked] == ["call_a", "call_b", "call_c"], "not asked at once"
        assert (await runner.snapshot())["status"] == "waiting_user"
        events = [e for e in await journal_events(runner) if e.seq > since]
        assert not [e for e in events if e.type == "tool.started"]  # nothing ran before a decision
        for call_id, decision in (("call_c", "allow"), ("call_a", "deny"), ("call_b", "allow")):
            await runner.answer_approval(call_id, decision)
        with anyio.fail_after(20):
            await runner.wait()
        events = [e for e in await journal_events(runner) if e.seq > since]
    seq = {(e.type, e.payload.get("tool_call_id")): e.seq for e in events}
    for call_id in ("call_b", "call_c"):
        assert seq[("approval.resolved", call_id)] < seq[("tool.started", call_id)]
    assert ("tool.started", "call_a") not in seq
    results = {e.payload["tool_call_id"]: e.payload for e in events if e.type == "tool.result"}
    assert results["call_a"]["status"] == "denied" and "not run" in results["call_a"]["content"]
    assert results["call_b"]["content"] == "two\n" and results["call_c"]["content"] == "three\n"
    assert events[-1].type in ("turn.completed", "session.status")
    assert all(r.status == 200 for r in mock.requests), [r.error for r in mock.requests]


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_cancel_with_several_pending_closes_them_all(
    tmp_path: Path, mock: MockProvider, provider: str
) -> None:
    W = Path(os.path.realpath(tmp_path)) / "w"
    W.mkdir()
    settings = settings_for(tmp_path / "state", mock, provider)
    async with open_session(settings, W) as (_, runner):
        mock.script(step_reply(provider), TextReply("after cancel"))
        since = runner.bus.last_seq
        await runner.step("three calls")
        assert len(await requested_all(runner, since, 3)) == 3
        await runner.cancel()
        with anyio.fail_after(20):
            await runner.wait()
        events = [e for e in await journal_events(runner) if e.seq > since]
        results = [e.payload for e in events if e.type == "tool.result"]
        assert sorted(r["tool_call_id"] for r in results) == ["call_a", "call_b", "call_c"]
        assert not [e for e in events if e.type == "tool.started"]
        assert (await runner.snapshot())["status"] == "cancelled"
        await runner.run_turn("go on")
    assert all(r.status == 200 for r in mock.requests), [r.error for r in mock.requests]


async def test_always_on_one_call_covers_its_pending_siblings_f131(
    tmp_path: Path, mock: MockProvider
) -> None:
    """F131: the prompt says what ``always`` covers ("this exact command"); a sibling call of the
    same step that it covers was still waiting for its own answer. It is now allowed by that rule
    (``approval.resolved`` allow, with the reason); a call the rule does not cover still asks."""
    W = Path(os.path.realpath(tmp_path)) / "w"
    W.mkdir()
    settings = settings_for(tmp_path / "state", mock, "openai")
    same, other = {"command": "echo same >> out.txt"}, {"command": "echo other >> out.txt"}
    calls = [("call_a", "shell", same), ("call_b", "shell", same), ("call_c", "shell", other)]
    async with open_session(settings, W) as (_, runner):
        mock.script(openai_tool_calls(calls), TextReply("done"))
        since = runner.bus.last_seq
        await runner.step("three calls")
        asked = await requested_all(runner, since, 3)
        assert [p["always"] for p in asked][:1] == ["always: this exact command only, for this session"]
        await runner.answer_approval("call_a", "always")
        with anyio.fail_after(20):
            while [p["tool_call_id"] for p in (await runner.snapshot())["pending_approvals"]] != ["call_c"]:
                await anyio.sleep(0.05)
        await runner.answer_approval("call_c", "deny")
        with anyio.fail_after(20):
            await runner.wait()
        events = [e for e in await journal_events(runner) if e.seq > since]
    resolved = {e.payload["tool_call_id"]: e.payload for e in events if e.type == "approval.resolved"}
    assert resolved["call_a"]["decision"] == "always"
    assert resolved["call_b"]["decision"] == "allow" and "always" in resolved["call_b"]["reason"]
    assert resolved["call_c"]["decision"] == "deny"
    results = {e.payload["tool_call_id"]: e.payload["status"] for e in events if e.type == "tool.result"}
    assert results == {"call_a": "ok", "call_b": "ok", "call_c": "denied"}
    assert (W / "out.txt").read_text() == "same\nsame\n"
    assert all(r.status == 200 for r in mock.requests), [r.error for r in mock.requests]
