"""What the user approves is shown faithfully: hidden and control characters escaped, with a warning.

The corpus (``unsafe_corpus.json``) is shared with the web page test (``tests/server/test_web.py``),
which checks that the page's ``safeParts`` gives the same text and counts, and with the tmux test.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from acagent.events import Event
from acagent.render import EventRenderer, approval_lines, approval_text, safe_text

CORPUS = json.loads((Path(__file__).with_name("unsafe_corpus.json")).read_text())
HIDDEN = {"\u202e", "\u202c", "\u2066", "\u200b", "\u200d", "\ufeff", "\x1b", "\r", "\U000e0041"}


@pytest.mark.parametrize("case", CORPUS, ids=[c["name"] for c in CORPUS])
def test_corpus(case: dict[str, Any]) -> None:
    safe = safe_text(case["input"])
    assert safe.text == case["shown"]
    assert safe.counts == case["counts"]
    assert (safe.warning is None) == (not case["counts"])
    # every escape is its own part, marked escaped, so it can be drawn apart from literal text
    assert sum(1 for _, escaped in safe.parts if escaped) == sum(case["counts"].values())


def test_lone_surrogate_is_escaped() -> None:
    assert safe_text("a\ud800b").text == "a\\ud800b"


def _approval(**payload: Any) -> Event:
    payload.setdefault("turn_id", "t1")
    payload.setdefault("tool_call_id", "call_1")
    return Event(seq=5, ts="2026-01-01T00:00:00Z", session_id="s", type="approval.requested", payload=payload)


@pytest.mark.parametrize(
    "payload",
    [
        {
            "name": "shell",
            "arguments": {},
            "command": "cat notes.txt \u202e;lmth.exe\u202c\x1b[2K\rrm\u200b -rf ~",
        },
        {"name": "write_file", "arguments": {"path": "a\u202eb.txt", "content": "x\u200by\x1b[1A\r"}},
        {"name": "ask_user", "arguments": {}, "kind": "question", "question": "ok\u2066?\u2069\x1b]0;t\x07"},
    ],
    ids=["shell", "arguments", "question"],
)
def test_every_approval_view_escapes_and_warns(payload: dict[str, Any]) -> None:
    lines = approval_lines(payload)
    plain = "\n".join(line.plain for line in lines)
    assert not HIDDEN & set(plain), plain
    assert "⚠ hidden characters shown escaped" in plain
    assert approval_text(payload) == plain
    # the terminal view (chat, attach): the panel on a real console
    console = Console(file=io.StringIO(), width=100, force_terminal=True, color_system="truecolor")
    EventRenderer(console).render(_approval(**payload))
    drawn = console.file.getvalue()  # type: ignore[attr-defined]
    assert "⚠ hidden characters shown escaped" in drawn
    for ch in HIDDEN - {"\x1b"}:
        assert ch not in drawn, repr(ch)
    assert "\\u202" in drawn or "\\u2066" in drawn
    # no escape sequence but rich's own SGR styling reached the terminal
    assert all(
        seq.startswith("[") and seq.split("m", 1)[0].replace(";", "").replace("[", "").isdigit()
        for seq in drawn.split("\x1b")[1:]
    ), drawn


def test_tool_call_line_uses_the_same_rule() -> None:
    console = Console(file=io.StringIO(), width=100)
    event = Event(
        seq=4, ts="2026-01-01T00:00:00Z", session_id="s", type="tool.call",
        payload={"turn_id": "t1", "tool_call_id": "c", "name": "shell", "arguments": {"command": "ls\u202e x"}},
    )  # fmt: skip
    EventRenderer(console).render(event)
    assert "ls\\u202e x" in console.file.getvalue()  # type: ignore[attr-defined]


def test_plain_command_has_no_warning() -> None:
    assert approval_text({"name": "shell", "arguments": {}, "command": "echo hi"}) == "$ echo hi"
