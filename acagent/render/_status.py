"""StatusLine: what a running turn is doing, derived from the session's events alone.

``⠋ running `shell` · 4.2 s · 1,234 tokens · $0.0012 · ctx 42% · Ctrl-C to interrupt`` — a
spinner, the phase (waiting for the model / thinking / streaming / running `tool` / waiting for
approval / retrying in N s), elapsed time of the turn, the session's tokens and cost so far, the
context fill and the key that interrupts. Everything comes from the event stream
(:meth:`StatusLine.update`), so ``chat`` in process, ``chat`` through a daemon and ``attach``
show the same line; the live view (:mod:`acagent.render._view`) draws it under the output.

**Context fill** is the runner's own estimate of the last request (``step.started``
``context_tokens`` / ``context_window``, from ``runner/_window.py``; after ``context.compacted``,
its ``tokens_after``): ``ctx 42%`` of a known window, ``ctx 12,345 tokens`` when the window is
unknown. :func:`context_fill` reads it from events for ``sessions show`` too.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from acagent.events import Event
from acagent.render._safe import visible

__all__ = ["StatusLine", "context_fill", "fill_text"]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
_END = frozenset({"turn.completed", "turn.interrupted", "turn.failed"})


def _fill_of(event: Event) -> tuple[int, int | None] | None:
    """``(tokens, window or None)`` an event says the context holds, or None if it says nothing."""
    p = event.payload
    if event.type == "step.started" and isinstance(p.get("context_tokens"), int):
        window = p.get("context_window")
        return int(p["context_tokens"]), int(window) if isinstance(window, int) and window > 0 else None
    if event.type == "context.compacted" and isinstance(p.get("tokens_after"), int):
        return int(p["tokens_after"]), None  # the window: the last step's (kept by the caller)
    return None


def _monotonic_at(event: Event) -> float | None:
    """The envelope's commit time on this process's monotonic clock (None when ``ts`` is bad)."""
    from acagent.render._tools import event_time

    at = event_time(event)
    if at is None:
        return None
    return time.monotonic() - max(0.0, time.time() - at)


def context_fill(events: Iterable[Event]) -> tuple[int, int | None] | None:
    """The latest context fill in ``events``: ``(estimated tokens, window or None)``; None if unknown."""
    fill: tuple[int, int | None] | None = None
    for event in events:
        found = _fill_of(event)
        if found is not None:
            fill = (found[0], found[1] if found[1] is not None or fill is None else fill[1])
    return fill


def fill_text(tokens: int, window: int | None, *, long: bool = False) -> str:
    """``ctx 42%`` (``long``: ``12,345 / 128,000 tokens (10%)``); without a window the tokens only."""
    if window:
        pct = 100 * tokens / window
        shown = f"{pct:.0f}%" if pct >= 1 or tokens == 0 else "<1%"
        return f"{tokens:,} / {window:,} tokens ({shown})" if long else f"ctx {shown}"
    return f"{tokens:,} tokens (window unknown)" if long else f"ctx {tokens:,} tokens"


class StatusLine:
    """The live status of a turn (see module docstring); a rich renderable (one dim line).

    Args:
        hint: the last part of the line (how to interrupt).
    """

    def __init__(self, hint: str = "Ctrl-C to interrupt") -> None:
        self.hint = hint
        self.active = False
        """A turn is running: the line is shown."""
        self.phase = ""
        self._started = 0.0
        self._retry_until = 0.0
        self._tokens = 0
        self._cost: float | None = None
        self._fill: tuple[int, int | None] | None = None
        self._frame = 0

    # ------------------------------------------------------------------ state

    def start(self, phase: str = "waiting for the model") -> None:
        """A turn started (or is being followed): show the line."""
        if not self.active:
            self._started = time.monotonic()
        self.active, self.phase = True, phase

    def stop(self) -> None:
        """The turn ended: hide the line."""
        self.active = False

    def tick(self) -> None:
        """Advance the spinner."""
        self._frame += 1

    def update(self, event: Event) -> None:
        """Follow an event: phase, tokens, cost, context fill; a turn's end stops the line."""
        p = event.payload
        kind = event.type
        fill = _fill_of(event)
        if fill is not None:
            window = fill[1] if fill[1] is not None or self._fill is None else self._fill[1]
            self._fill = (fill[0], window)
        if kind in _END:
            self.stop()
            return
        if kind in ("turn.started", "user.message", "step.started"):
            self.start("waiting for the model")
            if kind == "turn.started":  # elapsed from the turn's own start, wherever it is watched from
                self._started = _monotonic_at(event) or self._started
        elif not self.active:
            self._totals(kind, p)
            return
        if kind == "assistant.delta":
            self.phase = "thinking" if p.get("kind") == "reasoning" else "streaming"
        elif kind in ("tool.call", "tool.started"):
            self.phase = f"running `{visible(str(p.get('name', 'tool')))}`"
        elif kind == "approval.requested":
            self.phase = "waiting for approval" if p.get("kind") != "question" else "waiting for your answer"
        elif kind in ("tool.result", "assistant.message"):
            self.phase = "waiting for the model"
        elif kind == "llm.retry":
            self._retry_until = time.monotonic() + float(p.get("delay_ms") or 0) / 1000
            self.phase = "retrying"
        self._totals(kind, p)

    def _totals(self, kind: str, p: dict[str, Any]) -> None:
        if kind != "usage":
            return
        total = int(p.get("session_input_tokens") or 0) + int(p.get("session_output_tokens") or 0)
        self._tokens = total or self._tokens + int(p.get("input_tokens") or 0) + int(
            p.get("output_tokens") or 0
        )
        for key in ("session_cost_usd", "cost_usd"):
            if isinstance(p.get(key), (int, float)):
                self._cost = float(p[key])
                break

    def text(self) -> str:
        """The line as plain text."""
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
        if self._fill is not None:
            parts.append(fill_text(*self._fill))
        parts.append(self.hint)
        return " · ".join(parts)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.active:
            yield Text(self.text(), style="dim", no_wrap=True, overflow="ellipsis", end="")
