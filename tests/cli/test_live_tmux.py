"""Issue 17 (1, 2) and 13 (1) in a real terminal: markdown rendered as it streams, compact tool
blocks, the context fill in the status line, and ``acagent attach`` showing the same live status
line as ``chat`` for a turn another client started (tmux, ``tests/cli/tmux.py``)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.cli.tmux import HAVE_TMUX, Tmux, _last_line, save_capture, slow_text, term
from tests.mockprovider import MockProvider, openai_tool_calls
from tests.server.conftest import Daemon, daemon_env

pytestmark = [pytest.mark.tmux, pytest.mark.skipif(not HAVE_TMUX, reason="tmux is not installed")]
__all__ = ["term"]  # the fixture, imported

REPLY = [
    "## Plan\n\n",
    "First a ",
    "**bold** step, ",
    "then code:\n\n",
    "```python\n",
    "def greet():\n",
    "    return 'hi'\n",
    "```\n\n",
    "Done ",
    "now.",
]


def _config(home: Path, window: int) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(f'[models."openai:mock"]\ncontext_window = {window}\n')


def test_markdown_streams_and_tool_blocks_are_compact(term: Tmux, mock: MockProvider, tmp_path: Path) -> None:
    """The reply streams as rendered markdown (heading, bold, a highlighted code block; no raw
    fences or ``**`` once a block closed); a long tool output is cut to head + tail with its exit
    code and duration; the status line shows the context fill of the known window."""
    _config(tmp_path / "home", 100_000)
    command = "seq 1 40; sleep 0.3"
    mock.script(
        openai_tool_calls([("call_m", "shell", {"command": command})]),
        slow_text(REPLY, sleep_s=0.4),
    )
    term.type(f"acagent chat --yes --model openai:mock --base-url {mock.openai_base_url}")
    term.wait_chat_prompt()
    mark = len(term.screen())
    term.type("show me")
    screen = term.wait_text("ctx ", after=mark)
    assert re.search(r"ctx \d+%", screen[mark:]), screen[mark:]  # a known window: a percentage
    screen = term.wait_text("def greet", after=mark, timeout=30)
    mid = screen[mark:]
    assert "Plan" in mid and "## Plan" not in mid  # the heading block was committed rendered
    save_capture("chat-markdown-streaming.txt", screen)
    screen = term.wait_text("✓ done", after=mark, timeout=30)
    term.wait_chat_prompt()
    screen = term.screen()[mark:]
    save_capture("chat-markdown.txt", screen)
    assert "Plan" in screen and "## Plan" not in screen
    assert "First a bold step, then code:" in screen and "**" not in screen
    assert "def greet():" in screen and "return 'hi'" in screen
    assert "```" not in screen
    assert "Done now." in screen
    assert screen.count("def greet") == 1  # committed once: nothing drawn twice into the scrollback
    # The tool block: head, the count of lines not shown, tail, then exit code and duration.
    assert "● shell $ seq 1 40; sleep 0.3" in screen
    assert "│ 1" in screen and "│ 40" in screen
    assert re.search(r"… \(\d+ lines not shown\)", screen), screen
    assert "│ 20\n" not in screen
    assert re.search(r"└ ok · exit 0 · \d+\.\d s", screen), screen
    assert "Ctrl-C to interrupt" not in screen.split("✓ done")[-1]
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")


def test_attach_shows_the_live_status_line(term: Tmux, mock: MockProvider, tmp_path: Path) -> None:
    """`acagent attach ID` on a terminal follows a turn another client started with the same
    status line as chat (phase, tool, elapsed, context fill, the Ctrl-C hint), streams its reply,
    drops the line at the end; a line typed there is sent; Ctrl-D detaches with exit 0."""
    home = tmp_path / "home"
    _config(home, 50_000)
    daemon = Daemon(home=home, env=daemon_env(home, mock), args=["--yes"]).start()
    try:
        sid = daemon.create(term.cwd)["id"]
        mock.script(
            openai_tool_calls([("call_a", "shell", {"command": "sleep 1.5; echo tool-finished"})]),
            slow_text(["The ", "tool ", "has ", "**finished**."], sleep_s=0.3),
            slow_text(["typed ", "reply"], sleep_s=0.05),
        )
        term.type(f"acagent attach {sid}")
        term.wait_text("(attached, pending)")
        term.wait_chat_prompt()
        mark = len(term.screen())
        assert daemon.send(sid, "run the tool").status_code == 202  # another client starts the turn
        screen = term.wait_text("running `shell`", after=mark)
        save_capture("attach-status.txt", screen)
        assert re.search(r"running `shell` · \d+\.\d s .*ctx \d+% · Ctrl-C to interrupt", screen[mark:]), (
            screen
        )
        assert "› run the tool" in screen[mark:]  # sent elsewhere: shown
        screen = term.wait_text("✓ done", after=mark, timeout=30)
        term.wait_chat_prompt()
        screen = term.screen()[mark:]
        assert "The tool has finished." in screen and "**" not in screen
        assert "tool-finished" in screen
        assert "Ctrl-C to interrupt" not in screen

        mark = len(term.screen())
        term.type("a typed line")
        term.wait_text("typed reply", after=mark)
        term.wait_chat_prompt()
        assert mock.requests[-1].json["messages"][-1]["content"] == "a typed line"
        term.keys("C-d")
        term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt after detaching")
        term.type("echo EXIT=$?")
        term.wait_text("EXIT=0")
        assert daemon.session(sid)["status"] == "done"
    finally:
        daemon.terminate(15)
