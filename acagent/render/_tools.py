"""Tool calls and results as compact blocks (part of :class:`~acagent.render.EventRenderer`).

::

    ● shell $ pytest -q
      │ ....                      first lines of the output, live
      │ … (120 lines not shown)
      │ 3 passed in 0.4s          the last lines, printed when the call ends
      └ ok · exit 0 · 2.1 s

Live ``tool.output`` shows its first ``head`` lines as they come and keeps the last ``tail``
lines in a ring; the result prints the count of the lines skipped and that tail (long output is
cut to head + tail). A result without live output (``read_file``, a recovered call) cuts its
content the same way. The duration is the time between the call's ``tool.started`` (else its
``tool.call``) and its ``tool.result`` envelopes, so replayed history shows it too.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.text import Text

from acagent.events import Event
from acagent.render._approval import safe_rich
from acagent.render._safe import visible

__all__ = ["ToolBlocks", "event_time"]

_RESULT_STYLE = {"ok": "", "error": "red", "interrupted": "yellow", "denied": "yellow"}


def event_time(event: Event) -> float | None:
    """The envelope's ``ts`` as epoch seconds (None when missing or malformed)."""
    try:
        return datetime.fromisoformat(event.ts.replace("Z", "+00:00")).timestamp()
    except (ValueError, AttributeError):
        return None


@dataclass
class _ToolState:
    name: str
    head: int
    tail: int
    started: float | None = None
    lines_shown: int = 0
    lines_hidden: int = 0
    partial: str = ""
    had_output: bool = False
    last: deque[str] = field(default_factory=deque)

    def __post_init__(self) -> None:
        self.last = deque(maxlen=max(0, self.tail))


class ToolBlocks:
    """Mixin of the renderer: the ``tool.*`` handlers (module docstring).

    The host provides ``console``, ``finish_line``, ``_line`` and ``max_output_lines`` /
    ``max_result_lines`` (each split into half head, half tail).
    """

    console: Console
    max_output_lines: int
    max_result_lines: int
    _event: Event | None
    _tools: dict[str, _ToolState]

    def finish_line(self) -> None:  # pragma: no cover - provided by the renderer
        raise NotImplementedError

    def _line(self, text: Text | str, style: str = "") -> None:  # pragma: no cover - the renderer's
        raise NotImplementedError

    def _clipped(self, line: str, style: str) -> None:
        self.finish_line()
        self.console.print(
            Text(visible(line.expandtabs(4)), style=style),
            no_wrap=True,
            overflow="ellipsis",
            highlight=False,
            crop=True,
        )

    def _now(self) -> float | None:
        return event_time(self._event) if self._event is not None else None

    def _on_tool_call(self, p: dict[str, Any]) -> None:
        name = str(p.get("name", "?"))
        args = p.get("arguments") or {}
        head_n = (self.max_output_lines + 1) // 2
        self._tools[str(p.get("tool_call_id"))] = _ToolState(
            name, head_n, self.max_output_lines - head_n, started=self._now()
        )
        head = Text("● ", style="cyan")
        head.append(visible(name), style="bold cyan")
        if name == "shell" and isinstance(args.get("command"), str):
            lines = safe_rich(args["command"], "bold").split("\n")
            head.append(" $ ", style="bold").append_text(lines[0])
            self._line(head)
            for line in lines[1:6]:
                self._line(Text("    ").append_text(line))
            if len(lines) > 6:
                self._line(f"    … ({len(lines) - 6} more lines)", "dim")
        else:
            head.append(" ").append_text(safe_rich(_format_args(args)))
            self.finish_line()
            self.console.print(head, highlight=False, no_wrap=True, overflow="ellipsis", crop=True)
        if p.get("arguments_error"):
            self._line(f"  not run: {p['arguments_error']}", "red")

    def _on_tool_started(self, p: dict[str, Any]) -> None:
        state = self._tools.get(str(p.get("tool_call_id")))
        if state is not None:
            state.started = self._now() or state.started

    def _state(self, call_id: str) -> _ToolState:
        if call_id not in self._tools:
            head_n = (self.max_output_lines + 1) // 2
            self._tools[call_id] = _ToolState("?", head_n, self.max_output_lines - head_n)
        return self._tools[call_id]

    def _on_tool_output(self, p: dict[str, Any]) -> None:
        state = self._state(str(p.get("tool_call_id")))
        state.had_output = True
        data = state.partial + str(p.get("text") or "")
        *complete, state.partial = data.split("\n")
        for line in complete:
            self._output_line(state, line)

    def _output_line(self, state: _ToolState, line: str) -> None:
        if state.lines_shown < state.head:
            state.lines_shown += 1
            self._clipped("  │ " + line, "dim")
            return
        if not state.last.maxlen or len(state.last) == state.last.maxlen:
            state.lines_hidden += 1  # beyond the head, and pushed out of (or never in) the tail
        if state.last.maxlen:
            state.last.append(line)

    def _flush_output(self, state: _ToolState) -> None:
        """Print what live output kept back: the skipped-lines count, then the tail."""
        if state.partial:
            self._output_line(state, state.partial)
            state.partial = ""
        if state.lines_hidden:
            self._clipped(f"  │ … ({state.lines_hidden} lines not shown)", "dim")
        for line in state.last:
            self._clipped("  │ " + line, "dim")
        state.last.clear()
        state.lines_hidden = 0

    def _on_tool_result(self, p: dict[str, Any]) -> None:
        state = self._tools.pop(str(p.get("tool_call_id")), None)
        status = str(p.get("status", "ok"))
        style = _RESULT_STYLE.get(status, "")
        if state is not None and state.had_output:
            self._flush_output(state)
            if status != "ok":
                first = str(p.get("content") or "").split("\n", 1)[0]
                self._clipped("  │ " + first, style)
        else:
            self._cut_block(str(p.get("content") or ""), style or "dim", self.max_result_lines)
        exit_code = p.get("exit_code")
        parts = [] if status == "ok" and exit_code not in (None, 0) else [status]
        if exit_code is not None:
            parts.append(f"exit {exit_code}")
        now = self._now()
        if state is not None and state.started is not None and now is not None and now >= state.started:
            parts.append(f"{now - state.started:.1f} s")
        if status == "ok":
            style = "yellow" if exit_code not in (None, 0) else "green"
        self._line("  └ " + " · ".join(parts), style)

    def _cut_block(self, content: str, style: str, limit: int, prefix: str = "  │ ") -> None:
        """Print ``content`` indented; beyond ``limit`` lines only its head and tail."""
        lines = content.rstrip("\n").split("\n") if content.strip() else []
        if len(lines) <= limit:
            shown, skipped, tail = lines, 0, []
        else:
            head_n = (limit + 1) // 2
            tail_n = limit - head_n
            shown, skipped = lines[:head_n], len(lines) - limit
            tail = lines[len(lines) - tail_n :] if tail_n else []
        for line in shown:
            self._clipped(prefix + line, style)
        if skipped:
            self._clipped(f"{prefix}… ({skipped} lines not shown)", "dim")
        for line in tail:
            self._clipped(prefix + line, style)

    def _end_tools(self) -> None:
        """A turn ended: print what open calls kept back and forget them."""
        for state in self._tools.values():
            self._flush_output(state)
        self._tools.clear()


def _format_args(args: dict[str, Any], limit: int = 60) -> str:
    """``key=value`` pairs, each value's repr clipped to ``limit`` characters."""
    parts = []
    for key, value in args.items():
        shown = repr(value)
        if len(shown) > limit:
            shown = shown[: limit - 1] + "…"
        parts.append(f"{key}={shown}")
    return " ".join(parts)
