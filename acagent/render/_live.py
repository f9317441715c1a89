"""EventRenderer: turn a session's event stream into a terminal view (rich).

The renderer is a pure consumer of :class:`~acagent.events.Event` envelopes, so the same code
draws a live turn in ``acagent chat``, an attached session and replayed history
(:meth:`EventRenderer.render_history`). It keeps only what it needs to draw the next event:

- the assistant text streamed since the last stream boundary (``assistant.delta`` is printed as
  it arrives, without a newline; ``assistant.message`` finishes the line and reconciles: text the
  stream missed is printed, an interrupted message gets a marker);
- ``llm.retry`` supersedes the partial text of the failed attempt (there is no separate discard
  event, see :mod:`acagent.events`): the renderer forgets it, strikes it through on a terminal
  when it is still on screen, and prints a retry line; only the retried attempt is the reply;
- per tool call, how much live ``tool.output`` was shown (output and results are truncated to a
  few lines with a "… (k more lines)" note);
- the approval awaiting an answer (:attr:`EventRenderer.pending_approval`).

History differs from live in one rule: deltas are not replayed, because the ``assistant.message``
that closes each stream is what the model saw; only a trailing stream that is still open (a turn
streaming right now in another process) is shown as the partial text so far.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rich.console import Console, Group
from rich.markdown import Markdown
from rich.panel import Panel
from rich.text import Text

from acagent.events import Event
from acagent.render._approval import approval_lines, safe_rich
from acagent.render._stream import StreamWriter, visible

__all__ = ["EventRenderer"]

TURN_END = frozenset({"turn.completed", "turn.interrupted", "turn.failed"})
_STREAM_CLOSERS = TURN_END | {"assistant.message", "llm.retry"}

_MARKDOWN = re.compile(
    r"\*\*|__|`|\[[^\]\n]+\]\([^)\n]+\)|^#{1,6} |^\s*[-*+] |^\s*\d+\. |^>|^\|.*\|\s*$", re.MULTILINE
)
"""Text that renders differently as markdown (emphasis, code, links, headings, lists, quotes, tables)."""

_RESULT_STYLE = {"ok": "", "error": "red", "interrupted": "yellow", "denied": "yellow"}
_DECISIONS = {
    "allow": ("✓ allowed", "green"),
    "always": ("✓ allowed (always, for this session)", "green"),
    "deny": ("✗ denied", "yellow"),
    "timeout": ("✗ approval timed out", "yellow"),
    "cancelled": ("✗ approval cancelled (the turn was cancelled)", "yellow"),
    "answered": ("✓ answered", "green"),
}


@dataclass
class _ToolState:
    name: str
    lines_shown: int = 0
    lines_hidden: int = 0
    partial: str = ""
    had_output: bool = False


class EventRenderer:
    """Draw events on a rich console (see module docstring).

    Args:
        console: where to draw.
        echo_user: draw ``user.message`` events (off in ``chat`` while the user's own input is
            already on screen; history is always drawn with them).
        max_output_lines: live ``tool.output`` lines shown per tool call.
        max_result_lines: ``tool.result`` content lines shown when no live output was shown.
        markdown: draw final assistant messages that use markdown as markdown (on a terminal the
            streamed raw text is replaced when it is still on screen); default: when the console
            is a terminal.
    """

    def __init__(
        self,
        console: Console,
        *,
        echo_user: bool = True,
        max_output_lines: int = 12,
        max_result_lines: int = 12,
        markdown: bool | None = None,
    ) -> None:
        self.console = console
        self.echo_user = echo_user
        self.max_output_lines = max_output_lines
        self.max_result_lines = max_result_lines
        self._use_markdown = console.is_terminal if markdown is None else markdown
        self._pending_approval: dict[str, Any] | None = None
        self._stream = ""
        """Assistant text streamed since the last stream boundary (the reply so far)."""
        self._stream_kind = "text"
        self._out = StreamWriter(console)
        self._tools: dict[str, _ToolState] = {}
        self.reply = ""
        """Text of the last committed ``assistant.message`` (what the model said)."""
        self.last_seq = 0
        """Seq of the last event drawn."""
        self._ended: set[str] = set()
        self._resolved: set[Any] = set()
        """History only: approvals resolved later in the replayed events (drawn as one line)."""

    # ------------------------------------------------------------------ public

    @property
    def pending_approval(self) -> dict[str, Any] | None:
        """The ``approval.requested`` payload awaiting an answer (None once resolved)."""
        return self._pending_approval

    @property
    def streamed_text(self) -> str:
        """Assistant text of the open stream (dropped on ``llm.retry``, reset at its message)."""
        return self._stream

    def render_history(self, events: Iterable[Event]) -> None:
        """Draw replayed events: committed messages instead of their deltas (module docstring)."""
        items = list(events)
        last_closer = -1
        for i, event in enumerate(items):
            if event.type in _STREAM_CLOSERS:
                last_closer = i
        saved = self.echo_user
        self.echo_user = True
        self._resolved = {e.payload.get("tool_call_id") for e in items if e.type == "approval.resolved"}
        try:
            for i, event in enumerate(items):
                if event.type == "assistant.delta" and i < last_closer:
                    self.last_seq = max(self.last_seq, event.seq)
                    continue
                self.render(event)
        finally:
            self.echo_user = saved
            self._resolved = set()

    @property
    def column(self) -> int:
        """The cursor's column (cells) after streamed text on a terminal; 0 at a line start."""
        return self._out.col if self._out.midline else 0

    @property
    def midline(self) -> bool:
        """True while the cursor is after streamed text that has no newline yet."""
        return self._out.midline

    def finish_line(self) -> None:
        """End a line of streamed text, if one is open (other output follows)."""
        self._out.end_line()
        self._out.close_region()

    def render(self, event: Event) -> None:
        """Draw one event."""
        self.last_seq = max(self.last_seq, event.seq)
        handler = getattr(self, "_on_" + event.type.replace(".", "_"), None)
        if handler is not None:
            handler(event.payload)

    # ------------------------------------------------------------------ helpers

    def _line(self, text: Text | str, style: str = "") -> None:
        self.finish_line()
        if isinstance(text, str):
            text = Text(visible(text), style=style)
        self.console.print(text, highlight=False, soft_wrap=False)

    def _block(self, content: str, style: str, limit: int, prefix: str = "  │ ") -> None:
        """Print ``content`` indented, at most ``limit`` lines, then a "… (k more lines)" note."""
        lines = content.rstrip("\n").split("\n") if content.strip() else []
        for line in lines[:limit]:
            self._clipped(prefix + line, style)
        if len(lines) > limit:
            self._clipped(f"{prefix}… ({len(lines) - limit} more lines)", "dim")

    def _clipped(self, line: str, style: str) -> None:
        self.finish_line()
        self.console.print(
            Text(visible(line.expandtabs(4)), style=style),
            no_wrap=True,
            overflow="ellipsis",
            highlight=False,
            crop=True,
        )

    # ------------------------------------------------------------------ messages

    def _on_user_message(self, p: dict[str, Any]) -> None:
        if not self.echo_user:
            return
        self.finish_line()
        self.console.print()
        text = Text("› ", style="bold cyan")
        text.append(visible(str(p.get("text", ""))), style="bold")
        self.console.print(text, highlight=False)

    def _on_assistant_delta(self, p: dict[str, Any]) -> None:
        text = str(p.get("text") or "")
        if not text:
            return
        kind = p.get("kind") or "text"
        if kind != self._stream_kind and self._out.midline:
            self._out.end_line()
        self._stream_kind = kind
        if kind == "text":
            self._stream += text
        self._out.write(text, "dim italic" if kind == "reasoning" else "")

    def _on_assistant_message(self, p: dict[str, Any]) -> None:
        text = str(p.get("text") or "")
        streamed, self._stream = self._stream, ""
        self.reply = text
        interrupted = bool(p.get("interrupted"))
        if not interrupted and (not streamed or text == streamed) and self._markdown(text, bool(streamed)):
            return
        if streamed and text.startswith(streamed):
            self._out.write(text[len(streamed) :])
        elif not (streamed and streamed.startswith(text)):
            self.finish_line()
            self._out.write(text)
        if interrupted:
            self._out.write(" [interrupted]" if self._out.midline else "[interrupted]", "yellow")
        self.finish_line()

    def _on_llm_retry(self, p: dict[str, Any]) -> None:
        partial, self._stream = self._stream, ""
        if partial and self._out.rewind():  # still on screen: redraw it struck through
            self._out.erase_below()
            self._out.write(partial, "dim strike")
        self.finish_line()
        reason = p.get("reason", "error")
        attempt = p.get("attempt", "?")
        note = f"↻ retrying after {reason} (attempt {attempt} failed)"
        if partial:
            note += "; partial reply discarded"
        self._line(note, "dim yellow")

    def _markdown(self, text: str, streamed: bool) -> bool:
        """Draw ``text`` as markdown, replacing the streamed raw text on screen; False if not done."""
        if not self._use_markdown or not _MARKDOWN.search(text):
            return False
        if streamed:
            if not self._out.rewind():
                return False
            self._out.erase_below()
        self.finish_line()
        self.console.print(Markdown(text), highlight=False)
        return True

    # ------------------------------------------------------------------ tools

    def _on_tool_call(self, p: dict[str, Any]) -> None:
        name = str(p.get("name", "?"))
        args = p.get("arguments") or {}
        self._tools[str(p.get("tool_call_id"))] = _ToolState(name)
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

    def _on_tool_output(self, p: dict[str, Any]) -> None:
        state = self._tools.setdefault(str(p.get("tool_call_id")), _ToolState("?"))
        state.had_output = True
        data = state.partial + str(p.get("text") or "")
        *complete, state.partial = data.split("\n")
        for line in complete:
            self._output_line(state, line)

    def _output_line(self, state: _ToolState, line: str) -> None:
        if state.lines_shown < self.max_output_lines:
            state.lines_shown += 1
            self._clipped("  │ " + line, "dim")
        else:
            state.lines_hidden += 1

    def _on_tool_result(self, p: dict[str, Any]) -> None:
        call_id = str(p.get("tool_call_id"))
        state = self._tools.pop(call_id, None)
        status = str(p.get("status", "ok"))
        style = _RESULT_STYLE.get(status, "")
        if state is not None and state.had_output:
            if state.partial:
                self._output_line(state, state.partial)
            if state.lines_hidden:
                self._clipped(f"  │ … ({state.lines_hidden} more lines)", "dim")
            if status != "ok":
                first = str(p.get("content") or "").split("\n", 1)[0]
                self._clipped("  │ " + first, style)
        else:
            self._block(str(p.get("content") or ""), style or "dim", self.max_result_lines)
        exit_code = p.get("exit_code")
        if status == "ok":
            if exit_code not in (None, 0):
                self._line(f"  └ exit {exit_code}", "yellow")
            else:
                self._line("  └ ok" + (" (exit 0)" if exit_code == 0 else ""), "green")
        else:
            self._line(f"  └ {status}" + (f" (exit {exit_code})" if exit_code is not None else ""), style)

    # ------------------------------------------------------------------ approvals

    def _on_approval_requested(self, p: dict[str, Any]) -> None:
        name = str(p.get("name", "?"))
        if p.get("tool_call_id") in self._resolved:
            if p.get("kind") == "question":
                self._line(Text("  ? ").append_text(safe_rich(str(p.get("question") or ""), "bold")))
            return
        self._pending_approval = dict(p)
        body = approval_lines(p)
        if p.get("kind") == "question":
            body.append(Text("type your answer", style="dim"))
            title = "question from the agent"
        else:
            body.append(Text("allow? [y]es / [n]o / [a]lways", style="bold yellow"))
            title = f"approval needed: {visible(name)}"
        self.finish_line()
        self.console.print(
            Panel(Group(*body), title=title, title_align="left", border_style="yellow", expand=False),
            highlight=False,
        )

    def _on_approval_resolved(self, p: dict[str, Any]) -> None:
        pending = self._pending_approval
        if pending is not None and pending.get("tool_call_id") == p.get("tool_call_id"):
            self._pending_approval = None
        label, style = _DECISIONS.get(str(p.get("decision")), (str(p.get("decision")), "dim"))
        reason = p.get("reason")
        if reason and p.get("decision") in ("deny", "timeout"):
            label += f" ({reason})"
        self._line("  " + label, style)

    # ------------------------------------------------------------------ status

    def _on_usage(self, p: dict[str, Any]) -> None:
        inp, out = int(p.get("input_tokens") or 0), int(p.get("output_tokens") or 0)
        if not inp and not out:
            return
        s_in, s_out = int(p.get("session_input_tokens") or 0), int(p.get("session_output_tokens") or 0)
        note = f"tokens: {inp:,} in · {out:,} out"
        if s_in or s_out:
            note += f"  (session {s_in:,} in · {s_out:,} out)"
        self._line(note, "dim")

    def _on_error(self, p: dict[str, Any]) -> None:
        self._line(f"⚠ {p.get('message', 'error')} [{p.get('code', 'error')}]", "yellow")

    def _on_turn_completed(self, p: dict[str, Any]) -> None:
        if self._end_turn(p):
            self._line("✓ done", "dim green")

    def _on_turn_interrupted(self, p: dict[str, Any]) -> None:
        if self._end_turn(p):
            self._line(f"⏹ interrupted ({p.get('reason', 'user')})", "yellow")

    def _on_turn_failed(self, p: dict[str, Any]) -> None:
        if not self._end_turn(p):
            return
        self._line(f"✗ turn failed: {p.get('message', 'error')} [{p.get('type', 'error')}]", "bold red")
        if p.get("retryable"):
            self._line("  (a transient error: send a message to try again)", "dim")

    def _end_turn(self, p: dict[str, Any]) -> bool:
        """Reset per-turn state; False if this turn already ended (a second end is not drawn)."""
        turn_id = p.get("turn_id")
        if turn_id is not None:
            if turn_id in self._ended:
                return False
            self._ended.add(turn_id)
        self._stream = ""
        self.finish_line()
        for state in self._tools.values():
            if state.partial:
                self._output_line(state, state.partial)
        self._tools.clear()
        self._pending_approval = None
        return True


def _format_args(args: dict[str, Any], limit: int = 60) -> str:
    """``key=value`` pairs, each value's repr clipped to ``limit`` characters."""
    parts = []
    for key, value in args.items():
        shown = repr(value)
        if len(shown) > limit:
            shown = shown[: limit - 1] + "…"
        parts.append(f"{key}={shown}")
    return " ".join(parts)
