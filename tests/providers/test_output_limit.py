"""F23: a reply cut by the output limit inside a tool call's arguments.

It is reported as hitting the output limit (``error`` ``max_tokens`` naming the call, and the
call's result), never as "invalid JSON"; the cut call never runs; the next request still pairs
the call with its result, so the strict mock accepts it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acagent.providers._base import ToolCallArgsDelta, ToolCallStart
from acagent.providers._parts import OUTPUT_LIMIT_ERROR, ArgsBuffer, PartsBuilder
from tests.cases.conftest import journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply, anthropic_tool_calls, openai_tool_calls

pytestmark = pytest.mark.anyio

CUT_ARGS = '{"path": "out.txt", "content": "line 1\\nline 2\\nli'


def _cut_stream(api: str) -> bytes:
    if api == "openai":
        body = openai_tool_calls([("call_cut", "write_file", CUT_ARGS)])
        return body.replace(b'"finish_reason": "tool_calls"', b'"finish_reason": "length"')
    body = anthropic_tool_calls("Writing it.", [("toolu_cut", "write_file", CUT_ARGS)])
    return body.replace(b'"stop_reason": "tool_use"', b'"stop_reason": "max_tokens"')


def test_builder_marks_a_call_cut_by_the_limit() -> None:
    builder = PartsBuilder()
    builder.feed(ToolCallStart(0, "c1", "write_file"))
    builder.feed(ToolCallArgsDelta(0, CUT_ARGS))
    (cut,) = builder.build("length")
    assert cut.arguments_error == OUTPUT_LIMIT_ERROR and cut.arguments == {}  # type: ignore[union-attr]
    (invalid,) = builder.build("tool_calls")
    assert invalid.arguments_error is not None and "invalid JSON" in invalid.arguments_error  # type: ignore[union-attr]


def test_a_complete_call_under_length_still_runs() -> None:
    builder = PartsBuilder()
    builder.feed(ToolCallStart(0, "c1", "read_file"))
    builder.feed(ToolCallArgsDelta(0, '{"path": "a"}'))
    (call,) = builder.build("length")
    assert call.arguments == {"path": "a"} and call.arguments_error is None  # type: ignore[union-attr]
    assert ArgsBuffer().complete is False


@pytest.mark.parametrize("api", ["openai", "anthropic"])
async def test_cut_call_is_reported_as_output_limit_and_never_runs(
    tmp_path: Path, mock: MockProvider, workspace: Path, api: str
) -> None:
    mock.script(_cut_stream(api), TextReply("I will write it in smaller parts."))
    settings = settings_for(tmp_path / "home", mock, api, auto_approve=True)
    async with open_session(settings, workspace) as (_, runner):
        await runner.run_turn("write the file")
        events = await journal_events(runner)
    text = [e.payload["text"] for e in events if e.type == "turn.completed"][-1]
    assert text == "I will write it in smaller parts."
    assert not (workspace / "out.txt").exists()
    assert not [e for e in events if e.type == "tool.started"]
    (error,) = [e.payload for e in events if e.type == "error"]
    assert error["code"] == "max_tokens" and "output limit" in error["message"]
    assert "write_file" in error["message"]
    (result,) = [e.payload for e in events if e.type == "tool.result"]
    assert "output limit" in result["content"] and result["is_error"]
    everything = json.dumps([e.payload for e in events])
    assert "invalid JSON" not in everything and "not valid JSON" not in everything
    _, second = mock.requests
    assert second.status == 200  # the strict mock accepted the pairing
    assert "output limit" in json.dumps(second.json["messages"])
