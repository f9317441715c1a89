"""``acagent chat`` driven in a real terminal (tmux, ``tests/cli/tmux.py``) as a person would,
against the strict mock."""

from __future__ import annotations

import os
import re
import time

import pytest

from tests.casefiles import require_cases
from tests.cli.tmux import HAVE_TMUX, Tmux, _last_line, save_capture, slow_text, term
from tests.mockprovider import MockProvider, Script, TextReply, openai_tool_calls

pytestmark = [pytest.mark.tmux, pytest.mark.skipif(not HAVE_TMUX, reason="tmux is not installed")]
__all__ = ["term"]  # the fixture, imported

F07_COMMAND = """bash -c 'trap "" INT TERM HUP; sleep 1000 & echo "child=$!"; while true; do sleep 1; done'"""


KILL_GRACE_S = 2.0
"""``timing.tool_kill_grace_s`` (the default): SIGTERM, this long, then SIGKILL."""


def _pid_dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # an unreaped zombie has exited too
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def test_chat_approve_stream_interrupt_exit_and_continue(term: Tmux, mock: MockProvider) -> None:
    """Type a prompt, approve the shell call, see the streamed answer; Ctrl-C mid-stream brings the
    prompt back; /exit exits 0; `chat --continue` shows the earlier conversation."""
    mock.script(
        openai_tool_calls(
            [("call_1", "shell", {"command": "echo tmux-ok > out.txt; echo written"})], text="Running it."
        ),
        slow_text(["The ", "file ", "is ", "written."]),
        slow_text(["Counting: ", "one ", "two ", "three"], pause_after=3),
    )
    chat = f"acagent chat --model openai:mock --base-url {mock.openai_base_url}"
    term.type(chat)
    term.wait_chat_prompt()
    term.wait_text("(new)")

    # Turn 1: the model asks for a shell call; approve it.
    term.type("please write the file")
    screen = term.wait_text("allow? [y/n/a]")
    assert "$ echo tmux-ok > out.txt; echo written" in screen
    assert "[y]es / [n]o / [a]lways" in screen
    assert not (term.cwd / "out.txt").exists()
    term.type("y")
    screen = term.wait_text("The file is written.")
    screen = term.wait_chat_prompt()
    assert "✓ allowed" in screen
    assert "│ written" in screen
    assert (term.cwd / "out.txt").read_text() == "tmux-ok\n"

    # Turn 2: the stream pauses mid-answer; Ctrl-C interrupts and the prompt comes back.
    mark = len(term.screen())
    term.type("count please")
    term.wait_text("Counting: one", after=mark)
    mock.wait_paused(1)
    term.keys("C-c")
    term.wait_text("interrupted (user)", after=mark)
    term.wait_chat_prompt(timeout=10)
    mock.release()
    assert len(mock.requests) == 3

    # /exit ends the process with status 0.
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt after /exit")
    term.type("echo EXIT=$?")
    term.wait_text("EXIT=0")

    # --continue replays the conversation before the prompt.
    mark = len(term.screen())
    term.type(f"acagent chat --continue --base-url {mock.openai_base_url}")
    screen = term.wait_chat_prompt()[mark:]
    assert "(resumed)" in screen
    history = screen[screen.index("history") :]
    for expected in (
        "› please write the file",
        "Running it.",
        "● shell $ echo tmux-ok > out.txt; echo written",
        "✓ allowed",
        "The file is written.",
        "› count please",
        "⏹ interrupted (user)",
    ):
        assert expected in history, expected
    assert history.index("› please write the file") < history.index("The file is written.")
    assert history.index("The file is written.") < history.index("› count please")
    assert "approval needed" not in history  # resolved approvals replay as their decision
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")


def test_ctrl_c_during_a_tool_kills_its_process_tree(term: Tmux, mock: MockProvider) -> None:
    """F07 (b): Ctrl-C while a shell call runs kills the whole group, the detached-looking child
    included, within the grace period + 2 s; the prompt comes back and the session goes on."""
    mock.script(
        openai_tool_calls([("call_7", "shell", {"command": F07_COMMAND})]), TextReply("after the cancel")
    )
    term.type(f"acagent chat --yes --model openai:mock --base-url {mock.openai_base_url}")
    term.wait_chat_prompt()
    term.type("start the loop")
    screen = term.wait_for(lambda s: re.search(r"child=\d+", s), what="child=NNN")
    match = re.search(r"child=(\d+)", screen)
    assert match is not None
    child = int(match.group(1))
    assert not _pid_dead(child)

    term.keys("C-c")
    started = time.monotonic()
    while not _pid_dead(child):
        assert time.monotonic() - started < KILL_GRACE_S + 2, f"child {child} still alive"
        time.sleep(0.05)
    screen = term.wait_text("interrupted (user)")
    term.wait_chat_prompt(timeout=10)
    assert "└ interrupted" in term.screen()

    # The session accepts the next message and the strict mock accepts its history.
    term.type("what happened?")
    term.wait_text("after the cancel")
    term.wait_chat_prompt()
    assert [r.status for r in mock.requests] == [200, 200]

    # Ctrl-C on the idle prompt: a hint first, then exit 0.
    term.keys("C-c")
    term.wait_text("press Ctrl-C again")
    term.keys("C-c")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")
    term.type("echo EXIT=$?")
    term.wait_text("EXIT=0")


