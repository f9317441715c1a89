"""What one turn costs the process, counted (never timed): the cap check, journal transactions
and round trips per turn, tool schemas per tool class (benchmarks figures 1 and 5).

A real registry, a real SQLite file and the strict mock provider over HTTP; the journal's calls
are counted by wrapping the journal instance's methods.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pytest

from acagent.errors import SessionBusy
from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, Script, TextReply, openai_text, openai_tool_calls, split_every

pytestmark = pytest.mark.anyio


def _settings(home: Path, mock: MockProvider, **over: Any) -> Any:
    return load_settings(
        {"home": str(home), "base_url": mock.openai_base_url, "model": "openai:mock", **over}, env={}
    )


class _CountingRunners(dict):  # type: ignore[type-arg]
    """The registry's ``runners`` dict, counting how often all runners are walked."""

    walks = 0

    def values(self) -> Any:
        self.walks += 1
        return super().values()


async def test_the_cap_check_reads_a_running_count_not_every_runner(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """``busy_count`` is O(1) (it walked every runner on each ``start_turn``: O(N²) for a wave of
    N sessions) and stays right through accepting, running, finishing, a refused lease, idle."""
    paused = Script(chunks=split_every(openai_text("hello"), 40), pause_after=1)
    mock.script(paused, Script(chunks=split_every(openai_text("hello"), 40), pause_after=1))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        runners = _CountingRunners(reg.runners)
        reg.runners = runners
        ids = [(await reg.create_session(workspace)).id for _ in range(3)]
        for sid in ids:
            await reg.get_runner(sid)
        assert reg.busy_count() == 0
        a, _ = await reg.start_turn(ids[0], "one")
        b, _ = await reg.start_turn(ids[1], "two")
        # another live holder has the third session's lease: refused, and not counted
        await reg.journal.acquire_lease(ids[2], "w_other", ttl_s=60)
        with pytest.raises(SessionBusy):
            await reg.start_turn(ids[2], "three")
        await anyio.to_thread.run_sync(mock.wait_paused, 2)
        walks = runners.walks
        assert reg.busy_count() == 2
        assert runners.walks == walks  # no walk over the runners
        mock.release(2)
        await a.wait()
        await b.wait()
        assert reg.busy_count() == 0
        mock.script(TextReply("again"))
        await a.run_turn("again")
        assert reg.busy_count() == 0


async def test_tool_schemas_are_built_once_per_tool_class(
    tmp_path: Path, mock: MockProvider, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every session of a process offers the same definitions: one pydantic schema per tool class
    for the whole process (the benchmarks' tool was a class made per session: a schema per
    session, among the largest items of a 1,000-session wave)."""
    import acagent.runner._turntools as turn_module
    from acagent.tools._base import _schema_of
    from benchmarks._common import echo_tools

    _schema_of.cache_clear()
    monkeypatch.setattr(turn_module, "_DEFINITIONS", {})
    defined = []
    for factory in (None, echo_tools):
        async with SessionRegistry.open(
            _settings(tmp_path / "home", mock, tools="on"), tools_factory=factory
        ) as reg:
            for _ in range(3):
                runner = await reg.get_runner((await reg.create_session(workspace)).id)
                defined.append(await runner._new_turn("turn_x").definitions())
    kinds = {d.name for defs in defined for d in defs}
    assert "echo" in kinds and "shell" in kinds
    assert _schema_of.cache_info().misses == len(kinds)
    assert all(a is b for a, b in zip(defined[0], defined[2], strict=True))  # shared by sessions


COUNTED = (
    "acquire_lease",
    "lease_session",
    "release_lease",
    "commit",
    "get_session",
    "session_limits",
    "tool_calls",
    "step_attempts",
    "existing_tool_call_ids",
)


def _count_calls(journal: Any) -> Counter[str]:
    """Count the journal's calls by method name (the instance's methods are wrapped)."""
    calls: Counter[str] = Counter()
    for name in COUNTED:
        inner = getattr(journal, name)

        async def counted(*args: Any, _inner: Any = inner, _name: str = name, **kwargs: Any) -> Any:
            calls[_name] += 1
            return await _inner(*args, **kwargs)

        setattr(journal, name, counted)
    return calls


async def _list_dir_turn(tmp_path: Path, mock: MockProvider, workspace: Path) -> Any:
    """A warm-up turn, then one counted turn of two LLM steps and one ``list_dir`` call.

    Returns:
        ``(journal calls of the counted turn, every event, the turn's tool-call rows)``.
    """
    (workspace / "a.txt").write_text("x")
    for _ in range(2):
        mock.script(openai_tool_calls([("call_ls", "list_dir", {"path": "."})]), TextReply("done"))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        runner = await reg.get_runner((await reg.create_session(workspace)).id)
        runner.writer.frame_s = 60.0  # the call ends "within a frame" however loaded the machine is
        await runner.run_turn("warm up")
        calls = _count_calls(reg.journal)
        turn_id = await runner.run_turn("list it")
        counted = Counter(calls)  # the reads below are the test's own
        events = await reg.journal.events(runner.session_id, 0)
        rows = await reg.journal.tool_calls(runner.session_id, turn_id=turn_id)
    return counted, events, rows


async def test_a_tool_turn_reads_back_nothing_the_runner_just_wrote(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """One turn of two LLM steps and one tool call: the runner knows a new turn has no tool calls,
    which calls its step committed, that a step for a context its own commit made has no attempts,
    and the session's caps once read. Before: 3 ``tool_calls``, 2 ``step_attempts`` and 3
    ``session_limits`` reads and a session-row read after the lease per turn (19 journal round trips
    in all; 12 without those reads; 8 with the folds below)."""
    calls, events, _ = await _list_dir_turn(tmp_path, mock, workspace)
    types = [e.type for e in events]
    assert types[-1] == "turn.completed" and types.count("tool.result") == 2
    assert calls["tool_calls"] == 0
    assert calls["step_attempts"] == 0
    assert calls["session_limits"] == 0  # the caps and the row come with the lease (lease_session)
    assert calls["get_session"] == 0
    assert (calls["lease_session"], calls["acquire_lease"]) == (1, 0)
    assert calls["existing_tool_call_ids"] == 1


async def test_the_completion_commit_gives_the_lease_up(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A completed turn releases its lease in its ``turn.completed`` transaction (it took a
    ``release_lease`` transaction after it); another worker may take the lease at once."""
    mock.script(TextReply("one"), TextReply("two"))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        runner = await reg.get_runner((await reg.create_session(workspace)).id)
        # the reply's deltas ride in its commit however loaded the machine is (a reply slower than
        # one 50 ms frame had them committed apart: 3 commits, under coverage in a full run)
        runner.writer.frame_s = 60.0
        await runner.run_turn("warm up")
        calls = _count_calls(reg.journal)
        await runner.run_turn("again")
        row = await reg.journal.get_session(runner.session_id)
        assert (row.status, row.lease_owner) == ("done", None)
        other = await reg.journal.acquire_lease(runner.session_id, "w_other", ttl_s=30)
    assert other.token == row.fencing_token + 1
    assert calls["release_lease"] == 0
    assert calls["commit"] == 2  # accept + step.started, reply + turn.completed + lease


async def test_a_quick_read_only_call_commits_its_start_with_its_result(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """An in-process read-only call that ends within a frame: ``tool.started`` rides in the
    result's transaction (6 commits per tool turn, was 7; 4 since each ``step.started`` rides in
    the commit before it); the row ends ``done`` with its runner recorded, as before."""
    calls, events, rows = await _list_dir_turn(tmp_path, mock, workspace)
    assert calls["commit"] == 4
    started = [e for e in events if e.type == "tool.started"][-1]
    result = [e for e in events if e.type == "tool.result"][-1]
    assert started.seq < result.seq and started.ts == result.ts  # one transaction, in order
    assert [(r.status, r.runner is not None, r.result_status) for r in rows] == [("done", True, "ok")]


def _slow_tools(gate: anyio.Event, out: list[str]) -> Any:
    from pydantic import BaseModel

    from acagent.tools import Tool, ToolResult, default_tools

    class Args(BaseModel):
        text: str = ""

    class SlowRead(Tool):
        name = "slow_read"
        description = "Read slowly."
        args_model = Args
        idempotent = True
        read_only = True

        async def run(self, args: Any, ctx: Any) -> Any:
            if args.text:
                ctx.emit_output(args.text)
            await gate.wait()
            out.append("ran")
            return ToolResult("read")

    return lambda: {**default_tools(), "slow_read": SlowRead()}


@pytest.mark.parametrize("output", ["", "live output"])
async def test_a_read_only_call_that_runs_longer_is_seen_started_before_its_output(
    tmp_path: Path, mock: MockProvider, workspace: Path, output: str
) -> None:
    """A deferred start is committed once the call outlasts a frame, or at once when it streams
    output — never after that output (the journal holds start, output, result in this order)."""
    gate, ran = anyio.Event(), []
    mock.script(openai_tool_calls([("call_s", "slow_read", {"text": output})]), TextReply("done"))
    async with SessionRegistry.open(
        _settings(tmp_path / "home", mock), tools_factory=_slow_tools(gate, ran)
    ) as reg:
        runner = await reg.get_runner((await reg.create_session(workspace)).id)
        await runner.step("read")
        with anyio.fail_after(10):
            while True:
                types = [e.type for e in await reg.journal.events(runner.session_id, 0)]
                if "tool.started" in types and (not output or "tool.output" in types):
                    break
                await anyio.sleep(0.01)
        assert "tool.result" not in types and not ran
        gate.set()
        await runner.wait()
        types = [e.type for e in await reg.journal.events(runner.session_id, 0)]
    wanted = ["tool.call", "tool.started", *(["tool.output"] if output else []), "tool.result"]
    assert [t for t in types if t.startswith("tool.")] == wanted
    assert types[-1] == "turn.completed"


def test_a_request_is_sized_by_its_new_messages_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The estimate before each call looks at the messages added since the last one (it sized
    every message of the history each time: O(history) per call)."""
    from acagent.messages import Message, TextPart
    from acagent.runner._window import RequestEstimator

    est = RequestEstimator()
    history = [Message(role="user", parts=[TextPart(text=f"m{i}")]) for i in range(50)]
    first = est.request_bytes("sys", history)
    sized: list[Message] = []
    real = est.message_bytes
    monkeypatch.setattr(est, "message_bytes", lambda m: sized.append(m) or real(m))
    new = Message(role="user", parts=[TextPart(text="new")])
    assert est.request_bytes("sys", [*history, new]) == first + real(new)
    assert sized == [new]
    # a different history is sized in full, and right
    other = history[:10]
    assert est.request_bytes("sys", other) == len(b"sys") + sum(real(m) for m in other)


async def test_a_quick_call_keeps_its_result_when_another_process_cancels_meanwhile(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """The folded start + result commit changes no status: a cross-process cancel flag set while
    the call ran (a worker status change would be refused) still lets the result that happened be
    recorded; the turn then ends cancelled."""
    from pydantic import BaseModel

    from acagent.tools import Tool, ToolResult, default_tools

    box: dict[str, Any] = {}

    class Args(BaseModel):
        pass

    class QuickRead(Tool):
        name = "quick_read"
        description = "Read quickly."
        args_model = Args
        idempotent = True
        read_only = True

        async def run(self, args: Any, ctx: Any) -> Any:
            reg = box["reg"]
            row = await reg.journal.get_session(ctx.session_id)
            await reg.journal.set_cancel(ctx.session_id, True, turn_id=row.turn_id)  # as another process
            return ToolResult("read")

    mock.script(openai_tool_calls([("call_q", "quick_read", {})]), TextReply("never"))
    tools = lambda: {**default_tools(), "quick_read": QuickRead()}  # noqa: E731
    async with SessionRegistry.open(_settings(tmp_path / "home", mock), tools_factory=tools) as reg:
        box["reg"] = reg
        runner = await reg.get_runner((await reg.create_session(workspace)).id)
        runner.writer.frame_s = 60.0  # the call ends within a frame however loaded the machine is
        with anyio.fail_after(20):
            await runner.run_turn("read")
        events = await reg.journal.events(runner.session_id, 0)
        status = (await reg.journal.get_session(runner.session_id)).status
    results = [e.payload for e in events if e.type == "tool.result"]
    assert [(r["status"], r["content"]) for r in results] == [("ok", "read")]
    assert status == "cancelled" and events[-1].type in ("session.status", "turn.interrupted")
