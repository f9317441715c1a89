"""What a woken-but-idle runner holds, and what it lets go when it hibernates (issue 12 item 6).

A daemon builds a runner for every session an attach wakes. Before, each one built the session's
tools (and their MCP tool set), parsed its approval policy, formatted its system prompt and made
a lock and three events, for a turn it might never run; and a hibernated runner's whole history
stayed in the module-level history-check memo (``acagent.messages._VALID``, 64 histories) and
its append hint in the journal (``SqliteJournal._seq_hints``, 4,096 sessions).
Real registry, real SQLite file, strict mock provider over HTTP.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent import messages
from acagent.runner import SessionRegistry
from acagent.runner._cancel import TurnEnded
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, openai_text

pytestmark = pytest.mark.anyio


def _settings(tmp_path: Path, mock: MockProvider) -> object:
    return load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock"}, env={}
    )


async def test_a_runner_woken_by_an_attach_builds_no_tools_policy_prompt_or_events(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    built: list[str] = []

    def tools() -> dict:
        built.append("tools")
        from acagent.tools import default_tools

        return default_tools()

    async with SessionRegistry.open(_settings(tmp_path, mock), tools_factory=tools) as reg:  # type: ignore[arg-type]
        row = await reg.create_session(workspace)
        runner = await reg.attach_runner(row.id)
        assert reg.runners_built == 1
        assert built == []
        assert runner._tools is None and runner._policy is None and runner._system_prompt is None
        assert runner.writer._lock_held is None and runner.writer._wake_held is None
        assert isinstance(runner._turn_done, TurnEnded)
        await runner.wait()  # no turn: returns at once

        driven = await reg.get_runner(row.id)
        assert built == ["tools"]  # driven: built now (MCP servers start while the user types)
        mock.script(openai_text("hello"))
        await driven.run_turn("hi")
        assert built == ["tools"]  # and only once
        assert "shell" in runner.tools and str(workspace) in runner.system_prompt
        assert not isinstance(runner._turn_done, TurnEnded) and runner._turn_done.is_set()


async def test_a_hibernated_runner_lets_go_of_its_history_and_its_append_hint(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    async with SessionRegistry.open(_settings(tmp_path, mock)) as reg:  # type: ignore[arg-type]
        row = await reg.create_session(workspace)
        runner = await reg.get_runner(row.id)
        mock.script(openai_text("hello"))
        await runner.run_turn("hi")
        first = runner.context.messages[0]
        assert id(first) in messages._VALID  # the provider's history check remembered it
        hints = reg.journal._seq_hints  # type: ignore[attr-defined]
        assert row.id in hints  # the journal's append hint of the session
        assert await reg.hibernate_idle() == 1
        assert reg.runners_hibernated == 1 and row.id not in reg.runners
        assert id(first) not in messages._VALID
        assert row.id not in hints


async def test_a_runner_resumed_without_its_context_hibernates_and_closes(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """``load()`` unloads the context (lazy resume); closing such a runner read
    ``context.messages`` for the history memo and raised ``ContextNotLoaded`` out of
    ``hibernate_idle`` and the registry's close (benchmarks figure 2 crashed on it)."""
    settings = _settings(tmp_path, mock)
    async with SessionRegistry.open(settings) as reg:  # type: ignore[arg-type]
        row = await reg.create_session(workspace)
        mock.script(openai_text("hello"))
        await (await reg.get_runner(row.id)).run_turn("hi")
    async with SessionRegistry.open(settings) as reg:  # type: ignore[arg-type]
        runner = await reg.get_runner(row.id)
        await runner.load()
        assert not runner.context.loaded
        assert await reg.hibernate_idle() == 1
        await (await reg.get_runner(row.id)).load()  # and once more, closed by the registry itself
