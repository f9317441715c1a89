"""A bug inside a turn names itself in ``turn.failed`` (type and message), not its task group.

Before: ``turn.failed`` said ``ExceptionGroup: unhandled errors in a TaskGroup (1 sub-exception)``
and ``acagent run`` printed that line, hiding the real error (found by [limits] session_usd = inf).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, openai_text

pytestmark = pytest.mark.anyio


async def test_turn_failed_names_the_leaf_error(
    tmp_path: Path, mock: MockProvider, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = [0]

    def broken(*args: object, **kwargs: object) -> None:
        calls[0] += 1
        if calls[0] > 1:  # the first check is the turn-start one; the next runs inside the turn
            raise OverflowError("cannot convert float infinity to integer")

    monkeypatch.setattr("acagent.runner._budget.check_budget", broken)
    mock.script(openai_text("never"))
    settings = load_settings(
        {"home": str(tmp_path / "home"), "base_url": mock.openai_base_url, "model": "openai:mock",
         "limits": {"session_usd": 1.0}, "pricing": {"openai:mock": {"input_usd_per_mtok": 0.0,
         "output_usd_per_mtok": 1.0}}},
        env={},
    )  # fmt: skip
    async with SessionRegistry.open(settings) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        try:
            await runner.run_turn("hi")
        except BaseException:  # the in-process caller may also get the error; the journal is the point
            pass
        events = await runner.journal.events(row.id, 0)
    failed = [e.payload for e in events if e.type == "turn.failed"]
    assert len(failed) == 1, [e.type for e in events]
    assert failed[0]["type"] == "OverflowError"
    assert failed[0]["message"] == "cannot convert float infinity to integer"
