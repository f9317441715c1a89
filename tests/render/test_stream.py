"""StreamWriter on a terminal: word wrapping, rewinding, control characters.

A small terminal model (:class:`Screen`) replays what the console wrote, so the tests check what
a person would see, not escape sequences.
"""

from __future__ import annotations

import io
import re

from rich.console import Console

from acagent.events import Event
from acagent.render import EventRenderer
from acagent.render._stream import StreamWriter, visible

_CSI = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])")


class Screen:
    """Enough of a VT100 for our output: printable text, newline, CR, CSI G/A/K/J/m, pending wrap."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.rows: list[list[str]] = [[]]
        self.r = self.c = 0
        self.pending = False

    def feed(self, data: str) -> Screen:
        i = 0
        while i < len(data):
            m = _CSI.match(data, i)
            if m:
                self._csi(m.group(1), m.group(2))
                i = m.end()
                continue
            ch = data[i]
            i += 1
            if ch == "\n":
                self._down()
                self.c, self.pending = 0, False
            elif ch == "\r":
                self.c, self.pending = 0, False
            else:
                if self.pending:
                    self._down()
                    self.c, self.pending = 0, False
                row = self.rows[self.r]
                row.extend(" " * (self.c + 1 - len(row)))
                row[self.c] = ch
                if self.c == self.width - 1:
                    self.pending = True
                else:
                    self.c += 1
        return self

    def _down(self) -> None:
        self.r += 1
        while len(self.rows) <= self.r:
            self.rows.append([])

    def _csi(self, params: str, final: str) -> None:
        n = int(params) if params.isdigit() else None
        if final == "G":
            self.c, self.pending = (n or 1) - 1, False
        elif final == "A":
            self.r, self.pending = max(0, self.r - (n or 1)), False
        elif final == "K":
            del self.rows[self.r][self.c :]
        elif final == "J":
            del self.rows[self.r][self.c :]
            del self.rows[self.r + 1 :]

    def lines(self) -> list[str]:
        out = ["".join(row).rstrip() for row in self.rows]
        while out and not out[-1]:
            out.pop()
        return out


def terminal(width: int, height: int = 24) -> Console:
    return Console(file=io.StringIO(), width=width, height=height, force_terminal=True, color_system=None)


def seen(c: Console) -> list[str]:
    file = c.file
    assert isinstance(file, io.StringIO)
    return Screen(c.width).feed(file.getvalue()).lines()


def ev(seq: int, type_: str, **payload: object) -> Event:
    return Event(seq=seq, ts="", session_id="s", type=type_, payload=dict(payload))


class TestWordWrap:
    def test_a_word_split_across_fragments_moves_whole(self) -> None:
        """'wor' + 'ld' does not fit the row: the first half is erased and 'world' starts the next."""
        c = terminal(10)
        w = StreamWriter(c)
        w.write("hello wor")
        w.write("ld foo bar")
        assert seen(c) == ["hello", "world foo", "bar"]
        assert w.rows == 2

    def test_words_wrap_at_spaces(self) -> None:
        c = terminal(12)
        w = StreamWriter(c)
        for fragment in ("The quick", " brown fox jumps", " over the lazy dog"):
            w.write(fragment)
        assert seen(c) == ["The quick", "brown fox", "jumps over", "the lazy dog"]

    def test_a_word_longer_than_the_row_is_cut_by_the_terminal(self) -> None:
        c = terminal(5)
        w = StreamWriter(c)
        w.write("ab abcdefghij")
        assert seen(c) == ["ab", "abcde", "fghij"]
        assert (w.rows, w.col) == (2, 5)

    def test_newlines_and_tabs(self) -> None:
        c = terminal(20)
        w = StreamWriter(c)
        w.write("a\n\tb\n")
        assert seen(c) == ["a", "    b"]
        assert not w.midline


class TestRewind:
    def test_retry_strikes_the_partial_text_in_place(self) -> None:
        """The partial text is redrawn where it was (not duplicated), then the retry line and the reply."""
        c = terminal(20, height=10)
        r = EventRenderer(c, markdown=False)
        r.render(ev(1, "assistant.delta", text="I'll start by looking at the ", attempt=1))
        r.render(ev(2, "assistant.delta", text="files in src", attempt=1))
        r.render(ev(3, "llm.retry", attempt=1, reason="overloaded_error", delay_ms=500))
        r.render(ev(4, "assistant.delta", text="done", attempt=2))
        r.render(ev(5, "assistant.message", text="done", message={}))
        lines = seen(c)
        assert lines[:3] == ["I'll start by", "looking at the files", "in src"]
        assert lines[3].startswith("↻ retrying after")
        assert lines[-1] == "done"
        assert sum("start by" in line for line in lines) == 1
        assert c.file.getvalue().count("I'll start by") == 2  # type: ignore[attr-defined]  # redrawn once

    def test_markdown_stream_never_shows_the_raw_syntax(self) -> None:
        c = terminal(30)
        r = EventRenderer(c)
        text = "Use **bold** and a list:\n\n- one\n- two"
        r.render(ev(1, "assistant.delta", text=text[:10]))
        r.render(ev(2, "assistant.delta", text=text[10:]))
        r.render(ev(3, "assistant.message", text=text, message={}))
        lines = seen(c)
        assert lines[0] == "Use bold and a list:"
        assert not any("**" in line for line in lines)
        assert any("• one" in line for line in lines)

    def test_text_scrolled_off_screen_is_not_rewound(self) -> None:
        """A region taller than the screen stays as it is; the retry line still says it is discarded."""
        c = terminal(10, height=4)
        r = EventRenderer(c, markdown=False)
        r.render(ev(1, "assistant.delta", text="one two three four five six seven"))
        r.render(ev(2, "llm.retry", attempt=1, reason="x", delay_ms=1))
        lines = seen(c)
        assert lines[0] == "one two"
        assert "discarded" in c.file.getvalue()  # type: ignore[attr-defined]

    def test_other_output_closes_the_region(self) -> None:
        """After a tool call line, the old stream is not rewound over."""
        c = terminal(40)
        w = StreamWriter(c)
        w.write("abc")
        w.end_line()
        w.close_region()
        assert not w.rewind()


class TestControlCharacters:
    def test_visible_escapes_controls(self) -> None:
        assert visible("a\x1b[2Jb\rc\x07\x9b") == "a\\x1b[2Jb\\x0dc\\x07\\x9b"
        assert visible("keep\ttabs\nand newlines") == "keep\ttabs\nand newlines"

    def test_streamed_escape_sequences_cannot_move_the_cursor(self) -> None:
        c = terminal(40)
        r = EventRenderer(c, markdown=False)
        r.render(ev(1, "assistant.delta", text="safe\x1b[2J\x1b[1Aend"))
        r.finish_line()
        assert seen(c) == ["safe\\x1b[2J\\x1b[1Aend"]

    def test_markdown_blocks_cannot_move_the_cursor(self) -> None:
        c = terminal(40)
        r = EventRenderer(c)
        r.render(ev(1, "assistant.delta", text="**safe**\x1b[2J\x1b[1Aend\n\nnext"))
        r.render(ev(2, "assistant.message", text="**safe**\x1b[2J\x1b[1Aend\n\nnext", message={}))
        assert "\x1b[2J" not in c.file.getvalue()  # type: ignore[attr-defined]
        assert "safe\\x1b[2J\\x1b[1Aend" in seen(c)[0]

    def test_approval_shows_hidden_characters_of_the_command(self) -> None:
        c = Console(file=io.StringIO(), width=80)
        r = EventRenderer(c)
        command = "echo hi\rrm -rf ~ \x1b[8m"
        r.render(ev(1, "approval.requested", tool_call_id="c", name="shell", arguments={}, command=command))
        text = c.file.getvalue()  # type: ignore[attr-defined]
        assert "echo hi\\x0drm -rf ~ \\x1b[8m" in text
