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
    import acagent.runner._turn as turn_module
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


async def test_a_tool_turn_reads_back_nothing_the_runner_just_wrote(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """One turn of two LLM steps and one tool call: the runner knows a new turn has no tool calls,
    which calls its step committed, that a step for a context its own commit made has no attempts,
    and the session's caps once read. Before: 3 ``tool_calls``, 2 ``step_attempts`` and 3
    ``session_limits`` reads per turn (19 journal round trips in all, now 12)."""
    (workspace / "a.txt").write_text("x")
    for _ in range(2):
        mock.script(openai_tool_calls([("call_ls", "list_dir", {"path": "."})]), TextReply("done"))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock)) as reg:
        runner = await reg.get_runner((await reg.create_session(workspace)).id)
        await runner.run_turn("warm up")
        calls = _count_calls(reg.journal)
        await runner.run_turn("list it")
        types = [e.type for e in await reg.journal.events(runner.session_id, 0)]
    assert types[-1] == "turn.completed" and types.count("tool.result") == 2
    assert calls["tool_calls"] == 0
    assert calls["step_attempts"] == 0
    assert calls["session_limits"] == 1
    assert calls["get_session"] == 1
    assert calls["acquire_lease"] == calls["release_lease"] == 1
    assert calls["existing_tool_call_ids"] == 1
