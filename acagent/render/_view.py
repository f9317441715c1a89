"""LiveView: the bottom of the terminal while a session is followed (``chat``, ``attach``).

One :class:`rich.live.Live` region holds what can still change — the reply's open markdown block
(:meth:`EventRenderer.open_block`) and the :class:`~acagent.render.StatusLine` — and everything
the renderer prints goes above it, into the scrollback, once. The region is transient: stopping
the view (a prompt takes the screen, the program ends) erases it, and what it showed is printed
for good when its block completes. Nothing is drawn on a console that is not a terminal.

The region is refreshed by the owner (after each event, and a few times a second by a timer for
the spinner), never by a thread of rich's: everything happens on the event loop's thread. While
it is shown, the ``acagent`` logger's stderr lines are printed above it (a raw write to the
terminal would land inside the region and be erased or garble it).
"""

from __future__ import annotations

import io
import logging
import sys
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.live import Live
from rich.text import Text

from acagent.render._live import EventRenderer
from acagent.render._status import StatusLine

__all__ = ["LiveView"]


class _Bottom:
    """The live region's renderable: the open block (its last rows), then the status line."""

    def __init__(self, renderer: EventRenderer, status: StatusLine) -> None:
        self.renderer = renderer
        self.status = status

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = max(1, console.height - 3)
        block = self.renderer.open_block(max_rows=rows)
        if block is not None:
            yield block
        if self.status.active:
            yield self.status


class _Above(io.TextIOBase):
    """A text stream that prints each line above the live region (for log handlers)."""

    def __init__(self, console: Console) -> None:
        self._console = console

    def write(self, text: str) -> int:
        if text.strip():
            self._console.print(Text(text.rstrip("\n"), style="yellow"), highlight=False)
        return len(text)


class LiveView:
    """The live region of a followed session (module docstring).

    Args:
        console: the terminal.
        renderer: draws the events (its open block is shown live).
        status: the status line (shown while a turn runs).
    """

    def __init__(self, console: Console, renderer: EventRenderer, status: StatusLine) -> None:
        self.console = console
        self.renderer = renderer
        self.status = status
        self._live: Live | None = None
        self._streams: list[tuple[logging.StreamHandler[Any], Any]] = []

    @property
    def running(self) -> bool:
        """The region is on screen."""
        return self._live is not None

    def start(self) -> None:
        """Show the region (no-op when already shown or when the console is not a terminal)."""
        if self._live is not None or not self.console.is_terminal:
            return
        live = Live(
            _Bottom(self.renderer, self.status),
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
            vertical_overflow="crop",
        )
        live.start(refresh=True)
        self._live = live
        above = _Above(self.console)
        for handler in logging.getLogger("acagent").handlers:
            if type(handler) is logging.StreamHandler and handler.stream is sys.stderr:
                self._streams.append((handler, handler.setStream(above)))

    def stop(self) -> None:
        """Erase the region (its open block is printed later, when it completes)."""
        live, self._live = self._live, None
        for handler, stream in self._streams:
            handler.setStream(stream)
        self._streams.clear()
        if live is not None:
            live.stop()

    def refresh(self) -> None:
        """Redraw the region (after an event)."""
        if self._live is not None:
            self._live.refresh()

    def tick(self) -> None:
        """Advance the spinner and redraw (call a few times a second)."""
        if self.status.active:
            self.status.tick()
            self.refresh()

    def __enter__(self) -> LiveView:
        self.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()