def test_ctrl_c_at_an_approval_prompt_cancels_the_turn(term: Tmux, mock: MockProvider) -> None:
    """Ctrl-C while asked y/n/a cancels the turn: the call is not run and the prompt comes back."""
    mock.script(openai_tool_calls([("call_9", "shell", {"command": "touch never.txt"})]))
    term.type(f"acagent chat --model openai:mock --base-url {mock.openai_base_url}")
    term.wait_chat_prompt()
    term.type("touch it")
    term.wait_text("allow? [y/n/a]")
    term.type("maybe")
    term.wait_text("answer y (yes), n (no) or a (always")
    term.keys("C-c")
    screen = term.wait_text("interrupted (user)")
    term.wait_chat_prompt()
    assert "approval cancelled" in screen
    assert not (term.cwd / "never.txt").exists()
    term.keys("C-d")
    term.wait_text("press Ctrl-C again")
    term.keys("C-d")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")


def test_parallel_approvals_are_each_asked_in_order_f127(term: Tmux, mock: MockProvider) -> None:
    """Three calls of one step ask at once; chat asked only the first and then waited forever
    (the renderer kept one pending approval, which the first answer cleared)."""
    calls = [(f"call_{x}", "shell", {"command": f"echo {x} >> calls.txt"}) for x in "ABC"]
    mock.script(openai_tool_calls(calls), TextReply("all three answered"))
    term.type(f"acagent chat --model openai:mock --base-url {mock.openai_base_url}")
    term.wait_chat_prompt()
    term.type("run three")
    for answer in ("y", "n", "y"):  # each call asked in turn: the last line is an empty prompt again
        term.wait_for(lambda s: _last_line(s) == "allow? [y/n/a]", what=f"the prompt to answer {answer}")
        term.type(answer)
    term.wait_text("all three answered")
    term.wait_chat_prompt()
    assert (term.cwd / "calls.txt").read_text().split() == ["A", "C"]
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")


def test_continue_finishes_a_turn_left_waiting_for_approval(term: Tmux, mock: MockProvider) -> None:
    """The process dies while an approval is pending; `chat --continue` replays the history, asks
    the same question again and finishes the turn once it is answered."""
    mock.script(
        openai_tool_calls([("call_5", "shell", {"command": "echo resumed > r.txt"})]),
        TextReply("finished after the restart"),
    )
    term.type(
        f"ACAGENT_CRASH_AT=waiting_approval acagent chat --model openai:mock --base-url {mock.openai_base_url}"
    )
    term.wait_chat_prompt()
    term.type("write r.txt")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt after the crash")
    term.type("echo EXIT=$?")
    term.wait_text("EXIT=137")  # SIGKILL at the crash point

    mark = len(term.screen())
    term.type(f"acagent chat --continue --base-url {mock.openai_base_url}")
    screen = term.wait_text("allow? [y/n/a]", after=mark)[mark:]
    assert "› write r.txt" in screen
    assert "$ echo resumed > r.txt" in screen
    assert "finishing the interrupted turn" in screen
    assert not (term.cwd / "r.txt").exists()
    term.type("y")
    term.wait_text("finished after the restart", after=mark)
    term.wait_chat_prompt()
    assert (term.cwd / "r.txt").read_text() == "resumed\n"
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")


def test_retry_after_partial_output_shows_only_the_retried_reply(term: Tmux, mock: MockProvider) -> None:
    """F13 in chat: the in-band overloaded_error after partial text is retried; the partial text is
    marked discarded and only `done` is the reply (also when the history is replayed)."""
    cases = require_cases()
    attempt1 = cases / "F13-overloaded-attempt1.anthropic.sse"
    chunks = [part + b"\n\n" for part in attempt1.read_bytes().split(b"\n\n") if part.strip()]
    mock.script(Script(chunks=chunks, sleeps=0.05), (cases / "F13-ok-attempt2.anthropic.sse").read_bytes())
    term.type(f"ANTHROPIC_API_KEY=k acagent chat --model anthropic:mock --base-url {mock.url}")
    term.wait_chat_prompt()
    term.type("start")
    screen = term.wait_text("✓ done")
    lines = [line.strip() for line in screen.splitlines()]
    assert "done" in lines
    assert "I'll start bydone" not in screen
    retry = next(line for line in lines if line.startswith("↻ retrying after overloaded_error"))
    assert "partial reply discarded" in retry
    assert lines.index(retry) < lines.index("done")
    assert len(mock.requests) == 2
    assert mock.requests[0].json == mock.requests[1].json
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")

    mark = len(term.screen())
    term.type(f"ANTHROPIC_API_KEY=k acagent chat --continue --base-url {mock.url}")
    history = term.wait_chat_prompt()[mark:]
    assert "I'll start by" not in history
    assert "done" in [line.strip() for line in history.splitlines()]


