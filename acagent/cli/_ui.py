"""SessionUI: one session followed and driven in a terminal (``acagent chat``, ``acagent attach``).

One task consumes ``client.events(since)`` and draws every event in order with
:class:`~acagent.render.EventRenderer` (the events up to the session's last seq first, as
history); it hands approvals and turn ends to the main task, which reads input with
prompt_toolkit, sends messages and asks for approvals. While a turn runs — started here or by
another client (the idle prompt gives way to it, keeping what was typed) — the
:class:`~acagent.render.LiveView` shows the reply's open markdown block and the status line under
the output; both derive from the events alone, so every path shows the same thing.

Keys:

- Ctrl-C during a turn (the terminal is in cooked mode: SIGINT, received with
  :func:`anyio.open_signal_receiver`) or at an approval prompt (a key in raw mode) cancels the
  turn; the prompt comes back once ``turn.interrupted`` arrives. Two more presses while the
  cancel is in progress quit (``attach``: one more detaches).
- Ctrl-C or Ctrl-D on the idle prompt: the first press prints a hint, a second one exits (0);
  ``attach`` detaches at the first.
- SIGHUP (the terminal closed) or SIGTERM: the running turn is stopped like a shutdown (its tool
  process groups are killed) and chat exits with 128 + the signal number.

Every prompt runs with ``handle_sigint=False`` so prompt_toolkit never replaces our SIGINT
handler. Events that arrive while a prompt is shown are drawn above it (``in_terminal``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from acagent.cli._common import TURN_END
from acagent.cli._tty import quiet_input, restore_input
from acagent.cli._ui_input import InputMixin

if TYPE_CHECKING:
    import anyio.abc
    from rich.console import Console

    from acagent.cli._common import Opened
    from acagent.events import Event
    from acagent.render import EventRenderer

__all__ = ["SessionUI"]

_ACTIVE = ("running", "waiting_tool", "waiting_user")
_SHOWN = frozenset(
    {"user.message", "assistant.message", "assistant.delta", "tool.call", "approval.requested", "error"}
)
"""Event types that make a history worth a ``history`` rule."""
_REFRESH_S = 0.05
"""Least time between two redraws of the live region caused by events (the timer adds 10/s)."""


class SessionUI(InputMixin):
    """The state of one followed session (see module docstring).

    Args:
        attach: ``acagent attach`` semantics: follow (never resume) a turn in progress, detach on
            the first idle Ctrl-C/Ctrl-D, no session switching.
        since: draw the history from this seq (exclusive).
    """

    def __init__(
        self,
        console: Console,
        renderer: EventRenderer,
        opened: Opened,
        session: Any,
        settings: Any,
        *,
        attach: bool = False,
        since: int = 0,
    ):
        import anyio
        from prompt_toolkit import PromptSession
        from prompt_toolkit.history import InMemoryHistory

        from acagent.render import LiveView, StatusLine

        self.console = console
        self.renderer = renderer
        self.opened = opened
        self.client = opened.client
        self.session = session
        self.ask_session: Any = PromptSession(history=InMemoryHistory())
        """Approval prompts: their answers stay out of the input history."""
        self.settings = settings
        self.attach = attach
        self.since = since
        self.history_upto = 0 if opened.created else opened.last_seq
        self.history_done = anyio.Event()
        self.notes_send, self.notes = anyio.create_memory_object_stream["Event"](1000)
        self.turn_id: str | None = None
        """The turn being waited for; ``""`` while a message is being sent."""
        self.follow: str | None = None
        """A turn started by another client while the idle prompt was shown: follow it next."""
        self.typed = ""
        """What was on the idle prompt when it gave way to a followed turn."""
        self.expect_echo: str | None = None
        """Text this chat just sent: its ``user.message`` is already on screen as typed input."""
        self.cancel_presses = 0
        self.prompting = False
        self.prompt_scope: anyio.CancelScope | None = None
        self.prompt_for: str | None = None
        """tool_call_id of the approval being asked (its resolution elsewhere closes the prompt)."""
        self.tg: anyio.abc.TaskGroup | None = None
        self.quit_code: int | None = None
        self.switch: Any = None
        """Set by /new and /resume: the session to open when this loop ends."""
        self.status = StatusLine()
        self.view = LiveView(console, renderer, self.status)
        """The live region (open block + status line) while a turn runs and no prompt is shown."""
        self._drawn_at = 0.0
        self._dirty = False

    # ------------------------------------------------------------------ run

    async def run(self) -> int:
        import anyio

        snapshot = await self.client.snapshot()
        self._banner(snapshot)
        try:
            async with anyio.create_task_group() as tg:
                self.tg = tg
                tg.start_soon(self._watch_sigint)
                tg.start_soon(self._consume)
                tg.start_soon(self._tick)
                with anyio.move_on_after(30):
                    await self.history_done.wait()
                try:
                    code = await self._main(snapshot)
                finally:
                    tg.cancel_scope.cancel()
        finally:
            self.view.stop()
        return self.quit_code if self.quit_code is not None else code

    def _banner(self, snapshot: dict[str, Any]) -> None:
        from rich.text import Text

        model = self.opened.model or self.settings.model or "(default)"
        head = Text("acagent", style="bold cyan")
        head.append(f" · session {self.opened.session_id}", style="bold")
        if self.attach:
            head.append(f" (attached, {snapshot.get('status', '?')})", style="dim")
        else:
            head.append(" (new)" if self.opened.created else " (resumed)", style="dim")
        self.console.print(head)
        self.console.print(Text(f"model {model} · cwd {snapshot.get('cwd', '')}", style="dim"))
        if model.startswith("local:") and not self.attach:
            try:
                from acagent.providers._local import local_banner  # type: ignore[import-not-found, unused-ignore]
            except ImportError:
                pass
            else:
                self.console.print(Text(str(local_banner(model)), style="dim"))
        keys = "Ctrl-C interrupts a turn · " + ("Ctrl-D detaches" if self.attach else "Ctrl-C twice quits")
        self.console.print(Text("/help for commands · " + keys, style="dim"))

    async def _main(self, snapshot: dict[str, Any]) -> int:
        from acagent.errors import AcagentError, SessionBusy

        if snapshot.get("status") in _ACTIVE:
            turn_id: str | None = snapshot.get("turn_id") if self.attach else None
            if not self.attach:
                self._note("finishing the interrupted turn…")
                try:
                    turn_id = await self.client.send(None)
                except SessionBusy as exc:  # another process runs it: follow it
                    turn_id = (exc.detail or {}).get("turn_id")
                except AcagentError as exc:
                    self._error(exc)
            if turn_id:
                await self._run_turn(turn_id)
        idle_presses = 0
        while True:
            if self.follow is not None:
                follow, self.follow = self.follow, None
                await self._run_turn(follow)
                continue
            try:
                text = await self._prompt([("ansicyan bold", "› ")], history=True)
            except (KeyboardInterrupt, EOFError):
                if idle_presses or self.attach:
                    return 0
                idle_presses = 1
                self._note("press Ctrl-C again (or type /exit) to quit")
                continue
            if text is None:
                continue
            idle_presses = 0
            text = text.strip()
            if not text:
                continue
            if text.startswith("/") and "/" not in text[1:].split(" ", 1)[0]:
                if await self._command(text) == "exit":
                    return 0
                continue
            self.expect_echo, self.turn_id, self.cancel_presses = text, "", 0
            try:
                turn_id = await self.client.send(text)
            except AcagentError as exc:
                self.expect_echo = self.turn_id = None
                self._error(exc)
                continue
            await self._run_turn(turn_id)

    async def _command(self, text: str) -> str | None:
        from acagent.cli._slash import run_command
        from acagent.errors import AcagentError

        if self.attach and text.split(" ", 1)[0].lower() in ("/new", "/resume"):
            self._note("attach follows one session; use `acagent chat` to open others")
            return None
        try:
            return await run_command(self, text)
        except AcagentError as exc:
            self._error(exc)
            return None

    # ------------------------------------------------------------------ a turn

    async def _run_turn(self, turn_id: str) -> None:
        from acagent.store import RESTING

        if self.turn_id != "":  # not a message of ours that Ctrl-C may already have cancelled
            self.cancel_presses = 0
        self.turn_id = turn_id
        saved = quiet_input()
        self.status.start()
        self.view.start()
        try:
            asked: set[str] = set()
            await self._ask_pending(asked)
            while True:
                event = await self.notes.receive()
                p = event.payload
                if event.type == "approval.requested":
                    await self._ask_pending(asked)
                elif event.type in TURN_END:
                    if p.get("turn_id") == turn_id:
                        return
                    snap = await self.client.snapshot()  # the awaited turn may never start
                    if snap.get("status") in RESTING and snap.get("turn_id") != turn_id:
                        return
        finally:
            self.turn_id = None
            self.status.stop()
            self.view.stop()
            restore_input(saved)

    async def _ask_pending(self, asked: set[str]) -> None:
        """Ask every approval still pending that was not asked yet, oldest first: parallel tool
        calls request theirs at once (F46), and only the newest was asked before (F127)."""
        presses = self.cancel_presses
        while self.cancel_presses == presses:  # a Ctrl-C at a prompt cancels the turn: ask no more
            payload = next(
                (p for p in self.renderer.pending_approvals if str(p.get("tool_call_id")) not in asked), None
            )
            if payload is None:
                return
            asked.add(str(payload.get("tool_call_id")))
            await self._approve(payload)

    # ------------------------------------------------------------------ events

    async def _consume(self) -> None:
        """Draw every event in order; hand approvals and turn ends to the main task.

        ``client.events`` runs forever; should it end anyway (the runner was closed), it is
        opened again from the last seq drawn, so nothing is missed or drawn twice.
        """
        import anyio

        backlog: list[Event] = []
        if self.history_upto <= self.since:
            self.history_done.set()
        last = self.since if self.history_upto > self.since else max(self.since, self.opened.last_seq)
        while True:
            async for event in self.client.events(last):
                last = max(last, event.seq)
                if not self.history_done.is_set():
                    if event.seq <= self.history_upto:
                        backlog.append(event)
                        if event.seq < self.history_upto:
                            continue
                    self._history(backlog)
                    if event.seq <= self.history_upto:
                        continue
                await self._handle(event)
            await anyio.sleep(0.2)

    async def _handle(self, event: Event) -> None:
        await self._draw(event)
        p = event.payload
        if event.type == "approval.requested":  # with --yes too: ask_user questions still ask
            await self.notes_send.send(event)
        elif event.type in TURN_END:
            if self.prompt_for is not None and self.prompt_scope is not None:
                self.prompt_scope.cancel()
            await self.notes_send.send(event)
        elif (
            event.type == "approval.resolved"
            and self.prompt_for == p.get("tool_call_id")
            and self.prompt_scope is not None
        ):
            self.prompt_scope.cancel()
        elif event.type == "turn.started" and self.turn_id is None and self.prompt_for is None:
            # Another client started a turn: the idle prompt gives way to following it.
            self.follow = str(p.get("turn_id") or "")
            if self.prompt_scope is not None:
                self.typed = self.session.default_buffer.text
                self.prompt_scope.cancel()

    def _history(self, events: list[Event]) -> None:
        from rich.text import Text

        for event in events:  # a turn in progress: its phase, elapsed time, tokens and fill so far
            self.status.update(event)
        ruled = any(e.type in _SHOWN for e in events)  # no frame for a session that said nothing yet
        if ruled:
            self.console.rule(Text("history", style="dim"), style="dim")
        self.renderer.render_history(events)
        self.renderer.finish_line()
        if ruled:
            self.console.rule(style="dim")
        self.history_done.set()

    async def _draw(self, event: Event) -> None:
        import anyio

        if event.type == "user.message":  # typed here: on screen already; sent elsewhere: show it
            echo = event.payload.get("text") != self.expect_echo
            if not echo:
                self.expect_echo = None
            self.renderer.echo_user = echo
        self.status.update(event)
        if self.prompting:
            from prompt_toolkit.application import in_terminal

            async with in_terminal():
                self.renderer.render(event)
                self.renderer.finish_line()
            return
        self.renderer.render(event)
        now = anyio.current_time()
        if now - self._drawn_at >= _REFRESH_S:
            self._drawn_at, self._dirty = now, False
            self.view.refresh()
        else:
            self._dirty = True

    async def _tick(self) -> None:
        """Keep the spinner and elapsed time moving, and draw what events left (10 times a second)."""
        import anyio

        while True:
            await anyio.sleep(0.1)
            if self.prompting:
                continue
            if self.status.active:
                self.view.tick()
            elif self._dirty:
                self.view.refresh()
            self._dirty = False

    # ------------------------------------------------------------------ output

    def _note(self, text: str) -> None:
        from rich.text import Text

        self.renderer.finish_line()
        self.console.print(Text(text, style="dim"))

    def _error(self, exc: Any) -> None:
        from rich.text import Text

        self.renderer.finish_line()
        code = getattr(exc, "code", "error")
        self.console.print(Text(f"error: {getattr(exc, 'message', str(exc))} [{code}]", style="bold red"))
