"""EventRenderer: turn a session's event stream into a terminal view (rich).

The renderer is a pure consumer of :class:`~acagent.events.Event` envelopes, so the same code
draws a live turn in ``acagent chat``, an attached session and replayed history
(:meth:`EventRenderer.render_history`). It keeps only what it needs to draw the next event:

- the assistant text streamed since the last stream boundary. With ``markdown`` (the default on
  a terminal) it is split into markdown blocks (:mod:`acagent.render._markdown`): each completed
  block is printed once, rendered, into the scrollback, and the open block is what
  :meth:`EventRenderer.open_block` returns for the live view to redraw. Without it (pipes, files)
  ``assistant.delta`` is printed as it arrives, without a newline;
- ``assistant.message`` ends the stream and reconciles: text the stream missed is printed, an
  interrupted message gets a marker;
- ``llm.retry`` supersedes the partial text of the failed attempt (there is no separate discard
  event, see :mod:`acagent.events`): the renderer forgets it, shows the open part struck through
  and prints a retry line; only the retried attempt is the reply;
- per tool call, what live ``tool.output`` was shown (:mod:`acagent.render._tools`: head and tail);
- the approval awaiting an answer (:attr:`EventRenderer.pending_approval`).

History differs from live in one rule: deltas are not replayed, because the ``assistant.message``
that closes each stream is what the model saw; only a trailing stream that is still open (a turn
streaming right now in another process) is shown as the partial text so far.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from acagent.events import Event
from acagent.render._approval import approval_lines, safe_rich
from acagent.render._markdown import BlockStream, OpenBlock, block_renderable, is_fenced
from acagent.render._stream import StreamWriter, visible
from acagent.render._tools import ToolBlocks, _ToolState

__all__ = ["EventRenderer"]

TURN_END = frozenset({"turn.completed", "turn.interrupted", "turn.failed"})
_STREAM_CLOSERS = TURN_END | {"assistant.message", "llm.retry"}
_REASONING_STYLE = "dim italic"

_DECISIONS = {
    "allow": ("✓ allowed", "green"),
    "always": ("✓ allowed (always, for this session)", "green"),
    "deny": ("✗ denied", "yellow"),
    "timeout": ("✗ approval timed out", "yellow"),
    "cancelled": ("✗ approval cancelled (the turn was cancelled)", "yellow"),
    "answered": ("✓ answered", "green"),
}


class EventRenderer(ToolBlocks):
    """Draw events on a rich console (see module docstring).

    Args:
        console: where to draw.
        echo_user: draw ``user.message`` events (off in ``chat`` while the user's own input is
            already on screen; history is always drawn with them).
        max_output_lines: live ``tool.output`` lines shown per tool call (half head, half tail).
        max_result_lines: ``tool.result`` content lines shown when no live output was shown.
        markdown: stream assistant text as markdown blocks (module docstring); default: when the
            console is a terminal.
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
        self.markdown = console.is_terminal if markdown is None else markdown
        self._pending: dict[str, dict[str, Any]] = {}
        """Approvals awaiting an answer, oldest first (parallel tool calls ask at once, F127)."""
        self._stream = ""
        """Assistant text streamed since the last stream boundary (the reply so far)."""
        self._stream_kind = "text"
        self._blocks = BlockStream()
        """Markdown mode: the open stream's blocks (text or reasoning, whichever streams now)."""
        self._out = StreamWriter(console)
        self._tools: dict[str, _ToolState] = {}
        self._event: Event | None = None
        self.reply = ""
        """Text of the last committed ``assistant.message`` (what the model said)."""
        self.last_seq = 0
        """Seq of the last event drawn."""
        self._ended: set[str] = set()
        self._resolved: set[Any] = set()
        """History only: approvals resolved later in the replayed events (drawn as one line)."""
        self._printed_blocks = 0
        self._last_fenced = False

    # ------------------------------------------------------------------ public

    @property
    def pending_approval(self) -> dict[str, Any] | None:
        """The oldest ``approval.requested`` payload awaiting an answer (None when none does)."""
        return next(iter(self._pending.values()), None)

    @property
    def pending_approvals(self) -> list[dict[str, Any]]:
        """Every ``approval.requested`` payload awaiting an answer, oldest first."""
        return list(self._pending.values())

    @property
    def streamed_text(self) -> str:
        """Assistant text of the open stream (dropped on ``llm.retry``, reset at its message)."""
        return self._stream

    def open_block(self, max_rows: int = 20) -> OpenBlock | None:
        """Markdown mode: the block still streaming, for the live view (None when there is none)."""
        text = self._blocks.open_text
        if not self.markdown or not text.strip():
            return None
        reasoning = self._stream_kind == "reasoning"
        return OpenBlock(
            text, _REASONING_STYLE if reasoning else "", markdown=not reasoning, max_rows=max_rows
        )

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
            self._event = event
            try:
                handler(event.payload)
            finally:
                self._event = None

    # ------------------------------------------------------------------ helpers

    def _line(self, text: Text | str, style: str = "") -> None:
        self.finish_line()
        if isinstance(text, str):
            text = Text(visible(text), style=style)
        self.console.print(text, highlight=False, soft_wrap=False)

    def _print_block(self, text: str, style: str = "", *, markdown: bool = True) -> None:
        """Print one completed block for good (a blank row before all but a reply's first; rich
        pads code blocks with their own)."""
        fenced = markdown and is_fenced(text)
        if self._printed_blocks and not fenced and not self._last_fenced:
            self.console.print()
        self._printed_blocks += 1
        self._last_fenced = fenced
        self.console.print(block_renderable(text, style, markdown=markdown), highlight=False)

    def _commit_open(self, style: str | None = None) -> str:
        """Markdown mode: print the open block for good; returns its text."""
        reasoning = self._stream_kind == "reasoning"
        rest = self._blocks.flush()
        if rest:
            shown = style if style is not None else (_REASONING_STYLE if reasoning else "")
            self._print_block(rest, shown, markdown=not reasoning and style is None)
        return rest

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
        if kind != self._stream_kind:
            if self.markdown:
                self._commit_open()
                self._printed_blocks = 0
            elif self._out.midline:
                self._out.end_line()
        self._stream_kind = kind
        if kind == "text":
            self._stream += text
        if not self.markdown:
            self._out.write(text, _REASONING_STYLE if kind == "reasoning" else "")
            return
        for block in self._blocks.feed(text):
            self._print_block(block, _REASONING_STYLE if kind == "reasoning" else "", markdown=kind == "text")

    def _on_assistant_message(self, p: dict[str, Any]) -> None:
        text = str(p.get("text") or "")
        streamed, self._stream = self._stream, ""
        self.reply = text
        interrupted = bool(p.get("interrupted"))
        if self.markdown:
            self._message_blocks(text, streamed)
        else:
            if streamed and text.startswith(streamed):
                self._out.write(text[len(streamed) :])
            elif not (streamed and streamed.startswith(text)):
                self.finish_line()
                self._out.write(text)
        if interrupted:
            if self.markdown or not self._out.midline:
                self._line("[interrupted]", "yellow")
            else:
                self._out.write(" [interrupted]", "yellow")
        self.finish_line()

    def _message_blocks(self, text: str, streamed: str) -> None:
        if self._stream_kind != "text":  # reasoning was streaming: it ends here
            self._commit_open()
            self._stream_kind = "text"
            self._printed_blocks = 0
        if streamed and text.startswith(streamed):
            for block in self._blocks.feed(text[len(streamed) :]):
                self._print_block(block)
        elif not (streamed and streamed.startswith(text)):
            self._commit_open()
            self._printed_blocks = 0
            for block in self._blocks.feed(text + "\n"):
                self._print_block(block)
        self._commit_open()
        self._printed_blocks = 0

    def _on_llm_retry(self, p: dict[str, Any]) -> None:
        partial, self._stream = self._stream, ""
        if self.markdown:
            self._commit_open("dim strike")
            self._stream_kind, self._printed_blocks = "text", 0
        elif partial and self._out.rewind():  # still on screen: redraw it struck through
            self._out.erase_below()
            self._out.write(partial, "dim strike")
        self.finish_line()
        reason = p.get("reason", "error")
        attempt = p.get("attempt", "?")
        note = f"↻ retrying after {reason} (attempt {attempt} failed)"
        if partial:
            note += "; partial reply discarded"
        self._line(note, "dim yellow")

    # ------------------------------------------------------------------ approvals

    def _on_approval_requested(self, p: dict[str, Any]) -> None:
        name = str(p.get("name", "?"))
        if p.get("tool_call_id") in self._resolved:
            if p.get("kind") == "question":
                self._line(Text("  ? ").append_text(safe_rich(str(p.get("question") or ""), "bold")))
            return
        self._pending[str(p.get("tool_call_id"))] = dict(p)
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
        self._pending.pop(str(p.get("tool_call_id")), None)
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
        if self.markdown:  # a stream cut without its message: what was live stays on screen
            self._commit_open()
            self._stream_kind, self._printed_blocks = "text", 0
        self.finish_line()
        self._end_tools()
        self._pending.clear()
        return True
