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
from typing import Any

import anyio
import pytest

from acagent import messages
from acagent.runner import SessionRegistry
from acagent.runner._cancel import TurnEnded
from acagent.runner._pins import pinned
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


async def test_a_hibernation_pass_while_a_message_gets_its_runner_does_not_close_it(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A pass landing during ``get_runner``'s awaits closed the runner a message was about to
    use: the message was a 500, ``bus … is closed`` (tester F11)."""
    async with SessionRegistry.open(_settings(tmp_path, mock)) as reg:  # type: ignore[arg-type]
        row = await reg.create_session(workspace)
        original = reg._start_transcript
        landed: list[int] = []

        async def a_pass_lands_meanwhile(runner: Any) -> None:
            if not landed:
                landed.append(await reg.hibernate_idle())
            await original(runner)

        reg._start_transcript = a_pass_lands_meanwhile  # type: ignore[method-assign]
        mock.script(openai_text("hello"))
        runner, _ = await reg.start_turn(row.id, "hi")
        await runner.wait()
        assert landed == [0]  # the pass landed and skipped the runner being got
        assert reg.runners[row.id] is runner and not runner.bus.closed
        types = [e.type for e in await reg.journal.events(row.id, 0)]
        assert types[-1] == "turn.completed"


async def test_a_pinned_runner_is_not_hibernated(tmp_path: Path, mock: MockProvider, workspace: Path) -> None:
    async with SessionRegistry.open(_settings(tmp_path, mock)) as reg:  # type: ignore[arg-type]
        row = await reg.create_session(workspace)
        async with pinned(reg, row.id, attach=True) as runner:
            assert runner.pins == 1
            assert await reg.hibernate_idle() == 0
        assert runner.pins == 0
        assert await reg.hibernate_idle() == 1


async def test_damaged_approval_rules_are_a_corrupt_journal_error_naming_the_session(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Tester F1: a bare ``JSONDecodeError`` (a 500 without a reason, a traceback in ``run``)."""
    from acagent.errors import JournalError

    async with SessionRegistry.open(_settings(tmp_path, mock)) as reg:  # type: ignore[arg-type]
        row = await reg.create_session(workspace)
        runner = await reg.attach_runner(row.id)
        runner.row.approval_rules = '{"rules": [{"kind": '
        with pytest.raises(JournalError) as caught:
            runner.policy
        assert caught.value.detail == {"reason": "corrupt"} and row.id in caught.value.message


async def test_one_session_that_cannot_recover_does_not_stop_the_others(
    tmp_path: Path, mock: MockProvider, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tester F7: one session's damaged data ended the whole recovery pass, every 30 s."""
    from acagent.errors import JournalError

    async with SessionRegistry.open(_settings(tmp_path, mock)) as reg:  # type: ignore[arg-type]
        rows = [await reg.create_session(workspace) for _ in range(3)]
        started: list[str] = []

        async def orphans() -> list[Any]:
            return rows

        async def start_turn(sid: str, text: str | None, **_: Any) -> Any:
            if sid == rows[0].id:
                raise JournalError("damaged", detail={"reason": "corrupt"})
            if sid == rows[1].id:
                raise KeyError("a bug")
            started.append(sid)

        monkeypatch.setattr(reg, "orphaned_sessions", orphans)
        monkeypatch.setattr(reg, "start_turn", start_turn)
        assert await reg.recover() == [rows[2].id] and started == [rows[2].id]


async def test_a_runner_asked_for_while_a_pass_drops_the_old_one_gets_its_own_transcript_writer(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """Tester F11: the new runner reused the old transcript writer, which the pass then closed
    (``ValueError: file descriptor cannot be a negative integer (-1)`` on its next write)."""
    async with SessionRegistry.open(_settings(tmp_path, mock)) as reg:  # type: ignore[arg-type]
        row = await reg.create_session(workspace)
        old = await reg.get_runner(row.id)
        got: list[Any] = []
        original = reg._close_transcript

        async def a_message_arrives_meanwhile(sid: str) -> None:
            async def message() -> None:
                got.append(await reg.get_runner(sid))

            reg._tg.start_soon(message)
            await anyio.sleep(0.2)  # it waits for the drop to end instead of reusing the writer
            assert got == []
            await original(sid)

        reg._close_transcript = a_message_arrives_meanwhile  # type: ignore[method-assign]
        assert await reg.hibernate_idle() == 1
        reg._close_transcript = original  # type: ignore[method-assign]
        with anyio.fail_after(10):
            while not got:
                await anyio.sleep(0.01)
        new = got[0]
        assert new is not old and reg.runners[row.id] is new
        mock.script(openai_text("after the pass"))
        await new.run_turn("hi")
        path = reg.transcript_path(new.row)
        assert "after the pass" in path.read_text()
