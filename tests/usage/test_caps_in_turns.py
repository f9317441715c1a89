"""Caps through real turns: the strict mock reports priced usage; the journal keeps the spend.

The mock's usage is priced by a config override (``[pricing."openai:mock"]``): output tokens at
$1,000 per million, so one reply of 1,024 output tokens costs $1.024 and the estimate of the
next call (1,024 output tokens) equals what a call really costs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acagent.errors import BudgetExceeded
from acagent.runner import SessionRegistry
from acagent.settings import load_settings
from tests.mockprovider import MockProvider, openai_text

pytestmark = pytest.mark.anyio

PRICING = {"openai:mock": {"input_usd_per_mtok": 0.0, "output_usd_per_mtok": 1000.0}}
CALL_USD = 1024 * 1000.0 / 1_000_000


def _settings(home: Path, mock: MockProvider, **limits: Any) -> Any:
    return load_settings(
        {
            "home": str(home),
            "base_url": mock.openai_base_url,
            "model": "openai:mock",
            "auto_approve": True,
            "pricing": PRICING,
            "limits": limits,
        },
        env={},
    )


def _reply(n: int) -> bytes:
    return openai_text(f"answer {n}", usage=(50, 1024))


async def test_session_cap_stops_the_turn_before_the_call_that_would_exceed_it(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    mock.script(*[_reply(i) for i in range(5)])
    s = _settings(tmp_path / "home", mock, session_usd=2.5)
    async with SessionRegistry.open(s) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        await runner.run_turn("one")
        await runner.run_turn("two")
        assert len(mock.requests) == 2
        before = (await runner.journal.get_session(row.id)).last_seq
        with pytest.raises(BudgetExceeded) as caught:  # 2 x $1.024 spent + $1.024 estimated > $2.50
            await reg.start_turn(row.id, "three")
        assert caught.value.detail["scope"] == "session"
        assert (await runner.journal.get_session(row.id)).last_seq == before  # refused, nothing written
        events = await runner.journal.events(row.id, 0)
        snap = await runner.snapshot()
    assert len(mock.requests) == 2, "the call that would exceed the cap was made"
    assert caught.value.detail["limit"] == 2.5
    assert caught.value.detail["used"] == pytest.approx(2 * CALL_USD)
    assert not [e for e in events if e.type == "turn.failed"]
    assert snap["status"] == "done"  # the session stays usable (raise the cap and go on)


async def test_spend_survives_a_restart_and_a_raised_cap_lets_the_session_go_on(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    mock.script(*[_reply(i) for i in range(5)])
    home = tmp_path / "home"
    async with SessionRegistry.open(_settings(home, mock, session_usd=1.5)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        await (await reg.get_runner(row.id)).run_turn("one")
    # A new registry (as after a crash and restart) knows what was spent: with the cap lowered
    # below the spend, the next turn is refused before anything is written or called.
    async with SessionRegistry.open(_settings(home, mock, session_usd=1.0)) as reg:
        runner = await reg.get_runner(row.id)
        before = (await runner.journal.get_session(row.id)).last_seq
        with pytest.raises(BudgetExceeded) as caught:
            await reg.start_turn(row.id, "two")
        assert caught.value.detail["scope"] == "session" and caught.value.detail["cap"] == "session_usd"
        assert (await runner.journal.get_session(row.id)).last_seq == before
        assert len(mock.requests) == 1
        await runner.journal.set_session_limits(row.id, {"session_usd": 10.0})
        await runner.run_turn("two")
    assert len(mock.requests) == 2


async def test_daily_cap_counts_every_session_of_the_home(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    mock.script(*[_reply(i) for i in range(5)])
    s = _settings(tmp_path / "home", mock, daily_usd=2.5)
    async with SessionRegistry.open(s) as reg:
        a = await reg.create_session(workspace, model="openai:mock")
        b = await reg.create_session(workspace, model="openai:mock")
        await (await reg.get_runner(a.id)).run_turn("a1")
        await (await reg.get_runner(b.id)).run_turn("b1")
        runner = await reg.get_runner(a.id)
        with pytest.raises(BudgetExceeded) as caught:
            await reg.start_turn(a.id, "a2")
        total = await runner.journal.usage_totals()
    assert len(mock.requests) == 2
    assert caught.value.detail["scope"] == "daily" and caught.value.detail["cap"] == "daily_usd"
    assert total.calls == 2 and total.cost_usd == pytest.approx(2 * CALL_USD)


async def test_usage_event_names_the_model_and_its_cost(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    mock.script(_reply(0))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock, session_usd=100.0)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        await runner.run_turn("one")
        usage = [e.payload for e in await runner.journal.events(row.id, 0) if e.type == "usage"]
    assert usage[0]["model"] == "openai:mock" and usage[0]["cost_usd"] == pytest.approx(CALL_USD)


async def test_cap_reached_inside_a_turn_fails_it_cleanly_before_the_next_call(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """The first call (a tool call) fits the cap; the call after the tool result would not."""
    from tests.mockprovider import openai_tool_calls

    calls = openai_tool_calls([("call_1", "shell", {"command": "echo hi"})])
    usage_chunk = openai_text("", usage=(50, 1024)).split(b"data: [DONE]")[0].split(b"\n\n")[-2] + b"\n\n"
    mock.script(calls.replace(b"data: [DONE]\n\n", usage_chunk + b"data: [DONE]\n\n"), _reply(1))
    async with SessionRegistry.open(_settings(tmp_path / "home", mock, session_usd=1.5)) as reg:
        row = await reg.create_session(workspace, model="openai:mock")
        runner = await reg.get_runner(row.id)
        await runner.run_turn("run it")
        events = await runner.journal.events(row.id, 0)
        snap = await runner.snapshot()
    assert len(mock.requests) == 1
    failed = [e.payload for e in events if e.type == "turn.failed"]
    assert len(failed) == 1 and failed[0]["type"] == "budget_exceeded" and failed[0]["scope"] == "session"
    assert failed[0]["used"] == pytest.approx(CALL_USD) and failed[0]["limit"] == 1.5
    assert [e.payload["status"] for e in events if e.type == "tool.result"] == ["ok"]  # the call was paired
    assert snap["status"] == "failed"
