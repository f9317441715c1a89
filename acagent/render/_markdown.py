"""Streamed assistant text as markdown: completed blocks are printed once, the open one stays live.

A reply arrives in fragments. :class:`BlockStream` splits the text so far into markdown blocks at
lines where a block certainly ends — a blank line outside a code fence, a heading line, the
closing line of a fence — and hands each completed block out once (:meth:`BlockStream.feed`), to
be printed into the scrollback for good. What follows the last boundary is the *open* block: the
live view (:mod:`acagent.render._view`) re-renders it on every update, so a code block is
highlighted while it streams and its fences never show. A block is drawn as markdown only when it
uses markdown (:data:`MARKDOWN`); plain text keeps its line breaks exactly (rich's markdown joins
soft line breaks).

The splitter is a few lines of our own because markdown-it (rich's parser) parses whole documents
only; re-parsing the whole reply on every fragment would be quadratic, and its block map cannot
say which blocks can still change.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markdown import Markdown
from rich.segment import Segment
from rich.text import Text

from acagent.render._safe import visible

__all__ = ["MARKDOWN", "BlockStream", "OpenBlock", "block_renderable", "is_fenced"]

MARKDOWN = re.compile(
    r"\*\*|__|`|\[[^\]\n]+\]\([^)\n]+\)|^#{1,6} |^\s*[-*+] |^\s*\d+\. |^>|^\|.*\|\s*$", re.MULTILINE
)
"""Text that renders differently as markdown (emphasis, code, links, headings, lists, quotes, tables)."""

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_HEADING = re.compile(r"^ {0,3}#{1,6}(\s|$)")


def is_fenced(block: str) -> bool:
    """True when ``block`` is a fenced code block (rich draws it with a padding row around it)."""
    return _FENCE.match(block.lstrip("\n")) is not None


def block_renderable(text: str, style: str = "", *, markdown: bool = True) -> RenderableType:
    """One block as rich draws it: markdown when it uses markdown, else the text as is.

    Args:
        text: the block (control characters are made visible first).
        style: style of plain text (reasoning is dim italic).
        markdown: False draws every block as plain text.
    """
    text = visible(text.strip("\n"))
    if markdown and MARKDOWN.search(text):
        return Markdown(text)
    return Text(text, style=style)


class BlockStream:
    """Split streamed text into completed markdown blocks and the open block (module docstring)."""

    def __init__(self) -> None:
        self.text = ""
        """All text of the stream so far."""
        self._done = 0
        """Characters already handed out as completed blocks (always outside a fence)."""
        self._scan = 0
        """Start of the first complete line not yet classified."""
        self._fence: tuple[str, int] | None = None
        """The open fence (character, length) while inside a code block."""

    @property
    def open_text(self) -> str:
        """The text after the last completed block (what is still live)."""
        return self.text[self._done :]

    def feed(self, fragment: str) -> list[str]:
        """Add ``fragment``; returns the blocks it completed, in order (each handed out once)."""
        self.text += fragment
        blocks: list[str] = []
        while (end := self.text.find("\n", self._scan)) >= 0:
            line_start, self._scan = self._scan, end + 1
            self._classify(self.text[line_start:end], line_start, blocks)
        return blocks

    def _classify(self, line: str, line_start: int, blocks: list[str]) -> None:
        if self._fence is not None:
            char, size = self._fence
            stripped = line.strip()
            if stripped and set(stripped) == {char} and len(stripped) >= size:
                self._fence = None
                self._cut(self._scan, blocks)
            return
        fence = _FENCE.match(line)
        if fence is not None:
            self._cut(line_start, blocks)
            self._fence = (fence.group(1)[0], len(fence.group(1)))
        elif not line.strip():
            self._cut(self._scan, blocks)
        elif _HEADING.match(line):
            self._cut(line_start, blocks)
            self._cut(self._scan, blocks)

    def _cut(self, at: int, blocks: list[str]) -> None:
        """End the open block at ``at``: hand it out unless it is blank (blank lines are dropped)."""
        block = self.text[self._done : at]
        if block.strip():
            blocks.append(block)
        self._done = at

    def flush(self) -> str:
        """End the stream: the open block's text (``""`` when blank); the stream starts over."""
        rest = self.open_text
        self.text, self._done, self._scan, self._fence = "", 0, 0, None
        return rest if rest.strip() else ""


class OpenBlock:
    """The live part of the reply: the open block rendered, cropped to its last ``max_rows`` rows.

    A block taller than the screen cannot be redrawn in place (the terminal cannot move the cursor
    above its top row), so while it is open only its last rows are shown; once it completes it is
    printed whole.
    """

    def __init__(self, text: str, style: str = "", *, markdown: bool = True, max_rows: int = 20) -> None:
        self.text = text
        self.style = style
        self.markdown = markdown
        self.max_rows = max(1, max_rows)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.text.strip():
            return
        renderable = block_renderable(self.text, self.style, markdown=self.markdown)
        lines = console.render_lines(renderable, options.update(height=None), pad=False)
        while lines and not "".join(s.text for s in lines[-1]).strip():
            lines.pop()  # markdown ends some blocks with a blank row
        yield from _join(lines[-self.max_rows :])


def _join(lines: list[list[Segment]]) -> Iterator[Segment]:
    for i, line in enumerate(lines):
        if i:
            yield Segment.line()
        yield from line
