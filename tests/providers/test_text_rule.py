"""F25: text that is not valid UTF-8 once decoded is mapped by one rule at one choke point.

Lone surrogates (from JSON escapes in tool arguments, from file names that are not UTF-8) and NUL
(in a user message) become U+FFFD in ``SessionWriter.commit`` (``acagent/_text.py``), the same in
the journal, the live stream, the transcript, after a restart, and in the next provider request.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import acagent._text as text_rule
from acagent._text import clean_text, clean_value
from acagent.runner import SessionRegistry
from tests.cases.conftest import journal_events, open_session, session_transcript, settings_for
from tests.mockprovider import MockProvider, TextReply, openai_tool_calls

pytestmark = pytest.mark.anyio

R = "\ufffd"


@pytest.mark.parametrize(
    ("raw", "clean"),
    [
        ("plain", "plain"),
        ("caf\u00e9 \U0001f600", "caf\u00e9 \U0001f600"),
        ("a\x00b", f"a{R}b"),
        ("x\ud800y", f"x{R}y"),
        ("\udcff", R),
        ("\ud83d\ude00", "\U0001f600"),  # a pair held as two code points is joined
        ("\ude00\ud83d", R + R),  # the wrong order is two lone halves
    ],
)
def test_the_rule(raw: str, clean: str) -> None:
    assert clean_text(raw) == clean
    clean.encode("utf-8")


def test_clean_value_walks_containers_and_keeps_identity() -> None:
    payload = {"a": ["x", ("y", {"k\x00": "v\ud800"})], "n": 1}
    assert clean_value(payload) == {"a": ["x", ("y", {f"k{R}": f"v{R}"})], "n": 1}
    same = {"a": ["x"], "b": 2}
    assert clean_value(same) is same


def test_clean_value_takes_no_walk_when_nothing_needs_replacing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every commit maps its payloads and ops: the common clean case is one C-speed check, no
    Python walk per string (it was thousands of calls per turn, benchmarks figure 1)."""
    walked: list[object] = []
    real = text_rule._clean
    monkeypatch.setattr(text_rule, "_clean", lambda v: walked.append(v) or real(v))
    payload = {"message": {"parts": [{"text": "caf\u00e9 " * 200, "n": 1}], "ok": True}, "l": [1.5, None]}
    assert clean_value(payload) is payload
    assert walked == []
    # what needs replacing, or what the check cannot read, still takes the walk
    assert clean_value({"a": "x\x00"}) == {"a": f"x{R}"}
    assert clean_value({"a": ["\ud800"]}) == {"a": [R]}
    assert clean_value({1: "\x00"}) == {1: R}
    assert clean_value({"a": "literal \\u0000"}) == {"a": "literal \\u0000"}
    assert len(walked) >= 4


async def test_a_real_turn_maps_every_view(tmp_path: Path, mock: MockProvider, workspace: Path) -> None:
    os.close(os.open(os.path.join(os.fsencode(workspace), b"bad\xff.txt"), os.O_CREAT | os.O_WRONLY, 0o600))
    calls = [
        ("call_ls", "list_dir", {"path": "."}),
        ("call_w", "write_file", '{"path": "out.txt", "content": "a\\ud800b\\ud83d\\ude00"}'),
    ]
    mock.script(openai_tool_calls(calls), TextReply("done"), TextReply("again"))
    home = tmp_path / "home"
    settings = settings_for(home, mock, "openai", auto_approve=True)
    async with open_session(settings, workspace) as (_, runner):
        seen: list[object] = []
        await runner.run_turn("hi\x00there \ud800!")
        async for event in runner.subscribe("test", 0):
            seen.append(event)
            if event.type == "turn.completed":
                break
        events = await journal_events(runner)
        session_id = runner.session_id
    # journal and live stream: the same mapped text, nothing refused, no step failed
    assert [e.payload["text"] for e in events if e.type == "turn.completed"] == ["done"]
    assert not [e for e in events if e.type in ("turn.failed", "llm.retry")]
    (user,) = [e.payload for e in events if e.type == "user.message"]
    assert user["text"] == f"hi{R}there {R}!"
    listing = next(
        e.payload for e in events if e.type == "tool.result" and e.payload["tool_call_id"] == "call_ls"
    )
    assert f"bad{R}.txt" in listing["content"]
    assert (workspace / "out.txt").read_text(encoding="utf-8") == f"a{R}b\U0001f600"
    assert [e.to_dict() for e in seen] == [e.to_dict() for e in events[: len(seen)]]
    # the transcript (what export streams) holds the same records, as valid UTF-8
    lines = session_transcript(settings, str(workspace), session_id).read_bytes().decode("utf-8").splitlines()
    on_disk = {json.loads(line)["seq"]: json.loads(line) for line in lines}
    for event in events:
        assert on_disk[event.seq]["payload"] == event.payload
    # the next provider request carries the mapped text; after a restart too
    second_body = mock.requests[1].json
    assert mock.requests[1].status == 200
    assert second_body["messages"][1] == {"role": "user", "content": f"hi{R}there {R}!"}
    async with SessionRegistry.open(settings) as reg:
        runner = await reg.get_runner(session_id)
        await runner.run_turn("and?")
        after = await journal_events(runner)
    assert [e.payload["text"] for e in after if e.type == "turn.completed"] == ["done", "again"]
    third = mock.requests[2].json
    assert third["messages"][: len(second_body["messages"])] == second_body["messages"]
    assert json.dumps(third).count("\\u0000") == 0