def test_approval_shows_hidden_characters_escaped(term: Tmux, mock: MockProvider) -> None:
    """F65: a command with bidi overrides, zero-width and control characters is shown escaped,
    with a warning, in the approval panel (the raw characters never reach the terminal)."""
    command = "echo safe \u202e;lmth.exe\u202c\x1b[2K\rrm\u200b -rf nothing"
    mock.script(openai_tool_calls([("call_h", "shell", {"command": command})]), TextReply("denied, fine"))
    term.type(f"acagent chat --model openai:mock --base-url {mock.openai_base_url}")
    term.wait_chat_prompt()
    term.type("run it")
    screen = term.wait_text("allow? [y/n/a]")
    assert "$ echo safe \\u202e;lmth.exe\\u202c\\x1b[2K\\x0drm\\u200b -rf nothing" in screen
    assert "⚠ hidden characters shown escaped: 2 bidi control, 2 control, 1 zero-width" in screen
    save_capture("chat-approval-escaped.txt", screen)
    for hidden in ("\u202e", "\u202c", "\u200b"):
        assert hidden not in screen
    term.type("n")
    term.wait_text("denied, fine")
    term.wait_chat_prompt()
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")


def test_status_line_and_type_ahead(term: Tmux, mock: MockProvider) -> None:
    """Issue 17 (1, 3): a live status line appears within 0.5 s of sending, names the tool being
    run, and is gone when the turn ends; text typed during the turn is not echoed into the answer
    and waits at the next prompt."""
    mock.script(
        openai_tool_calls([("call_s", "shell", {"command": "sleep 1.5; echo tool-finished"})]),
        slow_text(["The ", "tool ", "has ", "finished ", "now."], sleep_s=0.3),
    )
    term.type(f"acagent chat --yes --model openai:mock --base-url {mock.openai_base_url}")
    term.wait_chat_prompt()
    mark = len(term.screen())
    term.type("run the tool")
    sent = time.monotonic()
    term.wait_text("Ctrl-C to interrupt", after=mark, timeout=5)
    assert time.monotonic() - sent < 0.5 + 0.3  # 0.5 s, plus one tmux capture round
    screen = term.wait_text("running `shell`", after=mark)
    save_capture("chat-status.txt", screen)
    assert re.search(r"running `shell` · \d+\.\d s", screen), screen[mark:]
    term.wait_text("The tool", after=mark)
    term.type("typed ahead", enter=False)  # mid-answer
    screen = term.wait_for(lambda s: _last_line(s) == "› typed ahead", what="the queued text at the prompt")
    answer = screen[mark : screen.rindex("✓ done")]  # the turn's output, before the next prompt
    assert "The tool has finished now." in answer
    assert "typed ahead" not in answer
    assert "Ctrl-C to interrupt" not in answer  # the status line is gone
    term.keys("C-u")
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")


def test_slash_commands_and_multiline_input(term: Tmux, mock: MockProvider) -> None:
    """Issue 17 (3, 4): Alt+Enter and a trailing backslash insert newlines; /model switches the
    next turn's model; /cost, /approvals, /compact answer; /new and /resume switch sessions."""
    mock.script(
        TextReply("first answer"),
        TextReply("second answer"),
        TextReply("a summary"),  # /compact's summary request (an LLM step like any other)
        TextReply("third answer"),
    )
    term.type(f"acagent chat --model openai:mock --base-url {mock.openai_base_url}")
    term.wait_chat_prompt()
    first = re.search(r"session (ses_\w+)", term.screen())
    assert first is not None
    term.type("line one", enter=False)
    term.keys("Escape", "Enter")
    term.type("line two \\", enter=False)
    term.keys("Enter")
    term.type("line three")
    term.wait_text("first answer")
    term.wait_chat_prompt()
    assert mock.requests[-1].json["messages"][-1]["content"] == "line one\nline two \nline three"

    term.type("/model openai:other")
    term.wait_text("model: openai:other (for the next turns")
    term.type("again")
    term.wait_text("second answer")
    term.wait_chat_prompt()
    assert mock.requests[-1].json["model"] == "other"
    term.type("/cost")
    term.wait_text("this session:")
    term.type("/approvals")
    term.wait_text("no `always` answers")
    term.type("/compact")
    term.wait_for(lambda s: "compacted the history" in s or "compaction of the context" in s, what="/compact")
    term.wait_chat_prompt()
    term.type("/mo", enter=False)
    term.keys("Tab")
    term.wait_for(lambda s: _last_line(s) == "› /model", what="tab completion")
    term.keys("C-u")

    mark = len(term.screen())
    term.type("/new")
    term.wait_text("(new)", after=mark)
    term.wait_chat_prompt()
    term.type("in the new session")
    term.wait_text("third answer", after=mark)
    term.wait_chat_prompt()
    mark = len(term.screen())
    term.type("/resume")
    term.wait_text("resume which", after=mark)
    assert first.group(1) in term.screen()[mark:]
    term.type(first.group(1)[:14])
    screen = term.wait_text("(resumed)", after=mark)
    term.wait_chat_prompt()
    assert first.group(1) in screen[mark:] and "first answer" in term.screen()[mark:]
    term.type("/exit")
    term.wait_for(lambda s: _last_line(s) == "$", what="the shell prompt")
