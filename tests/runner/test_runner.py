"""Runner behaviour against the strict mock provider (real HTTP, real providers, real SQLite).

Cancel from every state, tool-call pairing after cancel (F01), partial output on cancel (F02),
process-tree kill (F07), single flight (50 concurrent starts), approvals, resume from checkpoints.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from acagent.errors import ConcurrencyCap, SessionBusy
from acagent.events import Event
from acagent.runner import InProcessRunner, SessionRegistry
from acagent.runner._context import ContextNotLoaded
from acagent.settings import load_settings
from tests.casefiles import require_cases
from tests.mockprovider import (
    MockProvider,
    Script,
    TextReply,
    anthropic_tool_calls,
    openai_text,
    openai_tool_calls,
)

pytestmark = pytest.mark.anyio


def settings_for(home: Path, mock: MockProvider, provider: str, **over: Any) -> Any:
    base = mock.openai_base_url if provider == "openai" else mock.anthropic_base_url
    return load_settings({"home": str(home), "base_url": base, "model": f"{provider}:mock", **over}, env={})


async def wait_for(runner: InProcessRunner, predicate: Any, since: int = 0, timeout: float = 30) -> Event:
    with anyio.fail_after(timeout):
        async for event in runner.subscribe("test", since):
            if predicate(event):
                return event
    raise AssertionError("subscription ended")


async def collect(runner: InProcessRunner) -> list[Event]:
    return await runner.journal.events(runner.session_id, 0)


class Harness:
    def __init__(self, registry: SessionRegistry, runner: InProcessRunner) -> None:
        self.registry = registry
        self.runner = runner


@pytest.fixture
async def openai_session(tmp_path: Path, mock: MockProvider, workspace: Path) -> AsyncIterator[Harness]:
    s = settings_for(tmp_path / "home", mock, "openai", auto_approve=True)
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        yield Harness(reg, await reg.get_runner(row.id))


def _tool_result_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_cancel_mid_tool_pairs_every_tool_call_f01(
    tmp_path: Path, mock: MockProvider, workspace: Path, provider: str
) -> None:
    """F01: cancel while toolu_B runs → B gets an "interrupted" result; the next request is valid."""
    fixture = require_cases() / f"F01-turn1.{provider}.sse"
    mock.script(fixture.read_bytes(), TextReply("4"))
    s = settings_for(tmp_path / "home", mock, provider, auto_approve=True)
    a_id, b_id = ("toolu_A", "toolu_B") if provider == "anthropic" else ("call_A", "call_B")
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace, model=f"{provider}:mock")
        runner = await reg.get_runner(row.id)
        await runner.step("run both")
        await wait_for(runner, lambda e: e.type == "tool.started" and e.payload["tool_call_id"] == b_id)
        await reg.cancel(row.id)
        await runner.wait()
        assert (await runner.snapshot())["status"] == "cancelled"
        await runner.run_turn("never mind, what is 2+2?")
        events = await collect(runner)
    last = mock.requests[-1]
    assert last.status == 200, last.error
    msgs = last.json["messages"]
    if provider == "anthropic":
        assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
        blocks = msgs[2]["content"]
        assert [b["type"] for b in blocks] == ["tool_result", "tool_result", "text"]
        assert [b["tool_use_id"] for b in blocks[:2]] == [a_id, b_id]
        assert _tool_result_text(blocks[0]["content"]) == "a\n"
        assert blocks[1]["is_error"] is True and "interrupted" in _tool_result_text(blocks[1]["content"])
        assert blocks[2]["text"] == "never mind, what is 2+2?"
        assert msgs[1]["content"][0] == {"type": "text", "text": "Running both."}
    else:
        msgs = [m for m in msgs if m["role"] != "system"]
        assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "user"]
        assert [c["id"] for c in msgs[1]["tool_calls"]] == [a_id, b_id]
        assert json.loads(msgs[1]["tool_calls"][1]["function"]["arguments"]) == {"command": "sleep 30"}
        assert msgs[2] == {"role": "tool", "tool_call_id": a_id, "content": "a\n"}
        assert msgs[3]["tool_call_id"] == b_id and "interrupted" in msgs[3]["content"]
    results = [e.payload for e in events if e.type == "tool.result"]
    assert [(r["tool_call_id"], r["status"]) for r in results] == [(a_id, "ok"), (b_id, "interrupted")]
    assert any(e.type == "turn.interrupted" for e in events)
    calls = [e for e in events if e.type == "tool.call"]
    assert len(calls) == len(results)


@pytest.mark.parametrize("variant", ["a", "b", "c", "d"])
async def test_cancel_during_stream_keeps_only_what_the_user_saw_f02(
    tmp_path: Path, mock: MockProvider, workspace: Path, variant: str
) -> None:
    """F02: partial text kept byte-identical, empty partials and half tool calls dropped."""
    provider = "openai" if variant == "a" else "anthropic"
    fixture = require_cases() / f"F02-pause-{variant}.{provider}.sse"
    mock.script(Script(chunks=[fixture.read_bytes()], pause_after=1), TextReply("ok"))
    s = settings_for(tmp_path / "home", mock, provider, auto_approve=True)
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace, model=f"{provider}:mock")
        runner = await reg.get_runner(row.id)
        await runner.step("start")
        await anyio.to_thread.run_sync(lambda: mock.wait_paused(1, 30))
        if variant in ("c", "d"):  # the text the user saw is shown before the cancel (0.2 s was
            await wait_for(runner, lambda e: e.type == "assistant.delta")  # not always enough)
        await anyio.sleep(0.2)  # let the rest of the paused bytes be parsed (nothing shows them)
        await reg.cancel(row.id)
        await runner.wait()
        await runner.run_turn("continue")
        events = await collect(runner)
    mock.release(5)
    req = mock.requests[-1]
    assert req.status == 200, req.error
    body = json.dumps(req.json)
    assert '"content": ""' not in body and '"tool_calls": []' not in body
    assert '{"type": "text", "text": ""}' not in body
    msgs = [m for m in req.json["messages"] if m["role"] != "system"]
    if variant in ("a", "b"):
        assert [m["role"] for m in msgs] == ["user"]  # policy: merged user messages
        text = msgs[0]["content"] if isinstance(msgs[0]["content"], str) else json.dumps(msgs[0]["content"])
        assert "start" in text and "continue" in text
    else:
        assert [m["role"] for m in msgs] == ["user", "assistant", "user"]
        content = msgs[1]["content"]
        text = content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
        expected = "Here is the plan: first" if variant == "c" else "Checking."
        assert text.startswith(expected)
        assert "tool_use" not in json.dumps(content)
    assert not [e for e in events if e.type == "tool.call"]


async def test_cancel_kills_shell_process_tree_f07(openai_session: Harness, mock: MockProvider) -> None:
    """F07: a command that traps TERM and forks a sleep is killed as a group on cancel."""
    cmd = 'bash -c \'trap "" INT TERM HUP; sleep 1000 & echo "child=$!"; while true; do sleep 1; done\''
    mock.script(openai_tool_calls([("call_1", "shell", {"command": cmd})]), TextReply("ok"))
    runner = openai_session.runner
    await runner.step("go")
    out = await wait_for(runner, lambda e: e.type == "tool.output" and "child=" in e.payload["text"])
    child = int(out.payload["text"].split("child=")[1].split()[0])
    t0 = time.monotonic()
    await openai_session.registry.cancel(runner.session_id)
    await runner.wait()
    assert time.monotonic() - t0 < runner.settings.timing.tool_kill_grace_s + 1.5
    _assert_dead(child)
    events = await collect(runner)
    result = next(e.payload for e in events if e.type == "tool.result")
    assert result["status"] == "interrupted" and f"child={child}" in result["content"]
    assert (await runner.snapshot())["status"] == "cancelled"
    await runner.run_turn("next")  # a new message revives the session
    assert (await runner.snapshot())["status"] == "done"


def _assert_dead(pid: int) -> None:
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return
        except (ProcessLookupError, FileNotFoundError):
            return
        time.sleep(0.05)
    raise AssertionError(f"pid {pid} still alive")


async def test_fifty_concurrent_starts_run_exactly_one_turn(
    openai_session: Harness, mock: MockProvider
) -> None:
    """Single flight: 50 concurrent attempts to start a turn → one runs, 49 get session_busy."""
    body = openai_text("only one")
    cut = body.index(b"\n\n") + 2  # two chunks: ``sleeps`` waits before every chunk but the first
    mock.script(Script(chunks=[body[:cut], body[cut:]], sleeps=0.2))
    reg, sid = openai_session.registry, openai_session.runner.session_id
    outcomes: list[str] = []

    async def attempt(i: int) -> None:
        try:
            await reg.start_turn(sid, f"msg {i}")
            outcomes.append("ok")
        except SessionBusy:
            outcomes.append("busy")

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(attempt, i)
    assert outcomes.count("ok") == 1 and outcomes.count("busy") == 49
    await openai_session.runner.wait()
    assert len(mock.requests) == 1
    types = [e.type for e in await collect(openai_session.runner)]
    assert types.count("user.message") == 1


async def test_concurrency_cap(tmp_path: Path, mock: MockProvider, workspace: Path) -> None:
    """max_sessions turns at once; the next one gets concurrency_cap."""
    body = openai_text("slow")
    cut = body.index(b"\n\n") + 2
    # Two chunks: ``sleeps`` is before each chunk after the first (with one chunk the "slow"
    # turn took a few ms and could end before the second start_turn, once commits ran inline).
    mock.default = Script(chunks=[body[:cut], body[cut:]], sleeps=0.5)
    s = settings_for(tmp_path / "home", mock, "openai", max_sessions=1)
    async with SessionRegistry.open(s) as reg:
        a = await reg.create_session(workspace)
        b = await reg.create_session(workspace)
        await reg.start_turn(a.id, "one")
        with pytest.raises(ConcurrencyCap):
            await reg.start_turn(b.id, "two")
        await (await reg.get_runner(a.id)).wait()
        await reg.start_turn(b.id, "two")


@pytest.mark.parametrize("status", ["pending", "running", "waiting_tool", "waiting_user", "done", "failed"])
async def test_cancel_reachable_from_every_status(
    tmp_path: Path, mock: MockProvider, workspace: Path, status: str
) -> None:
    """Cancel works in each state and ends in cancelled; a new message then revives the session."""
    s = settings_for(tmp_path / "home", mock, "openai", auto_approve=status != "waiting_user")
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        if status == "running":
            body = openai_text("never")
            cut = body.index(b"\n\n") + 2
            mock.script(Script(chunks=[body[:cut], body[cut:]], pause_after=1))
            await runner.step("hi")
            await anyio.to_thread.run_sync(lambda: mock.wait_paused(1, 30))
        elif status in ("waiting_tool", "waiting_user"):
            mock.script(openai_tool_calls([("call_1", "shell", {"command": "sleep 30"})]))
            await runner.step("hi")
            target = "tool.started" if status == "waiting_tool" else "approval.requested"
            await wait_for(runner, lambda e: e.type == target)
        elif status in ("done", "failed"):
            mock.script(
                TextReply("x") if status == "done" else Script(status=400, body={"error": {"message": "no"}})
            )
            await runner.run_turn("hi")
        assert (await runner.snapshot())["status"] == status
        await reg.cancel(row.id)
        await runner.wait()
        mock.release(5)
        snap = await runner.snapshot()
        assert snap["status"] == "cancelled"
        assert snap["pending_approvals"] == []
        mock.script(TextReply("revived"))
        await runner.run_turn("again")
        assert (await runner.snapshot())["status"] == "done"
        assert mock.requests[-1].status == 200, mock.requests[-1].error


async def test_approval_allow_deny_always(tmp_path: Path, mock: MockProvider, workspace: Path) -> None:
    """Approvals: deny gives an error result; always remembers the program for the session."""
    s = settings_for(tmp_path / "home", mock, "anthropic")
    mock.script(
        anthropic_tool_calls("a", [("toolu_1", "shell", {"command": "ls"})]),
        anthropic_tool_calls("b", [("toolu_2", "shell", {"command": "touch denied.txt"})]),
        TextReply("done"),
    )
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        await runner.step("go")
        ev = await wait_for(runner, lambda e: e.type == "approval.requested")
        assert ev.payload["command"] == "ls"
        assert (await runner.snapshot())["pending_approvals"][0]["tool_call_id"] == "toolu_1"
        await runner.answer_approval("toolu_1", "always")
        ev = await wait_for(
            runner, lambda e: e.type == "approval.requested" and e.payload["tool_call_id"] == "toolu_2"
        )
        await runner.answer_approval("toolu_2", "deny")
        await runner.wait()
        events = await collect(runner)
        results = [e.payload for e in events if e.type == "tool.result"]
        assert [r["status"] for r in results] == ["ok", "denied"]
        assert not (workspace / "denied.txt").exists()
        # `always` for ls: the next ls runs without asking
        mock.script(anthropic_tool_calls("c", [("toolu_3", "shell", {"command": "ls"})]), TextReply("done"))
        await runner.run_turn("again")
        events = await collect(runner)
        assert [e.payload["tool_call_id"] for e in events if e.type == "approval.requested"] == [
            "toolu_1",
            "toolu_2",
        ]
    assert all(r.status == 200 for r in mock.requests), [r.error for r in mock.requests]


async def test_resume_rebuilds_context_lazily_without_full_checkpoints(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """No turn copies the whole context into a checkpoint (bytes per turn stay flat); opening the
    session in a fresh registry reads no message, and the first turn rebuilds the same context."""
    big = "x" * 3000
    mock.default = TextReply(big)
    s = settings_for(tmp_path / "home", mock, "openai")
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        for i in range(6):
            await runner.run_turn(f"turn {i}")
        before = list(runner.context.messages)
        events = await collect(runner)
    assert not [e for e in events if e.type == "checkpoint"], "a turn wrote a full-context checkpoint"
    async with SessionRegistry.open(s) as reg:
        runner = await reg.get_runner(row.id)
        await runner.load()
        assert not runner.context.loaded, "opening the session built the context"
        with pytest.raises(ContextNotLoaded):
            _ = runner.context.messages
        await runner.load_context()
        assert runner.context.messages == before
        mock.default = TextReply("last")
        await runner.run_turn("final")
    assert mock.requests[-1].status == 200
    sent = [m for m in mock.requests[-1].json["messages"] if m["role"] != "system"]
    assert len(sent) == 13


async def test_a_journal_with_old_full_checkpoints_still_resumes_from_them(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Read compatibility: a session written by the previous format (a full-context ``checkpoint``
    every so often) resumes from its latest checkpoint plus the tail, as before."""
    s = settings_for(tmp_path / "home", mock, "openai")
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace)
        j = reg.journal
        old = [
            ("user.message", {"turn_id": "turn_a", "text": "before the checkpoint"}),
            (
                "checkpoint",
                {
                    "upto_seq": 2,
                    "messages": [
                        {"role": "user", "parts": [{"part_kind": "text", "text": "from the checkpoint"}]}
                    ],
                },
            ),
            (
                "assistant.message",
                {
                    "turn_id": "turn_a",
                    "text": "tail",
                    "message": {"role": "assistant", "parts": [{"part_kind": "text", "text": "tail"}]},
                },
            ),
        ]
        await j.commit_unfenced(row.id, old, reason="test: a journal of the previous format")
        runner = await reg.get_runner(row.id)
        await runner.load_context()
        texts = [m.text for m in runner.context.messages]
    assert texts == ["from the checkpoint", "tail"]


async def test_message_right_after_turn_completed_is_accepted(
    openai_session: Harness, mock: MockProvider
) -> None:
    """A client that sends as soon as it sees turn.completed is not refused as busy."""
    mock.default = TextReply("ok")
    runner, reg = openai_session.runner, openai_session.registry
    for i in range(5):
        since = (await runner.snapshot())["last_seq"]
        await reg.start_turn(runner.session_id, f"m{i}")
        await wait_for(runner, lambda e: e.type == "turn.completed", since=since)
    await runner.wait()
    types = [e.type for e in await collect(runner)]
    assert types.count("turn.completed") == 5 and "turn.interrupted" not in types
