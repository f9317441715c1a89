"""EventRenderer, sessions_table and show_session against scripted event lists (rich to StringIO)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import pytest
from rich.console import Console

import acagent.render
from acagent.events import Event
from acagent.render import EventRenderer, sessions_table, show_session

SID = "ses_test"
TURN = "turn_1"


def console(**kw: Any) -> Console:
    return Console(file=io.StringIO(), width=80, **kw)


def out(c: Console) -> str:
    file = c.file
    assert isinstance(file, io.StringIO)
    return file.getvalue()


class Script:
    """Builds events with increasing seq."""

    def __init__(self) -> None:
        self.seq = 0
        self.events: list[Event] = []

    def __call__(self, type_: str, **payload: Any) -> Event:
        self.seq += 1
        payload.setdefault("turn_id", TURN)
        event = Event(
            seq=self.seq, ts="2026-01-01T00:00:00.000000Z", session_id=SID, type=type_, payload=payload
        )
        self.events.append(event)
        return event


def f13_events() -> list[Event]:
    """F13: attempt 1 streams partial text then fails in-band; attempt 2 replies ``done``."""
    e = Script()
    e("turn.started")
    e("user.message", text="start")
    e("step.started", step_id="s1", request_id="s1|1", attempt=1)
    e("assistant.delta", text="I'll start by", step_id="s1", attempt=1)
    e("llm.retry", attempt=1, reason="overloaded_error", delay_ms=500, error="Overloaded")
    e("step.started", step_id="s1", request_id="s1|2", attempt=2)
    e("assistant.delta", text="done", step_id="s1", attempt=2)
    e("assistant.message", text="done", message={}, step_id="s1")
    e(
        "usage",
        input_tokens=12,
        output_tokens=2,
        total_tokens=14,
        session_input_tokens=12,
        session_output_tokens=2,
    )
    e("step.finished", step_id="s1", request_id="s1|2", attempt=2, finish_reason="stop")
    e("turn.completed", text="done")
    return e.events


def test_exported_members() -> None:
    """`acagent.render.__all__` lists exactly the public names, each importable."""
    public = {name for name in dir(acagent.render) if not name.startswith("_")}
    assert set(acagent.render.__all__) <= public
    for name in acagent.render.__all__:
        assert getattr(acagent.render, name) is not None
    assert {"EventRenderer", "sessions_table", "show_session"} <= set(acagent.render.__all__)


class TestStreaming:
    def test_deltas_print_incrementally_without_newline(self) -> None:
        """Each delta appears as it arrives on the same line; the final message ends the line."""
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("assistant.delta", text="Hel", step_id="s", attempt=1))
        assert out(c) == "Hel"
        r.render(e("assistant.delta", text="lo **there**", step_id="s", attempt=1))
        assert out(c) == "Hello **there**"
        assert r.midline
        r.render(e("assistant.message", text="Hello **there**", message={}, step_id="s"))
        assert out(c) == "Hello **there**\n"
        assert r.reply == "Hello **there**"
        assert not r.midline

    def test_message_prints_what_the_stream_missed(self) -> None:
        """A message longer than the streamed text prints the rest; one with no stream prints in full."""
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("assistant.delta", text="Hello", step_id="s", attempt=1))
        r.render(e("assistant.message", text="Hello world", message={}, step_id="s"))
        r.render(e("assistant.message", text="Second reply", message={}, step_id="s2"))
        assert out(c) == "Hello world\nSecond reply\n"

    def test_other_output_ends_an_open_line(self) -> None:
        """A tool call after streamed text starts on its own line."""
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("assistant.delta", text="Let me look.", step_id="s", attempt=1))
        r.render(e("error", code="max_tokens", message="cut off"))
        assert out(c).splitlines() == ["Let me look.", "⚠ cut off [max_tokens]"]

    def test_interrupted_message_is_marked(self) -> None:
        """The partial text kept after a cancel is shown with a marker, and the turn as interrupted."""
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("assistant.delta", text="Here is the plan: first", step_id="s", attempt=1))
        r.render(e("assistant.message", text="Here is the plan: first", message={}, interrupted=True))
        r.render(e("turn.interrupted", reason="user"))
        assert out(c).splitlines() == ["Here is the plan: first [interrupted]", "⏹ interrupted (user)"]


class TestRetrySupersedesPartialText:
    def test_live_retry_drops_the_partial_text(self) -> None:
        """F13 live: the partial text is not part of the reply; a retry line says it is discarded."""
        c = console()
        r = EventRenderer(c)
        events = f13_events()
        for event in events[:4]:
            r.render(event)
        assert r.streamed_text == "I'll start by"
        r.render(events[4])  # llm.retry
        assert r.streamed_text == ""
        for event in events[5:]:
            r.render(event)
        assert r.reply == "done"
        lines = out(c).splitlines()
        assert "I'll start bydone" not in out(c)
        assert "done" in lines  # the reply on its own line
        retry = next(line for line in lines if "retrying" in line)
        assert "overloaded_error" in retry
        assert "attempt 1" in retry
        assert "discarded" in retry
        assert lines.index(retry) < lines.index("done")

    def test_history_never_shows_the_failed_attempt(self) -> None:
        """F13 replayed: only ``done`` is drawn as the reply."""
        c = console()
        r = EventRenderer(c)
        r.render_history(f13_events())
        text = out(c)
        assert "I'll start by" not in text
        assert "› start" in text
        assert "done" in text.splitlines()
        assert "retrying after overloaded_error" in text
        assert r.reply == "done"

    def test_terminal_strikes_the_partial_text_through(self) -> None:
        """On a terminal the open (live) part of the failed attempt is printed once, struck through."""
        c = console(force_terminal=True, color_system="standard", height=24)
        r = EventRenderer(c)
        for event in f13_events()[:5]:
            r.render(event)
        text = out(c)
        assert "\x1b[9m" in text or ";9m" in text  # strike
        assert text.count("I'll start by") == 1  # live only, then printed struck

    def test_raw_terminal_stream_redraws_the_partial_text_struck(self) -> None:
        """Without markdown a terminal gets the raw stream; the partial text is redrawn struck."""
        c = console(force_terminal=True, color_system="standard", height=24)
        r = EventRenderer(c, markdown=False)
        for event in f13_events()[:5]:
            r.render(event)
        text = out(c)
        assert "\x1b[9m" in text or ";9m" in text
        assert text.count("I'll start by") == 2  # streamed, then redrawn struck

    def test_delta_after_retry_starts_a_new_reply(self) -> None:
        """Without a retry, the attempts would concatenate; with one, only the new text counts."""
        r = EventRenderer(console())
        e = Script()
        r.render(e("assistant.delta", text="abc", step_id="s", attempt=1))
        r.render(e("llm.retry", attempt=1, reason="process_died", delay_ms=0))
        r.render(e("assistant.delta", text="xyz", step_id="s", attempt=2))
        assert r.streamed_text == "xyz"


class TestTools:
    def test_shell_call_shows_the_command(self) -> None:
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("tool.call", tool_call_id="c1", name="shell", arguments={"command": "ls -la"}))
        r.render(e("tool.call", tool_call_id="c2", name="read_file", arguments={"path": "a.py", "start": 3}))
        assert out(c).splitlines() == ["● shell $ ls -la", "● read_file path='a.py' start=3"]

    def test_result_is_truncated_with_a_count(self) -> None:
        """A result without live output shows its first lines and how many more there are."""
        c = console()
        r = EventRenderer(c, max_result_lines=5)
        e = Script()
        content = "\n".join(f"line {i}" for i in range(1, 31))
        r.render(e("tool.call", tool_call_id="c1", name="read_file", arguments={"path": "a"}))
        r.render(
            e(
                "tool.result",
                tool_call_id="c1",
                name="read_file",
                status="ok",
                content=content,
                is_error=False,
            )
        )
        lines = out(c).splitlines()
        assert lines[1:7] == [
            "  │ line 1",
            "  │ line 2",
            "  │ line 3",
            "  │ … (25 lines not shown)",
            "  │ line 29",
            "  │ line 30",
        ]  # head and tail
        assert lines[-1] == "  └ ok · 0.0 s"

    def test_live_output_is_shown_once_and_truncated(self) -> None:
        """Live output split mid-line is joined; the result does not repeat it; head, then tail."""
        c = console()
        r = EventRenderer(c, max_output_lines=3)
        e = Script()
        r.render(e("tool.call", tool_call_id="c1", name="shell", arguments={"command": "seq 5"}))
        r.render(e("tool.output", tool_call_id="c1", text="1\n2"))
        r.render(e("tool.output", tool_call_id="c1", text="\n3\n4\n5\n"))
        r.render(
            e(
                "tool.result",
                tool_call_id="c1",
                name="shell",
                status="ok",
                content="1\n2\n3\n4\n5\n",
                is_error=False,
                exit_code=0,
            )
        )
        assert out(c).splitlines() == [
            "● shell $ seq 5",
            "  │ 1",
            "  │ 2",
            "  │ … (2 lines not shown)",
            "  │ 5",
            "  └ ok · exit 0 · 0.0 s",
        ]

    def test_error_and_interrupted_results(self) -> None:
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(
            e(
                "tool.result",
                tool_call_id="c1",
                name="edit_file",
                status="error",
                content="not unique",
                is_error=True,
            )
        )
        r.render(e("tool.output", tool_call_id="c2", text="child=42\n"))
        r.render(
            e(
                "tool.result",
                tool_call_id="c2",
                name="shell",
                status="interrupted",
                content="interrupted by user after start; partial output: child=42",
                is_error=True,
            )
        )
        r.render(
            e(
                "tool.result",
                tool_call_id="c3",
                name="shell",
                status="ok",
                content="x\nexit code 2",
                is_error=False,
                exit_code=2,
            )
        )
        lines = out(c).splitlines()
        assert lines[:2] == ["  │ not unique", "  └ error"]
        assert "  │ child=42" in lines
        assert "  └ interrupted" in lines
        assert lines[-1] == "  └ exit 2"  # no duration: these calls were never seen starting

    def test_error_results_are_red_on_a_terminal(self) -> None:
        c = console(force_terminal=True, color_system="standard")
        r = EventRenderer(c)
        e = Script()
        r.render(
            e("tool.result", tool_call_id="c1", name="shell", status="error", content="boom", is_error=True)
        )
        assert "\x1b[31m" in out(c)


class TestApprovals:
    def test_request_shows_a_prompt_box_and_is_pending(self) -> None:
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(
            e(
                "approval.requested",
                tool_call_id="c1",
                name="shell",
                arguments={"command": "rm -rf build"},
                command="rm -rf build",
            )
        )
        text = out(c)
        assert "approval needed: shell" in text
        assert "$ rm -rf build" in text
        assert "[y]es / [n]o / [a]lways" in text
        assert r.pending_approval is not None
        assert r.pending_approval["tool_call_id"] == "c1"
        r.render(e("approval.resolved", tool_call_id="c1", decision="deny"))
        assert r.pending_approval is None
        assert out(c).splitlines()[-1] == "  ✗ denied"

    def test_non_shell_arguments_are_shown(self) -> None:
        c = console()
        r = EventRenderer(c)
        r.render(
            Script()(
                "approval.requested",
                tool_call_id="c1",
                name="write_file",
                arguments={"path": "a.txt", "content": "hi"},
            )
        )
        assert '"path": "a.txt"' in out(c)

    def test_history_keeps_only_the_unresolved_approval_pending(self) -> None:
        """Resolved approvals replay as their decision; an open one stays pending with its box."""
        e = Script()
        e("approval.requested", tool_call_id="c1", name="shell", arguments={"command": "a"}, command="a")
        e("approval.resolved", tool_call_id="c1", decision="always")
        e("approval.requested", tool_call_id="c2", name="shell", arguments={"command": "b"}, command="b")
        c = console()
        r = EventRenderer(c)
        r.render_history(e.events)
        text = out(c)
        assert text.count("approval needed") == 1
        assert "$ b" in text
        assert "✓ allowed (always, for this session)" in text
        assert r.pending_approval is not None
        assert r.pending_approval["tool_call_id"] == "c2"

    def test_turn_end_clears_the_pending_approval(self) -> None:
        r = EventRenderer(console())
        e = Script()
        r.render(e("approval.requested", tool_call_id="c1", name="shell", arguments={}, command="x"))
        r.render(e("turn.interrupted", reason="user"))
        assert r.pending_approval is None


class TestStatusLines:
    def test_usage_and_turn_end_lines(self) -> None:
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("usage", input_tokens=0, output_tokens=0, total_tokens=0))  # unknown: not drawn
        r.render(
            e(
                "usage",
                input_tokens=1200,
                output_tokens=34,
                total_tokens=1234,
                session_input_tokens=1200,
                session_output_tokens=34,
            )
        )
        r.render(e("turn.completed", text=""))
        r.render(
            e("turn.failed", type="overloaded_error", message="Overloaded", retryable=True, turn_id="t2")
        )
        assert out(c).splitlines() == [
            "tokens: 1,200 in · 34 out  (session 1,200 in · 34 out)",
            "✓ done",
            "✗ turn failed: Overloaded [overloaded_error]",
            "  (a transient error: send a message to try again)",
        ]

    def test_a_turn_ends_once(self) -> None:
        """A second end event for the same turn (e.g. a late shutdown marker) is not drawn."""
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("turn.completed", text="x"))
        r.render(e("turn.interrupted", reason="shutdown"))
        assert out(c).splitlines() == ["✓ done"]

    def test_quiet_types_draw_nothing(self) -> None:
        c = console()
        r = EventRenderer(c)
        e = Script()
        for type_ in (
            "session.status",
            "step.started",
            "step.finished",
            "checkpoint",
            "tool.started",
            "turn.started",
        ):
            r.render(e(type_))
        assert out(c) == ""
        assert r.last_seq == 6

    def test_user_messages_can_be_hidden_live(self) -> None:
        c = console()
        r = EventRenderer(c, echo_user=False)
        r.render(Script()("user.message", text="hi"))
        assert out(c) == ""


class TestHistory:
    def test_replay_draws_messages_not_deltas(self) -> None:
        """Deltas closed by a message are skipped; a trailing open stream is shown as is."""
        e = Script()
        e("user.message", text="q1")
        e("assistant.delta", text="Ans", step_id="s1", attempt=1)
        e("assistant.delta", text="wer", step_id="s1", attempt=1)
        e("assistant.message", text="Answer", message={}, step_id="s1")
        e("turn.completed", text="Answer")
        e("user.message", text="q2", turn_id="t2")
        e("assistant.delta", text="Partial so", step_id="s2", attempt=1, turn_id="t2")
        c = console()
        r = EventRenderer(c)
        r.render_history(e.events)
        r.finish_line()
        assert out(c).splitlines() == ["", "› q1", "Answer", "✓ done", "", "› q2", "Partial so"]
        assert r.last_seq == 7

    def test_stream_cancelled_without_a_message_is_not_replayed(self) -> None:
        """Deltas the model never saw (no message kept) are not part of the history (F02)."""
        e = Script()
        e("assistant.delta", text="lost", step_id="s1", attempt=1)
        e("turn.interrupted", reason="user")
        c = console()
        EventRenderer(c).render_history(e.events)
        assert "lost" not in out(c)


@dataclass
class Step:
    step_id: str
    turn_id: str
    attempt: int
    status: str
    error: str | None = None


class TestSessions:
    def test_sessions_table(self) -> None:
        c = console()
        rows = [
            {
                "id": "ses_a",
                "status": "done",
                "cwd": "/w",
                "title": "hello",
                "updated_at": "2026-01-02T03:04:05.1Z",
                "last_seq": 9,
            },
            {
                "id": "ses_b",
                "status": "failed",
                "cwd": "/x",
                "title": None,
                "updated_at": "2026-01-01T00:00:00Z",
                "last_seq": 3,
            },
        ]
        sessions_table(rows, show_cwd=True, console=c)
        text = out(c)
        assert "ses_a" in text
        assert "2026-01-02 03:04:05" in text
        assert "/x" in text
        assert "hello" in text

    def test_empty_table(self) -> None:
        c = console()
        sessions_table([], console=c)
        assert "no sessions" in out(c)

    def test_show_session_counts_attempts_and_retries(self) -> None:
        """`sessions show` gives attempts per step (issue 3), pending approvals and the history."""
        c = console()
        info = {
            "id": "ses_a",
            "status": "waiting_user",
            "model": "anthropic:mock",
            "cwd": "/w",
            "title": "start",
            "last_seq": 11,
            "usage": {"input_tokens": 12, "output_tokens": 2},
        }
        steps = [
            Step("s1", TURN, 1, "failed", "Overloaded"),
            Step("s1", TURN, 2, "done"),
            Step("s2", TURN, 1, "done"),
        ]
        approvals = [{"tool_call_id": "c9", "name": "shell", "arguments": '{"command": "make"}'}]
        show_session(info, steps, approvals, f13_events(), console=c)
        text = out(c)
        assert "waiting_user" in text
        assert "anthropic:mock" in text
        assert "2 steps, 3 attempts, 1 retry" in text
        assert "Overloaded" in text
        assert "c9" in text
        assert "$ make" in text
        assert "I'll start by" not in text
        assert "done" in text.splitlines()

    def test_show_session_escapes_what_a_pending_approval_would_run(self) -> None:
        """`sessions show` listed a pending command as it was: `rm -rf ~ ESC[2K ESC[1G ls -la`
        erased its own start on a terminal and read `ls -la` (found by the break-it tester).
        The command is shown under the approval rule (escaped, with a warning), and the ids,
        the step errors and the recorded warnings from the journal have no raw control byte."""
        c = Console(file=io.StringIO(), width=200)
        info = {
            "id": "ses_a",
            "status": "waiting_user",
            "cwd": "/w",
            "last_seq": 3,
            "warnings": ["imported \x1b]8;;http://x\x1b\\link"],
        }
        hostile = "rm -rf ~ \x1b[2K\x1b[1Gls -la"
        approvals = [
            {"tool_call_id": "c\x1b[31m9", "name": "shell", "arguments": {"command": hostile}},
            {"tool_call_id": "c10", "name": "write_file", "arguments": {"path": "a\u202eb", "content": "x"}},
        ]
        steps = [Step("s1", "turn_\x1b[2J", 1, "failed", "boom \x1b[2J")]
        show_session(info, steps, approvals, [], console=c)
        text = out(c)
        assert "\x1b" not in text  # no raw ESC reaches the terminal
        assert "rm -rf ~ \\x1b[2K\\x1b[1Gls -la" in text  # the whole command, escaped
        assert "\\u202e" in text
        assert text.count("hidden characters shown escaped") == 2


@pytest.mark.parametrize("width", [20, 80])
def test_long_lines_do_not_break_tool_lines(width: int) -> None:
    """Output lines are clipped to the console width, never wrapped into the gutter."""
    c = Console(file=io.StringIO(), width=width)
    r = EventRenderer(c)
    e = Script()
    r.render(e("tool.output", tool_call_id="c1", text="x" * 200 + "\n"))
    lines = out(c).splitlines()
    assert len(lines) == 1
    assert len(lines[0]) <= width


class TestMarkdown:
    MD = "Use **bold** and `code`."

    def test_terminal_streams_markdown_blocks(self) -> None:
        """On a terminal completed blocks are printed rendered, once; the open one stays live."""
        c = console(force_terminal=True, color_system="standard", height=24)
        r = EventRenderer(c)
        e = Script()
        text = "# Title\n\nIntro " + self.MD + "\n\n```python\nprint(1)\n```\n\nlast para"
        for i in range(0, len(text), 7):
            r.render(e("assistant.delta", text=text[i : i + 7], step_id="s", attempt=1))
        printed = out(c)
        assert "Title" in printed and "print" in printed
        assert "**" not in printed and "```" not in printed and "# Title" not in printed
        assert "last para" not in printed  # still open: the live view shows it
        live = r.open_block()
        assert live is not None and live.text == "last para"
        r.render(e("assistant.message", text=text, message={}, step_id="s"))
        final = out(c)
        assert final.count("Title") == 1 and final.count("last para") == 1
        assert r.open_block() is None
        assert not r.midline

    def test_plain_consoles_keep_the_raw_text(self) -> None:
        c = console()
        r = EventRenderer(c)
        e = Script()
        r.render(e("assistant.delta", text=self.MD, step_id="s", attempt=1))
        r.render(e("assistant.message", text=self.MD, message={}, step_id="s"))
        assert out(c) == self.MD + "\n"

    def test_history_draws_markdown_when_asked(self) -> None:
        c = console()
        EventRenderer(c, markdown=True).render_history(
            [
                Event(
                    seq=1,
                    ts="",
                    session_id=SID,
                    type="assistant.message",
                    payload={"text": "# Title\n\n- a\n- b"},
                )
            ]
        )
        text = out(c)
        assert "# Title" not in text
        assert "Title" in text
        assert "• a" in text

    def test_plain_text_is_never_reformatted(self) -> None:
        c = console(force_terminal=True, color_system=None, height=24)
        r = EventRenderer(c)
        e = Script()
        r.render(e("assistant.delta", text="just words", step_id="s", attempt=1))
        r.render(e("assistant.message", text="just words", message={}, step_id="s"))
        assert "\x1b[J" not in out(c)


def test_log_lines_go_above_the_live_region(capsys: pytest.CaptureFixture[str]) -> None:
    """While the live view is shown, an `acagent` warning is printed above it, never raw on stderr."""
    import logging
    import sys

    from acagent.render import LiveView, StatusLine

    c = console(force_terminal=True, color_system=None, height=24)
    handler = logging.StreamHandler(sys.stderr)
    log = logging.getLogger("acagent")
    log.addHandler(handler)
    try:
        status = StatusLine()
        status.start()
        view = LiveView(c, EventRenderer(c), status)
        view.start()
        log.warning("the window is assumed")
        view.stop()
        assert handler.stream is sys.stderr  # put back
    finally:
        log.removeHandler(handler)
    assert "the window is assumed" in out(c)
    assert "the window is assumed" not in capsys.readouterr().err
