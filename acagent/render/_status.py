"""StatusLine: one live line under the output while a turn runs (``acagent chat``, ``attach``).

``⠋ running `shell` · 4.2 s · 1,234 tokens · Ctrl-C to interrupt`` — a spinner, the phase
(waiting for the model / thinking / streaming / running `tool` / waiting for approval / retrying
in N s), elapsed time of the turn, the session's tokens (and cost when the usage event carries
it) so far.

It is drawn with relative cursor moves only, so it works whatever row the cursor is on (a
newline on the last row scrolls, and the moves stay right):

- cursor at column 0 (between blocks of output): the line is drawn on the cursor's row and the
  cursor goes back to column 0;
- cursor after streamed text (``col`` > 0): the line is drawn one row below, and the cursor goes
  back up to its column.

:meth:`clear` erases it before anything else is printed; :meth:`draw` puts it back. The owner
calls ``clear()`` → print → ``draw()`` around every output, and :meth:`tick` from a timer.
Nothing is drawn on a console that is not a terminal.
"""

from __future__ import annotations

import time
from typing import Any

from rich.cells import cell_len
from rich.console import Console

from acagent.events import Event
from acagent.render._safe import visible

__all__ = ["StatusLine"]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_END = frozenset({"turn.completed", "turn.interrupted", "turn.failed"})


class StatusLine:
    """The live status of a turn (see module docstring).

    Args:
        console: the terminal.
        column: returns the cursor's column (cells) — the stream writer's ``col``.
    """

    def __init__(self, console: Console, column: Any) -> None:
        self.console = console
        self._column = column
        self.active = False
        """A turn is running: the line is shown (unless :attr:`hidden`)."""
        self.hidden = False
        """Temporarily not drawn (a prompt owns the screen)."""
        self.phase = ""
        self._started = 0.0
        self._retry_until = 0.0
        self._tokens = 0
        self._cost: float | None = None
        self._frame = 0
        self._shown: int | None = None
        """Where the drawn line is: 0 on the cursor's row, 1 on the row below; None: not drawn."""

    # ------------------------------------------------------------------ state

    def start(self, phase: str = "waiting for the model") -> None:
        """A turn started (or is being followed): show the line."""
        if not self.active:
            self._started = time.monotonic()
        self.active, self.phase = True, phase

    def stop(self) -> None:
        """The turn ended: erase the line and forget the turn."""
        self.clear()
        self.active = False

    def update(self, event: Event) -> None:
        """Follow an event: phase, tokens, cost; a turn's end stops the line."""
        p = event.payload
        kind = event.type
        if kind in _END:
            self.stop()
            return
        if kind in ("turn.started", "user.message", "step.started"):
            self.start("waiting for the model")
        elif not self.active:
            return
        if kind == "assistant.delta":
            self.phase = "thinking" if p.get("kind") == "reasoning" else "streaming"
        elif kind in ("tool.call", "tool.started"):
            self.phase = f"running `{visible(str(p.get('name', 'tool')))}`"
        elif kind == "approval.requested":
            self.phase = "waiting for approval" if p.get("kind") != "question" else "waiting for your answer"
        elif kind in ("tool.result", "approval.resolved", "assistant.message"):
            self.phase = "waiting for the model" if kind != "approval.resolved" else self.phase
        elif kind == "llm.retry":
            self._retry_until = time.monotonic() + float(p.get("delay_ms") or 0) / 1000
            self.phase = "retrying"
        elif kind == "usage":
            total = int(p.get("session_input_tokens") or 0) + int(p.get("session_output_tokens") or 0)
            self._tokens = total or self._tokens + int(p.get("input_tokens") or 0) + int(
                p.get("output_tokens") or 0
            )
            for key in ("session_cost_usd", "cost_usd"):
                if isinstance(p.get(key), (int, float)):
                    self._cost = float(p[key])
                    break

    def text(self) -> str:
        """The line as plain text (what :meth:`draw` shows)."""
        phase = self.phase
        if phase == "retrying":
            left = max(0.0, self._retry_until - time.monotonic())
            phase = f"retrying in {left:.0f} s" if left >= 1 else "retrying"
        parts = [
            f"{_SPINNER[self._frame % len(_SPINNER)]} {phase}",
            f"{time.monotonic() - self._started:.1f} s",
        ]
        if self._tokens:
            parts.append(f"{self._tokens:,} tokens")
        if self._cost is not None:
            parts.append(f"${self._cost:.4f}")
        parts.append("Ctrl-C to interrupt")
        return " · ".join(parts)

    # ------------------------------------------------------------------ drawing

    def tick(self) -> None:
        """Advance the spinner and redraw (call a few times a second)."""
        self._frame += 1
        if self._shown is not None:
            self.clear()
        self.draw()

    def draw(self) -> None:
        """Draw the line if a turn is active, it is not hidden, and the console is a terminal."""
        if not self.active or self.hidden or self._shown is not None or not self.console.is_terminal:
            return
        width = max(1, self.console.width)
        col = int(self._column())
        if col >= width:
            return  # a wrap is pending at the last column: a newline would not be where we think
        line = self.text()
        while cell_len(line) > width - 1 and len(line) > 1:
            line = line[:-1]
        out = self.console.file
        if col == 0:
            out.write(f"\r\x1b[2K\x1b[2m{line}\x1b[0m\r")
            self._shown = 0
        else:
            out.write(f"\n\x1b[2K\x1b[2m{line}\x1b[0m\x1b[1A\r" + (f"\x1b[{col}C" if col else ""))
            self._shown = 1
        out.flush()

    def clear(self) -> None:
        """Erase the line if it is drawn (the cursor is left where it was)."""
        if self._shown is None:
            return
        out = self.console.file
        if self._shown == 0:
            out.write("\r\x1b[2K")
        else:
            col = int(self._column())
            out.write("\x1b[1B\r\x1b[2K\x1b[1A\r" + (f"\x1b[{col}C" if col else ""))
        out.flush()
        self._shown = None
