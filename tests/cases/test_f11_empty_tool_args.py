"""F11: empty or null tool arguments, and a usage chunk with no choices — through the runner.

Case ``shared/cases/F11-empty-tool-args.md``. The stream-level parsing of every fixture is tested
in ``tests/providers/test_openai_stream.py::TestEmptyArguments`` and
``tests/providers/test_anthropic_stream.py::TestEmptyArguments``; here each fixture runs a whole
turn. The test hook that registers ``noop_probe`` is the registry's ``tools_factory`` (the tool is
``acagent.tools._testing.NoopProbeTool``, never registered by default). The case's "usage 12/7/19"
is the ``usage`` event's ``input_tokens``/``output_tokens``/``total_tokens``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from acagent.tools import default_tools
from acagent.tools._testing import NoopProbeTool
from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply

pytestmark = pytest.mark.anyio

FIXTURES = {
    "A": "F11-noarg-A.openai.sse",
    "B": "F11-noarg-B.openai.sse",
    "C": "F11-noarg-C.openai.sse",
    "D": "F11-noarg-D.openai.sse",
    "E1": "F11-noarg-E1.anthropic.sse",
    "E2": "F11-noarg-E2.anthropic.sse",
}


@pytest.mark.parametrize("variant", ["A", "B", "C", "E1", "E2"])
async def test_noarg_call_runs_once_with_empty_object(
    tmp_path: Path, mock: MockProvider, workspace: Path, cases: Path, variant: str
) -> None:
    """``noop_probe`` runs exactly once with ``{}``; its result goes back; history replays ``{}``;
    the usage event records 12/7/19; the strict mock accepts every request."""
    provider = "anthropic" if variant.startswith("E") else "openai"
    probe = NoopProbeTool()
    mock.script((cases / FIXTURES[variant]).read_bytes(), TextReply("ok"), TextReply("again"))
    settings = settings_for(tmp_path / "home", mock, provider)
    async with open_session(
        settings, workspace, tools_factory=lambda: {**default_tools(), probe.name: probe}
    ) as (
        _,
        runner,
    ):
        await runner.run_turn("probe it")
        await runner.run_turn("once more")
        events = await journal_events(runner)
    assert probe.calls == 1 and probe.received == [{}]
    call_id = "toolu_N" if provider == "anthropic" else "call_N"
    (call,) = [e.payload for e in events if e.type == "tool.call"]
    assert (call["tool_call_id"], call["name"], call["arguments"]) == (call_id, "noop_probe", {})
    (result,) = [e.payload for e in events if e.type == "tool.result"]
    assert result["status"] == "ok" and result["tool_call_id"] == call_id
    usage = next(e.payload for e in events if e.type == "usage")
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (12, 7, 19)
    assert not [e for e in events if e.type in ("llm.retry", "turn.failed")]
    requests = mock.requests
    assert [r.status for r in requests] == [200, 200, 200], [r.error for r in requests]
    for request in requests[1:]:
        messages = request.json["messages"]
        if provider == "openai":
            assistant = next(m for m in messages if m.get("tool_calls"))
            assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
            tool = next(m for m in messages if m["role"] == "tool")
            assert tool["tool_call_id"] == call_id and "noop_probe called 1 time" in tool["content"]
        else:
            assert messages[1]["content"] == [
                {"type": "tool_use", "id": call_id, "name": "noop_probe", "input": {}}
            ]
            first = messages[2]["content"][0]
            assert first["type"] == "tool_result" and first["tool_use_id"] == call_id


async def test_missing_required_argument_is_an_error_result_without_retry_loop(
    tmp_path: Path, mock: MockProvider, workspace: Path, cases: Path
) -> None:
    """D: ``shell`` without ``command`` is not run (no approval asked either); the model gets
    ``missing required argument: command``; exactly 2 requests for the turn."""
    mock.script((cases / FIXTURES["D"]).read_bytes(), TextReply("ok"))
    settings = settings_for(tmp_path / "home", mock)
    async with open_session(settings, workspace) as (_, runner):
        await runner.run_turn("run something")
        events = await journal_events(runner)
        snapshot = await runner.snapshot()
    types = [e.type for e in events]
    assert "tool.started" not in types and "approval.requested" not in types and "llm.retry" not in types
    (call,) = [e.payload for e in events if e.type == "tool.call"]
    assert (call["tool_call_id"], call["name"]) == ("call_N", "shell")  # the call is not dropped
    (result,) = [e.payload for e in events if e.type == "tool.result"]
    assert result["status"] == "error" and "missing required argument: command" in result["content"]
    assert types[-2:] == ["session.status", "turn.completed"] and snapshot["status"] == "done"
    usage = next(e.payload for e in events if e.type == "usage")
    assert (usage["input_tokens"], usage["output_tokens"], usage["total_tokens"]) == (12, 7, 19)
    requests = mock.requests
    assert len(requests) == 2 and [r.status for r in requests] == [200, 200]
    tool = next(m for m in requests[1].json["messages"] if m["role"] == "tool")
    assert "missing required argument: command" in tool["content"]
