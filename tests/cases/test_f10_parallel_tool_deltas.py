"""F10: streamed parallel tool calls are assembled into the right calls — through the runner.

Case ``shared/cases/F10-parallel-tool-deltas.md``. The provider-level assembly (every fixture, the
replayed history) is tested in ``tests/providers/test_openai_stream.py::TestParallelToolCalls``;
here each fixture runs a whole turn: the real OpenAI provider against the strict mock, the loop,
the tools, the journal and the transcript. Names as in the case (``read_file`` ``path``,
``shell`` ``command``).

Policy D (docs/field-cases.md): with no ids at all, a new top-level JSON object that begins after
a complete one starts a new call with a generated id (``call_<32 hex>``); the two objects are
never concatenated.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.cases.conftest import all_text, journal_events, open_session, settings_for
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio

EXPECTED: dict[str, list[tuple[str | None, str, dict[str, str]]]] = {
    "A": [("call_A", "read_file", {"path": "a.txt"}), ("call_B", "shell", {"command": "ls"})],
    "B": [("call_A", "read_file", {"path": "a.txt"}), ("call_B", "read_file", {"path": "b.txt"})],
    "C": [("call_X", "read_file", {"path": "a.txt"}), ("call_Y", "read_file", {"path": "b.txt"})],
    "D": [(None, "read_file", {"path": "a.txt"}), (None, "read_file", {"path": "b.txt"})],
}
CONCATENATIONS = ["read_fileread_file", '"a.txt"}{', 'a.txt\\"}{', '}{\\"path']


def _never_concatenated(text: str) -> None:
    for bad in CONCATENATIONS:
        assert bad not in text, bad


@pytest.mark.parametrize("variant", ["A", "B", "C", "D"])
async def test_fixture_runs_each_call_with_its_own_id_and_arguments(
    tmp_path: Path, mock: MockProvider, workspace: Path, cases: Path, variant: str
) -> None:
    """Each call executes once with its own id, name and arguments; results carry the right ids;
    the strict mock accepts the follow-up requests; no concatenation is stored anywhere."""
    (workspace / "a.txt").write_text("A-CONTENT\n")
    (workspace / "b.txt").write_text("B-CONTENT\n")
    mock.script(
        (cases / f"F10-parallel-{variant}.openai.sse").read_bytes(), TextReply("ok"), TextReply("again")
    )
    settings = settings_for(tmp_path / "home", mock, auto_approve=True)
    async with open_session(settings, workspace) as (reg, runner):
        await runner.run_turn("go")
        await runner.run_turn("and again")  # the history replays cleanly
        events = await journal_events(runner)
        path = reg.transcript_path(runner.row)
    calls = [e.payload for e in events if e.type == "tool.call"]
    got = [(c["tool_call_id"], c["name"], c["arguments"]) for c in calls]
    want = EXPECTED[variant]
    assert [(n, a) for _, n, a in got] == [(n, a) for _, n, a in want]
    ids = [i for i, _, _ in got]
    if variant == "D":
        assert all(re.fullmatch(r"call_[0-9a-f]{32}", i) for i in ids) and ids[0] != ids[1]
    else:
        assert ids == [i for i, _, _ in want]
    started = [e.payload["tool_call_id"] for e in events if e.type == "tool.started"]
    assert started == ids  # each call ran exactly once, in order
    results = [e.payload for e in events if e.type == "tool.result"]
    assert [(r["tool_call_id"], r["status"]) for r in results] == [(i, "ok") for i in ids]
    for (_, name, args), result in zip(want, results, strict=True):
        if name == "read_file":
            assert ("A-CONTENT" if args["path"] == "a.txt" else "B-CONTENT") in result["content"]
    requests = mock.requests
    assert [r.status for r in requests] == [200, 200, 200], [r.error for r in requests]
    second = [m for m in requests[1].json["messages"] if m["role"] != "system"]
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert [c["id"] for c in second[1]["tool_calls"]] == ids
    assert [json.loads(c["function"]["arguments"]) for c in second[1]["tool_calls"]] == [
        a for _, _, a in want
    ]
    assert [m["tool_call_id"] for m in second[2:]] == ids
    _never_concatenated(all_text(e.to_dict() for e in events))
    _never_concatenated(path.read_text())
    _never_concatenated(all_text(r.json for r in requests))


async def test_invalid_final_arguments_are_not_executed_and_replay_as_empty_object(
    tmp_path: Path, mock: MockProvider, workspace: Path
) -> None:
    """A call whose final arguments are not JSON is not run; the model gets an error result; the
    history sends ``"arguments": "{}"`` so the provider accepts every later request."""
    mock.script(
        openai_tool_calls([("call_1", "write_file", '{"path": "x.txt", "content": "y"')]),
        TextReply("noted"),
        TextReply("fine"),
    )
    settings = settings_for(tmp_path / "home", mock, auto_approve=True)
    async with open_session(settings, workspace) as (_, runner):
        await runner.run_turn("write it")
        await runner.run_turn("next")
        events = await journal_events(runner)
    assert not (workspace / "x.txt").exists()
    assert not [e for e in events if e.type == "tool.started"]
    (result,) = [e.payload for e in events if e.type == "tool.result"]
    assert result["status"] == "error" and "not valid JSON" in result["content"]
    requests = mock.requests
    assert [r.status for r in requests] == [200, 200, 200]
    for request in requests[1:]:
        assistant = next(m for m in request.json["messages"] if m.get("tool_calls"))
        assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
        tool = next(m for m in request.json["messages"] if m["role"] == "tool")
        assert tool["tool_call_id"] == "call_1" and "not valid JSON" in tool["content"]
