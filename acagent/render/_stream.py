"""StreamWriter: streamed text at the cursor, word-wrapped, with the cursor tracked.

Streamed assistant text arrives in fragments that split words anywhere. On a terminal the writer
wraps at word boundaries itself (a word that no longer fits moves to the next row, even when its
first half was already printed: that half is erased and the word reprinted), and counts the rows
the current *region* (the text of one stream) covers. That count is what lets the renderer go
back over a region that is still on screen: strike through the partial text of a failed attempt,
or replace a raw markdown reply by its rendering. On anything else (a pipe, a file, a
``StringIO``) the text is written as is and nothing is rewound.

Model and tool text can hold terminal control sequences; :func:`visible` turns every control
character but newline and tab (and bidi controls) into a visible escape, so no text can move the cursor, retitle the
terminal or hide part of a command shown for approval.
"""

from __future__ import annotations

import re

from rich.cells import cell_len
from rich.console import Console
from rich.control import Control
from rich.segment import ControlType
from rich.text import Text

from acagent.render._safe import visible

__all__ = ["StreamWriter", "visible"]

_TOKENS = re.compile(r"\n|[^\S\n]+|[^\s]+")


class StreamWriter:
    """Write streamed text on ``console`` (see module docstring)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.col = 0
        """Cursor column (cells) on a terminal; ``width`` means a wrap is pending."""
        self.rows = 0
        """Rows the cursor moved down since the region started."""
        self.region = False
        """A region is open: everything since its start is text written here."""
        self._word: str | None = None
        """The word being written (its last character was not whitespace), on a terminal."""
        self._word_col = 0
        self._open = False
        """Not a terminal: the last character written was not a newline."""

    @property
    def midline(self) -> bool:
        """The cursor is not at the start of a line."""
        return self.col > 0 if self.console.is_terminal else self._open

    def end_line(self) -> None:
        """Move to the start of the next line unless already at the start of one."""
        if self.midline:
            self.console.print()
            self._open = False
            self._newline()

    def close_region(self) -> None:
        """Other output follows: the region can no longer be rewound."""
        self.region = False

    def write(self, text: str, style: str = "") -> None:
        """Write ``text`` (made :func:`visible`) at the cursor, opening a region if none is open."""
        if not self.region:
            self.end_line()
            self.region, self.rows = True, 0
        text = visible(text)
        if not text:
            return
        if not self.console.is_terminal:
            self.console.print(Text(text, style=style), end="", soft_wrap=True, highlight=False)
            self._open = not text.endswith("\n")
            return
        width = max(1, self.console.width)
        out: list[str] = []
        for token in _TOKENS.findall(text.replace("\t", "    ")):
            if token == "\n":
                out.append("\n")
                self._newline()
            elif token.isspace():
                if self.col + cell_len(token) > width:
                    out.append("\n")  # a space at the end of a row becomes the line break
                    self._newline()
                else:
                    out.append(token)
                    self.col += cell_len(token)
                self._word = None
            else:
                self._write_word(token, width, out, style)
        self._flush(out, style)

    def _write_word(self, token: str, width: int, out: list[str], style: str) -> None:
        w = cell_len(token)
        if self._word is not None and self.col + w > width:
            whole = self._word + token
            if self._word_col > 0 and cell_len(whole) <= width:
                # The word started on this row and no longer fits: erase its first part, reprint it below.
                self._flush(out, style)
                self.console.control(
                    Control.move_to_column(self._word_col), Control((ControlType.ERASE_IN_LINE, 0))
                )
                self.col = self._word_col
                out.append("\n")
                self._newline()
                self._word, self._word_col = "", 0
                token, w = whole, cell_len(whole)
        elif self._word is None:
            if self.col > 0 and self.col + w > width:
                out.append("\n")
                self._newline()
            self._word, self._word_col = "", self.col
        out.append(token)
        self._word = (self._word or "") + token
        self._advance(w, width)

    def _advance(self, cells: int, width: int) -> None:
        pos = self.col + cells
        if pos > width:
            wraps = (pos - 1) // width
            self.rows += wraps
            pos -= wraps * width
        self.col = pos

    def _newline(self) -> None:
        self.col = 0
        self.rows += 1
        self._word = None

    def _flush(self, out: list[str], style: str) -> None:
        if out:
            self.console.print(Text("".join(out), style=style), end="", soft_wrap=True, highlight=False)
            out.clear()

    def rewind(self) -> bool:
        """Move the cursor back to the start of the open region if it is all still on screen.

        Returns:
            True if the cursor moved (the region restarts empty at column 0).
        """
        console = self.console
        if not console.is_terminal or not self.region or self.rows > max(0, console.height - 2):
            return False
        moves = [Control.move_to_column(0)]
        if self.rows:
            moves.append(Control((ControlType.CURSOR_UP, self.rows)))
        console.control(*moves)
        self.col = self.rows = 0
        self._word = None
        return True

    def erase_below(self) -> None:
        """Erase from the cursor to the end of the screen (after :meth:`rewind`)."""
        self.console.file.write("\x1b[J")
        self.console.file.flush()
